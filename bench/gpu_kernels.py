"""Times the CUDA backend's kernels and full proofs; prints one table (bench/gpu_check.sh runs it).

    python3 bench/gpu_kernels.py [--out DIR] [--max-log 24] [--budget-s 330] [--emulate]
    python3 bench/gpu_kernels.py --compile-only CURVE   # warm CuPy's kernel cache, then exit

Rows: MSM on G1 and G2 at 2^16..2^max points and NTT at 2^16..2^max on both curves, then
full proofs of the committed fixtures. MSM times are with the points already on the device
(as for the second partition of a key) and the scalars too ("device"), and end to end from
host arrays ("host": scalar upload included). NTT "device" is one forward transform of a
resident array; "host" adds the transfers. Each time is the median of --reps runs after one
warm-up. Points are the fixture's, tiled to size (distinct addresses, so caches see a real
working set); scalars are random. The 2^16 MSMs are checked against the CPU backend first,
and any mismatch stops the run with exit status 1. Sizes that would pass the time budget are
reported as skipped, not run. --emulate runs the same code on the host emulation at tiny
sizes (a check of this script without a GPU).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from groth16 import curves  # noqa: E402
from groth16.backends import cuda  # noqa: E402
from groth16.backends.cuda import CudaBackend  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures"
H200_TARGET_MS = {"bls12381": 250.0, "bn128": 150.0}  # issue 3: 2^24 G1 MSM on an H200


class Budget:
    def __init__(self, seconds: float):
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()


def timed(fn, reps: int, sync) -> float:
    """Median wall time in ms of fn() over `reps` runs after one warm-up (synchronised)."""
    fn()
    sync()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def frozen(arr: np.ndarray) -> np.ndarray:
    """A read-only copy backed by bytes: the backend mirrors it on the device like a .zkey map."""
    return np.frombuffer(arr.tobytes(), dtype=arr.dtype).reshape(arr.shape)


def fixture_points(curve, g2: bool) -> np.ndarray:
    from groth16.formats import zkey
    key = zkey.read_zkey(FIXTURES / f"{curve.name}_chain_12" / "circuit_final.zkey")
    return np.asarray(key.b2_query if g2 else key.h_query)


def random_scalars(curve, n: int, rng: np.random.Generator) -> np.ndarray:
    words = rng.integers(0, 2**64, size=(n, 4), dtype=np.uint64, endpoint=False)
    words[:, 3] &= np.uint64((1 << (curve.r.bit_length() - 1 - 192)) - 1)  # < 2^(bits-1) < r
    return words


def make_backend(curve, emulate: bool) -> CudaBackend:
    if emulate:
        from groth16.backends.cuda_emu import EmulatedRuntime
        return CudaBackend(curve, runtime=EmulatedRuntime(curve))
    return CudaBackend(curve)


def bench_msm(be, curve, g2: bool, logs, reps, budget, rows, check_cpu: bool) -> None:
    group = "g2" if g2 else "g1"
    base = fixture_points(curve, g2)
    rng = np.random.default_rng(1)
    last_ms = 0.0
    for log_n in logs:
        n = 1 << log_n
        label = f"msm {group} {curve.name}"
        if last_ms * 4 * (reps + 1) / 1e3 > budget.left():  # the next size takes about 2-4x longer
            rows.append((label, f"2^{log_n}", "skipped (time budget)", "", ""))
            continue
        pts = frozen(np.tile(base, (-(-n // len(base)), 1))[:n])
        host_sc = random_scalars(curve, n, rng)
        msm = be.msm_g2 if g2 else be.msm_g1
        if check_cpu and log_n == logs[0]:
            from groth16.backends.cpu import CpuBackend
            want = (CpuBackend(curve).msm_g2 if g2 else CpuBackend(curve).msm_g1)(pts, host_sc)
            if msm(pts, host_sc) != want:
                print(f"MISMATCH: {label} at 2^{log_n} differs from the CPU backend", flush=True)
                sys.exit(1)
        dev_sc = be._output(be.rt.upload(host_sc))  # resident: the MSM skips the upload
        sync = be.rt.synchronize
        t_dev = timed(lambda: msm(pts, dev_sc), reps, sync)
        t_host = timed(lambda: msm(pts, host_sc), max(1, reps // 2), sync)
        last_ms = t_host
        note = ""
        if not g2 and log_n == 24:
            target = H200_TARGET_MS[curve.name]
            note = f"target <= {target:.0f} ms on H200: {'met' if t_dev <= target else 'MISSED'}"
        rows.append((label, f"2^{log_n}", f"{t_dev:.2f}", f"{t_host:.2f}", note))
        print(f"  {label} 2^{log_n}: {t_dev:.2f} ms device, {t_host:.2f} ms host", flush=True)
        pts = dev_sc = host_sc = None  # free before the next, larger size
        be.release_memory()


def bench_ntt(be, curve, logs, reps, budget, rows) -> None:
    rng = np.random.default_rng(2)
    last_ms = 0.0
    for log_n in logs:
        label = f"ntt {curve.name}"
        if last_ms * 3 * (reps + 1) / 1e3 > budget.left():
            rows.append((label, f"2^{log_n}", "skipped (time budget)", "", ""))
            continue
        host = random_scalars(curve, 1 << log_n, rng)
        x = be.rt.upload(host)
        t_dev = timed(lambda: be._ntt_device(x, log_n, False, None), reps, be.rt.synchronize)
        t_host = timed(lambda: be.ntt(host), max(1, reps // 2), be.rt.synchronize)
        last_ms = t_host
        rows.append((label, f"2^{log_n}", f"{t_dev:.2f}", f"{t_host:.2f}", "forward"))
        print(f"  {label} 2^{log_n}: {t_dev:.2f} ms device, {t_host:.2f} ms host", flush=True)
        x = host = None
        be.release_memory()


def bench_proofs(backends, reps, budget, rows, only: str) -> None:
    from groth16 import prover, verifier
    from groth16.formats import wtns, zkey
    for d in sorted(p for p in FIXTURES.iterdir() if (p / "circuit_final.zkey").exists() and only in p.name):
        curve_name = d.name.split("_")[0]
        label = f"prove {d.name}"
        if budget.left() < 10:
            rows.append((label, "", "skipped (time budget)", "", ""))
            continue
        be = backends[curve_name]
        key, w = zkey.read_zkey(d / "circuit_final.zkey"), wtns.read_wtns(d / "witness.wtns")
        result = prover.prove(key, w, be, self_check=False)
        if not verifier.verify(key.verification_key, result.proof, result.public_signals):
            print(f"MISMATCH: the CUDA proof of {d.name} does not verify", flush=True)
            sys.exit(1)
        t = timed(lambda: prover.prove(key, w, be, self_check=False), reps, be.rt.synchronize)
        rows.append((label, f"n=2^{key.log2_domain}", f"{t:.1f}", "", "key resident, verified"))
        print(f"  {label}: {t:.1f} ms", flush=True)


def table(rows, header: str) -> str:
    cols = ("what", "size", "device ms", "host ms", "note")
    widths = [max(len(str(r[i])) for r in [cols, *rows]) for i in range(len(cols))]
    line = lambda r: "  ".join(str(v).ljust(w) for v, w in zip(r, widths)).rstrip()  # noqa: E731
    return "\n".join([header, line(cols), line(["-" * w for w in widths]), *map(line, rows)])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT"), help="folder for gpu_check.txt (default $OUT)")
    ap.add_argument("--min-log", type=int, default=16)
    ap.add_argument("--max-log", type=int, default=24)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--budget-s", type=float, default=330.0, help="stop starting new sizes after this")
    ap.add_argument("--proofs", default="", help="prove only fixtures whose name contains this")
    ap.add_argument("--emulate", action="store_true", help="host emulation at tiny sizes (no GPU)")
    ap.add_argument("--compile-only", metavar="CURVE", help="build one curve's module and exit")
    args = ap.parse_args()

    if args.compile_only:
        t0 = time.perf_counter()
        be = make_backend(curves.by_name(args.compile_only), args.emulate)
        print(f"compiled {args.compile_only} in {time.perf_counter() - t0:.1f}s on {be.rt.describe()}")
        return 0
    if args.emulate:
        args.min_log, args.max_log, args.reps = min(args.min_log, 6), min(args.max_log, 7), 1
        args.proofs = args.proofs or "chain_10"
    budget = Budget(args.budget_s)
    backends = {c.name: make_backend(c, args.emulate) for c in (curves.BN128, curves.BLS12381)}
    desc = next(iter(backends.values())).rt.describe()
    logs = list(range(args.min_log, args.max_log + 1))
    rows: list[tuple] = []
    print(f"timing on {desc}, kernels {cuda.source_hash()}", flush=True)
    for curve in (curves.BN128, curves.BLS12381):
        bench_msm(backends[curve.name], curve, False, logs, args.reps, budget, rows, check_cpu=not args.emulate)
    for curve in (curves.BN128, curves.BLS12381):
        bench_ntt(backends[curve.name], curve, logs, args.reps, budget, rows)
    for curve in (curves.BN128, curves.BLS12381):
        bench_msm(backends[curve.name], curve, True, logs, args.reps, budget, rows, check_cpu=not args.emulate)
    bench_proofs(backends, args.reps, budget, rows, args.proofs)
    text = table(rows, f"zkqueue CUDA backend on {desc}; kernels {cuda.source_hash()}; "
                       f"median of {args.reps} after a warm-up")
    print(text)
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "gpu_check.txt").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
