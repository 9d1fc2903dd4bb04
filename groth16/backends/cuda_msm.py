"""The MSM on the device: which kernels of msm.cu run, with what sizes, in what order.

`msm(be, group, points, scalars, n)` runs msm.cu's steps 1-6 on device arrays and returns
the result as a (1, xyzz_words) device array, plus the device word that flags a scalar >= r
(read it with raise_bad_scalar when the result is read: no extra host round trip).
`small(...)` is the path for a few terms (the proof's blinding), one block per group.

Sizes (plan): the window c minimises windows * (n + 3 * 2^(c-1)) (a point's mixed addition
per window against about three additions per bucket in the reduction) for 4 <= c <= 16:
16 bits at 2^24, 2^15 buckets per window, whose sums fit the L2 cache; wider windows would
save additions but sort and reduce millions of buckets. Heavy buckets are split into units
of L entries, L about twice the mean bucket size, so a random window splits none and a
witness full of 0s and 1s splits its two hot buckets into thousands of units.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import InputError

MIN_WINDOW, MAX_WINDOW = 4, 16
SMALL_MSM = 32          # at most this many terms: one thread per term (msm_small_*)
SEGMENT = 32            # buckets per thread in the bucket reduction (S)
UNIT_FAN = 8            # units folded per thread and round (msm_unit_tree_*)
ROW_FAN = 32            # segment sums added per thread and round (msm_sum_rows_*)
SORT_ENTRIES = 1 << 30  # (point, window) entries sorted at once: bounds the sort's memory (4 GiB)
U64_MAX = np.uint64(0xFFFFFFFFFFFFFFFF)


def choose_window(n: int, scalar_bits: int) -> int:
    """Window width c minimising windows * (n + 3 * 2^(c-1)), MIN_WINDOW <= c <= MAX_WINDOW."""
    best, best_cost = MIN_WINDOW, math.inf
    for c in range(MIN_WINDOW, MAX_WINDOW + 1):
        windows = -(-(scalar_bits + 1) // c)
        cost = windows * (n + 3 * (1 << (c - 1)))
        if cost < best_cost:
            best, best_cost = c, cost
    return best


def split_length(n: int, c: int) -> int:
    """Entries per work unit: twice the mean bucket size, at least 32."""
    return max(32, 2 * -(-n // (1 << (c - 1))))


@dataclass(frozen=True)
class Plan:
    c: int            # window bits
    windows: int
    half: int         # buckets per window, 2^(c-1)
    L: int            # entries per work unit
    chunk: int        # points sorted at once

    @property
    def buckets(self) -> int:
        return self.windows * self.half


def plan(n: int, scalar_bits: int, c: int | None = None) -> Plan:
    """The sizes of an MSM of n points (c may be forced, e.g. by tests)."""
    c = c or choose_window(n, scalar_bits)
    windows = -(-(scalar_bits + 1) // c)
    chunk = max(1, min(n, SORT_ENTRIES // windows))
    return Plan(c, windows, 1 << (c - 1), split_length(chunk, c), chunk)


def xyzz_words(be, group: str) -> int:
    return 4 * be.coord_words(group)


def msm(be, group: str, points, scalars, n: int, *, c: int | None = None):
    """sum scalars[i] * points[i] for device arrays of n affine points and n standard-form
    scalars. Returns (out, bad): out a (1, xyzz) device array, bad a 1-word device array
    (the lowest index of a scalar >= r, or all ones)."""
    xp = be.xp
    p = plan(n, be.scalar_bits, c)
    words = xyzz_words(be, group)
    buckets = xp.empty((p.buckets, words), dtype=xp.uint64)
    bad = xp.full(1, U64_MAX, dtype=xp.uint64)
    for first, start in enumerate(range(0, n, p.chunk)):
        end = min(n, start + p.chunk)
        _sort_and_accumulate(be, group, p, points[start:end], scalars[start:end], start, end - start, buckets,
                             bad, first == 0)
    return _reduce(be, group, p, buckets), bad


def _sort_and_accumulate(be, group, p: Plan, points, scalars, offset: int, count: int, buckets, bad,
                         first: bool) -> None:
    """Steps 1-4 for one chunk: count, sort, split into units, accumulate, fold, gather."""
    xp, B = be.xp, p.buckets
    c, windows = np.uint32(p.c), np.uint32(p.windows)
    counts = xp.zeros(B, dtype=xp.uint32)
    be.launch("msm_count", count, scalars, np.uint64(count), np.uint64(offset), c, windows, counts, bad)
    ends = xp.cumsum(counts, dtype=xp.uint32)
    starts = ends - counts
    cursor = starts.copy()
    vals = xp.empty(max(1, count * p.windows), dtype=xp.uint32)   # an upper bound: zero digits drop out
    be.launch("msm_scatter", count, scalars, np.uint64(count), c, windows, cursor, vals)
    del cursor, ends
    unit_start = xp.zeros(B + 1, dtype=xp.uint32)
    unit_start[1:] = xp.cumsum((counts + np.uint32(p.L - 1)) // np.uint32(p.L), dtype=xp.uint32)
    total_units = unit_start[B:]                       # a device word: no host round trip
    max_units = -(-count // p.L)                       # a bucket holds at most `count` entries
    unit_bound = B + -(-count * p.windows // p.L)
    unit_bucket = xp.empty(unit_bound, dtype=xp.uint32)
    be.launch("msm_unit_map", B, unit_start, np.uint64(B), unit_bucket)
    partial = xp.empty((unit_bound, xyzz_words(be, group)), dtype=xp.uint64)
    be.launch(f"msm_accumulate_{group}", unit_bound, points, vals, starts, counts, unit_bucket, unit_start,
              total_units, np.uint32(p.L), partial)
    del vals
    stride = 1
    while stride < max_units:
        be.launch(f"msm_unit_tree_{group}", unit_bound, unit_bucket, unit_start, total_units, np.uint32(stride),
                  np.uint32(UNIT_FAN), partial)
        stride *= UNIT_FAN
    be.launch(f"msm_gather_{group}", B, unit_start, np.uint64(B), np.uint32(first), partial, buckets)


def _reduce(be, group: str, p: Plan, buckets):
    """Steps 5-6: weight the buckets segment by segment, add the segments, combine windows."""
    xp, words = be.xp, xyzz_words(be, group)
    segs = -(-p.half // SEGMENT)
    cur = xp.empty((p.windows * segs, words), dtype=xp.uint64)
    be.launch(f"msm_bucket_segments_{group}", p.windows * segs, buckets, np.uint32(p.windows), np.uint32(p.c),
              np.uint32(SEGMENT), cur)
    cols = segs
    while cols > 1:
        ocols = -(-cols // ROW_FAN)
        out = xp.empty((p.windows * ocols, words), dtype=xp.uint64)
        be.launch(f"msm_sum_rows_{group}", p.windows * ocols, cur, np.uint32(p.windows), np.uint32(cols),
                  np.uint32(ROW_FAN), out)
        cur, cols = out, ocols
    out = xp.empty((1, words), dtype=xp.uint64)
    threads = max(32, 1 << (p.windows - 1).bit_length())
    assert threads <= 64, "msm_combine_* holds 64 window sums (c >= MIN_WINDOW = 4)"
    be.launch(f"msm_combine_{group}", threads, cur, np.uint32(p.windows), np.uint32(p.c), out, block=threads,
              grid=1)
    return out


def small(be, group: str, points_xyzz, scalars, *, groups: int, terms: int):
    """`groups` MSMs of `terms` (<= SMALL_MSM) XYZZ points each ((groups * terms, xyzz) device
    array) with standard-form scalars ((groups * terms, 4)). Returns (out (groups, xyzz), bad)."""
    xp = be.xp
    out = xp.empty((groups, xyzz_words(be, group)), dtype=xp.uint64)
    bad = xp.full(1, U64_MAX, dtype=xp.uint64)
    be.launch(f"msm_small_{group}", groups * 32, points_xyzz, scalars, np.uint32(terms), bad, out, block=32,
              grid=groups)
    return out, bad


def affine_to_xyzz(be, group: str, points: np.ndarray) -> np.ndarray:
    """Host affine points (Montgomery words, zeros = infinity) as XYZZ rows (ZZ = ZZZ = 1)."""
    coord = be.coord_words(group)
    points = np.asarray(points, dtype=np.uint64).reshape(-1, 2 * coord)
    one = np.zeros(coord, dtype=np.uint64)
    one[:be.q_words] = np.frombuffer(pow(2, 64 * be.q_words, be.curve.q).to_bytes(8 * be.q_words, "little"),
                                     dtype="<u8")
    inf = ~points.any(axis=1)
    z = np.where(inf[:, None], np.uint64(0), one[None, :])
    return np.ascontiguousarray(np.concatenate([points, z, z], axis=1))


def raise_bad_scalar(be, group: str, bad, offset: int = 0) -> None:
    """Raises InputError when an MSM flagged a scalar >= r (reads the flag: a sync)."""
    i = int(bad[0])
    if i != int(U64_MAX):
        raise InputError(f"msm_{group}: scalar {offset + i} is not below r", expected=f"< {be.curve.r}",
                         found=offset + i)
