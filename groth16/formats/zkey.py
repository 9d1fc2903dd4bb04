"""Reader for Groth16 .zkey proving keys as written by snarkjs 0.7.x.

Point sections are exposed as zero-copy numpy views in the file's own encoding (affine,
Montgomery, little endian; see encoding.py), which is what the kernels consume. Section
sizes are checked against the header, and every point is checked to lie on its curve
(`ZKey.check_points`), so a truncated or corrupted key is refused before any proving.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from .. import curves
from ..curves import Curve
from ..encoding import g1_from_lem, g2_from_lem
from ..errors import FormatError, UnsupportedError
from ..model import VerificationKey
from .binfile import BinFile, read_prime

PROTOCOLS = {1: "groth16", 2: "plonk", 10: "fflonk"}

# Section ids (snarkjs zkey_utils.js).
SEC_PROTOCOL, SEC_HEADER, SEC_IC, SEC_COEFS, SEC_A, SEC_B1, SEC_B2, SEC_C, SEC_H = range(1, 10)

COEF_DTYPE = np.dtype([("matrix", "<u4"), ("constraint", "<u4"), ("signal", "<u4"), ("value", "<u8", (4,))])


@dataclass
class ZKey:
    """A Groth16 proving key. Point arrays are views into the memory-mapped file."""

    path: str
    curve: Curve
    n_vars: int             # witness length, including the constant 1
    n_public: int           # outputs + public inputs
    domain_size: int        # n: a power of two > nConstraints + nPublic
    alpha1: bytes           # header points, LEM
    beta1: bytes
    beta2: bytes
    gamma2: bytes
    delta1: bytes
    delta2: bytes
    ic: np.ndarray          # (nPublic+1, g1 words)
    coefs: np.ndarray       # COEF_DTYPE entries of section 4
    a_query: np.ndarray     # (nVars, g1 words)
    b1_query: np.ndarray    # (nVars, g1 words)
    b2_query: np.ndarray    # (nVars, g2 words)
    l_query: np.ndarray     # (nVars - nPublic - 1, g1 words): snarkjs's section 8 "C"
    h_query: np.ndarray     # (domainSize, g1 words)
    _file: BinFile | None = None

    @property
    def log2_domain(self) -> int:
        return self.domain_size.bit_length() - 1

    @cached_property
    def verification_key(self) -> VerificationKey:
        """The verification key embedded in this proving key."""
        c = self.curve
        return VerificationKey(
            curve=c,
            alpha1=g1_from_lem(c, self.alpha1),
            beta2=g2_from_lem(c, self.beta2),
            gamma2=g2_from_lem(c, self.gamma2),
            delta2=g2_from_lem(c, self.delta2),
            ic=tuple(g1_from_lem(c, self.ic[i].tobytes()) for i in range(self.n_public + 1)),
        )

    def check_points(self, backend) -> None:
        """Checks that every point of the key lies on its curve.

        Raises:
            FormatError: naming the section and index of the first bad point.
        """
        c = self.curve
        header_g1 = np.frombuffer(self.alpha1 + self.beta1 + self.delta1, dtype="<u8").reshape(3, -1)
        header_g2 = np.frombuffer(self.beta2 + self.gamma2 + self.delta2, dtype="<u8").reshape(3, -1)
        for name, pts, check in (
            ("header (alpha1, beta1, delta1)", header_g1, backend.check_g1),
            ("header (beta2, gamma2, delta2)", header_g2, backend.check_g2),
            ("section 3 (IC)", self.ic, backend.check_g1),
            ("section 5 (A)", self.a_query, backend.check_g1),
            ("section 6 (B1)", self.b1_query, backend.check_g1),
            ("section 7 (B2)", self.b2_query, backend.check_g2),
            ("section 8 (C)", self.l_query, backend.check_g1),
            ("section 9 (H)", self.h_query, backend.check_g1),
        ):
            try:
                check(pts)
            except FormatError as exc:
                raise FormatError(f"corrupt .zkey: {name}: {exc} (on {c.name})", path=self.path) from None


def read_zkey(path: str | Path) -> ZKey:
    """Reads and structurally validates a Groth16 .zkey.

    Raises:
        FormatError: not a .zkey, truncated, or sections of the wrong size.
        UnsupportedError: a PLONK/FFLONK key, or a curve other than bn128 / bls12381.
    """
    path = str(path)
    f = BinFile(path, b"zkey", ".zkey", versions=(1,))
    proto = f.expect_size(SEC_PROTOCOL, "protocol", 4)
    (protocol,) = struct.unpack_from("<I", proto, 0)
    if protocol != 1:
        name = PROTOCOLS.get(protocol, f"unknown protocol {protocol}")
        raise UnsupportedError(f"this is a {name} .zkey; zkqueue proves Groth16 only", path=path,
                               expected="protocol 1 (groth16)", found=protocol)

    hdr = f.section(SEC_HEADER, "groth16 header")
    n8q, q, pos = read_prime(hdr, 0, path, ".zkey")
    curve = curves.by_prime(q, path=path)
    if n8q != curve.n8q:
        raise FormatError(f"corrupt .zkey: base field stored in {n8q} bytes, {curve.name} uses {curve.n8q}",
                          path=path, expected=curve.n8q, found=n8q)
    n8r, r, pos = read_prime(hdr, pos, path, ".zkey")
    if (n8r, r) != (curve.n8r, curve.r):
        raise FormatError(f"corrupt .zkey: scalar field does not match the {curve.name} base field",
                          path=path, expected=hex(curve.r), found=hex(r))
    g1b, g2b = curve.g1_bytes, curve.g2_bytes
    want = pos + 12 + 3 * g1b + 3 * g2b
    if len(hdr) != want:
        raise FormatError(f"corrupt .zkey: groth16 header is {len(hdr)} bytes, expected {want}",
                          path=path, expected=want, found=len(hdr))
    n_vars, n_public, domain_size = struct.unpack_from("<III", hdr, pos)
    pos += 12
    if domain_size == 0 or domain_size & (domain_size - 1) or domain_size > 1 << curve.two_adicity:
        raise FormatError(f"corrupt .zkey: domain size {domain_size} is not a power of two "
                          f"up to 2^{curve.two_adicity}", path=path, found=domain_size)
    if not 0 <= n_public < n_vars:
        raise FormatError(f"corrupt .zkey: nPublic {n_public} must be below nVars {n_vars}",
                          path=path, expected=f"< {n_vars}", found=n_public)
    header_points = []
    for size in (g1b, g1b, g2b, g2b, g1b, g2b):
        header_points.append(bytes(hdr[pos:pos + size]))
        pos += size
    alpha1, beta1, beta2, gamma2, delta1, delta2 = header_points

    def points(sec: int, name: str, count: int, size: int) -> np.ndarray:
        buf = f.expect_size(sec, name, count * size)
        return np.frombuffer(buf, dtype="<u8").reshape(count, size // 8)

    coef_sec = f.section(SEC_COEFS, "coefficients")
    if len(coef_sec) < 4:
        raise FormatError("corrupt .zkey: section 4 (coefficients) has no count", path=path)
    (n_coefs,) = struct.unpack_from("<I", coef_sec, 0)
    want = 4 + n_coefs * COEF_DTYPE.itemsize
    if len(coef_sec) != want:
        raise FormatError(f"corrupt .zkey: section 4 (coefficients) is {len(coef_sec)} bytes, "
                          f"{n_coefs} entries need {want}", path=path, expected=want, found=len(coef_sec))

    return ZKey(
        path=path, curve=curve, n_vars=n_vars, n_public=n_public, domain_size=domain_size,
        alpha1=alpha1, beta1=beta1, beta2=beta2, gamma2=gamma2, delta1=delta1, delta2=delta2,
        ic=points(SEC_IC, "IC", n_public + 1, g1b),
        coefs=np.frombuffer(coef_sec[4:], dtype=COEF_DTYPE),
        a_query=points(SEC_A, "A", n_vars, g1b),
        b1_query=points(SEC_B1, "B1", n_vars, g1b),
        b2_query=points(SEC_B2, "B2", n_vars, g2b),
        l_query=points(SEC_C, "C", n_vars - n_public - 1, g1b),
        h_query=points(SEC_H, "H", domain_size, g1b),
        _file=f,
    )
