"""Groth16 proving, following snarkjs's construction (groth16_prove.js) step for step.

    A, B   = evaluations of <A_k, w>, <B_k, w> on the size-n domain (from .zkey section 4)
    C      = A * B pointwise                       # C is implied: satisfying rows have A*B = C
    X_odd  = NTT(shift^i * iNTT(X))  for X in A, B, C   # values on the odd coset omega_2n^(2j+1)
    h      = A_odd * B_odd - C_odd                 # division by Z = x^n - 1 = -2 there is folded into H
    pi_a   = sum w_i A_i + alpha1 + r*delta1
    pi_b   = sum w_i B2_i + beta2 + s*delta2       # and b1 = the same on G1 with B1_i, beta1
    pi_c   = sum_{i>nPublic} w_i L_i + sum h_j H_j + s*pi_a + r*b1 - r*s*delta1
r and s are fresh CSPRNG scalars, so two proofs of the same witness differ.
"""

from __future__ import annotations

import time

from . import csprng
from .encoding import g1_from_lem, g2_from_lem, scalars_to_bytes
from .errors import MismatchError, UnsatisfiedError
from .record import Record

TYPE_CHECKING = False  # as typing.TYPE_CHECKING; importing typing costs `zkqueue prove` 2.5 ms
if TYPE_CHECKING:  # numpy-free at import: native_prove.py shares check_inputs and self_check
    import numpy as np

    from .backends.base import Backend
    from .model import Proof, VerificationKey
    from .formats.wtns import Witness, WtnsHeader
    from .formats.zkey import ZKey, ZKeyHeader


class ProveResult(Record):
    """A proof, its public signals, and where the time went (seconds per step)."""

    proof: Proof
    public_signals: list[int]
    timings_s: dict[str, float] = {}    # a fresh dict for each result (Record copies it)


def _scalars(curve, values: list[int]) -> np.ndarray:
    import numpy as np  # noqa: PLC0415
    return np.frombuffer(scalars_to_bytes(curve, values), dtype="<u8").reshape(-1, 4)


def _rows(*points: bytes) -> np.ndarray:
    import numpy as np  # noqa: PLC0415
    return np.frombuffer(b"".join(points), dtype="<u8").reshape(len(points), -1)


def blinding_scalars(curve) -> tuple[int, int]:
    """Fresh r, s in [1, r) from the OS's CSPRNG: two proofs of one witness never match."""
    return csprng.randbelow(curve.r - 1) + 1, csprng.randbelow(curve.r - 1) + 1


def check_inputs(zkey: ZKey | ZKeyHeader, witness: Witness | WtnsHeader) -> None:
    """Checks that a witness belongs to a key (curve and length).

    Raises:
        MismatchError: naming both files and what differs.
    """
    if witness.curve is not zkey.curve:
        raise MismatchError(f"witness is for {witness.curve.name} but the key {zkey.path} is for "
                            f"{zkey.curve.name}", path=witness.path,
                            expected=zkey.curve.name, found=witness.curve.name)
    if len(witness) != zkey.n_vars:
        raise MismatchError(f"witness has {len(witness)} values but the key {zkey.path} expects "
                            f"{zkey.n_vars}", path=witness.path, expected=zkey.n_vars, found=len(witness))


