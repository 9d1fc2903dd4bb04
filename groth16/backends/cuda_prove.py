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
from ..errors import Cancelled, FormatError, InputError, MismatchError
from . import cuda_msm, cuda_ntt
from .base import as_words

MSM_STREAMS = 3


def _scalar_rows(curve, values: list[int]) -> np.ndarray:
    return np.frombuffer(scalars_to_bytes(curve, values), dtype="<u8").reshape(-1, 4).copy()


def prove(be, zkey, witness_std: np.ndarray, r: int, s: int, *, cancel=None) -> tuple[bytes, bytes, bytes]:
    """(pi_a, pi_b, pi_c) as affine LEM bytes; see the module docstring. Raises as
    CudaBackend.prove_whole."""
    (out,) = prove_batch(be, zkey, [witness_std], [(r, s)], cancel=cancel)
    if isinstance(out, BaseException):
        raise out
    return out


def prove_batch(be, zkey, witnesses, blinding: list[tuple[int, int]], *, cancel=None
                ) -> list[tuple[bytes, bytes, bytes] | BaseException]:
    """B proofs of one key, each (pi_a, pi_b, pi_c) or the error its own witness caused.

    `witnesses`: an iterable of B standard-form witness arrays, or exceptions for witnesses
    that could not even be read (passed through in their place); it is consumed
    one item at a time, so a caller that reads witness j+1 while the device works on
    witness j (an iterator fed by a reader thread) overlaps the two. `blinding`: each
    proof's fresh (r, s).

    How the B proofs share the device: the key's sections and coefficient index are staged
    once for the batch; each proof's transforms and five MSMs are queued on the device
    without any host synchronisation between proofs (the MSMs on MSM_STREAMS streams), so
    the device never waits for the host inside a batch; the blinding of all B proofs is
    three small-MSM launches in total (2B, B and B groups); and the proof points and every
    proof's bad-scalar flags come back in one download. A bad witness fails only its own
    proof.

    Raises:
        Cancelled: `cancel` was set (the whole batch stops).
        FormatError: a bad coefficient entry in the key (every proof would fail alike).
    """
    queries = (("a", zkey.a_query, "g1"), ("b1", zkey.b1_query, "g1"), ("b2", zkey.b2_query, "g2"),
               ("l", zkey.l_query, "g1"), ("h", zkey.h_query, "g1"))
    check_cancel(cancel)
    # Key sections first: what is not cached yet is copied while the first transforms run.
    sections = {name: be.key_section_async(as_words(arr, 2 * be.coord_words(g), f"{name}_query"), "points")
                for name, arr, g in queries}
    streams = [be.rt.stream() for _ in range(MSM_STREAMS)]
    started: list = []
    for witness in witnesses:
        check_cancel(cancel)
        if isinstance(witness, BaseException):
            started.append(witness)
            continue
        try:
            started.append(_start(be, zkey, witness, queries, sections, streams))
        except (MismatchError, InputError) as exc:
            if isinstance(exc, FormatError) and not isinstance(exc, MismatchError):
                raise               # the key's fault, not this witness's
            started.append(exc)
    if len(started) != len(blinding):
        raise ValueError(f"{len(started)} witnesses but {len(blinding)} blinding pairs")
    check_cancel(cancel)
    return _finish(be, zkey, queries, started, blinding)


class _Started:
    """One proof's device work, queued: the five MSMs' raw sums and bad-scalar flags, and the
    events that mark them done."""

    def __init__(self, raw: dict, bads: dict, done: list, offsets: dict):
        self.raw, self.bads, self.done, self.offsets = raw, bads, done, offsets


def _start(be, zkey, witness_std, queries, sections, streams) -> _Started:
    """Queues one proof's transforms and MSMs; no host synchronisation. Raises MismatchError
    (wrong witness length) before queueing anything."""
    xp, rt = be.xp, be.rt
    n, k = zkey.domain_size, zkey.log2_domain
    w = be.fr_array(witness_std, "witness")
    if len(w) != zkey.n_vars:
        raise MismatchError(f"the witness has {len(w)} values but the key needs {zkey.n_vars}",
                            expected=zkey.n_vars, found=len(w))
    w_dev = be.input(w)
    ab = be.evaluate_ab_device(zkey.coefs, w_dev, zkey.n_vars, n)
    a, b = ab[:n], ab[n:]
    c = xp.empty((n, 4), dtype=xp.uint64)
    be.launch("fr_mul", n, a, b, c, np.uint64(n))                 # C is implied: satisfying rows have A*B = C
    for x in (a, b, c):
        cuda_ntt.coset_evaluations(be, x, k)                      # values on the odd coset
    h = xp.empty((n, 4), dtype=xp.uint64)
    be.launch("fr_h_scalars", n, a, b, c, h, np.uint64(n))        # division by Z is folded into H
    del ab, a, b, c

    ready = rt.record()
    scalars = {"a": w_dev, "b1": w_dev, "b2": w_dev, "l": w_dev[zkey.n_public + 1:], "h": h}
    offsets = {"a": 0, "b1": 0, "b2": 0, "l": zkey.n_public + 1, "h": 0}
    raw, bads, done = {}, {}, []
    for i, (name, _, group) in enumerate(queries):
        points, copied = sections[name]
        with streams[i % len(streams)]:
            rt.wait(ready)
            rt.wait(copied)
            count = len(scalars[name])
            if count == 0:
                raw[name] = xp.zeros((1, cuda_msm.xyzz_words(be, group)), dtype=xp.uint64)
                bads[name] = xp.full(1, cuda_msm.U64_MAX, dtype=xp.uint64)
            else:
                raw[name], bads[name] = cuda_msm.msm(be, group, points, scalars[name], count)
            done.append(rt.record())
    return _Started(raw, bads, done, offsets)


