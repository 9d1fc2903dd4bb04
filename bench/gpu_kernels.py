"""The CUDA backend against the CPU backend: kernel comparisons and timings (bench/gpu_check.sh).

    python3 bench/gpu_kernels.py compile CURVE            # warm CuPy's NVRTC cache, then exit
    python3 bench/gpu_kernels.py compare [--json F]       # every kernel vs the CPU backend
    python3 bench/gpu_kernels.py cpu-ref --json C         # the CPU backend's times (run beside the GPU work)
    python3 bench/gpu_kernels.py time [--json F] [--cpu-ref C]   # GPU timings, merged with C's
    ... --emulate                                         # the same on the host emulation, tiny sizes

compare: MSM on G1 and G2, NTT (forward, inverse, on the coset and off it) and the pointwise
kernels at 2^10, 2^13, 2^16, 2^19, 2^22 (and an odd size), on both curves, byte for byte
against the CPU backend (itself checked against the Python oracle by tests/test_cpu_kernels.py).
Inputs carry the oracle tests' edge cases: points at infinity, repeated points, a point next
to its negation with the same scalar (they cancel in one bucket), scalars 0, 1, 2, r-1, r-2,
r/2, r/2+1, 2^128-1, small ones and ones >= r/2, plus runs where every scalar is the same
(one bucket per window), all zero, or 0/1. Exit status 1 on any mismatch. Sizes whose
estimated time would pass --budget-s are reported as skipped, never silently dropped.

time: MSM G1/G2 at 2^16, 2^20, 2^22, 2^24 (and G1 at 2^26) and the forward NTT at 2^20,
2^24 on both curves, with the inputs resident on the device ("gpu ms", as for the second
partition of a key) and from host arrays ("host ms"); whole proofs at 2^16 and 2^20 on both
curves and 2^24 on bn128, on a synthetic key (the fixture's points tiled to size, random
constraints and witness: the real prover's work at that size, but not a verifiable circuit;
real circuits are proved and verified in the other steps). Every timed MSM is checked
exactly: its points are a base of fixture points tiled, so the sum equals the CPU
backend's MSM over the base with folded scalars (bench/gpu_fold.py); every timed proof's
pi_a and pi_b likewise (an MSM of tiled points plus the blinding terms). The CPU backend
(cpu-ref, --cpu-threads, default 2: "the CPU backend on 2 cores") is timed in the same run
by a second process, which gpu_check.sh starts while NVRTC compiles, on the same seeded
inputs: `time --cpu-ref` merges its rows and checks that every result it has (NTT outputs,
whole proofs with the same r and s) equals the GPU's. GPU times are medians of --reps runs
after a warm-up; CPU times are one run. Targets (issue 21, H100/H200): a 2^24 G1 MSM in
70 ms on bn128 and 120 ms on bls12381, a 2^24 NTT in 4 ms, a whole 2^20 bn128 proof in
60 ms and a 2^24 one in 0.6 s; each row says whether its target was met.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import statistics
import sys
import time
import zlib
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from gpu_fold import fold_scalars  # noqa: E402
from zkqueue.groth16 import curves  # noqa: E402
from zkqueue.groth16.backends import cuda_ntt, cuda_source  # noqa: E402
from zkqueue.groth16.backends.cuda import CudaBackend  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures"
CURVES = (curves.BN128, curves.BLS12381)
# Issue 21's targets on an H100/H200: (what, curve, log2 size) -> ms.
TARGETS_MS = {("msm_g1", "bn128", 24): 70.0, ("msm_g1", "bls12381", 24): 120.0,
              ("ntt", "bn128", 24): 4.0, ("ntt", "bls12381", 24): 4.0,
              ("proof", "bn128", 20): 60.0, ("proof", "bn128", 24): 600.0}


class Budget:
    def __init__(self, seconds: float):
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()


def make_backend(curve, emulate: bool) -> CudaBackend:
    """The CUDA backend for `curve` (every production unit built now; on a GPU from the cubin
    cache, which gpu_check.sh's setup fills), or its host emulation."""
    if emulate:
        from zkqueue.groth16.backends.cuda_emu import EmulatedRuntime
        return CudaBackend(curve, runtime=EmulatedRuntime(curve, units=cuda_source.PRODUCTION_UNITS))
    return CudaBackend(curve)


def cpu_backend(curve, threads: int | None):
    from zkqueue.groth16.backends.cpu import CpuBackend
    return CpuBackend(curve, threads=threads)


# ---- inputs -----------------------------------------------------------------------------

def frozen(arr: np.ndarray) -> np.ndarray:
    """A read-only copy backed by bytes: the backend mirrors it on the device like a .zkey map."""
    return np.frombuffer(arr.tobytes(), dtype=arr.dtype).reshape(arr.shape)


@contextlib.contextmanager
def timer(out: list):
    t0 = time.perf_counter()
    yield
    out.append((time.perf_counter() - t0) * 1e3)


def fixture_key(curve):
    from zkqueue.groth16.formats import zkey
    return zkey.read_zkey(FIXTURES / f"{curve.name}_chain_12" / "circuit_final.zkey")


def base_points(curve, g2: bool) -> np.ndarray:
    key = fixture_key(curve)
    return np.asarray(key.b2_query if g2 else key.h_query)


from gpu_fold import tiled  # noqa: E402  (one definition, shared with the tests)


def _negate(curve, rows: np.ndarray, g2: bool) -> np.ndarray:
    """-P for each row (affine, Montgomery LEM): y -> q - y per Fq coordinate, 0 stays 0."""
    nw = curve.n8q // 8
    out = rows.copy()
    coords = 2 if g2 else 1
    for i in range(len(rows)):
        for c in range(coords):
            lo = (coords + c) * nw
            y = int.from_bytes(rows[i, lo:lo + nw].tobytes(), "little")
            out[i, lo:lo + nw] = np.frombuffer(((curve.q - y) % curve.q).to_bytes(8 * nw, "little"), "<u8")
    return out


def edge_points(curve, g2: bool, n: int, base: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(points, indices i whose point is -points[i-1]): tiled fixture points (so repeats),
    infinity at every 97th row, and a negation of its predecessor at every 89th row."""
    pts = tiled(base, n)
    pts[::97] = 0
    neg = np.arange(1, n, 89)
    if len(neg):
        pts[neg] = _negate(curve, pts[neg - 1], g2)
    return pts, neg


def random_scalars(curve, n: int, rng: np.random.Generator) -> np.ndarray:
    """n random scalars below 2^(bits-1) < r, as (n, 4) words."""
    words = rng.integers(0, 2**64, size=(n, 4), dtype=np.uint64, endpoint=False)
    words[:, 3] &= np.uint64((1 << (curve.r.bit_length() - 1 - 192)) - 1)
    return words


def _rows_of(values: list[int]) -> np.ndarray:
    return np.frombuffer(b"".join(v.to_bytes(32, "little") for v in values), "<u8").reshape(-1, 4).copy()


def edge_scalars(curve, n: int, rng: np.random.Generator, neg: np.ndarray, kind: str = "mixed") -> np.ndarray:
    """Scalars (standard form) of one `kind`: "mixed" (random, >= r/2 at every 7th row, the
    oracle's special values at every 11th, small at every 13th; a negated point gets its
    predecessor's scalar), "same", "zeros" or "bits"."""
    r = curve.r
    if kind == "same":
        return np.tile(_rows_of([r // 2 + 7]), (n, 1))
    if kind == "zeros":
        return np.zeros((n, 4), dtype=np.uint64)
    if kind == "bits":
        out = np.zeros((n, 4), dtype=np.uint64)
        out[:, 0] = rng.integers(0, 2, n, dtype=np.uint64)
        return out
    sc = random_scalars(curve, n, rng)
    high = np.arange(0, n, 7)
    sc[high] = _rows_of([r - 1 - int(x) for x in rng.integers(0, 2**62, len(high))])
    specials = [0, 1, 2, r - 1, r - 2, r // 2, r // 2 + 1, (1 << 128) - 1]
    idx = np.arange(3, n, 11)
    sc[idx] = _rows_of([specials[i % len(specials)] for i in range(len(idx))])
    small = np.arange(5, n, 13)
    sc[small] = 0
    sc[small, 0] = rng.integers(0, 1 << 20, len(small), dtype=np.uint64)
    if len(neg):
        sc[neg] = sc[neg - 1]      # P and -P with the same scalar: they cancel in one bucket
    return sc


def edge_fr(curve, n: int, rng: np.random.Generator) -> np.ndarray:
    """Field elements (any value < r is a valid Montgomery form): random, with 0, 1, r-1, r-2 mixed in."""
    x = random_scalars(curve, n, rng)
    specials = _rows_of([0, 1, curve.r - 1, curve.r - 2])
    for i in range(0, n, max(1, n // 16)):
        x[i] = specials[i % 4]
    return x


# ---- compare ------------------------------------------------------------------------------

class Rows:
    """Result rows, printed as they come and written as JSON at the end."""

    def __init__(self):
        self.rows: list[dict] = []

    def add(self, **row) -> dict:
        self.rows.append(row)
        status = {True: "ok", False: "MISMATCH", None: row.get("note", "")}[row.get("ok")]
        times = " ".join(f"{k}={row[k]:.2f}" for k in ("gpu_ms", "gpu_host_ms", "cpu_ms") if row.get(k) is not None)
        print(f"  {row['what']:<10} {row['curve']:<9} n={row['n']:<9} {row.get('case', ''):<7} {status} {times}",
              flush=True)
        return row


def compare(args) -> int:
    budget = Budget(args.budget_s)
    logs = [4, 6, 7] if args.emulate else [int(x) for x in args.logs.split(",")]
    odd = 37 if args.emulate else 100003
    rows = Rows()
    rng = np.random.default_rng(20260)
    threads = args.cpu_threads or os.cpu_count()
    print(f"compare: CUDA backend ({'host emulation' if args.emulate else 'GPU'}) vs CPU backend "
          f"({threads} threads) at n = 2^{logs} and {odd}; budget {args.budget_s:.0f} s", flush=True)
    pairs = {c.name: (make_backend(c, args.emulate), cpu_backend(c, threads)) for c in CURVES}
    last: dict[str, float] = {}   # seconds the last case of a kind took, to estimate the next

    def run(kind: str, curve, n: int, case: str, fn):
        est = last.get(kind, 0.0) * max(1.0, n / last.get(kind + ":n", n))
        if est > budget.left():
            return rows.add(what=kind, curve=curve.name, n=n, case=case, ok=None,
                            note=f"skipped (time budget: ~{est:.0f} s needed, {budget.left():.0f} s left)")
        t0 = time.perf_counter()
        ok, gpu_ms, cpu_ms = fn()
        last[kind], last[kind + ":n"] = time.perf_counter() - t0, n
        return rows.add(what=kind, curve=curve.name, n=n, case=case, ok=ok, gpu_ms=gpu_ms, cpu_ms=cpu_ms)

    def msm_case(curve, g2, n, case):
        gpu, cpu = pairs[curve.name]
        pts, neg = edge_points(curve, g2, n, base_points(curve, g2))
        sc = edge_scalars(curve, n, rng, neg, case)
        tg, tc = [], []
        with timer(tg):
            got = (gpu.msm_g2 if g2 else gpu.msm_g1)(pts, sc)
        with timer(tc):
            want = (cpu.msm_g2 if g2 else cpu.msm_g1)(pts, sc)
        gpu.release_memory()
        return got == want, tg[0], tc[0]

    def ntt_case(curve, n):
        gpu, cpu = pairs[curve.name]
        x = edge_fr(curve, n, rng)
        shift = curve.coset_shift(n.bit_length() - 1)
        ok, tg, tc = True, [], []
        for kw in ({}, {"inverse": True}, {"coset_shift": shift}, {"inverse": True, "coset_shift": shift}):
            with timer(tg):
                a = gpu.ntt(x, **kw)
            with timer(tc):
                b = cpu.ntt(x, **kw)
            ok &= bool(np.array_equal(a, b))
        gpu.release_memory()
        return ok, sum(tg), sum(tc)

    def pointwise_case(curve, n):
        gpu, cpu = pairs[curve.name]
        a, b, c = (edge_fr(curve, n, rng) for _ in range(3))
        tg, tc = [], []
        with timer(tg):
            g = (gpu.mul(a, b), gpu.h_scalars(a, b, c))
        with timer(tc):
            h = (cpu.mul(a, b), cpu.h_scalars(a, b, c))
        gpu.release_memory()
        return all(np.array_equal(x, y) for x, y in zip(g, h)), tg[0], tc[0]

    sizes = [1 << k for k in logs]
    for curve in CURVES:   # G1 first: the MSM every proof spends most of its time in
        for case in ("same", "zeros", "bits"):
            run("msm_g1", curve, sizes[0], case, lambda c=curve, k=case: msm_case(c, False, sizes[0], k))
        for n in [odd, *sizes]:
            run("msm_g1", curve, n, "mixed", lambda c=curve, n=n: msm_case(c, False, n, "mixed"))
    for curve in CURVES:
        for n in sizes:
            run("ntt", curve, n, "4 ways", lambda c=curve, n=n: ntt_case(c, n))
            run("pointwise", curve, n, "mul,h", lambda c=curve, n=n: pointwise_case(c, n))
        run("pointwise", curve, odd, "mul,h", lambda c=curve: pointwise_case(c, odd))
    for curve in CURVES:
        for case in ("same", "bits"):
            run("msm_g2", curve, sizes[0], case, lambda c=curve, k=case: msm_case(c, True, sizes[0], k))
        for n in [odd, *sizes]:
            run("msm_g2", curve, n, "mixed", lambda c=curve, n=n: msm_case(c, True, n, "mixed"))

    bad = [r for r in rows.rows if r["ok"] is False]
    skipped = [r for r in rows.rows if r["ok"] is None]
    summary = {"step": "compare", "emulated": args.emulate, "rows": rows.rows, "mismatches": len(bad),
               "skipped": len(skipped), "compared": len(rows.rows) - len(skipped)}
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1))
    print(f"compare: {summary['compared']} cases compared, {len(bad)} mismatches, {len(skipped)} skipped (budget)")
    return 1 if bad else 0


# ---- timings -----------------------------------------------------------------------------

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


def once(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


def synthetic_key(curve, log_n: int, seed: int = 7):
    """A proving key and witness of domain 2^log_n: the fixture's header and points (tiled),
    random A and B rows over all signals, random witness. Proving it does the real work of
    that size; the proof is not meant to verify (there is no circuit behind it)."""
    from zkqueue.groth16.formats.wtns import Witness
    from zkqueue.groth16.formats.zkey import ZKey, coef_dtype
    fx = fixture_key(curve)
    rng = np.random.default_rng(seed)
    n = 1 << log_n
    n_public = fx.n_public
    n_vars = n - 1
    m = n - n_public - 1                         # constraints, as snarkjs sizes the domain
    coefs = np.zeros(2 * m, dtype=coef_dtype())
    coefs["matrix"][m:] = 1
    coefs["constraint"] = np.concatenate([np.arange(m), np.arange(m)])
    coefs["signal"] = rng.integers(0, n_vars, 2 * m)
    coefs["value"] = random_scalars(curve, 2 * m, rng)
    g1, g2 = np.asarray(fx.h_query), np.asarray(fx.b2_query)
    key = ZKey(path=f"synthetic-2^{log_n}", curve=curve, n_vars=n_vars, n_public=n_public, domain_size=n,
               alpha1=fx.alpha1, beta1=fx.beta1, beta2=fx.beta2, gamma2=fx.gamma2, delta1=fx.delta1,
               delta2=fx.delta2, ic=np.asarray(fx.ic), coefs=frozen(coefs),
               a_query=frozen(tiled(g1, n_vars)), b1_query=frozen(tiled(g1[::-1], n_vars)),
               b2_query=frozen(tiled(g2, n_vars)), l_query=frozen(tiled(g1, n_vars - n_public - 1)),
               h_query=frozen(tiled(g1[1:], n)))
    values = random_scalars(curve, n_vars, rng)
    values[0] = [1, 0, 0, 0]
    return key, Witness(path=f"synthetic-2^{log_n}.wtns", curve=curve, values=frozen(values))


FIXED_RS = (123456789, 987654321)


@contextlib.contextmanager
def fixed_randomness():
    """The prover's r and s fixed, so two backends must produce the same proof bytes."""
    from zkqueue.groth16 import prover
    real = prover.blinding_scalars
    prover.blinding_scalars = lambda _curve: FIXED_RS
    try:
        yield
    finally:
        prover.blinding_scalars = real


def seeded(*what) -> np.random.Generator:
    """The same random inputs for the same (kind, curve, size) in every process."""
    return np.random.default_rng(zlib.crc32(repr(what).encode()))


def digest(result) -> str:
    """A short hash of a kernel's or prover's result, to compare two processes' results."""
    if isinstance(result, np.ndarray):
        data = np.ascontiguousarray(result).tobytes()
    elif isinstance(result, bytes):
        data = result
    else:
        data = repr(result).encode()
    return hashlib.sha256(data).hexdigest()[:16]


def msm_inputs(curve, g2: bool, log_n: int, base: np.ndarray | None = None):
    """(points, scalars) of a timed MSM: `base` (default: the fixture's points) tiled to 2^log_n,
    seeded random scalars."""
    n = 1 << log_n
    base = base_points(curve, g2) if base is None else base
    return frozen(tiled(base, n)), random_scalars(curve, n, seeded("msm", g2, curve.name, log_n))


def proof_points_check(curve, key, w, proof, cpu) -> bool:
    """pi_a and pi_b of a synthetic key's proof (fixed r, s) computed independently: the key's
    A and B2 points are fixture points tiled, so sum w_i A_i is the CPU's MSM over the base
    with folded witness values, plus the blinding terms."""
    from zkqueue.groth16.encoding import g1_to_lem, g2_to_lem
    r, s = FIXED_RS
    fx = fixture_key(curve)
    g1, g2 = np.asarray(fx.h_query), np.asarray(fx.b2_query)
    values = np.asarray(w.values)
    a = cpu.msm_g1(g1, fold_scalars(values, len(g1), curve.r))
    b = cpu.msm_g2(g2, fold_scalars(values, len(g2), curve.r))
    rows = lambda *pts: np.frombuffer(b"".join(pts), dtype="<u8").reshape(len(pts), -1)  # noqa: E731
    sc = lambda *ks: np.frombuffer(b"".join(k.to_bytes(32, "little") for k in ks), "<u8").reshape(-1, 4)  # noqa: E731
    pi_a = cpu.msm_g1(rows(a, key.alpha1, key.delta1), sc(1, 1, r))
    pi_b = cpu.msm_g2(rows(b, key.beta2, key.delta2), sc(1, 1, s))
    return g1_to_lem(curve, proof.a) == pi_a and g2_to_lem(curve, proof.b) == pi_b


def ntt_input(curve, log_n: int) -> np.ndarray:
    return random_scalars(curve, 1 << log_n, seeded("ntt", curve.name, log_n))


def run_kind(backend, curve, what: str, log_n: int, inputs=None):
    """Runs one measured operation on `backend`; returns its result (for digest)."""
    from zkqueue.groth16 import prover
    if what in ("msm_g1", "msm_g2"):
        pts, sc = inputs or msm_inputs(curve, what == "msm_g2", log_n)
        return (backend.msm_g2 if what == "msm_g2" else backend.msm_g1)(pts, sc)
    if what == "ntt":
        return backend.ntt(inputs if inputs is not None else ntt_input(curve, log_n))
    key, w = inputs or synthetic_key(curve, log_n)
    with fixed_randomness():
        return prover.prove(key, w, backend, self_check=False).proof


def cpu_plan(emulate: bool) -> list[tuple[str, str, int]]:
    """What the CPU backend is timed on, most wanted first (the run may be cut short)."""
    if emulate:
        return [(w, c.name, 5) for w in ("proof", "msm_g1", "msm_g2", "ntt") for c in CURVES] + \
               [("proof", "bn128", 6)]
    return [("proof", "bn128", 16), ("proof", "bn128", 20),
            ("msm_g1", "bn128", 16), ("msm_g1", "bls12381", 16), ("msm_g2", "bn128", 16),
            ("msm_g2", "bls12381", 16), ("ntt", "bn128", 20), ("ntt", "bls12381", 20),
            ("proof", "bls12381", 16), ("msm_g1", "bn128", 20), ("proof", "bls12381", 20),
            ("ntt", "bn128", 24), ("ntt", "bls12381", 24), ("proof", "bn128", 24)]


def cpu_reference(args) -> int:
    """Times the CPU backend on cpu_plan(), one run each, writing --json after every row.

    Meant to run beside the GPU work (gpu_check.sh starts it while NVRTC compiles), on its
    own --cpu-threads cores; `time --cpu-ref` merges the rows and checks the results match.
    """
    if not args.json:
        raise SystemExit("cpu-ref needs --json FILE")
    rows, out = [], Path(args.json)
    backends = {c.name: cpu_backend(c, args.cpu_threads) for c in CURVES}
    print(f"cpu reference: CPU backend on {args.cpu_threads} threads", flush=True)
    for what, curve_name, log_n in cpu_plan(args.emulate):
        curve = curves.by_name(curve_name)
        inputs = msm_inputs(curve, what == "msm_g2", log_n) if what.startswith("msm") else \
            ntt_input(curve, log_n) if what == "ntt" else synthetic_key(curve, log_n)
        t0 = time.perf_counter()
        result = run_kind(backends[curve_name], curve, what, log_n, inputs)
        ms = (time.perf_counter() - t0) * 1e3
        rows.append({"what": what, "curve": curve_name, "n": 1 << log_n, "cpu_ms": ms, "digest": digest(result)})
        print(f"  cpu {what} {curve_name} 2^{log_n}: {ms:.0f} ms", flush=True)
        out.write_text(json.dumps({"cpu_threads": args.cpu_threads, "rows": rows, "done": False}))
    out.write_text(json.dumps({"cpu_threads": args.cpu_threads, "rows": rows, "done": True}))
    return 0


def load_cpu_reference(path: str | None, wait_s: float) -> dict:
    """The CPU rows written so far by `cpu-ref`, waiting up to wait_s for it to finish."""
    if not path:
        return {"rows": [], "cpu_threads": None, "done": False}
    deadline = time.monotonic() + wait_s
    while True:
        try:
            ref = json.loads(Path(path).read_text())
        except (OSError, ValueError):   # not written yet, or caught mid-write
            ref = None
        if ref and ref.get("done"):
            return ref
        if time.monotonic() > deadline:
            return ref or {"rows": [], "cpu_threads": None, "done": False}
        time.sleep(0.5)


def _target(row: dict, log_n: int) -> str:
    target = TARGETS_MS.get((row["what"], row["curve"], log_n))
    if target is None or row.get("gpu_ms") is None:
        return ""
    return f"target <= {target:g} ms: {'met' if row['gpu_ms'] <= target else 'MISSED'}"


def _estimate_s(what: str, log_n: int, emulate: bool) -> float:
    """Seconds a row may take (inputs, warm-up, runs, the check): start it only if they are left."""
    if emulate:
        return 2.0
    scale = (1 << log_n) / (1 << 24)
    return {"msm_g1": 3 + 10 * scale, "msm_g2": 3 + 20 * scale, "ntt": 2 + 4 * scale, "proof": 3 + 45 * scale}[what]


def time_all(args) -> int:
    budget = Budget(args.budget_s)
    emulate = args.emulate
    big = [] if emulate else [26]
    plan = ([("msm_g1", c, k) for c in CURVES for k in ([5, 7] if emulate else [16, 20, 22, 24])]
            + [("ntt", c, k) for c in CURVES for k in ([5, 7] if emulate else [20, 24])]
            + [("proof", c, k) for k in ([5, 6] if emulate else [16, 20]) for c in CURVES]
            + ([] if emulate else [("proof", curves.BN128, 24)])
            + [("msm_g2", c, k) for c in CURVES for k in ([5, 7] if emulate else [16, 20, 22, 24])]
            + [("msm_g1", c, k) for c in CURVES for k in big])
    base_len = 37 if emulate else None     # the emulation's sizes still fold several points per base point
    reps = 1 if emulate else args.reps
    gpus = {c.name: make_backend(c, emulate) for c in CURVES}
    checkers = {c.name: cpu_backend(c, args.cpu_threads) for c in CURVES}
    desc = next(iter(gpus.values())).rt.describe()
    rows = Rows()
    print(f"timings on {desc}, kernels {cuda_source.source_hash()}; GPU median of {reps} after a warm-up; "
          f"budget {args.budget_s:.0f} s; every MSM and proof checked by folding onto the base points", flush=True)
    from zkqueue.groth16 import prover

    for what, curve, log_n in plan:
        n = 1 << log_n
        if budget.left() < max(args.reserve_s, _estimate_s(what, log_n, emulate)):
            rows.add(what=what, curve=curve.name, n=n, ok=None, note="skipped (time budget)")
            continue
        gpu, cpu = gpus[curve.name], checkers[curve.name]
        if what.startswith("msm"):
            g2 = what == "msm_g2"
            base = base_points(curve, g2)[:base_len]
            pts, host_sc = msm_inputs(curve, g2, log_n, base)
            msm = gpu.msm_g2 if g2 else gpu.msm_g1
            dev_sc = gpu.output(gpu.rt.upload(host_sc))   # resident: the MSM skips the upload
            t_dev = timed(lambda: msm(pts, dev_sc), reps, gpu.rt.synchronize)
            t_host = timed(lambda: msm(pts, host_sc), max(1, reps // 2), gpu.rt.synchronize)
            got = msm(pts, dev_sc)
            want = (cpu.msm_g2 if g2 else cpu.msm_g1)(base, fold_scalars(host_sc, len(base), curve.r))
            row = rows.add(what=what, curve=curve.name, n=n, gpu_ms=t_dev, gpu_host_ms=t_host, ok=got == want,
                           check=f"folded onto {len(base)} base points", digest=digest(got))
            pts = dev_sc = host_sc = None
        elif what == "ntt":
            host = ntt_input(curve, log_n)
            x = gpu.rt.upload(host)
            t_dev = timed(lambda: cuda_ntt.run_passes(gpu, x, log_n, dif=False), reps, gpu.rt.synchronize)
            t_host = timed(lambda: gpu.ntt(host), max(1, reps // 2), gpu.rt.synchronize)
            got = gpu.ntt(host)
            row = rows.add(what="ntt", curve=curve.name, n=n, gpu_ms=t_dev, gpu_host_ms=t_host,
                           ok=bool(np.array_equal(got, cpu.ntt(host))), check="equal to the CPU backend's",
                           note="forward passes on the device; host ms: natural order, with transfers",
                           digest=digest(got))
            x = host = None
        else:
            key, w = synthetic_key(curve, log_n)
            with fixed_randomness():
                t_cold = once(lambda: prover.prove(key, w, gpu, self_check=False))
                t_gpu = timed(lambda: prover.prove(key, w, gpu, self_check=False), reps, gpu.rt.synchronize)
                proof = prover.prove(key, w, gpu, self_check=False).proof
            row = rows.add(what="proof", curve=curve.name, n=n, gpu_ms=t_gpu, gpu_host_ms=t_cold,
                           ok=proof_points_check(curve, key, w, proof, cpu),
                           check="pi_a, pi_b folded onto the base points",
                           note="synthetic key; host ms = first proof (key upload)", digest=digest(proof))
            key = w = None
        row["note"] = "; ".join(x for x in (row.get("note", ""), _target(row, log_n)) if x)
        gpu.release_memory()

    # The CPU backend's rows, timed by `cpu-ref` (beside the compile), on the same inputs.
    ref = load_cpu_reference(args.cpu_ref, max(0.0, budget.left() - 2))
    cpu_rows = {(r["what"], r["curve"], r["n"]): r for r in ref["rows"]}
    for row in rows.rows:
        c = cpu_rows.get((row["what"], row["curve"], row["n"]))
        if c is None or row.get("gpu_ms") is None:
            continue
        same = c["digest"] == row["digest"]
        row.update(cpu_ms=c["cpu_ms"], cpu_threads=ref["cpu_threads"], speedup=c["cpu_ms"] / row["gpu_ms"],
                   ok=same and row.get("ok") is not False)
        if "CPU" not in row.get("check", ""):
            row["check"] = ", ".join(x for x in (row.get("check"), "equal to the CPU reference's") if x)
    mismatches = sum(r.get("ok") is False for r in rows.rows)
    unchecked = [r for r in rows.rows if r.get("gpu_ms") is not None and r.get("ok") is None]
    cpu_note = (f"CPU backend on {ref['cpu_threads']} of {os.cpu_count()} cores, one run, in a second process "
                f"beside the other steps"
                + ("" if ref.get("done") else " (cut short)")) if ref["rows"] else "no CPU reference"
    text = table(rows.rows, f"zkqueue CUDA backend on {desc}; kernels {cuda_source.source_hash()}; GPU median of {reps} "
                            f"after a warm-up; {cpu_note}")
    print(text)
    summary = {"step": "time", "emulated": emulate, "device": desc, "kernels": cuda_source.source_hash(),
               "cpu_threads": ref["cpu_threads"], "cpu_reference_complete": bool(ref.get("done")),
               "rows": rows.rows, "mismatches": mismatches, "unchecked": len(unchecked), "table": text}
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1))
    return 1 if mismatches or unchecked else 0


def table(rows: list[dict], header: str) -> str:
    cols = ("what", "curve", "size", "gpu ms", "host ms", "cpu ms", "speedup", "exact", "checked by", "note")

    def fmt(v, spec=".2f"):
        return "" if v is None else format(v, spec)

    body = [(r["what"], r["curve"], f"2^{int(r['n']).bit_length() - 1}", fmt(r.get("gpu_ms")),
             fmt(r.get("gpu_host_ms")), fmt(r.get("cpu_ms"), ".1f"),
             "" if r.get("speedup") is None else f"{r['speedup']:.1f}x",
             {True: "yes", False: "NO", None: ""}[r.get("ok")], r.get("check", ""), r.get("note", "")) for r in rows]
    widths = [max(len(str(x[i])) for x in [cols, *body]) for i in range(len(cols))]
    line = lambda r: "  ".join(str(v).ljust(w) for v, w in zip(r, widths)).rstrip()  # noqa: E731
    return "\n".join([header, line(cols), line(["-" * w for w in widths]), *map(line, body)])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compile", help="build one curve's module (warms CuPy's disk cache) and exit")
    c.add_argument("curve")
    for name, fn in (("compare", compare), ("time", time_all), ("cpu-ref", cpu_reference)):
        p = sub.add_parser(name)
        p.set_defaults(func=fn)
        p.add_argument("--json", help="write the rows and a summary here")
        p.add_argument("--budget-s", type=float, default=120.0, help="stop starting new cases after this")
        p.add_argument("--cpu-threads", type=int, default=None)
    for p in sub.choices.values():
        p.add_argument("--emulate", action="store_true", help="host emulation at tiny sizes (no GPU)")
    sub.choices["compare"].add_argument("--logs", default="10,13,16,19,22", help="log2 sizes")
    t = sub.choices["time"]
    t.add_argument("--reps", type=int, default=3)
    t.add_argument("--cpu-ref", help="the JSON `cpu-ref` writes: its rows are merged and checked")
    t.add_argument("--reserve-s", type=float, default=5.0, help="start nothing new with less than this left")
    sub.choices["cpu-ref"].set_defaults(cpu_threads=2)
    args = ap.parse_args()
    if args.cmd == "compile":
        t0 = time.perf_counter()
        be = make_backend(curves.by_name(args.curve), args.emulate)
        print(f"compiled {args.curve} in {time.perf_counter() - t0:.1f}s on {be.rt.describe()}")
        return 0
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