def prove(zkey: ZKey, witness: Witness, backend: Backend, *, self_check: bool = True,
          fused: bool = True) -> ProveResult:
    """Proves that `witness` satisfies the circuit of `zkey`.

    With `self_check` (the default) the proof is verified against the key's own
    verification key before it is returned, so an unsatisfying witness (or corrupt key
    coefficients) is reported instead of yielding an invalid proof.

    A backend that proves in one call (`prove_whole`, the CPU's) does so when `fused`;
    otherwise each step of the module docstring is one backend call. Both give the same
    proof for the same r and s (tests compare them).

    Raises:
        MismatchError: the witness is for another curve or has the wrong length.
        UnsatisfiedError: the proof does not verify: the witness breaks a constraint.
        BackendError: the compute backend failed.
    """
    from .model import Proof  # noqa: PLC0415 - a dataclass: off the native prove's start-up

    check_inputs(zkey, witness)
    curve = zkey.curve
    whole = getattr(backend, "prove_whole", None) if fused else None
    t0 = time.perf_counter()
    if whole is not None:
        r, s = blinding_scalars(curve)
        pi_a, pi_b, pi_c = whole(zkey, witness.values, r, s)
        t = {"prove": time.perf_counter() - t0}
    else:
        pi_a, pi_b, pi_c, t = _prove_by_steps(zkey, witness, backend)
    proof = Proof(curve=curve, a=g1_from_lem(curve, pi_a), b=g2_from_lem(curve, pi_b),
                  c=g1_from_lem(curve, pi_c))
    public = witness.public_signals(zkey.n_public)
    if self_check:
        t0 = time.perf_counter()
        check_proof(zkey.verification_key, proof, public, zkey.path, witness.path)
        t["verify"] = time.perf_counter() - t0
    return ProveResult(proof=proof, public_signals=public, timings_s=t)


def _prove_by_steps(zkey: ZKey, witness: Witness, backend: Backend) -> tuple[bytes, bytes, bytes, dict]:
    """pi_a, pi_b, pi_c (LEM bytes) and step timings, one backend call per step."""
    curve, n = zkey.curve, zkey.domain_size
    w = witness.values
    t = {}
    t0 = time.perf_counter()

    a, b = backend.evaluate_ab(zkey.coefs, w, n)
    c = backend.mul(a, b)
    shift = curve.coset_shift(zkey.log2_domain)
    a, b, c = (backend.ntt(backend.ntt(x, inverse=True), coset_shift=shift) for x in (a, b, c))
    h = backend.h_scalars(a, b, c)
    del a, b, c  # 3 x 32n bytes not needed by the MSMs: keeps the peak RSS down
    t["ntt"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    pi_a_raw = backend.msm_g1(zkey.a_query, w)
    b1_raw = backend.msm_g1(zkey.b1_query, w)
    pi_b_raw = backend.msm_g2(zkey.b2_query, w)
    c_raw = backend.msm_g1(zkey.l_query, w[zkey.n_public + 1:])
    h_raw = backend.msm_g1(zkey.h_query, h)
    t["msm"] = time.perf_counter() - t0

    # Blinding: a few tiny MSMs reuse the kernels for the point additions.
    r, s = blinding_scalars(curve)
    pi_a = backend.msm_g1(_rows(pi_a_raw, zkey.alpha1, zkey.delta1), _scalars(curve, [1, 1, r]))
    pi_b = backend.msm_g2(_rows(pi_b_raw, zkey.beta2, zkey.delta2), _scalars(curve, [1, 1, s]))
    b1 = backend.msm_g1(_rows(b1_raw, zkey.beta1, zkey.delta1), _scalars(curve, [1, 1, s]))
    pi_c = backend.msm_g1(_rows(c_raw, h_raw, pi_a, b1, zkey.delta1),
                          _scalars(curve, [1, 1, s, r, -r * s]))
    return pi_a, pi_b, pi_c, t


def check_proof(vk: VerificationKey, proof: Proof, public: list[int], zkey_path: str, witness_path: str) -> None:
    """Verifies a fresh proof against the key's own verification key.

    Raises:
        UnsatisfiedError: it does not verify: the witness breaks a constraint (or the key's
            coefficients are corrupt).
    """
    from . import verifier  # noqa: PLC0415

    if not verifier.verify(vk, proof, public):
        raise unsatisfied(zkey_path, witness_path)


def unsatisfied(zkey_path: str, witness_path: str) -> UnsatisfiedError:
    """The error for a fresh proof that fails verification against its own key."""
    return UnsatisfiedError(
        "the witness does not satisfy the circuit's constraints (the proof it yields fails "
        f"verification against {zkey_path}); pass --r1cs to name the broken constraint",
        path=witness_path)
