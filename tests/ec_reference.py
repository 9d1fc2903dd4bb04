"""A small, slow, obviously-correct model of G1/G2 arithmetic and MSM inputs for the CUDA tests.

Points are affine tuples of standard-form integers (G2 coordinates are (c0, c1) pairs),
None for infinity, as in groth16/encoding.py. Random MSM inputs are built with known
discrete logarithms (P_i = a_i * G), so the expected sum is one scalar multiplication of G:
sum k_i P_i = (sum k_i a_i mod r) * G.
"""

from __future__ import annotations

import random

import numpy as np

from zkqueue.groth16.curves import Curve
from zkqueue.groth16.encoding import g1_to_lem, g2_to_lem, scalars_to_bytes


class Fq2Ops:
    """Fq2 = Fq[u]/(u^2 + 1) on (c0, c1) tuples."""

    def __init__(self, q: int):
        self.q = q
        self.zero, self.one = (0, 0), (1, 0)

    def add(self, a, b): return (a[0] + b[0]) % self.q, (a[1] + b[1]) % self.q
    def sub(self, a, b): return (a[0] - b[0]) % self.q, (a[1] - b[1]) % self.q
    def mul(self, a, b): return (a[0] * b[0] - a[1] * b[1]) % self.q, (a[0] * b[1] + a[1] * b[0]) % self.q
    def small(self, k): return k % self.q, 0

    def inv(self, a):
        t = pow(a[0] * a[0] + a[1] * a[1], -1, self.q)
        return a[0] * t % self.q, -a[1] * t % self.q


class FqOps:
    def __init__(self, q: int):
        self.q = q
        self.zero, self.one = 0, 1

    def add(self, a, b): return (a + b) % self.q
    def sub(self, a, b): return (a - b) % self.q
    def mul(self, a, b): return a * b % self.q
    def small(self, k): return k % self.q
    def inv(self, a): return pow(a, -1, self.q)


class Group:
    """Affine short-Weierstrass arithmetic (a = 0) over FqOps or Fq2Ops."""

    def __init__(self, curve: Curve, g2: bool):
        self.curve, self.is_g2 = curve, g2
        self.f = Fq2Ops(curve.q) if g2 else FqOps(curve.q)
        self.gen = curve.g2 if g2 else curve.g1

    def neg(self, p):
        if p is None:
            return None
        return p[0], self.f.sub(self.f.zero, p[1])

    def add(self, p, q):
        f = self.f
        if p is None:
            return q
        if q is None:
            return p
        if p[0] == q[0]:
            if p[1] != q[1] or p[1] == f.zero:
                return None
            lam = f.mul(f.mul(f.small(3), f.mul(p[0], p[0])), f.inv(f.mul(f.small(2), p[1])))
        else:
            lam = f.mul(f.sub(q[1], p[1]), f.inv(f.sub(q[0], p[0])))
        x = f.sub(f.sub(f.mul(lam, lam), p[0]), q[0])
        return x, f.sub(f.mul(lam, f.sub(p[0], x)), p[1])

    def mul(self, k: int, p=None):
        p = self.gen if p is None else p
        k %= self.curve.r
        acc = None
        for bit in bin(k)[2:] if k else "":
            acc = self.add(acc, acc)
            if bit == "1":
                acc = self.add(acc, p)
        return acc

    def lem(self, p) -> bytes:
        return g2_to_lem(self.curve, p) if self.is_g2 else g1_to_lem(self.curve, p)

    def rows(self, points) -> np.ndarray:
        data = b"".join(self.lem(p) for p in points)
        words = (4 if self.is_g2 else 2) * self.curve.n8q // 8
        return np.frombuffer(data, dtype="<u8").reshape(len(points), words).copy()


def scalar_rows(curve: Curve, ks) -> np.ndarray:
    return np.frombuffer(scalars_to_bytes(curve, list(ks)), dtype="<u8").reshape(-1, 4).copy()


def random_points(group: Group, n: int, rng: random.Random, *, specials: bool = True):
    """n points with known logs: a random walk G-multiples (one addition per point), and, when
    `specials`, infinity, repeats and negations mixed in (they make buckets double and cancel)."""
    r = group.curve.r
    steps = [rng.randrange(1, r) for _ in range(8)]
    step_pts = [group.mul(s) for s in steps]
    logs, pts = [], []
    a, p = steps[0], step_pts[0]
    for i in range(n):
        j = rng.randrange(8)
        a, p = (a + steps[j]) % r, group.add(p, step_pts[j])
        logs.append(a)
        pts.append(p)
    if specials and n >= 6:
        logs[1], pts[1] = 0, None                                    # infinity
        logs[3], pts[3] = logs[2], pts[2]                            # a repeat
        logs[5], pts[5] = (r - logs[4]) % r, group.neg(pts[4])      # a negation
    return logs, pts


def special_scalars(curve: Curve, n: int, rng: random.Random) -> list[int]:
    """Scalars mixing zeros, ones, r-1, values >= r/2, small and random ones."""
    r = curve.r
    pool = [0, 1, 2, r - 1, r - 2, r // 2, r // 2 + 1, (1 << 128) - 1]
    return [rng.choice(pool) if rng.random() < 0.4 else rng.randrange(r) for _ in range(n)]


def expected_msm(group: Group, logs, ks):
    return group.mul(sum(a * k for a, k in zip(logs, ks)) % group.curve.r)
