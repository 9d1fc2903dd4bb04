"""Groth16 verification with the native pairing (groth16/kernels/cpu/pairing.cpp).

A proof (A, B, C) with public signals s_1..s_n is valid when
``e(A, B) = e(alpha1, beta2) * e(vk_x, gamma2) * e(C, delta2)``, ``vk_x = IC_0 + sum s_j IC_j``.
The native code checks ``e(-A, B) e(alpha1, beta2) e(vk_x, gamma2) e(C, delta2) == 1`` with one
multi-Miller loop and one final exponentiation. Many proofs under one key are checked at
once with a random linear combination: with fresh random 128-bit rho_i,
``prod e(-rho_i A_i, B_i) * e(sum rho_i alpha1, beta2) * e(sum rho_i vk_x_i, gamma2) *
e(sum rho_i C_i, delta2) == 1`` holds for an invalid proof with probability about 2^-128.

Proof points are checked for being on the curve and in the r-order subgroup; a point that is
not is an invalid proof (``False``), not an error. Verification-key points are trusted key
material: checked for range and curve membership only.
"""

from __future__ import annotations

import ctypes
import operator

from . import csprng
from .curves import Curve
from .encoding import fq_from_lem, g1_to_lem, g2_to_lem, scalars_to_bytes
from .errors import BackendError, FormatError, MismatchError
from .native_abi import ERR_POINT_CURVE, ERR_POINT_RANGE, library

TYPE_CHECKING = False  # as typing.TYPE_CHECKING
if TYPE_CHECKING:  # dataclasses: `zkqueue prove` (verify_lem) never builds them
    from .model import Proof, VerificationKey

__all__ = ["verify", "verify_batch", "verify_lem", "alphabeta_json"]

# Return codes of zkq_groth16_verify_batch (see the top of pairing.cpp and errors.hpp).
_VALID, _INVALID = 1, 0
_PROOF_POINT_BASE = 1000          # -(1000 + 3*i + k): point k (A, B, C) of proof i is invalid

_RHO_BITS = 128


def _coords(p) -> list[int]:
    if p is None:
        return []
    x, y = p
    return [*x, *y] if isinstance(x, tuple) else [x, y]


def _in_range(curve: Curve, p) -> bool:
    """Coordinates in [0, q), and not the all-zero tuple (which would encode as infinity)."""
    cs = _coords(p)
    return all(0 <= c < curve.q for c in cs) and (p is None or any(cs))


_encoded_vks = None  # functools.lru_cache(64) of _encode_vk_uncached, made on first use


def _encode_vk(vk: VerificationKey) -> tuple[bytes, bytes, bytes, bytes, bytes]:
    """The key's points as the native check takes them (LEM bytes), cached for the worker
    that checks many proofs of one key. The cache is made on first use: functools brings
    collections, about 2 ms of a one-shot `zkqueue prove`, which never calls this."""
    global _encoded_vks
    if _encoded_vks is None:
        from functools import lru_cache  # noqa: PLC0415
        _encoded_vks = lru_cache(maxsize=64)(_encode_vk_uncached)
    return _encoded_vks(vk)


def _encode_vk_uncached(vk: VerificationKey) -> tuple[bytes, bytes, bytes, bytes, bytes]:
    c = vk.curve
    for name, p in (("alpha1", vk.alpha1), ("beta2", vk.beta2), ("gamma2", vk.gamma2),
                    ("delta2", vk.delta2), *((f"IC[{j}]", p) for j, p in enumerate(vk.ic))):
        if not _in_range(c, p):
            raise FormatError(f"verification key point {name} has a coordinate outside [0, q)",
                              expected=f"coordinates < {c.q}", found=p)
    return (g1_to_lem(c, vk.alpha1), g2_to_lem(c, vk.beta2), g2_to_lem(c, vk.gamma2),
            g2_to_lem(c, vk.delta2), b"".join(g1_to_lem(c, p) for p in vk.ic))


def _check_publics(vk: VerificationKey, public_signals, index: int | None = None) -> list[int]:
    return _checked_signals(vk.curve, vk.n_public, public_signals, index)


