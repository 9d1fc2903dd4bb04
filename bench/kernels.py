"""Timings of the CPU backend's kernels: MSM on G1/G2 and NTT, both curves, 1 and 2 threads,
for each native arithmetic variant this CPU runs (x86-adx assembly and portable C++).

Not a test. Prints median-of-3 wall and CPU times and ns per point; the variants run in
turn so that machine noise hits both alike:
    .venv/bin/python bench/kernels.py [log2 sizes, default 12 14 16]

MSM before/after, in one process: `--baseline LIB` loads another build of the CPU library
(e.g. main's: `.venv/bin/python -c 'import zkqueue.groth16.native as n; print(n.library_path())'` run in a
checkout of main) and times its zkq_msm_g1/g2 against this tree's MSM without and with a
fixed-base table, alternating, median of --reps; ratios are baseline time / this time:
    .venv/bin/python bench/kernels.py --baseline /path/to/libzkq_cpu.so 14

Window widths: `--sweep` times every c from the cost model's choice - 3 to + 3 (forced
through window_bits) and prints the model's pick against the fastest measured:
    .venv/bin/python bench/kernels.py --sweep 12 14 16
"""

from __future__ import annotations

import argparse
import ctypes
import random
import statistics
import time

import numpy as np

from zkqueue.groth16 import encoding, native
from zkqueue.groth16.backends.cpu import CpuBackend
from zkqueue.groth16.curves import BLS12381, BN128


def random_points(be: CpuBackend, g2: bool, n: int, rng: random.Random) -> np.ndarray:
    """n points: 1024 distinct k*G (made by the MSM itself, n = 1) tiled to length n."""
    c = be.curve
    gen = encoding.g2_to_lem(c, c.g2) if g2 else encoding.g1_to_lem(c, c.g1)
    g = np.frombuffer(gen, dtype=np.uint64).reshape(1, -1)
    fn = be.msm_g2 if g2 else be.msm_g1
    distinct = [np.frombuffer(fn(g, np.frombuffer(rng.randrange(1, c.r).to_bytes(32, "little"),
                                                   dtype=np.uint64).reshape(1, 4)), dtype=np.uint64)
                for _ in range(min(n, 1024))]
    base = np.stack(distinct)
    return np.ascontiguousarray(np.resize(base, (n, base.shape[1])))


def random_scalars(curve, n: int, rng: random.Random) -> np.ndarray:
    data = b"".join(rng.randrange(curve.r).to_bytes(32, "little") for _ in range(n))
    return np.frombuffer(data, dtype=np.uint64).reshape(n, 4)


def median_s(fn, reps: int = 3) -> tuple[float, float]:
    """Median (wall, process CPU) seconds of reps calls."""
    walls, cpus = [], []
    for _ in range(reps):
        t, c = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    return statistics.median(walls), statistics.median(cpus)


def kernel_table(logs: list[int], rng: random.Random) -> None:
    """MSM and NTT timings per curve, size, thread count and arithmetic variant."""
    variants = (["x86-adx"] if native.has_adx() else []) + ["portable"]
    print(f"{'kernel':<22}{'log2 n':>7}{'threads':>8}{'variant':>10}{'wall ms':>10}{'cpu ms':>10}{'ns/elem':>10}")

    def row(name, log_n, threads, variant, wall_cpu, n):
        wall, cpu = wall_cpu
        print(f"{name:<22}{log_n:>7}{threads:>8}{variant:>10}{wall * 1e3:>10.1f}{cpu * 1e3:>10.1f}"
              f"{wall * 1e9 / n:>10.0f}", flush=True)

    for curve in (BN128, BLS12381):
        be1 = CpuBackend(curve, threads=1)
        for log_n in logs:
            n = 1 << log_n
            scalars = random_scalars(curve, n, rng)
            for g2 in (False, True):
                pts = random_points(be1, g2, n, rng)
                for threads in (1, 2):
                    for variant in variants:
                        be = CpuBackend(curve, threads=threads, variant=variant)
                        fn = be.msm_g2 if g2 else be.msm_g1
                        row(curve.name + (" msm_g2" if g2 else " msm_g1"), log_n, threads, variant,
                            median_s(lambda: fn(pts, scalars)), n)
            values = np.ascontiguousarray(scalars.copy())
            for threads in (1, 2):
                for variant in variants:
                    be = CpuBackend(curve, threads=threads, variant=variant)
                    shift = curve.coset_shift(log_n)
                    row(curve.name + " ntt", log_n, threads, variant,
                        median_s(lambda: be.ntt(values, coset_shift=shift)), n)


