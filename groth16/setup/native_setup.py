"""numpy-facing wrappers of the setup's native kernels (kernels/cpu/setup.cpp).

Each takes and returns numpy arrays (or addresses into a memory-mapped file) and raises the
error of groth16.native_abi for a non-zero return code.
"""

from __future__ import annotations

import ctypes

import numpy as np

from .. import native_abi

ONE_COEF = np.uint64(0xFFFFFFFFFFFFFFFF)   # a term whose coefficient is 1 (setup.cpp ONE_COEF)


def _addr(a: np.ndarray) -> int:
    return a.ctypes.data


def r1cs_count(curve_id: int, sec_addr: int, sec_len: int, n8: int, n_constraints: int, n_vars: int,
               path: str) -> np.ndarray:
    """Per-signal term counts of A, B, C: an int64 array (3, n_vars).

    Raises:
        FormatError: the constraint section is truncated, or names a wire >= n_vars, or a
            coefficient is not below r.
    """
    counts = np.zeros((3, n_vars), dtype=np.int64)
    info = (ctypes.c_int64 * 2)()
    rc = native_abi.library().zkq_setup_r1cs_count(curve_id, sec_addr, sec_len, n8, n_constraints, n_vars,
                                                   _addr(counts), info)
    if rc:
        from ..errors import FormatError  # noqa: PLC0415
        what = {30: f"the constraint section ends inside constraint {info[0]} (byte {info[1]})",
                31: f"constraint {info[0]} uses wire {info[1]}, but the circuit has {n_vars} wires",
                13: f"constraint {info[0]} has a coefficient that is not below the field prime r (byte {info[1]})"}
        if rc in what:
            raise FormatError(f"corrupt .r1cs: {what[rc]}", path=path)
        native_abi.raise_for(rc, "reading the .r1cs constraints")
    return counts


def r1cs_fill(curve_id: int, sec_addr: int, sec_len: int, n8: int, c_begin: int, c_end: int, n_vars: int,
              pos: int, cursor: np.ndarray, term_c: np.ndarray, term_k: np.ndarray,
              coefs: np.ndarray, entry: int) -> tuple[int, int, int]:
    """Pass 2 over constraints [c_begin, c_end) from byte `pos`: fills the term index and
    writes section-4 entries into `coefs` (uint8, `entry` bytes each), stopping before they
    would overflow it. Returns (next pos, first constraint not done, entries written); when
    not one constraint fits, the third value is the entries that constraint needs."""
    p = ctypes.c_uint64(pos)
    n = ctypes.c_uint64(0)
    done = ctypes.c_uint32(0)
    rc = native_abi.library().zkq_setup_r1cs_fill(curve_id, sec_addr, sec_len, n8, c_begin, c_end, n_vars,
                                                  ctypes.byref(p), _addr(cursor), _addr(term_c), _addr(term_k),
                                                  _addr(coefs), len(coefs) // entry, ctypes.byref(done),
                                                  ctypes.byref(n))
    native_abi.raise_for(rc, "indexing the .r1cs constraints")
    return p.value, done.value, n.value


def combine(curve_id: int, group: int, parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, int]],
            coef_addr: int, n8: int, s_begin: int, nrows: int, out: np.ndarray, threads: int) -> None:
    """out (nrows points) = per signal s_begin + i, sum over the parts' terms of coef * base.

    parts: (rowstart int64, term_c uint32, term_k uint64, bases address) per part.
    """
    words = np.array([[_addr(rs), _addr(tc), _addr(tk), base] for rs, tc, tk, base in parts],
                     dtype=np.uint64).ravel()
    rc = native_abi.library().zkq_setup_combine(curve_id, group, len(parts), _addr(words), coef_addr, n8,
                                                s_begin, nrows, _addr(out), threads)
    native_abi.raise_for(rc, "computing the key's points")


def lem_to_u(curve_id: int, group: int, points: np.ndarray, n: int, threads: int) -> np.ndarray:
    """The uncompressed encoding (the circuit hash's) of n LEM points in `points`."""
    out = np.empty(points.nbytes if n else 0, dtype=np.uint8)
    if n:
        rc = native_abi.library().zkq_setup_lem_to_u(curve_id, group, _addr(points), n, _addr(out), threads)
        native_abi.raise_for(rc, "encoding points for the circuit hash")
    return out


def sub_u_g1(curve_id: int, a_addr: int, b_addr: int, n: int, point_bytes: int, threads: int) -> np.ndarray:
    """uncompressed(a_i - b_i) for n G1 points at two addresses."""
    out = np.empty(n * point_bytes, dtype=np.uint8)
    rc = native_abi.library().zkq_setup_sub_u_g1(curve_id, a_addr, b_addr, n, _addr(out), threads)
    native_abi.raise_for(rc, "hashing the tau powers")
    return out


def scale_g1(curve_id: int, points: np.ndarray, n: int, k: int, threads: int) -> np.ndarray:
    """k * P for n LEM G1 points (k < r, standard form)."""
    out = np.empty_like(points)
    kw = np.frombuffer(k.to_bytes(32, "little"), dtype=np.uint64).copy()
    rc = native_abi.library().zkq_setup_scale_g1(curve_id, _addr(points), n, _addr(kw), _addr(out), threads)
    native_abi.raise_for(rc, "applying the contribution")
    return out
