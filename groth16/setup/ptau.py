"""A prepared powers-of-tau file (.ptau) as `zkey new` reads it, checked before any work.

Sections used (../shared/docs/snarkjs-formats.md section 5): 1 header (n8q, q, power), 2
tauG1 (2^(power+1) - 1 points, for the circuit hash), 4/5/6 alpha1, beta1, beta2 (their
first point), and the prepared Lagrange bases 12 (tauG1, powers 0..power+1), 13 (tauG2),
14 (alphaTauG1), 15 (betaTauG1) (powers 0..power): the basis of size 2^p starts at point
index 2^p - 1.
"""

from __future__ import annotations

import struct

from .. import curves
from ..curves import Curve
from ..errors import FormatError, UnsupportedError
from ..formats.binfile import BinFile, read_prime


class Ptau:
    """An open, checked prepared .ptau (memory-mapped)."""

    def __init__(self, path: str):
        """Opens and checks `path`.

        Raises:
            FormatError: not a .ptau, truncated, or a section of the wrong size.
            UnsupportedError: a curve other than bn128 / bls12381, or an unprepared .ptau.
        """
        self.path = path
        self.file = BinFile(path, b"ptau", ".ptau", versions=(1,), native=True)
        hdr = self.file.section(1, "header")
        _, q, pos = read_prime(hdr, 0, path, ".ptau")
        self.curve: Curve = curves.by_prime(q, path=path)
        if len(hdr) < pos + 8:
            raise FormatError(f"corrupt .ptau: header is {len(hdr)} bytes", path=path, expected=pos + 8)
        self.power, self.ceremony_power = struct.unpack_from("<II", hdr, pos)
        if not 1 <= self.power <= self.curve.two_adicity:
            raise FormatError(f"corrupt .ptau: power {self.power}", path=path, found=self.power)
        g1, g2 = self.curve.g1_bytes, self.curve.g2_bytes
        n = 1 << self.power
        self.file.expect_size(2, "tauG1", (2 * n - 1) * g1)
        for sec, name, size in ((4, "alphaTauG1", g1), (5, "betaTauG1", g1), (6, "betaG2", g2)):
            if len(self.file.section(sec, name)) < size:
                raise FormatError(f"truncated .ptau: section {sec} ({name}) is empty", path=path)
        if 12 not in self.file.sections:
            raise UnsupportedError("the powers of tau is not prepared for phase 2 (no Lagrange sections "
                                   "12-15): run `snarkjs powersoftau prepare phase2` on it first",
                                   path=path, expected="sections 12-15", found=sorted(self.file.sections))
        self.file.expect_size(12, "Lagrange tauG1", (4 * n - 1) * g1)
        self.file.expect_size(13, "Lagrange tauG2", (2 * n - 1) * g2)
        self.file.expect_size(14, "Lagrange alphaTauG1", (2 * n - 1) * g1)
        self.file.expect_size(15, "Lagrange betaTauG1", (2 * n - 1) * g1)

    def point_bytes(self, section: int, index: int, size: int) -> bytes:
        """`size` bytes at point `index` of `section` (G1 or G2 by the section)."""
        off, _ = self.file.sections[section]
        unit = self.curve.g2_bytes if section in (3, 6, 13) else self.curve.g1_bytes
        return bytes(self.file.data[off + index * unit: off + index * unit + size])

    def address(self, section: int, index: int = 0) -> int:
        """Memory address of point `index` of `section` in the mapping."""
        off, _ = self.file.sections[section]
        unit = self.curve.g2_bytes if section in (3, 6, 13) else self.curve.g1_bytes
        return self.file.address(off + index * unit)
