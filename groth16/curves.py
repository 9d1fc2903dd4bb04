"""Curve and field constants of bn128 (BN254) and bls12381 (BLS12-381), checked at import.

Names follow snarkjs: a curve is recognised from the base-field prime written in a file's
header, and named "bn128" or "bls12381" as snarkjs writes it in JSON.
"""

from __future__ import annotations

from .errors import UnsupportedError
from .record import Record


class Curve(Record):
    """Constants of one pairing-friendly curve, with the scalar field's NTT parameters."""

    _frozen = True

    name: str                     # snarkjs's name, as written in verification_key.json
    native_id: int                # the curve number of the native kernels' C ABI
    q: int                        # base-field prime
    r: int                        # scalar-field prime (group order)
    n8q: int                      # bytes per base-field element in files
    b: int                        # G1: y^2 = x^3 + b
    b2: tuple[int, int]           # G2: y^2 = x^3 + b2 over Fq2 = Fq[u]/(u^2 + 1)
    g1: tuple[int, int]
    g2: tuple[tuple[int, int], tuple[int, int]]
    two_adicity: int              # largest s with 2^s | r - 1
    nqr: int = 5                  # smallest quadratic non-residue of Fr (snarkjs's F1Field.nqr)

    n8r = 32                      # both scalar fields fit in four 64-bit words

    @property
    def g1_bytes(self) -> int:
        return 2 * self.n8q

    @property
    def g2_bytes(self) -> int:
        return 4 * self.n8q

    def root_of_unity(self, log2_size: int) -> int:
        """Generator of the size-2^k subgroup of Fr*, exactly as snarkjs picks it."""
        if not 0 <= log2_size <= self.two_adicity:
            raise UnsupportedError(f"no 2^{log2_size} roots of unity on {self.name}",
                                   expected=f"log2 size <= {self.two_adicity}", found=log2_size)
        w = pow(self.nqr, (self.r - 1) >> self.two_adicity, self.r)
        for _ in range(self.two_adicity - log2_size):
            w = w * w % self.r
        return w

    def coset_shift(self, log2_size: int) -> int:
        """The factor snarkjs multiplies coefficient i by (as shift^i) to reach the odd coset.

        This is omega_2n, a primitive 2n-th root, so the domain moves to omega_2n^(2j+1);
        at the field's largest domain snarkjs uses nqr^2 instead.
        """
        if log2_size == self.two_adicity:
            return self.nqr * self.nqr % self.r
        return self.root_of_unity(log2_size + 1)


def _fq2_div(a: tuple[int, int], b: tuple[int, int], q: int) -> tuple[int, int]:
    norm_inv = pow(b[0] * b[0] + b[1] * b[1], -1, q)
    return ((a[0] * b[0] + a[1] * b[1]) * norm_inv % q, (a[1] * b[0] - a[0] * b[1]) * norm_inv % q)


_BN_Q = 0x30644E72E131A029B85045B68181585D97816A916871CA8D3C208C16D87CFD47
_BLS_Q = 0x1A0111EA397FE69A4B1BA7B6434BACD764774B84F38512BF6730D2A0F6B0F6241EABFFFEB153FFFFB9FEFFFFFFFFAAAB

BN128 = Curve(
    name="bn128", native_id=0, q=_BN_Q,
    r=0x30644E72E131A029B85045B68181585D2833E84879B9709143E1F593F0000001,
    n8q=32, b=3, b2=_fq2_div((3, 0), (9, 1), _BN_Q),
    g1=(1, 2),
    g2=((10857046999023057135944570762232829481370756359578518086990519993285655852781,
         11559732032986387107991004021392285783925812861821192530917403151452391805634),
        (8495653923123431417604973247489272438418190587263600148770280649306958101930,
         4082367875863433681332203403145435568316851327593401208105741076214120093531)),
    two_adicity=28,
)

BLS12381 = Curve(
    name="bls12381", native_id=1, q=_BLS_Q,
    r=0x73EDA753299D7D483339D80809A1D80553BDA402FFFE5BFEFFFFFFFF00000001,
    n8q=48, b=4, b2=(4, 4),
    g1=(3685416753713387016781088315183077757961620795782546409894578378688607592378376318836054947676345821548104185464507,
        1339506544944476473020471379941921221584933875938349620426543736416511423956333506472724655353366534992391756441569),
    g2=((352701069587466618187139116011060144890029952792775240219908644239793785735715026873347600343865175952761926303160,
         3059144344244213709971259814753781636986470325476647558659373206291635324768958432433509563104347017837885763365758),
        (1985150602287291935568054521177171638300868978215655730859378665066344726373823718423869104263333984641494340347905,
         927553665492332455747201965776037880757740193453592970025027978793976877002675564980949289727957565575433344219582)),
    two_adicity=32,
)

CURVES = {c.name: c for c in (BN128, BLS12381)}


def by_prime(q: int, *, path: str | None = None) -> Curve:
    """The curve whose base field is q, as recognised from a file header.

    Raises:
        UnsupportedError: q is neither BN254's nor BLS12-381's base-field prime.
    """
    for curve in CURVES.values():
        if curve.q == q:
            return curve
    raise UnsupportedError("unsupported curve: the field prime is neither bn128's nor bls12381's",
                           path=path, expected="bn128 or bls12381 base-field prime", found=hex(q))


def by_scalar_prime(r: int, *, path: str | None = None) -> Curve:
    """The curve whose scalar field is r (a .wtns header holds r, not q).

    Raises:
        UnsupportedError: r is neither curve's group order.
    """
    for curve in CURVES.values():
        if curve.r == r:
            return curve
    raise UnsupportedError("unsupported curve: the scalar-field prime is neither bn128's nor bls12381's",
                           path=path, expected="bn128 or bls12381 scalar-field prime", found=hex(r))


def by_name(name: str) -> Curve:
    """The curve snarkjs calls `name` ("bn128", "bls12381"; "bn254"/"bls12-381" accepted)."""
    key = {"bn254": "bn128", "bls12-381": "bls12381", "bls12_381": "bls12381"}.get(name.lower(), name.lower())
    if key not in CURVES:
        raise UnsupportedError(f"unsupported curve {name!r}", expected="bn128 or bls12381", found=name)
    return CURVES[key]


def _check(c: Curve) -> None:
    q, (x, y) = c.q, c.g1
    assert (y * y - x * x * x - c.b) % q == 0, f"{c.name}: G1 generator off the curve"

    def m(a, b):
        return ((a[0] * b[0] - a[1] * b[1]) % q, (a[0] * b[1] + a[1] * b[0]) % q)
    (x2, y2) = c.g2
    lhs, rhs = m(y2, y2), m(m(x2, x2), x2)
    assert ((lhs[0] - rhs[0] - c.b2[0]) % q, (lhs[1] - rhs[1] - c.b2[1]) % q) == (0, 0), \
        f"{c.name}: G2 generator off the twist"
    assert (c.r - 1) % (1 << c.two_adicity) == 0 and ((c.r - 1) >> c.two_adicity) % 2 == 1
    assert pow(c.nqr, (c.r - 1) // 2, c.r) == c.r - 1, f"{c.name}: {c.nqr} is a square in Fr"


for _c in CURVES.values():
    _check(_c)
