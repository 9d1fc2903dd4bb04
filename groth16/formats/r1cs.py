"""Reader for circom .r1cs constraint systems, and an exact satisfaction check.

A .zkey does not hold the C matrix, so only the .r1cs can say which constraint a witness
breaks; `first_unsatisfied` is what `zkqueue prove --r1cs` uses to name it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from .. import curves
from ..curves import Curve
from ..errors import FormatError, MismatchError, UnsatisfiedError
from .binfile import BinFile, read_prime

LinearCombination = list[tuple[int, int]]          # (wire, coefficient), standard form


@dataclass
class R1cs:
    """A rank-1 constraint system: <A_k, w> * <B_k, w> = <C_k, w> for each constraint k."""

    path: str
    curve: Curve
    n_wires: int
    n_outputs: int
    n_pub_inputs: int
    n_prv_inputs: int
    constraints: list[tuple[LinearCombination, LinearCombination, LinearCombination]]

    @property
    def n_public(self) -> int:
        return self.n_outputs + self.n_pub_inputs

    @property
    def n_constraints(self) -> int:
        return len(self.constraints)

    def first_unsatisfied(self, witness: list[int]) -> int | None:
        """Index of the first constraint the witness breaks, or None if all hold."""
        r = self.curve.r

        def ev(lc: LinearCombination) -> int:
            return sum(witness[w] * c for w, c in lc) % r
        for k, (a, b, c) in enumerate(self.constraints):
            if ev(a) * ev(b) % r != ev(c):
                return k
        return None


def read_r1cs(path: str | Path) -> R1cs:
    """Reads a circom .r1cs (header and constraints).

    Raises:
        FormatError: not an .r1cs, truncated, or a term naming a wire that does not exist.
        UnsupportedError: a prime other than bn128's or bls12381's scalar field.
    """
    path = str(path)
    f = BinFile(path, b"r1cs", ".r1cs", versions=(1,))
    hdr = f.section(1, "header")
    n8, prime, pos = read_prime(hdr, 0, path, ".r1cs")
    curve = curves.by_scalar_prime(prime, path=path)
    if len(hdr) != pos + 28:
        raise FormatError(f"corrupt .r1cs: header is {len(hdr)} bytes", path=path, expected=pos + 28)
    n_wires, n_out, n_pub, n_prv = struct.unpack_from("<4I", hdr, pos)
    (n_constraints,) = struct.unpack_from("<I", hdr, pos + 24)
    body = f.section(2, "constraints")
    off = 0
    constraints = []
    try:
        for _ in range(n_constraints):
            lcs = []
            for _ in range(3):
                (n_terms,) = struct.unpack_from("<I", body, off)
                off += 4
                lc = []
                for _ in range(n_terms):
                    (wire,) = struct.unpack_from("<I", body, off)
                    coef = int.from_bytes(body[off + 4:off + 4 + n8], "little")
                    if wire >= n_wires:
                        raise FormatError(f"corrupt .r1cs: constraint {len(constraints)} uses wire {wire} "
                                          f"of {n_wires}", path=path)
                    lc.append((wire, coef))
                    off += 4 + n8
                lcs.append(lc)
            constraints.append(tuple(lcs))
    except struct.error:
        raise FormatError(f"truncated .r1cs: constraint section ends inside constraint {len(constraints)}",
                          path=path) from None
    return R1cs(path=path, curve=curve, n_wires=n_wires, n_outputs=n_out, n_pub_inputs=n_pub,
                n_prv_inputs=n_prv, constraints=constraints)


def check_witness(r1cs_path: str | Path, witness_path: str | Path, *, witness_name: str | None = None) -> None:
    """Checks a .wtns against the constraints of a .r1cs, exactly.

    `witness_name` names the witness in messages (default: its path).

    Raises:
        UnsatisfiedError: a constraint the witness breaks (the first, by index).
        MismatchError: the witness is for another curve, or its length is not the circuit's.
        FormatError, UnsupportedError: either file is not what it should be.
    """
    from .wtns import read_wtns, words_to_int

    system = read_r1cs(r1cs_path)
    witness = read_wtns(witness_path)
    name = witness_name or str(witness_path)
    if witness.curve is not system.curve:
        raise MismatchError(f"{name} is a {witness.curve.name} witness; {r1cs_path} is a {system.curve.name} circuit",
                            expected=system.curve.name, found=witness.curve.name)
    if len(witness.values) != system.n_wires:
        raise MismatchError(f"{name} has {len(witness.values)} values; {r1cs_path} has {system.n_wires} wires",
                            expected=system.n_wires, found=len(witness.values))
    bad = system.first_unsatisfied([words_to_int(v) for v in witness.values])
    if bad is not None:
        raise UnsatisfiedError(f"{name}: the witness does not satisfy constraint {bad} of the circuit's .r1cs "
                               f"({system.n_constraints} constraints)", found=bad)
