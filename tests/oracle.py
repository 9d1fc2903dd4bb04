"""Pure-Python reference arithmetic: the test oracle for the native kernels. Never used by
the product.

Points are affine tuples of standard-form integers with None for infinity, as in
groth16.encoding: G1 (x, y), G2 ((x0, x1), (y0, y1)). Field elements of Fq2 are (c0, c1).
Everything is written from the textbook formulas so that it shares no code with the kernels.
"""

from __future__ import annotations

import random

from zkqueue.groth16.curves import Curve

# ---- Fq2 = Fq[u] / (u^2 + 1) -------------------------------------------------------


def f2_add(a, b, q):
    return ((a[0] + b[0]) % q, (a[1] + b[1]) % q)


def f2_sub(a, b, q):
    return ((a[0] - b[0]) % q, (a[1] - b[1]) % q)


def f2_mul(a, b, q):
    return ((a[0] * b[0] - a[1] * b[1]) % q, (a[0] * b[1] + a[1] * b[0]) % q)


def f2_inv(a, q):
    t = pow(a[0] * a[0] + a[1] * a[1], -1, q)
    return (a[0] * t % q, -a[1] * t % q)


def f2_neg(a, q):
    return (-a[0] % q, -a[1] % q)


# ---- the two groups, through one small "field" interface ----------------------------

class _Fq:
    def __init__(self, q):
        self.q = q

    def add(self, a, b): return (a + b) % self.q
    def sub(self, a, b): return (a - b) % self.q
    def mul(self, a, b): return a * b % self.q
    def inv(self, a): return pow(a, -1, self.q)
    def neg(self, a): return -a % self.q
    def small(self, k): return k % self.q
    def random(self, rng): return rng.randrange(self.q)


class _Fq2:
    def __init__(self, q):
        self.q = q

    def add(self, a, b): return f2_add(a, b, self.q)
    def sub(self, a, b): return f2_sub(a, b, self.q)
    def mul(self, a, b): return f2_mul(a, b, self.q)
    def inv(self, a): return f2_inv(a, self.q)
    def neg(self, a): return f2_neg(a, self.q)
    def small(self, k): return (k % self.q, 0)
    def random(self, rng): return (rng.randrange(self.q), rng.randrange(self.q))


class Group:
    """Affine arithmetic on y^2 = x^3 + b over Fq (G1) or Fq2 (G2)."""

    def __init__(self, curve: Curve, g2: bool):
        self.curve = curve
        self.f = _Fq2(curve.q) if g2 else _Fq(curve.q)
        self.b = curve.b2 if g2 else curve.b
        self.gen = curve.g2 if g2 else curve.g1
        self.r = curve.r

    def on_curve(self, p) -> bool:
        if p is None:
            return True
        f = self.f
        x, y = p
        return f.mul(y, y) == f.add(f.mul(f.mul(x, x), x), self.b)

    def neg(self, p):
        return None if p is None else (p[0], self.f.neg(p[1]))

    def add(self, p, q):
        if p is None:
            return q
        if q is None:
            return p
        f = self.f
        (x1, y1), (x2, y2) = p, q
        if x1 == x2:
            if y1 != y2:
                return None  # P + (-P)
            return self.double(p)
        lam = f.mul(f.sub(y2, y1), f.inv(f.sub(x2, x1)))
        x3 = f.sub(f.sub(f.mul(lam, lam), x1), x2)
        return x3, f.sub(f.mul(lam, f.sub(x1, x3)), y1)

    def double(self, p):
        if p is None:
            return None
        f = self.f
        x, y = p
        lam = f.mul(f.mul(f.small(3), f.mul(x, x)), f.inv(f.add(y, y)))
        x3 = f.sub(f.mul(lam, lam), f.add(x, x))
        return x3, f.sub(f.mul(lam, f.sub(x, x3)), y)

    def mul(self, p, k: int):
        """k * p by double-and-add (k taken mod r; p must be in the order-r subgroup)."""
        k %= self.r
        acc = None
        while k:
            if k & 1:
                acc = self.add(acc, p)
            p = self.double(p)
            k >>= 1
        return acc

    def msm(self, points, scalars):
        """Naive sum of k_i * P_i."""
        acc = None
        for p, k in zip(points, scalars):
            acc = self.add(acc, self.mul(p, k))
        return acc

    def random_point(self, rng: random.Random):
        """(k * G, k) for a random k."""
        k = rng.randrange(1, self.r)
        return self.mul(self.gen, k), k

    def random_off_curve(self, rng: random.Random):
        """A point with valid coordinates that is not on the curve."""
        while True:
            p = (self.f.random(rng), self.f.random(rng))
            if not self.on_curve(p):
                return p


def g1(curve: Curve) -> Group:
    return Group(curve, g2=False)


def g2(curve: Curve) -> Group:
    return Group(curve, g2=True)


# ---- Fr: snarkjs's roots of unity and a naive DFT ------------------------------------

def root_of_unity(curve: Curve, log2_size: int) -> int:
    """omega_s = 5^((r-1)/2^s), squared s - k times (written out, not Curve.root_of_unity)."""
    r, s = curve.r, curve.two_adicity
    w = pow(5, (r - 1) >> s, r)
    for _ in range(s - log2_size):
        w = w * w % r
    return w


def dft(curve: Curve, coefs: list[int], coset_shift: int | None = None) -> list[int]:
    """values[j] = sum_i coefs[i] * shift^i * omega^(ij), O(n^2)."""
    r, n = curve.r, len(coefs)
    k = n.bit_length() - 1
    w = root_of_unity(curve, k)
    g = 1 if coset_shift is None else coset_shift
    c = [x * pow(g, i, r) % r for i, x in enumerate(coefs)]
    return [sum(c[i] * pow(w, i * j, r) for i in range(n)) % r for j in range(n)]


def idft(curve: Curve, values: list[int], coset_shift: int | None = None) -> list[int]:
    """Inverse of dft: coefs[i] = n^-1 * sum_j values[j] * omega^(-ij), then divided by shift^i."""
    r, n = curve.r, len(values)
    k = n.bit_length() - 1
    wi = pow(root_of_unity(curve, k), -1, r)
    ninv = pow(n, -1, r)
    g_inv = 1 if coset_shift is None else pow(coset_shift, -1, r)
    return [sum(values[j] * pow(wi, i * j, r) for j in range(n)) * ninv * pow(g_inv, i, r) % r
            for i in range(n)]
