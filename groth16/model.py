"""The objects the core passes around: verification keys and proofs, as plain dataclasses.

Points are affine tuples of standard-form integers, None for infinity (see encoding.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from .curves import Curve
from .encoding import G1, G2


@dataclass(frozen=True)
class VerificationKey:
    """A Groth16 verification key, as in snarkjs's verification_key.json."""

    curve: Curve
    alpha1: G1
    beta2: G2
    gamma2: G2
    delta2: G2
    ic: tuple[G1, ...]          # nPublic + 1 points: IC_0 + sum public_i * IC_i

    @property
    def n_public(self) -> int:
        return len(self.ic) - 1


@dataclass(frozen=True)
class Proof:
    """A Groth16 proof (pi_a, pi_b, pi_c), as in snarkjs's proof.json."""

    curve: Curve
    a: G1
    b: G2
    c: G1
