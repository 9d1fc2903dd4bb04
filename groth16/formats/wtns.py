"""Reader for circom/snarkjs .wtns witness files (version 2).

`read_header` validates the container and header without numpy and leaves the values in
the mapped file (the native whole-prove, groth16/native_prove.py, checks them in place);
`read_wtns` adds a numpy view of the values and checks them.
"""

from __future__ import annotations

import struct

from .. import curves
from ..curves import Curve
from ..errors import FormatError
from ..record import Record
from .binfile import BinFile, read_prime

TYPE_CHECKING = False  # as typing.TYPE_CHECKING; importing typing costs `zkqueue prove` 2.5 ms
if TYPE_CHECKING:
    from pathlib import Path

    import numpy as np

SEC_HEADER, SEC_VALUES = 1, 2


class Witness(Record):
    """A full witness: values[i] is wire i in standard form, as (n, 4) little-endian words."""

    path: str
    curve: Curve
    values: np.ndarray

    def __len__(self) -> int:
        return len(self.values)

    def public_signals(self, n_public: int) -> list[int]:
        """w[1..nPublic] as integers: outputs first, then public inputs (public.json)."""
        return [words_to_int(self.values[i]) for i in range(1, n_public + 1)]


class WtnsHeader(Record):
    """A .wtns whose header and value section size are validated; values stay in the file."""

    path: str
    curve: Curve
    n_witness: int
    file: BinFile

    def __len__(self) -> int:
        return self.n_witness

    def value(self, i: int) -> int:
        """Value i as an integer (no range check)."""
        n8 = self.curve.n8r
        return int.from_bytes(self.file.section(SEC_VALUES, "witness values")[i * n8:(i + 1) * n8], "little")

    def public_signals(self, n_public: int) -> list[int]:
        """w[1..nPublic] as integers: outputs first, then public inputs (public.json)."""
        return [self.value(i) for i in range(1, n_public + 1)]


def words_to_int(words: np.ndarray) -> int:
    return int.from_bytes(words.astype("<u8").tobytes(), "little")


def first_not_below(values: np.ndarray, bound: int) -> int | None:
    """Index of the first row (4 little-endian words) whose value is >= bound, or None."""
    import numpy as np  # noqa: PLC0415 - the module stays numpy-free for read_header's users

    b = [(bound >> (64 * i)) & (2**64 - 1) for i in range(4)]
    ge = np.ones(len(values), dtype=bool)     # "equal so far from the top" turns into ">="
    gt = np.zeros(len(values), dtype=bool)
    for i in (3, 2, 1, 0):
        col = values[:, i]
        gt |= ge & (col > np.uint64(b[i]))
        ge &= col == np.uint64(b[i])
    bad = np.flatnonzero(gt | ge)
    return int(bad[0]) if len(bad) else None


def read_header(path: str | Path, *, native: bool = False) -> WtnsHeader:
    """Reads a .wtns file's header and checks the size of its value section.

    `native`: map the file so that native code can read the values in place (BinFile.address).

    Raises:
        FormatError: not a .wtns, or truncated.
        UnsupportedError: a prime other than bn128's or bls12381's scalar field.
    """
    path = str(path)
    f = BinFile(path, b"wtns", ".wtns", versions=(2,), native=native)
    hdr = f.section(SEC_HEADER, "header")
    n8, prime, pos = read_prime(hdr, 0, path, ".wtns")
    curve = curves.by_scalar_prime(prime, path=path)
    if n8 != curve.n8r or len(hdr) != pos + 4:
        raise FormatError(f"corrupt .wtns: header is {len(hdr)} bytes with {n8}-byte elements",
                          path=path, expected=f"{curve.n8r + 8} bytes", found=len(hdr))
    (n_witness,) = struct.unpack_from("<I", hdr, pos)
    f.expect_size(SEC_VALUES, "witness values", n_witness * n8)
    return WtnsHeader(path=path, curve=curve, n_witness=n_witness, file=f)


def check_values(w: WtnsHeader, first_bad: int | None) -> None:
    """Raises the error for a witness whose first value >= r is `first_bad` (None: all are
    below r), or whose w[0] is not 1.

    Raises:
        FormatError: naming the file, the index and the value.
    """
    if first_bad is not None:
        raise FormatError(f"corrupt .wtns: value {first_bad} is not below the {w.curve.name} scalar field prime",
                          path=w.path, expected=f"< {w.curve.r}", found=w.value(first_bad))
    if w.n_witness == 0 or w.value(0) != 1:
        raise FormatError("corrupt .wtns: w[0] must be the constant 1", path=w.path, expected=1,
                          found=w.value(0) if w.n_witness else "no values")


def read_wtns(path: str | Path) -> Witness:
    """Reads a .wtns file and checks every value is a field element and w[0] = 1.

    Raises:
        FormatError: not a .wtns, truncated, a value >= r, or w[0] != 1.
        UnsupportedError: a prime other than bn128's or bls12381's scalar field.
    """
    import numpy as np  # noqa: PLC0415

    w = read_header(path)
    data = w.file.section(SEC_VALUES, "witness values")
    values = np.frombuffer(data, dtype="<u8").reshape(w.n_witness, 4)
    check_values(w, first_not_below(values, w.curve.r))
    return Witness(path=w.path, curve=w.curve, values=values)
