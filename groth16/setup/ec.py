"""The few curve operations a contribution needs, on Python integers: affine points of G1
(over Fq) and G2 (over Fq2 = Fq[u]/(u^2 + 1)), scalar multiplication, square roots, and
the file (LEM) and hash (uncompressed) encodings.

A handful of points per contribution, so clarity over speed; the sections' millions of
points go through the native kernels. The point at infinity is None.
"""

from __future__ import annotations


class Field:
    """Fq (degree 1, elements int) or Fq2 (degree 2, elements (c0, c1)) of a curve."""

    def __init__(self, q: int, degree: int):
        self.q, self.degree = q, degree

    # -- arithmetic ---------------------------------------------------------------------------
    def add(self, a, b):
        q = self.q
        return (a + b) % q if self.degree == 1 else ((a[0] + b[0]) % q, (a[1] + b[1]) % q)

    def sub(self, a, b):
        q = self.q
        return (a - b) % q if self.degree == 1 else ((a[0] - b[0]) % q, (a[1] - b[1]) % q)

    def neg(self, a):
        return self.sub(self.zero, a)

    def mul(self, a, b):
        q = self.q
        if self.degree == 1:
            return a * b % q
        return ((a[0] * b[0] - a[1] * b[1]) % q, (a[0] * b[1] + a[1] * b[0]) % q)

    def inv(self, a):
        q = self.q
        if self.degree == 1:
            return pow(a, -1, q)
        n = pow(a[0] * a[0] + a[1] * a[1], -1, q)
        return (a[0] * n % q, -a[1] * n % q)

    def pow(self, a, e: int):
        r = self.one
        while e:
            if e & 1:
                r = self.mul(r, a)
            a = self.mul(a, a)
            e >>= 1
        return r

    @property
    def zero(self):
        return 0 if self.degree == 1 else (0, 0)

    @property
    def one(self):
        return 1 if self.degree == 1 else (1, 0)

    # -- what snarkjs's random points need (ffjavascript / wasmcurves semantics) ---------------
    def norm(self, a) -> int:
        return a if self.degree == 1 else (a[0] * a[0] + a[1] * a[1]) % self.q

    def is_square(self, a) -> bool:
        """wasmcurves isSquare: zero counts as a square."""
        n = self.norm(a)
        return n == 0 or pow(n, (self.q - 1) // 2, self.q) == 1

    def sqrt(self, a):
        """A square root of a square `a` (q = 3 mod 4 on both curves)."""
        q = self.q
        if self.degree == 1:
            r = pow(a, (q + 1) // 4, q)
        else:   # Adj and Rodriguez-Henriquez, algorithm 9
            a1 = self.pow(a, (q - 3) // 4)
            alpha = self.mul(self.mul(a1, a1), a)
            x0 = self.mul(a1, a)
            if alpha == (q - 1, 0):
                r = (-x0[1] % q, x0[0])   # u * x0
            else:
                b = self.pow(self.add(self.one, alpha), (q - 1) // 2)
                r = self.mul(b, x0)
        if self.mul(r, r) != a:
            raise ArithmeticError("not a square")
        return r

    def is_negative(self, a) -> bool:
        """wasmcurves isNegative: the standard value above (q - 1) / 2; on Fq2 that of c1,
        or of c0 when c1 is zero."""
        half = (self.q - 1) // 2
        if self.degree == 1:
            return a > half
        return a[0] > half if a[1] == 0 else a[1] > half


class Group:
    """G1 or G2 of a curve as affine points (None = infinity)."""

    def __init__(self, field: Field, b, n8q: int, cofactor: int | None):
        self.F, self.b, self.n8q, self.cofactor = field, b, n8q, cofactor

    def add(self, p, r):
        F = self.F
        if p is None:
            return r
        if r is None:
            return p
        if p[0] == r[0]:
            if F.add(p[1], r[1]) == F.zero:
                return None
            lam = F.mul(F.mul(F.mul(p[0], p[0]), 3 if F.degree == 1 else (3, 0)), F.inv(F.add(p[1], p[1])))
        else:
            lam = F.mul(F.sub(r[1], p[1]), F.inv(F.sub(r[0], p[0])))
        x = F.sub(F.sub(F.mul(lam, lam), p[0]), r[0])
        return (x, F.sub(F.mul(lam, F.sub(p[0], x)), p[1]))

    def mul(self, p, k: int):
        acc = None
        for bit in bin(k)[2:] if k > 0 else "":
            acc = self.add(acc, acc)
            if bit == "1":
                acc = self.add(acc, p)
        return acc

    # -- encodings ----------------------------------------------------------------------------
    def _coords(self, v):
        return (v,) if self.F.degree == 1 else v

    def to_lem(self, p) -> bytes:
        """The file encoding: Montgomery little-endian coordinates (c0 then c1); infinity = zeros."""
        size = 2 * self.F.degree * self.n8q
        if p is None:
            return bytes(size)
        R, q = 1 << (8 * self.n8q), self.F.q
        return b"".join((c * R % q).to_bytes(self.n8q, "little")
                        for v in p for c in self._coords(v))

    def from_lem(self, data: bytes):
        """A point from its file encoding (all zeros = infinity)."""
        if not any(data):
            return None
        q, n8 = self.F.q, self.n8q
        rinv = pow(1 << (8 * n8), -1, q)
        vals = [int.from_bytes(data[i:i + n8], "little") * rinv % q for i in range(0, len(data), n8)]
        if self.F.degree == 1:
            return (vals[0], vals[1])
        return ((vals[0], vals[1]), (vals[2], vals[3]))

    def to_u(self, p) -> bytes:
        """The hash encoding (snarkjs LEMtoU): standard big-endian coordinates, Fq2 as c1 then
        c0; infinity = zeros."""
        size = 2 * self.F.degree * self.n8q
        if p is None:
            return bytes(size)
        return b"".join(c.to_bytes(self.n8q, "big") for v in p for c in reversed(self._coords(v)))


def groups(curve) -> tuple[Group, Group]:
    """(G1, G2) of a groth16.curves.Curve, with ffjavascript's cofactors for random points."""
    cof = {"bn128": (None, 0x30644E72E131A029B85045B68181585E06CEECDA572A2489345F2299C0F9FA8D),
           "bls12381": (0x396C8C005555E1568C00AAAB0000AAAB,
                        0x5D543A95414E7F1091D50792876A202CD91DE4547085ABAA68A205B2E5A7DDFA628F1CB4D9E82EF21537E293A6691AE1616EC6E786F0C70CF1C38E31C7238E5)}
    c1, c2 = cof[curve.name]
    return (Group(Field(curve.q, 1), curve.b, curve.n8q, c1),
            Group(Field(curve.q, 2), tuple(curve.b2), curve.n8q, c2))
