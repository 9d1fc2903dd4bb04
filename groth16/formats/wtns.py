"""Reader for circom/snarkjs .wtns witness files (version 2)."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import curves
from ..curves import Curve
from ..errors import FormatError
from .binfile import BinFile, read_prime


@dataclass
class Witness:
    """A full witness: values[i] is wire i in standard form, as (n, 4) little-endian words."""

    path: str
    curve: Curve
    values: np.ndarray

    def __len__(self) -> int:
        return len(self.values)

    def public_signals(self, n_public: int) -> list[int]:
        """w[1..nPublic] as integers: outputs first, then public inputs (public.json)."""
        return [words_to_int(self.values[i]) for i in range(1, n_public + 1)]


def words_to_int(words: np.ndarray) -> int:
    return int.from_bytes(words.astype("<u8").tobytes(), "little")


def first_not_below(values: np.ndarray, bound: int) -> int | None:
    """Index of the first row (4 little-endian words) whose value is >= bound, or None."""
    b = [(bound >> (64 * i)) & (2**64 - 1) for i in range(4)]
    ge = np.ones(len(values), dtype=bool)     # "equal so far from the top" turns into ">="
    gt = np.zeros(len(values), dtype=bool)
    for i in (3, 2, 1, 0):
        col = values[:, i]
        gt |= ge & (col > np.uint64(b[i]))
        ge &= col == np.uint64(b[i])
    bad = np.flatnonzero(gt | ge)
    return int(bad[0]) if len(bad) else None


def read_wtns(path: str | Path) -> Witness:
    """Reads a .wtns file and checks every value is a field element and w[0] = 1.

    Raises:
        FormatError: not a .wtns, truncated, a value >= r, or w[0] != 1.
        UnsupportedError: a prime other than bn128's or bls12381's scalar field.
    """
    path = str(path)
    f = BinFile(path, b"wtns", ".wtns", versions=(2,))
    hdr = f.section(1, "header")
    n8, prime, pos = read_prime(hdr, 0, path, ".wtns")
    curve = curves.by_scalar_prime(prime, path=path)
    if n8 != curve.n8r or len(hdr) != pos + 4:
        raise FormatError(f"corrupt .wtns: header is {len(hdr)} bytes with {n8}-byte elements",
                          path=path, expected=f"{curve.n8r + 8} bytes", found=len(hdr))
    (n_witness,) = struct.unpack_from("<I", hdr, pos)
    data = f.expect_size(2, "witness values", n_witness * n8)
    values = np.frombuffer(data, dtype="<u8").reshape(n_witness, 4)
    bad = first_not_below(values, curve.r)
    if bad is not None:
        raise FormatError(f"corrupt .wtns: value {bad} is not below the {curve.name} scalar field prime",
                          path=path, expected=f"< {curve.r}", found=words_to_int(values[bad]))
    if n_witness == 0 or words_to_int(values[0]) != 1:
        raise FormatError("corrupt .wtns: w[0] must be the constant 1", path=path, expected=1,
                          found=words_to_int(values[0]) if n_witness else "no values")
    return Witness(path=path, curve=curve, values=values)
