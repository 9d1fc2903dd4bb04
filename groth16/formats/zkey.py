"""Reader for Groth16 .zkey proving keys as written by snarkjs 0.7.x.

`read_header` validates the container, the groth16 header and every section's size
without numpy (the native whole-prove, groth16/native_prove.py, starts from it);
`read_zkey` adds zero-copy numpy views of the sections in the file's own encoding (affine,
Montgomery, little endian; see encoding.py), which is what the backend kernels consume.
Every point is checked to lie on its curve (`ZKey.check_points`), so a truncated or
corrupted key is refused before any proving.
"""

from __future__ import annotations

import struct

from .. import curves
from ..curves import Curve
from ..encoding import g1_from_lem, g2_from_lem
from ..errors import FormatError, UnsupportedError
from ..record import Record, computed_once
from .binfile import BinFile, read_prime

TYPE_CHECKING = False  # as typing.TYPE_CHECKING; importing typing costs `zkqueue prove` 2.5 ms
if TYPE_CHECKING:
    from pathlib import Path

    import numpy as np

    from ..model import VerificationKey

PROTOCOLS = {1: "groth16", 2: "plonk", 10: "fflonk"}

# Section ids (snarkjs zkey_utils.js).
SEC_PROTOCOL, SEC_HEADER, SEC_IC, SEC_COEFS, SEC_A, SEC_B1, SEC_B2, SEC_C, SEC_H = range(1, 10)

COEF_BYTES = 44  # section 4 entry: matrix u32, constraint u32, signal u32, value 32 bytes

# Point sections, in the order they are validated: (snarkjs's name, section id, G2?).
POINT_SECTIONS = (("IC", SEC_IC, False), ("A", SEC_A, False), ("B1", SEC_B1, False),
                  ("B2", SEC_B2, True), ("C", SEC_C, False), ("H", SEC_H, False))


def coef_dtype():
    """numpy dtype of a section 4 entry (numpy is imported here, not by the module)."""
    import numpy as np  # noqa: PLC0415 - keeps `zkqueue prove --backend cpu` numpy-free
    return np.dtype([("matrix", "<u4"), ("constraint", "<u4"), ("signal", "<u4"), ("value", "<u8", (4,))])


def point_groups(key: ZKey | ZKeyHeader) -> list[tuple[str, bool, bytes | int]]:
    """What a key's point check covers, in order: (name in errors, G2?, the header's points
    as LEM bytes, or a point section's id)."""
    return [("header (alpha1, beta1, delta1)", False, key.alpha1 + key.beta1 + key.delta1),
            ("header (beta2, gamma2, delta2)", True, key.beta2 + key.gamma2 + key.delta2),
            *((f"section {sec} ({name})", g2, sec) for name, sec, g2 in POINT_SECTIONS)]


def point_error(path: str, curve: Curve, name: str, exc: FormatError) -> FormatError:
    """The error for a bad point found by a backend's check in the named part of a key."""
    return FormatError(f"corrupt .zkey: {name}: {exc} (on {curve.name})", path=path)


def make_verification_key(curve: Curve, alpha1: bytes, beta2: bytes, gamma2: bytes, delta2: bytes,
                          ic_rows: list[bytes]) -> VerificationKey:
    """A VerificationKey from a key's header points and its IC points (LEM bytes)."""
    from ..model import VerificationKey  # noqa: PLC0415 - a dataclass: off `zkqueue prove`'s start-up
    return VerificationKey(curve=curve, alpha1=g1_from_lem(curve, alpha1), beta2=g2_from_lem(curve, beta2),
                           gamma2=g2_from_lem(curve, gamma2), delta2=g2_from_lem(curve, delta2),
                           ic=tuple(g1_from_lem(curve, row) for row in ic_rows))


class ZKeyHeader(Record):
    """A .zkey whose header and section sizes are validated; sections stay in the mapped file."""

    path: str
    curve: Curve
    n_vars: int
    n_public: int
    domain_size: int
    n_coefs: int            # entries of section 4
    alpha1: bytes           # header points, LEM
    beta1: bytes
    beta2: bytes
    gamma2: bytes
    delta1: bytes
    delta2: bytes
    file: BinFile

    def points_count(self, sec: int) -> int:
        """Number of points in point section `sec` (3, 5-9)."""
        return {SEC_IC: self.n_public + 1, SEC_H: self.domain_size,
                SEC_C: self.n_vars - self.n_public - 1}.get(sec, self.n_vars)

    @computed_once
    def verification_key(self) -> VerificationKey:
        """The verification key embedded in this proving key."""
        ic = self.file.section(SEC_IC, "IC")
        g1b = self.curve.g1_bytes
        return make_verification_key(self.curve, self.alpha1, self.beta2, self.gamma2, self.delta2,
                                     [bytes(ic[i * g1b:(i + 1) * g1b]) for i in range(self.n_public + 1)])