def baseline_compare(lib_path: str, logs: list[int], threads: int, reps: int, rng: random.Random) -> None:
    """Another build's MSM (`lib_path`, same C ABI zkq_msm_g1/g2) against this tree's, plain
    and with a full fixed-base table, alternating within each repetition."""
    base = ctypes.CDLL(lib_path)
    print(f"# baseline {lib_path}; threads={threads}; median wall of {reps} alternating runs")
    print(f"{'msm':<16}{'log2 n':>7}{'base ms':>9}{'new ms':>9}{'table ms':>9}{'base/new':>9}"
          f"{'base/table':>11}{'table MiB':>10}{'build s':>8}")
    for curve in (BN128, BLS12381):
        be = CpuBackend(curve, threads=threads)
        for log_n in logs:
            n = 1 << log_n
            scalars = random_scalars(curve, n, rng)
            for g2 in (False, True):
                pts = random_points(be, g2, n, rng)
                t0 = time.perf_counter()
                table = (be.precompute_g2 if g2 else be.precompute_g1)(pts, 1 << 40)
                build_s = time.perf_counter() - t0
                fn = be.msm_g2 if g2 else be.msm_g1
                base_fn = base.zkq_msm_g2 if g2 else base.zkq_msm_g1
                out = np.zeros(pts.shape[1], dtype=np.uint64)

                def run_base():
                    rc = base_fn(ctypes.c_int(curve.native_id), ctypes.c_void_p(pts.ctypes.data),
                                 ctypes.c_void_p(scalars.ctypes.data), ctypes.c_size_t(n),
                                 ctypes.c_void_p(out.ctypes.data), ctypes.c_int(threads))
                    assert rc == 0, rc
                    return out.tobytes()

                runs = {"base": run_base, "new": lambda: fn(pts, scalars)}
                if table is not None:  # None: the planner finds no table that pays at this size
                    runs["table"] = lambda: fn(pts, scalars, table)
                if len({f() for f in runs.values()}) != 1:
                    raise SystemExit(f"{curve.name} 2^{log_n}: the baseline and this tree disagree")
                times: dict[str, list[float]] = {k: [] for k in runs}
                for _ in range(reps):
                    for k, f in runs.items():
                        t = time.perf_counter()
                        f()
                        times[k].append(time.perf_counter() - t)
                b, nw = (statistics.median(times[k]) for k in ("base", "new"))
                row = f"{curve.name + (' g2' if g2 else ' g1'):<16}{log_n:>7}{b * 1e3:>9.1f}{nw * 1e3:>9.1f}"
                if table is None:
                    row += f"{'-':>9}{b / nw:>9.2f}{'-':>11}{'-':>10}{'-':>8}"
                else:
                    tb = statistics.median(times["table"])
                    row += f"{tb * 1e3:>9.1f}{b / nw:>9.2f}{b / tb:>11.2f}{table.nbytes / 2**20:>10.1f}{build_s:>8.2f}"
                print(row, flush=True)


def sweep(logs: list[int], reps: int, rng: random.Random) -> None:
    """Every window width around the cost model's choice, timed; the model's pick vs the best."""
    print(f"{'msm':<16}{'log2 n':>7}{'threads':>8}{'model c':>8}  ms per c (median of {reps})")
    for curve in (BN128,):
        for log_n in logs:
            n = 1 << log_n
            scalars = random_scalars(curve, n, rng)
            for g2 in (False, True):
                for threads in (1, 2):
                    be = CpuBackend(curve, threads=threads)
                    pts = random_points(be, g2, n, rng)
                    fn = be.msm_g2 if g2 else be.msm_g1
                    pick = be.msm_plan(n, g2=g2).window_bits
                    cs = [c for c in range(pick - 3, pick + 4) if 1 <= c <= 15]
                    times: dict[int, list[float]] = {c: [] for c in cs}
                    for _ in range(reps):
                        for c in cs:
                            t = time.perf_counter()
                            fn(pts, scalars, window_bits=c)
                            times[c].append(time.perf_counter() - t)
                    med = {c: statistics.median(v) for c, v in times.items()}
                    best = min(med, key=med.get)
                    cells = " ".join(f"c{c}={med[c] * 1e3:.1f}" for c in cs)
                    print(f"{curve.name + (' g2' if g2 else ' g1'):<16}{log_n:>7}{threads:>8}{pick:>8}  {cells}"
                          f"  -> best c{best}, model's pick {med[pick] / med[best]:.2f}x the best", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("logs", type=int, nargs="*", default=[12, 14, 16], help="log2 sizes")
    ap.add_argument("--baseline", help="another build of libzkq_cpu.so to compare MSMs against")
    ap.add_argument("--sweep", action="store_true", help="time window widths around the model's choice")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    rng = random.Random(1)
    if args.baseline:
        baseline_compare(args.baseline, args.logs, args.threads, args.reps, rng)
    elif args.sweep:
        sweep(args.logs, args.reps, rng)
    else:
        kernel_table(args.logs, rng)


if __name__ == "__main__":
    main()