def _finish(be, zkey, queries, started, blinding) -> list:
    """Blinds every started proof (three small-MSM launches for the whole batch), downloads the
    points and flags once, and returns each proof or its InputError."""
    curve, xp, rt = be.curve, be.xp, be.rt
    live = [(j, st) for j, st in enumerate(started) if isinstance(st, _Started)]
    out: list = list(started)
    if not live:
        return out
    for _, st in live:
        for event in st.done:
            rt.wait(event)

    def terms(group: str, *points) -> list:
        return [p if not isinstance(p, bytes) else
                rt.upload(cuda_msm.affine_to_xyzz(be, group, np.frombuffer(p, dtype="<u8"))) for p in points]

    def stack(rows: list) -> object:
        return xp.ascontiguousarray(xp.concatenate(rows, axis=0))

    # Blinding: r and s fresh per proof (the caller's); pi_a and b1 of every proof in one launch,
    # pi_b in one, then pi_c in one.
    rr, B = curve.r, len(live)
    alpha1, delta1, beta1 = (terms("g1", p)[0] for p in (zkey.alpha1, zkey.delta1, zkey.beta1))
    beta2, delta2 = (terms("g2", p)[0] for p in (zkey.beta2, zkey.delta2))
    g1_rows, g1_sc, g2_rows, g2_sc = [], [], [], []
    for j, st in live:
        r, s = blinding[j]
        g1_rows += [st.raw["a"], alpha1, delta1, st.raw["b1"], beta1, delta1]
        g1_sc += [1, 1, r, 1, 1, s]
        g2_rows += [st.raw["b2"], beta2, delta2]
        g2_sc += [1, 1, s]
    first, bad1 = cuda_msm.small(be, "g1", stack(g1_rows), rt.upload(_scalar_rows(curve, g1_sc)),
                                 groups=2 * B, terms=3)                                   # pi_a_j, b1_j
    pi_b, bad2 = cuda_msm.small(be, "g2", stack(g2_rows), rt.upload(_scalar_rows(curve, g2_sc)), groups=B, terms=3)
    c_rows, c_sc = [], []
    for k, (j, st) in enumerate(live):
        r, s = blinding[j]
        c_rows += [st.raw["l"], st.raw["h"], first[2 * k:2 * k + 1], first[2 * k + 1:2 * k + 2], delta1]
        c_sc += [1, 1, s, r, (-r * s) % rr]
    pi_c, bad3 = cuda_msm.small(be, "g1", stack(c_rows), rt.upload(_scalar_rows(curve, c_sc)), groups=B, terms=5)

    flags = rt.download(xp.concatenate([st.bads[name] for _, st in live for name, _, _ in queries]
                                       + [bad1, bad2, bad3]))
    if any(f != cuda_msm.U64_MAX for f in flags[-3:]):      # r, s and h are ours: only a bug gets here
        raise AssertionError("a blinding scalar was flagged as not below r")
    g1_out = rt.download(xp.concatenate([first[0::2], pi_c], axis=0))      # pi_a of each, then pi_c of each
    pi_b_words = rt.download(pi_b)
    nq = len(queries)
    for k, (j, st) in enumerate(live):
        bad = next(((name, int(f)) for (name, _, _), f in zip(queries, flags[k * nq:(k + 1) * nq])
                    if f != cuda_msm.U64_MAX), None)
        if bad is not None:   # only the witness can be: h is reduced
            where = st.offsets[bad[0]] + bad[1]
            out[j] = InputError(f"witness value {where} is not below r", expected=f"< {rr}", found=where)
            continue
        out[j] = (be.xyzz_to_lem("g1", g1_out[k]), be.xyzz_to_lem("g2", pi_b_words[k]),
                  be.xyzz_to_lem("g1", g1_out[B + k]))
    return out


def check_cancel(cancel) -> None:
    """Raises Cancelled when the caller's flag (a ctypes c_int, or None) is set."""
    if cancel is not None and cancel.value:
        raise Cancelled("the prove was cancelled")
