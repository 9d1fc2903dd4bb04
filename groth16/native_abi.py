"""The C ABI of the native kernels (groth16/kernels/cpu), in one place.

Every exported function's ctypes signature, the error codes of kernels/cpu/errors.hpp with
the Python error each becomes, and the thread count the kernels get by default. The CPU
backend (backends/cpu.py), the one-call prove (native_prove.py) and the verifier
(verifier.py) all load the library through `library()`, so a function is declared once and
a wrong call fails in ctypes rather than in C.

Imports neither numpy nor anything heavy: `zkqueue prove` loads it on its start-up path.
"""

from __future__ import annotations

import ctypes
import os
from _thread import allocate_lock  # threading.Lock, without importing threading (~1 ms)
from ctypes import POINTER, c_char_p, c_double, c_int, c_int64, c_size_t, c_uint32, c_uint64, c_void_p

from . import native
from .errors import BackendError, Cancelled, FormatError, InputError

# kernels/cpu/errors.hpp: code -> (error class, message)
ERRORS: dict[int, tuple[type, str]] = {
    1: (BackendError, "unknown curve id"),
    2: (BackendError, "bad argument to a native kernel"),
    3: (InputError, "NTT size must be a power of two within the field's 2-adicity"),
    4: (BackendError, "out of memory in a native kernel"),
    5: (BackendError, "internal error in a native kernel"),
    6: (InputError, "an MSM scalar is not below the group order r"),
    7: (Cancelled, "cancelled by the caller"),
    10: (FormatError, "coefficient matrix is neither 0 (A) nor 1 (B)"),
    11: (FormatError, "coefficient constraint index is not below the domain size"),
    12: (FormatError, "coefficient signal index is not below the number of variables"),
    13: (FormatError, "coefficient value is not below r"),
    20: (FormatError, "point coordinate is not below the field prime q"),
    21: (FormatError, "point is not on the curve"),
    30: (FormatError, "the constraint section ends inside a constraint"),
    31: (FormatError, "a constraint term names a signal beyond the number of wires"),
}
ERR_POINT_RANGE, ERR_POINT_CURVE = 20, 21

_addr = c_void_p    # numpy buffers and mapped file sections, passed as raw addresses
_bytes = c_char_p   # the verifier passes Python bytes

