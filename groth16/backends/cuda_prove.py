"""A whole Groth16 proof on the device (CudaBackend.prove_whole), as groth16/prover.py
describes it step by step, with nothing but the three proof points coming back:

    w            one upload of the witness; the L MSM's scalars are a view into it (w[nPublic+1:])
    A, B         evaluate_ab from the key's coefficients (cached CSR), C = A * B
    A, B, C      in place to the odd coset (cuda_ntt.coset_evaluations: no bit reversal)
    h            A * B - C, out of Montgomery form
    five MSMs    a, b1 (G1), b2 (G2), l, h, each on its own stream once w and h are ready and
                 its key section is on the device (sections not cached yet are copied on the
                 copy stream through pinned memory while the device computes)
    blinding     small MSMs: pi_a = A + alpha1 + r delta1, b1 = B1 + beta1 + s delta1,
                 pi_b = B2 + beta2 + s delta2, then pi_c = C + H + s pi_a + r b1 - r s delta1
Only key sections stay cached (the backend's mirrors); the witness and every intermediate
are freed when this returns.
"""

from __future__ import annotations

import numpy as np

from ..encoding import scalars_to_bytes
from ..errors import Cancelled, InputError, MismatchError
from . import cuda_msm, cuda_ntt
from .base import as_words

MSM_STREAMS = 3


def _scalar_rows(curve, values: list[int]) -> np.ndarray:
    return np.frombuffer(scalars_to_bytes(curve, values), dtype="<u8").reshape(-1, 4).copy()


def prove(be, zkey, witness_std: np.ndarray, r: int, s: int, *, cancel=None) -> tuple[bytes, bytes, bytes]:
    """(pi_a, pi_b, pi_c) as affine LEM bytes; see the module docstring. Raises as
    CudaBackend.prove_whole."""
    curve, xp, rt = be.curve, be.xp, be.rt
    n, k = zkey.domain_size, zkey.log2_domain
    w = be.fr_array(witness_std, "witness")
    if len(w) != zkey.n_vars:
        raise MismatchError(f"the witness has {len(w)} values but the key needs {zkey.n_vars}",
                            expected=zkey.n_vars, found=len(w))
    check_cancel(cancel)
    queries = (("a", zkey.a_query, "g1"), ("b1", zkey.b1_query, "g1"), ("b2", zkey.b2_query, "g2"),
               ("l", zkey.l_query, "g1"), ("h", zkey.h_query, "g1"))
    # Key sections first: what is not cached yet is copied while the transforms run.
    sections = {name: be.key_section_async(as_words(arr, 2 * be.coord_words(g), f"{name}_query"), "points")
                for name, arr, g in queries}
    w_dev = be.input(w)
    ab = be.evaluate_ab_device(zkey.coefs, w_dev, zkey.n_vars, n)
    a, b = ab[:n], ab[n:]
    c = xp.empty((n, 4), dtype=xp.uint64)
    be.launch("fr_mul", n, a, b, c, np.uint64(n))                 # C is implied: satisfying rows have A*B = C
    for x in (a, b, c):
        check_cancel(cancel)
        cuda_ntt.coset_evaluations(be, x, k)                      # values on the odd coset
    h = xp.empty((n, 4), dtype=xp.uint64)
    be.launch("fr_h_scalars", n, a, b, c, h, np.uint64(n))        # division by Z is folded into H
    del ab, a, b, c
    check_cancel(cancel)

    ready = rt.record()
    scalars = {"a": w_dev, "b1": w_dev, "b2": w_dev, "l": w_dev[zkey.n_public + 1:], "h": h}
    offsets = {"a": 0, "b1": 0, "b2": 0, "l": zkey.n_public + 1, "h": 0}
    streams = [rt.stream() for _ in range(MSM_STREAMS)]
    raw, bads, done = {}, {}, []
    for i, (name, _, group) in enumerate(queries):
        points, copied = sections[name]
        with streams[i % MSM_STREAMS]:
            rt.wait(ready)
            rt.wait(copied)
            count = len(scalars[name])
            if count == 0:
                raw[name] = xp.zeros((1, cuda_msm.xyzz_words(be, group)), dtype=xp.uint64)
                bads[name] = xp.full(1, cuda_msm.U64_MAX, dtype=xp.uint64)
            else:
                raw[name], bads[name] = cuda_msm.msm(be, group, points, scalars[name], count)
            done.append(rt.record())
    for event in done:
        rt.wait(event)
    check_cancel(cancel)

    # Blinding: r and s fresh per proof (the caller's), three small MSMs, then pi_c.
    def terms(group: str, *points) -> object:
        rows = [p if not isinstance(p, bytes) else
                rt.upload(cuda_msm.affine_to_xyzz(be, group, np.frombuffer(p, dtype="<u8"))) for p in points]
        return xp.ascontiguousarray(xp.concatenate(rows, axis=0))

    rr = curve.r
    g1_pts = terms("g1", raw["a"], zkey.alpha1, zkey.delta1, raw["b1"], zkey.beta1, zkey.delta1)
    g1_sc = rt.upload(_scalar_rows(curve, [1, 1, r, 1, 1, s]))
    first, bad1 = cuda_msm.small(be, "g1", g1_pts, g1_sc, groups=2, terms=3)       # pi_a, b1
    g2_pts = terms("g2", raw["b2"], zkey.beta2, zkey.delta2)
    pi_b, bad2 = cuda_msm.small(be, "g2", g2_pts, rt.upload(_scalar_rows(curve, [1, 1, s])), groups=1, terms=3)
    c_pts = terms("g1", raw["l"], raw["h"], first[0:1], first[1:2], zkey.delta1)
    c_sc = rt.upload(_scalar_rows(curve, [1, 1, s, r, (-r * s) % rr]))
    pi_c, bad3 = cuda_msm.small(be, "g1", c_pts, c_sc, groups=1, terms=5)

    flags = be.rt.download(xp.concatenate([bads[name] for name, _, _ in queries] + [bad1, bad2, bad3]))
    for (name, _, group), flag in zip(queries, flags[:5]):
        if flag != cuda_msm.U64_MAX:   # only the witness can be: h is reduced, r and s are ours
            raise InputError(f"witness value {offsets[name] + int(flag)} is not below r", expected=f"< {rr}",
                             found=offsets[name] + int(flag))
    out = be.rt.download(xp.concatenate([first[0:1], pi_c], axis=0))
    pi_b_words = be.rt.download(pi_b)
    return be.xyzz_to_lem("g1", out[0]), be.xyzz_to_lem("g2", pi_b_words[0]), be.xyzz_to_lem("g1", out[1])


def check_cancel(cancel) -> None:
    """Raises Cancelled when the caller's flag (a ctypes c_int, or None) is set."""
    if cancel is not None and cancel.value:
        raise Cancelled("the prove was cancelled")