def _checked_signals(curve: Curve, n_public: int, public_signals, index: int | None = None) -> list[int]:
    where = "" if index is None else f"proof {index}: "
    signals = [operator.index(s) for s in public_signals]
    if len(signals) != n_public:
        raise MismatchError(f"{where}expected {n_public} public signals, found {len(signals)}",
                            expected=n_public, found=len(signals))
    for j, s in enumerate(signals):
        if not 0 <= s < curve.r:
            raise MismatchError(f"{where}public signal {j} is not in [0, r) of {curve.name}",
                                expected=f"0 <= signal < {curve.r}", found=s)
    return signals


def _check_curve(vk: VerificationKey, proof: Proof, index: int | None = None) -> None:
    if proof.curve != vk.curve:
        where = "" if index is None else f"proof {index}: "
        raise MismatchError(f"{where}proof is on {proof.curve.name}, verification key on {vk.curve.name}",
                            expected=vk.curve.name, found=proof.curve.name)


def _points_in_range(curve: Curve, proof: Proof) -> bool:
    return _in_range(curve, proof.a) and _in_range(curve, proof.b) and _in_range(curve, proof.c)


def _native_check(vk: VerificationKey, proofs: list[Proof], publics: list[list[int]],
                  rhos: list[int]) -> int:
    """One call of zkq_groth16_verify_batch: 1, 0, or -(1000 + 3i + k) for a bad point."""
    c = vk.curve
    a = b"".join(g1_to_lem(c, p.a) for p in proofs)
    b = b"".join(g2_to_lem(c, p.b) for p in proofs)
    cc = b"".join(g1_to_lem(c, p.c) for p in proofs)
    return _native_check_lem(c, _encode_vk(vk), (a, b, cc), publics, rhos)