SIGNATURES: dict[str, list] = {
    # CPU backend: one kernel per call (backends/cpu.py)
    "zkq_msm_g1": [c_int, _addr, _addr, c_size_t, _addr, c_int],
    "zkq_msm_g2": [c_int, _addr, _addr, c_size_t, _addr, c_int],
    "zkq_msm_g1_ex": [c_int, _addr, _addr, c_size_t, _addr, c_int, _addr, c_int],
    "zkq_msm_g2_ex": [c_int, _addr, _addr, c_size_t, _addr, c_int, _addr, c_int],
    "zkq_msm_g1_plan": [c_int, c_size_t, c_int, c_uint64, POINTER(c_int64)],
    "zkq_msm_g2_plan": [c_int, c_size_t, c_int, c_uint64, POINTER(c_int64)],
    "zkq_msm_g1_table_build": [c_int, _addr, c_size_t, c_int, c_int, c_int, _addr, c_size_t, c_int],
    "zkq_msm_g2_table_build": [c_int, _addr, c_size_t, c_int, c_int, c_int, _addr, c_size_t, c_int],
    "zkq_ntt": [c_int, _addr, c_size_t, c_int, _addr, c_int],
    "zkq_fr_mul": [c_int, _addr, _addr, _addr, c_size_t, c_int],
    "zkq_h_scalars": [c_int, _addr, _addr, _addr, _addr, c_size_t, c_int],
    "zkq_evaluate_ab": [c_int, _addr, c_size_t, _addr, c_size_t, c_size_t, _addr, _addr, POINTER(c_int64), c_int],
    # input checks, in place (backends/cpu.py, native_prove.py)
    "zkq_fr_first_not_below_r": [c_int, _addr, c_size_t, POINTER(c_int64)],
    "zkq_check_g1": [c_int, _addr, c_size_t, POINTER(c_int64), c_int],
    "zkq_check_g2": [c_int, _addr, c_size_t, POINTER(c_int64), c_int],
    # the whole prove in one call (native_prove.py)
    "zkq_prove": [c_int, _addr, c_size_t, _addr, c_size_t, c_size_t, c_size_t,
                  _addr, _addr, _addr, _addr, _addr,                  # A, B1, B2, C, H
                  _addr, _addr, _addr, _addr, _addr,                  # alpha1 beta1 delta1 beta2 delta2
                  _addr, _addr,                                       # coset shift, (r, s, -rs)
                  _addr, _addr, _addr, POINTER(c_int64), POINTER(c_double),   # proof, bad, timings
                  _addr, _addr, c_int, c_int],                        # tables, cancel, release, threads
    "zkq_h_from_ab": [c_int, _addr, _addr, c_size_t, _addr, c_int],
    # verification (verifier.py)
    "zkq_groth16_verify_batch": [c_int, _bytes, _bytes, _bytes, _bytes, _bytes, c_uint64,
                                 _bytes, _bytes, _bytes, _bytes, _bytes, c_uint64],
    "zkq_pairing_check": [c_int, _bytes, _bytes, c_uint64],
    "zkq_g1_validate": [c_int, _bytes],
    "zkq_g2_validate": [c_int, _bytes],
    "zkq_pairing_value": [c_int, _bytes, _bytes, _addr],
    # the phase-2 setup (groth16/setup/: zkey new, beacon, contribute)
    "zkq_setup_r1cs_count": [c_int, _addr, c_uint64, c_int, c_uint32, c_uint32, _addr, POINTER(c_int64)],
    "zkq_setup_r1cs_fill": [c_int, _addr, c_uint64, c_int, c_uint32, c_uint32, c_uint32, POINTER(c_uint64),
                            _addr, _addr, _addr, _addr, c_uint64, POINTER(c_uint32), POINTER(c_uint64)],
    "zkq_setup_combine": [c_int, c_int, c_int, _addr, _addr, c_int, c_uint64, c_uint64, _addr, c_int],
    "zkq_setup_lem_to_u": [c_int, c_int, _addr, c_uint64, _addr, c_int],
    "zkq_setup_sub_u_g1": [c_int, _addr, _addr, c_uint64, _addr, c_int],
    "zkq_setup_scale_g1": [c_int, _addr, c_uint64, _addr, _addr, c_int],
    # a public-beacon powers of tau (groth16/setup/ptau_beacon.py: zkqueue ptau beacon)
    "zkq_ptau_table": [c_int, c_int, _addr, c_int, _addr, c_int],
    "zkq_ptau_points": [c_int, c_int, c_int, _addr, c_int, _addr, c_uint64, c_uint64, _addr, c_int],
    "zkq_ptau_lem_to_c": [c_int, c_int, _addr, c_uint64, _addr, c_int],
    "zkq_blake2b_init": [_addr],
    "zkq_blake2b_update": [_addr, _addr, c_uint64],
    "zkq_blake2b_final": [_addr, _addr],
    # arithmetic probes for the tests (tests/test_cpu_kernels.py, tests/test_msm_glv.py)
    "zkq_test_field_op": [c_int, c_int, c_int, _addr, _addr, _addr, c_size_t],
    "zkq_test_field_mul": [c_int, c_int, _addr, _addr, _addr, c_size_t],
    "zkq_test_fq2_op": [c_int, c_int, _addr, _addr, _addr, c_size_t],
    "zkq_test_g1_add": [c_int, c_int, _addr, _addr, _addr, c_size_t],
    "zkq_test_g2_add": [c_int, c_int, _addr, _addr, _addr, c_size_t],
    "zkq_test_affine_add8": [c_int, c_int, _addr, _addr, _addr, c_size_t],
    "zkq_test_glv_decompose": [c_int, _addr, _addr, c_size_t],
    "zkq_test_glv_constants": [c_int, _addr],
}

_declare_lock = allocate_lock()


def library(variant: str | None = None) -> ctypes.CDLL:
    """The native library of `variant` (groth16.native.load: built and cached on first use)
    with every function of SIGNATURES declared.

    Raises:
        NativeBuildError: the kernels do not compile here.
    """
    lib = native.load(variant)
    if not getattr(lib, "_zkq_declared", False):
        with _declare_lock:
            if not getattr(lib, "_zkq_declared", False):
                for name, args in SIGNATURES.items():
                    fn = getattr(lib, name)
                    fn.argtypes = args
                    fn.restype = c_int
                lib._zkq_declared = True
    return lib


def raise_for(rc: int, what: str, index: int | None = None, noun: str = "entry") -> None:
    """Raises the error of native return code `rc` (nothing for 0), naming `what` failed and,
    when the kernel reported one (index >= 0), which `noun` (entry, point, value) was bad."""
    if rc == 0:
        return
    cls, msg = ERRORS.get(rc, (BackendError, f"unknown native error code {rc}"))
    known = index is not None and index >= 0
    where = f" ({noun} {index})" if known else ""
    raise cls(f"{what}: {msg}{where}", found=index if known else rc)


def default_threads() -> int:
    """Kernel threads: ZKQUEUE_THREADS (zkqueue.config) if set, else the number of CPUs.

    Raises:
        BackendError: ZKQUEUE_THREADS is not a positive integer.
    """
    from zkqueue import config  # noqa: PLC0415 - groth16 sits below zkqueue's packages
    try:
        threads = config.process().threads
    except config.ConfigError as exc:
        raise BackendError("ZKQUEUE_THREADS must be a positive integer", expected="integer >= 1",
                           found=exc.found) from None
    if threads < 0:
        raise BackendError("ZKQUEUE_THREADS must be a positive integer", expected="integer >= 1", found=threads)
    return threads or os.cpu_count() or 1
