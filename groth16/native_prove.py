"""The CPU's whole prove in one native call (kernels/cpu/prove.cpp), without numpy.

What `zkqueue prove --backend cpu` runs: the .zkey and .wtns are mapped, their headers and
section sizes checked in Python (formats/zkey.py, formats/wtns.py: the same checks and
errors as the numpy readers), then native code reads the sections in place: the witness
range check, the curve check of the key's header and IC points, and zkq_prove (A/B
evaluation, coset transforms, the five MSMs and blinding, both cores busy throughout). r
and s come from the OS's CSPRNG (groth16/csprng.py), as in groth16/prover.py; the proof is
verified against the key's own verification key before it is returned.

The MSMs' own point sections (A, B1, B2, C, H: nearly all of a key) are curve-checked only
when that verification fails, to name a bad point instead of blaming the witness: the
verification is what guards the result (a bad point gives a proof that does not verify,
and no proof that does not verify is returned), and checking them up front took 2-3% of
every prove (30 ms of 1.2 s at 2^16). Without the self-check they are checked first.

Nothing here imports numpy or OpenSSL: a one-shot process pays neither their import time
nor their memory. Workers with resident keys reach the same zkq_prove through
groth16/prover.py and CpuBackend.prove_whole (call_prove below), with their keys' fixed-base
tables; other backends run prover.py's steps one call each.
"""

from __future__ import annotations

import ctypes
import time
from ctypes import c_double, c_int64, c_void_p

from . import verifier
from .curves import Curve
from .encoding import g1_from_lem, g2_from_lem, scalars_to_bytes
from .errors import BackendError, FormatError
from .native_abi import default_threads, library, raise_for
from .formats import wtns, zkey
from .prover import ProveResult, blinding_scalars, check_inputs, unsatisfied
from .record import Record

def coset_shift_mont(curve: Curve, log2_domain: int) -> bytes:
    """The odd coset's shift (Curve.coset_shift) in Montgomery form, as the kernels take it."""
    return (curve.coset_shift(log2_domain) * pow(2, 256, curve.r) % curve.r).to_bytes(32, "little")


def check_witness(lib: ctypes.CDLL, w: wtns.WtnsHeader) -> None:
    """Every value below r and w[0] = 1, read in place.

    Raises:
        FormatError: as formats.wtns.read_wtns does.
    """
    bad = c_int64(-1)
    offset = w.file.section_offset(wtns.SEC_VALUES, "witness values")
    rc = lib.zkq_fr_first_not_below_r(w.curve.native_id, w.file.address(offset), w.n_witness, ctypes.byref(bad))
    if rc:
        raise_for(rc, "witness range check", -1, "value")
    wtns.check_values(w, bad.value if bad.value >= 0 else None)


# The point sections only the MSMs read (see the module docstring).
MSM_SECTIONS = frozenset({zkey.SEC_A, zkey.SEC_B1, zkey.SEC_B2, zkey.SEC_C, zkey.SEC_H})


def check_key_points(lib: ctypes.CDLL, key: zkey.ZKeyHeader, threads: int, *, msm_sections: bool = True,
                     others: bool = True) -> None:
    """Every point of the key has coordinates below q and lies on its curve, read in place:
    those of MSM_SECTIONS when `msm_sections`, the others (header, IC) when `others`.

    Raises:
        FormatError: as ZKey.check_points does, naming the section and the point.
    """
    curve = key.curve
    for name, g2, what in zkey.point_groups(key):
        if not (msm_sections if what in MSM_SECTIONS else others):
            continue
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
                raise_for(rc, f"{'G2' if g2 else 'G1'} point ({curve.name})", bad.value, "point")
            except FormatError as exc:
                raise zkey.point_error(key.path, curve, name, exc) from None


class Sections(Record):
    """Where zkq_prove finds one key: addresses of the coefficient entries (after section 4's
    u32 count) and of the A, B1, B2, L(C), H point sections, and the header points (LEM)."""

    _frozen = True

    coefs: int
    n_coefs: int
    a: int
    b1: int
    b2: int
    l: int  # noqa: E741 - snarkjs's name for the private-wire query
    h: int
    alpha1: bytes
    beta1: bytes
    delta1: bytes
    beta2: bytes
    delta2: bytes


