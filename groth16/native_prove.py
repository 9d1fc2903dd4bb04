"""The CPU's whole prove in one native call (kernels/cpu/prove.cpp), without numpy.

What `zkqueue prove --backend cpu` runs: the .zkey and .wtns are mapped, their headers and
section sizes checked in Python (formats/zkey.py, formats/wtns.py: the same checks and
errors as the numpy readers), then native code reads the sections in place: the witness
range check, the curve check of every key point, and zkq_prove (A/B evaluation, coset
transforms, the five MSMs and blinding, both cores busy throughout). r and s come from
Python's `secrets`, as in groth16/prover.py; the proof is verified against the key's own
verification key before it is returned.

Nothing here imports numpy: a one-shot process pays neither its import time nor its memory.
Workers with resident keys and other backends keep using groth16/prover.py.
"""

from __future__ import annotations

import ctypes
import os
import time
from ctypes import POINTER, c_double, c_int, c_int64, c_size_t, c_void_p

from . import native
from .curves import Curve
from .encoding import g1_from_lem, g2_from_lem, scalars_to_bytes
from .errors import BackendError, FormatError
from .formats import wtns, zkey
from .model import Proof
from .prover import ProveResult, blinding_scalars, check_inputs, check_proof

_SIGNATURES = {
    "zkq_fr_first_not_below_r": [c_int, c_void_p, c_size_t, POINTER(c_int64)],
    "zkq_check_g1": [c_int, c_void_p, c_size_t, POINTER(c_int64), c_int],
    "zkq_check_g2": [c_int, c_void_p, c_size_t, POINTER(c_int64), c_int],
    "zkq_prove": [c_int, c_void_p, c_size_t, c_void_p, c_size_t, c_size_t, c_size_t,
                  c_void_p, c_void_p, c_void_p, c_void_p, c_void_p,            # A, B1, B2, C, H
                  c_void_p, c_void_p, c_void_p, c_void_p, c_void_p,            # alpha1 beta1 delta1 beta2 delta2
                  c_void_p, c_void_p,                                          # coset shift, (r, s, -rs)
                  c_void_p, c_void_p, c_void_p, POINTER(c_int64), POINTER(c_double), c_int, c_int],
    "zkq_h_from_ab": [c_int, c_void_p, c_void_p, c_size_t, c_void_p, c_int],
}


def library(variant: str | None = None) -> ctypes.CDLL:
    """The native library (groth16.native.load) with this module's functions declared."""
    lib = native.load(variant)
    for name, args in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.argtypes = args
        fn.restype = c_int
    return lib


def coset_shift_mont(curve: Curve, log2_domain: int) -> bytes:
    """The odd coset's shift (Curve.coset_shift) in Montgomery form, as the kernels take it."""
    return (curve.coset_shift(log2_domain) * pow(2, 256, curve.r) % curve.r).to_bytes(32, "little")


def default_threads() -> int:
    """ZKQUEUE_THREADS if set, else the number of CPUs (as groth16.backends.cpu.default_threads).

    Raises:
        BackendError: ZKQUEUE_THREADS is not a positive integer.
    """
    env = os.environ.get("ZKQUEUE_THREADS")
    if not env:
        return os.cpu_count() or 1
    if not env.isdigit() or int(env) < 1:
        raise BackendError("ZKQUEUE_THREADS must be a positive integer", expected="integer >= 1", found=env)
    return int(env)


def _raise_native(rc: int, what: str, index: int, noun: str) -> None:
    # The error table lives with the CPU backend; importing it (and numpy) on failure only
    # keeps the messages identical to the backend path's at no cost to a good prove.
    from .backends.cpu import _check  # noqa: PLC0415
    _check(rc, what, index, noun)


def check_witness(lib: ctypes.CDLL, w: wtns.WtnsHeader) -> None:
    """Every value below r and w[0] = 1, read in place.

    Raises:
        FormatError: as formats.wtns.read_wtns does.
    """
    bad = c_int64(-1)
    offset = w.file.section_offset(wtns.SEC_VALUES, "witness values")
    rc = lib.zkq_fr_first_not_below_r(w.curve.native_id, w.file.address(offset), w.n_witness, ctypes.byref(bad))
    if rc:
        _raise_native(rc, "witness range check", -1, "value")
    wtns.check_values(w, bad.value if bad.value >= 0 else None)


