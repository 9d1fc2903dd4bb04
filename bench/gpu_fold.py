"""An exact check of an MSM at any size: fold the scalars onto the base points.

When points are a base of m points tiled (P_i = B_(i mod m)),
    sum_i s_i P_i = sum_j s'_j B_j   with   s'_j = sum_{i = j mod m} s_i  (mod r),
so an MSM of 2^24 or 2^26 tiled points is checked exactly against an MSM of m points (the
CPU backend's, at the base's size). bench/gpu_kernels.py checks every timed configuration
this way; tests/test_cuda_emulation.py checks the emulated CUDA MSM at c >= 16 this way.
"""

from __future__ import annotations

import numpy as np


def tiled(base: np.ndarray, n: int) -> np.ndarray:
    """n rows: base repeated (row i is base[i mod len(base)])."""
    return np.tile(base, (-(-n // len(base)), 1))[:n].copy()


def fold_scalars(scalars: np.ndarray, m: int, r: int) -> np.ndarray:
    """s'_j = sum of scalars[i] over i = j mod m, reduced mod r, as an (m, 4) word array.

    Vectorised: each scalar is cut into 16 chunks of 16 bits and the chunks are summed in
    64-bit integers (exact up to 2^47 rows per residue), then each of the m sums is put
    together and reduced with Python integers.
    """
    words = np.ascontiguousarray(scalars, dtype=np.uint64).reshape(-1, 4)
    n = len(words)
    rows = -(-n // m)
    chunks = np.zeros((rows * m, 16), dtype=np.uint16)
    chunks[:n] = words.view(np.uint16).reshape(n, 16)
    sums = chunks.reshape(rows, m, 16).sum(axis=0, dtype=np.int64)
    out = bytearray()
    for j in range(m):
        value = sum(int(c) << (16 * k) for k, c in enumerate(sums[j])) % r
        out += value.to_bytes(32, "little")
    return np.frombuffer(bytes(out), dtype="<u8").reshape(m, 4).copy()