def call_prove(lib: ctypes.CDLL, curve: Curve, key_path: str, sec: Sections, witness_addr: int, *,
               n_vars: int, n_public: int, domain_size: int, r: int, s: int, threads: int,
               tables: list[int | None] | None = None, cancel: ctypes.c_int | None = None,
               release: bool = False) -> tuple[bytes, bytes, bytes, tuple[float, float, float]]:
    """One zkq_prove call: the raw proof points (pi_a, pi_b, pi_c as LEM bytes) and the
    native step timings (setup, transforms and MSMs, blinding).

    The witness values at `witness_addr` (n_vars x 32 bytes, standard form) must already be
    checked below r, and the key's points on their curves. `tables`: five addresses (or
    None) of fixed-base tables for A, B1, B2, L, H. `cancel`: a c_int that another thread
    sets to 1 to stop before the next step. `release`: a one-shot process whose sections
    are private file mappings (their pages are dropped once used).

    Raises:
        FormatError: a bad coefficient entry (naming `key_path`, section 4 and the entry).
        Cancelled: `cancel` was set.
        BackendError: the native prove failed.
    """
    rs = scalars_to_bytes(curve, [r, s, -r * s])
    pi_a, pi_c = ctypes.create_string_buffer(curve.g1_bytes), ctypes.create_string_buffer(curve.g1_bytes)
    pi_b = ctypes.create_string_buffer(curve.g2_bytes)
    bad = c_int64(-1)
    steps = (c_double * 3)()
    table_ptrs = (c_void_p * 5)(*tables) if tables else None
    rc = lib.zkq_prove(curve.native_id, sec.coefs, sec.n_coefs, witness_addr, n_vars, n_public, domain_size,
                       sec.a, sec.b1, sec.b2, sec.l, sec.h,
                       sec.alpha1, sec.beta1, sec.delta1, sec.beta2, sec.delta2,
                       coset_shift_mont(curve, domain_size.bit_length() - 1), rs,
                       pi_a, pi_b, pi_c, ctypes.byref(bad), steps, table_ptrs,
                       None if cancel is None else ctypes.byref(cancel), int(release), threads)
    if rc:
        try:
            raise_for(rc, "A/B coefficients", bad.value, "entry")
        except FormatError as exc:  # a coefficient entry: name the file and the section
            raise FormatError(f"corrupt .zkey: section 4 (coefficients): {exc}", path=key_path,
                              found=exc.found) from None
    return pi_a.raw, pi_b.raw, pi_c.raw, (steps[0], steps[1], steps[2])


class LemProof(Record):
    """A proof as zkq_prove returns it: pi_a, pi_b, pi_c in LEM bytes (see encoding.py), with
    its curve, public signals and step timings (prove_files' names)."""

    curve: Curve
    pi_a: bytes
    pi_b: bytes
    pi_c: bytes
    public_signals: list[int]
    timings_s: dict[str, float]


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
    from .model import Proof  # noqa: PLC0415 - a dataclass: `zkqueue prove` (prove_lem) needs none

    raw = prove_lem(zkey_path, witness_path, threads=threads, variant=variant, self_check=self_check)
    curve = raw.curve
    proof = Proof(curve=curve, a=g1_from_lem(curve, raw.pi_a), b=g2_from_lem(curve, raw.pi_b),
                  c=g1_from_lem(curve, raw.pi_c))
    return ProveResult(proof=proof, public_signals=raw.public_signals, timings_s=raw.timings_s)


def prove_lem(zkey_path: str, witness_path: str, *, threads: int | None = None,
              variant: str | None = None, self_check: bool = True) -> LemProof:
    """prove_files, with the proof's points as zkq_prove returns them: what `zkqueue prove`
    writes, without the Python objects (groth16/model.py's dataclasses) it has no use for.
    The self-check verifies those bytes against the key's own (verifier.verify_lem).

    Raises:
        as prove_files.
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
    check_key_points(lib, key, threads, msm_sections=not self_check)  # see the module docstring
    t_read = time.perf_counter() - t0

    curve, f = key.curve, key.file
    r, s = blinding_scalars(curve)
    addr = {i: f.address(f.section_offset(i, name)) for name, i, _ in zkey.POINT_SECTIONS}
    sec = Sections(f.address(f.section_offset(zkey.SEC_COEFS, "coefficients") + 4), key.n_coefs,
                   addr[zkey.SEC_A], addr[zkey.SEC_B1], addr[zkey.SEC_B2], addr[zkey.SEC_C], addr[zkey.SEC_H],
                   alpha1=key.alpha1, beta1=key.beta1, delta1=key.delta1, beta2=key.beta2, delta2=key.delta2)
    pi_a, pi_b, pi_c, steps = call_prove(
        lib, curve, key.path, sec, witness.file.address(witness.file.section_offset(wtns.SEC_VALUES, "witness values")),
        n_vars=key.n_vars, n_public=key.n_public, domain_size=key.domain_size, r=r, s=s, threads=threads,
        release=True)
    public = witness.public_signals(key.n_public)
    timings = {"read": t_read, "setup": steps[0], "ntt_msm": steps[1], "blind": steps[2]}
    if self_check:
        t1 = time.perf_counter()
        vk = (key.alpha1, key.beta2, key.gamma2, key.delta2, bytes(f.section(zkey.SEC_IC, "IC")))
        if not verifier.verify_lem(curve, vk, (pi_a, pi_b, pi_c), public):
            check_key_points(lib, key, threads, others=False)  # a bad point, if any, is named
            raise unsatisfied(key.path, witness.path)
        timings["verify"] = time.perf_counter() - t1
    return LemProof(curve=curve, pi_a=pi_a, pi_b=pi_b, pi_c=pi_c, public_signals=public, timings_s=timings)