def check_key_points(lib: ctypes.CDLL, key: zkey.ZKeyHeader, threads: int) -> None:
    """Every point of the key has coordinates below q and lies on its curve, read in place.

    Raises:
        FormatError: as ZKey.check_points does, naming the section and the point.
    """
    curve = key.curve
    for name, g2, what in zkey.point_groups(key):
        if isinstance(what, bytes):
            addr, count, offset = what, 3, None
        else:
            offset, count = key.file.section_offset(what, name), key.points_count(what)
            addr = key.file.address(offset)
        bad = c_int64(-1)
        fn = lib.zkq_check_g2 if g2 else lib.zkq_check_g1
        rc = fn(curve.native_id, addr, count, ctypes.byref(bad), threads)
        if offset is not None:  # zkq_prove reads the section again when its MSM runs
            key.file.release(offset, count * (curve.g2_bytes if g2 else curve.g1_bytes))
        if rc:
            try:
                _raise_native(rc, f"{'G2' if g2 else 'G1'} point ({curve.name})", bad.value, "point")
            except FormatError as exc:
                raise zkey.point_error(key.path, curve, name, exc) from None


def prove_files(zkey_path: str, witness_path: str, *, threads: int | None = None,
                variant: str | None = None, self_check: bool = True) -> ProveResult:
    """Proves the witness in `witness_path` for the key in `zkey_path` on the CPU.

    `threads` defaults to ZKQUEUE_THREADS, else all cores; `variant` picks the native
    arithmetic (see groth16.native). Timings: read (headers, witness and point checks),
    setup (A/B evaluation, twiddles), ntt_msm (transforms and MSMs, overlapped), blind, verify.

    Raises:
        FormatError, UnsupportedError: a bad or unsupported file (named in the message).
        MismatchError: the witness is for another curve or has the wrong length.
        UnsatisfiedError: the proof does not verify: the witness breaks a constraint.
        BackendError: the native kernels failed.
    """
    t0 = time.perf_counter()
    threads = default_threads() if threads is None else threads
    if threads < 1:
        raise BackendError("threads must be >= 1", expected=">= 1", found=threads)
    key = zkey.read_header(zkey_path, native=True)
    witness = wtns.read_header(witness_path, native=True)
    lib = library(variant)
    check_witness(lib, witness)
    check_inputs(key, witness)
    check_key_points(lib, key, threads)
    t_read = time.perf_counter() - t0

    curve, f = key.curve, key.file
    r, s = blinding_scalars(curve)
    rs = scalars_to_bytes(curve, [r, s, -r * s])
    sec = {i: f.address(f.section_offset(i, name)) for name, i, _ in zkey.POINT_SECTIONS}
    coefs = f.address(f.section_offset(zkey.SEC_COEFS, "coefficients") + 4)
    pi_a, pi_c = ctypes.create_string_buffer(curve.g1_bytes), ctypes.create_string_buffer(curve.g1_bytes)
    pi_b = ctypes.create_string_buffer(curve.g2_bytes)
    bad = c_int64(-1)
    steps = (c_double * 3)()
    rc = lib.zkq_prove(curve.native_id, coefs, key.n_coefs,
                       witness.file.address(witness.file.section_offset(wtns.SEC_VALUES, "witness values")),
                       key.n_vars, key.n_public, key.domain_size,
                       sec[zkey.SEC_A], sec[zkey.SEC_B1], sec[zkey.SEC_B2], sec[zkey.SEC_C], sec[zkey.SEC_H],
                       key.alpha1, key.beta1, key.delta1, key.beta2, key.delta2,
                       coset_shift_mont(curve, key.domain_size.bit_length() - 1), rs,
                       pi_a, pi_b, pi_c, ctypes.byref(bad), steps, 1, threads)
    if rc:
        try:
            _raise_native(rc, "A/B coefficients", bad.value, "entry")
        except FormatError as exc:  # a coefficient entry: name the file and the section
            raise FormatError(f"corrupt .zkey: section 4 (coefficients): {exc}", path=key.path,
                                   found=exc.found) from None

    proof = Proof(curve=curve, a=g1_from_lem(curve, pi_a.raw), b=g2_from_lem(curve, pi_b.raw),
                  c=g1_from_lem(curve, pi_c.raw))
    public = witness.public_signals(key.n_public)
    timings = {"read": t_read, "setup": steps[0], "ntt_msm": steps[1], "blind": steps[2]}
    if self_check:
        t1 = time.perf_counter()
        check_proof(key.verification_key, proof, public, key.path, witness.path)
        timings["verify"] = time.perf_counter() - t1
    return ProveResult(proof=proof, public_signals=public, timings_s=timings)
