"""Timings of the CPU backend's kernels: MSM on G1/G2 and NTT, both curves, 1 and 2 threads,
for each native arithmetic variant this CPU runs (x86-adx assembly and portable C++).

Not a test. Prints median-of-3 wall and CPU times and ns per point; the variants run in
turn so that machine noise hits both alike:
    PYTHONPATH=. python3 bench/kernels.py [log2 sizes, default 12 14 16]
"""

from __future__ import annotations

import random
import statistics
import sys
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


def main() -> None:
    logs = [int(a) for a in sys.argv[1:]] or [12, 14, 16]
    rng = random.Random(1)
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


if __name__ == "__main__":
    main()