def _native_check_lem(c: Curve, vk: tuple[bytes, bytes, bytes, bytes, bytes], proofs: tuple[bytes, bytes, bytes],
                      publics: list[list[int]], rhos: list[int]) -> int:
    """_native_check on LEM bytes: the key's alpha1, beta2, gamma2, delta2 and IC points, and
    the proofs' A, B and C points, each concatenated."""
    alpha1, beta2, gamma2, delta2, ic = vk
    a, b, cc = proofs
    pubs = scalars_to_bytes(c, [s for ss in publics for s in ss]) or b"\0"
    rho = scalars_to_bytes(c, rhos)
    code = library().zkq_groth16_verify_batch(c.native_id, alpha1, beta2, gamma2, delta2, ic,
                                           len(ic) // c.g1_bytes, a, b, cc, pubs, rho, len(rhos))
    if code in (_VALID, _INVALID) or code <= -_PROOF_POINT_BASE:
        return code
    if code in (-ERR_POINT_RANGE, -ERR_POINT_CURVE):
        raise FormatError("a verification key point is not on its curve",
                          expected=f"points on {c.name}", found=f"native code {code}")
    raise BackendError(f"native Groth16 verification failed with code {code}",
                       expected="1 or 0", found=code)


def _fresh_rho() -> int:
    while True:
        rho = csprng.randbits(_RHO_BITS)
        if rho:  # rho = 0 would drop the proof from the combination
            return rho


def verify(vk: VerificationKey, proof: Proof, public_signals: list[int]) -> bool:
    """True when `proof` is a valid Groth16 proof for `public_signals` under `vk`.

    A proof point that is off the curve, outside the r-order subgroup, or has a coordinate
    outside [0, q) makes the proof invalid (False), not an error.

    Raises:
        MismatchError: the proof is on another curve than the key; the number of public
            signals is not vk.n_public; a public signal is outside [0, r).
        TypeError: a public signal is not an integer.
        FormatError: a verification-key point is not on its curve.
        BackendError: the native library reported an unexpected error.
        NativeBuildError: the native library could not be built.
    """
    _check_curve(vk, proof)
    signals = _check_publics(vk, public_signals)
    if not _points_in_range(vk.curve, proof):
        return False
    return _native_check(vk, [proof], [signals], [1]) == _VALID


def verify_lem(curve: Curve, vk: tuple[bytes, bytes, bytes, bytes, bytes], proof: tuple[bytes, bytes, bytes],
               public_signals: list[int]) -> bool:
    """verify() for points in the kernels' encoding (LEM bytes), as a .zkey holds them and
    zkq_prove returns them: `vk` is (alpha1, beta2, gamma2, delta2, the IC points
    concatenated), `proof` (A, B, C). The one-shot prove's self-check, which so converts
    no point to integers and back.

    The key's points must already be checked in range and on their curve (the .zkey's
    native point check), as verify() checks a VerificationKey's; proof points off the curve
    or the subgroup make the proof invalid (False), as in verify().

    Raises:
        MismatchError: the number of public signals is not the key's; one is outside [0, r).
        FormatError, BackendError, NativeBuildError: as verify().
    """
    signals = _checked_signals(curve, len(vk[4]) // curve.g1_bytes - 1, public_signals)
    return _native_check_lem(curve, vk, proof, [signals], [1]) == _VALID


def verify_batch(vk: VerificationKey, proofs: list[Proof], publics: list[list[int]]) -> list[bool]:
    """Per-proof validity of many proofs under one key, checked together.

    All proofs are first checked in one pairing product with fresh random 128-bit
    coefficients (from the OS's CSPRNG); only if that fails are the invalid ones found, by
    bisection. The result equals ``[verify(vk, p, s) for p, s in zip(proofs, publics)]``
    except with probability about 2^-128 per batch.

    Raises:
        MismatchError: `proofs` and `publics` differ in length; or, for any proof, the
            checks of `verify` (curve, number and range of public signals).
        TypeError: a public signal is not an integer.
        FormatError: a verification-key point is not on its curve.
        BackendError: the native library reported an unexpected error.
        NativeBuildError: the native library could not be built.
    """
    if len(proofs) != len(publics):
        raise MismatchError(f"{len(proofs)} proofs but {len(publics)} lists of public signals",
                            expected=len(proofs), found=len(publics))
    signals = []
    for i, (proof, pub) in enumerate(zip(proofs, publics)):
        _check_curve(vk, proof, i)
        signals.append(_check_publics(vk, pub, i))
    result = [False] * len(proofs)
    todo = [i for i, p in enumerate(proofs) if _points_in_range(vk.curve, p)]
    _resolve(vk, proofs, signals, todo, result)
    return result


def _resolve(vk: VerificationKey, proofs: list[Proof], signals: list[list[int]],
             idx: list[int], result: list[bool]) -> None:
    """Sets result[i] for every i in idx: one batched check, bisecting when it fails."""
    while idx:
        rhos = [1] if len(idx) == 1 else [_fresh_rho() for _ in idx]
        code = _native_check(vk, [proofs[i] for i in idx], [signals[i] for i in idx], rhos)
        if code <= -_PROOF_POINT_BASE:  # a point off the curve or the subgroup: drop that proof
            idx = idx[:(-code - _PROOF_POINT_BASE) // 3] + idx[(-code - _PROOF_POINT_BASE) // 3 + 1:]
            continue
        if code == _VALID:
            for i in idx:
                result[i] = True
        elif len(idx) > 1:
            half = len(idx) // 2
            _resolve(vk, proofs, signals, idx[:half], result)
            _resolve(vk, proofs, signals, idx[half:], result)
        return


def alphabeta_json(vk: VerificationKey) -> list:
    """e(alpha1, beta2) as verification_key.json's vk_alphabeta_12: 2 x 3 x 2 decimal strings.

    Raises:
        FormatError: alpha1 or beta2 is not on its curve.
    """
    c = vk.curve
    out = ctypes.create_string_buffer(12 * c.n8q)
    code = library().zkq_pairing_value(c.native_id, g1_to_lem(c, vk.alpha1), g2_to_lem(c, vk.beta2), out)
    if code != 0:
        raise FormatError(f"verification key alpha1/beta2 is not a valid {c.name} point (code {code})")
    raw = out.raw
    fq = [str(fq_from_lem(c, raw[i * c.n8q:(i + 1) * c.n8q])) for i in range(12)]
    # memory order c0.c0.c0, c0.c0.c1, c0.c1.c0, ...: Fq12 -> Fq6 (w) -> Fq2 (v) -> Fq (u)
    return [[[fq[6 * i + 2 * j], fq[6 * i + 2 * j + 1]] for j in range(3)] for i in range(2)]
