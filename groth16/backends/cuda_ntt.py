"""NTTs on the device: the passes of ntt.cu, their sizes, and the twiddle tables.

A transform of 2^k elements runs ceil(k / MAX_LOG_RADIX) passes of ntt_pass, each over r
consecutive stages (radix 2^r, r as equal as possible: 8 + 8 + 8 at 2^24, 10 + 10 at 2^20),
with its group of 2^r elements in shared memory. Twiddles omega_n^j (j < n/2) are computed
once per domain size and kept on the device with the backend's other tables (released with
them). The forward transform is DIT (bit-reversed in, natural out), the inverse DIF (natural
in, bit-reversed out):

  * `coset_evaluations` (the prover's inverse then coset-forward pair) needs no permutation:
    the inverse's last pass multiplies position i by n^-1 g^bitrev(i), and the forward
    takes the bit-reversed coefficients as they are.
  * `natural` (the public API's natural-order transforms) adds one ntt_permute.
"""

from __future__ import annotations

import numpy as np

MAX_LOG_RADIX = 11      # stages per pass: 2^11 elements, 64 KiB of shared memory
MIN_BLOCK_LOG = 8       # at least 2^8 elements per block: small passes take several groups
MAX_THREADS = 512       # threads per block of a pass (each does E / 2 / threads butterflies)
FR_BYTES = 32


def passes(k: int) -> list[tuple[int, int]]:
    """(first stage, stages) of each pass of a 2^k transform, in DIT (ascending) order."""
    if k == 0:
        return []
    count = -(-k // MAX_LOG_RADIX)
    sizes = [k // count + (1 if i < k % count else 0) for i in range(count)]
    out, s = [], 0
    for r in sizes:
        out.append((s, r))
        s += r
    return out


def twiddles(be, k: int):
    """omega_n^j for j < n/2 on the device (n = 2^k >= 2), computed once per k."""
    key = ("twiddles", k)
    tw = be._tables.get(key)
    if tw is None:
        omega = be.curve.root_of_unity(k)
        lo, hi, bits = be.table(omega, 1, k - 1)
        tw = be.xp.empty((1 << (k - 1), 4), dtype=be.xp.uint64)
        be.launch("ntt_twiddles", 1 << (k - 1), tw, np.uint64(1 << (k - 1)), lo, hi, np.uint32(bits))
        be._tables[key] = tw
    return tw


def run_passes(be, a, k: int, *, dif: bool, scale=None) -> None:
    """All passes of one transform, in place on the device array a (2^k elements). `scale`:
    (lo, hi, bits) tables whose factor(bitrev(i)) the last DIF pass multiplies position i by."""
    plan = passes(k)
    if not plan:
        return
    tw = twiddles(be, k)
    for step, (s_lo, r) in enumerate(reversed(plan) if dif else plan):
        log_g = max(0, min(MIN_BLOCK_LOG - r, k - r))
        elements = 1 << (r + log_g)
        threads = min(elements // 2, MAX_THREADS)
        last = step == len(plan) - 1
        lo, hi, bits = scale if (scale is not None and last) else (be.dummy, be.dummy, 0)
        be.launch("ntt_pass", 0, a, np.uint32(k), np.uint32(s_lo), np.uint32(r), np.uint32(log_g),
                  np.uint32(dif), tw, np.uint32(2 if scale is not None and last else 0), lo, hi, np.uint32(bits),
                  block=threads, grid=min((1 << k) // elements, 1 << 20), shared_bytes=elements * FR_BYTES)


def coset_evaluations(be, a, k: int) -> None:
    """In place: values on the domain -> values on the coset g * <omega> (the prover's
    inverse NTT, shift by g^i, forward NTT), with no bit reversal."""
    r = be.curve.r
    n = 1 << k
    g = be.curve.coset_shift(k)
    if k == 0:   # n^-1 = 1 and g^0 = 1: nothing to do
        return
    run_passes(be, a, k, dif=True, scale=be.table(g, pow(n, -1, r), k))
    run_passes(be, a, k, dif=False)


def natural(be, x, k: int, inverse: bool, coset_shift: int | None):
    """The NTT of a device array of 2^k elements into a new device array, natural order in
    and out (base.Backend.ntt's meaning of inverse and coset_shift)."""
    xp, r, n = be.xp, be.curve.r, 1 << k
    out = xp.empty((n, 4), dtype=xp.uint64)
    if not inverse:
        if coset_shift is not None:
            lo, hi, bits = be.table(coset_shift, 1, k)
            be.launch("ntt_permute", n, x, out, np.uint64(n), np.uint32(k), lo, hi, np.uint32(bits), np.uint32(1))
        else:
            be.launch("ntt_permute", n, x, out, np.uint64(n), np.uint32(k), be.dummy, be.dummy, np.uint32(0),
                      np.uint32(0))
        run_passes(be, out, k, dif=False)
        return out
    work = xp.array(x, copy=True)
    if k == 0:
        return work
    g_inv = pow(coset_shift, -1, r) if coset_shift is not None else 1
    run_passes(be, work, k, dif=True, scale=be.table(g_inv, pow(n, -1, r), k))
    be.launch("ntt_permute", n, work, out, np.uint64(n), np.uint32(k), be.dummy, be.dummy, np.uint32(0),
              np.uint32(0))
    return out