class ZKey(Record):
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
    coefs: np.ndarray       # coef_dtype() entries of section 4
    a_query: np.ndarray     # (nVars, g1 words)
    b1_query: np.ndarray    # (nVars, g1 words)
    b2_query: np.ndarray    # (nVars, g2 words)
    l_query: np.ndarray     # (nVars - nPublic - 1, g1 words): snarkjs's section 8 "C"
    h_query: np.ndarray     # (domainSize, g1 words)
    _file: BinFile | None = None

    @property
    def log2_domain(self) -> int:
        return self.domain_size.bit_length() - 1

    @computed_once
    def verification_key(self) -> VerificationKey:
        """The verification key embedded in this proving key."""
        return make_verification_key(self.curve, self.alpha1, self.beta2, self.gamma2, self.delta2,
                                     [self.ic[i].tobytes() for i in range(self.n_public + 1)])

    def check_points(self, backend) -> None:
        """Checks that every point of the key lies on its curve.

        Raises:
            FormatError: naming the section and index of the first bad point.
        """
        import numpy as np  # noqa: PLC0415

        arrays = {SEC_IC: self.ic, SEC_A: self.a_query, SEC_B1: self.b1_query, SEC_B2: self.b2_query,
                  SEC_C: self.l_query, SEC_H: self.h_query}
        for name, g2, what in point_groups(self):
            pts = np.frombuffer(what, dtype="<u8").reshape(3, -1) if isinstance(what, bytes) else arrays[what]
            try:
                (backend.check_g2 if g2 else backend.check_g1)(pts)
            except FormatError as exc:
                raise point_error(self.path, self.curve, name, exc) from None


def read_header(path: str | Path, *, native: bool = False) -> ZKeyHeader:
    """Reads and structurally validates a Groth16 .zkey without touching its point sections.

    `native`: map the file so that native code can read it in place (BinFile.address).

    Raises:
        FormatError: not a .zkey, truncated, or sections of the wrong size.
        UnsupportedError: a PLONK/FFLONK key, or a curve other than bn128 / bls12381.
    """
    path = str(path)
    f = BinFile(path, b"zkey", ".zkey", versions=(1,), native=native)
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

    coef_sec = f.section(SEC_COEFS, "coefficients")
    if len(coef_sec) < 4:
        raise FormatError("corrupt .zkey: section 4 (coefficients) has no count", path=path)
    (n_coefs,) = struct.unpack_from("<I", coef_sec, 0)
    want = 4 + n_coefs * COEF_BYTES
    if len(coef_sec) != want:
        raise FormatError(f"corrupt .zkey: section 4 (coefficients) is {len(coef_sec)} bytes, "
                          f"{n_coefs} entries need {want}", path=path, expected=want, found=len(coef_sec))

    header = ZKeyHeader(path=path, curve=curve, n_vars=n_vars, n_public=n_public, domain_size=domain_size,
                        n_coefs=n_coefs, alpha1=alpha1, beta1=beta1, beta2=beta2, gamma2=gamma2,
                        delta1=delta1, delta2=delta2, file=f)
    for name, sec, g2 in POINT_SECTIONS:
        f.expect_size(sec, name, header.points_count(sec) * (g2b if g2 else g1b))
    return header


def read_zkey(path: str | Path) -> ZKey:
    """Reads and structurally validates a Groth16 .zkey, with numpy views of its sections.

    Raises:
        FormatError: not a .zkey, truncated, or sections of the wrong size.
        UnsupportedError: a PLONK/FFLONK key, or a curve other than bn128 / bls12381.
    """
    import numpy as np  # noqa: PLC0415 - read_header, the lean path's reader, stays numpy-free

    h = read_header(path)
    f, c = h.file, h.curve

    def points(sec: int, name: str, g2: bool) -> np.ndarray:
        size = c.g2_bytes if g2 else c.g1_bytes
        return np.frombuffer(f.section(sec, name), dtype="<u8").reshape(h.points_count(sec), size // 8)

    return ZKey(
        path=h.path, curve=c, n_vars=h.n_vars, n_public=h.n_public, domain_size=h.domain_size,
        alpha1=h.alpha1, beta1=h.beta1, beta2=h.beta2, gamma2=h.gamma2, delta1=h.delta1, delta2=h.delta2,
        ic=points(SEC_IC, "IC", False),
        coefs=np.frombuffer(f.section(SEC_COEFS, "coefficients")[4:], dtype=coef_dtype()),
        a_query=points(SEC_A, "A", False),
        b1_query=points(SEC_B1, "B1", False),
        b2_query=points(SEC_B2, "B2", True),
        l_query=points(SEC_C, "C", False),
        h_query=points(SEC_H, "H", False),
        _file=f,
    )
