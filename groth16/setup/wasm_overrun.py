"""The one circuit-hash point snarkjs computes from bytes past the tau powers.

snarkjs's hashHPoints (zkey_new.js) hashes tauG1[n + i] - tauG1[i] in chunks of 2^14 points
whose length is min(n - 1, 2^14) for every chunk, the last included. From n = 2^15 on, that
reads up to i = n - 1, i.e. tauG1[2n - 1]; when the .ptau's power is exactly the circuit's,
its tauG1 section holds 2n - 1 points and that read runs into the next bytes of the file (the
next section's header and the start of tauG2). The bytes are not a point, and wasmcurves'
field operations treat them as 256- (384-) bit integers: its modular addition and
subtraction wrap at 2^256 instead of reducing mod q, so the result depends on the exact
operations. This module repeats them, integer for integer, for that point only:
g1m_subAffine = negAffine then addAffine (build_curve_jacobian_a0.js), with F1m add, sub,
mul, square as build_f1m.js computes them; the conversion to affine and to the hash
encoding that follow are products, inverses and a Montgomery reduction, exact modulo q
whatever their inputs, so they are done in the field.
"""

from __future__ import annotations


class WasmF1m:
    """build_f1m.js's arithmetic on raw little-endian integers below 2^(8 n8)."""

    def __init__(self, q: int, n8: int):
        self.q, self.R = q, 1 << (8 * n8)
        self.qinv_neg = (-pow(q, -1, self.R)) % self.R

    def add(self, x: int, y: int) -> int:
        s = x + y
        if s >= self.R or s >= self.q:   # carry out, or >= q: subtract q (mod 2^bits)
            return (s - self.q) % self.R
        return s

    def sub(self, x: int, y: int) -> int:
        if x < y:                        # borrow: add q (mod 2^bits)
            return (x - y + self.q) % self.R
        return x - y

    def mul(self, x: int, y: int) -> int:
        t = x * y
        m = (t * self.qinv_neg) % self.R
        t = (t + m * self.q) // self.R   # < 2^bits + q
        return t - self.q if t >= self.q else t


def sub_affine_u(p1: tuple[int, int], p2: tuple[int, int], q: int, n8: int) -> bytes:
    """The uncompressed encoding snarkjs hashes for g1m_subAffine(p1, p2) then
    batchToAffine and batchLEMtoU, p1 and p2 raw (Montgomery) coordinates."""
    F = WasmF1m(q, n8)
    x1, y1 = p1
    x2, y2 = p2[0], F.sub(0, p2[1])          # negAffine
    if (x1, y1) == (0, 0):
        x3, y3, z3 = x2, y2, (1 << (8 * n8)) % q
    elif (x2, y2) == (0, 0):
        x3, y3, z3 = x1, y1, (1 << (8 * n8)) % q
    elif x1 == x2 and y1 == y2:
        raise NotImplementedError("doubling of bytes past the tau powers")
    else:                                     # addAffine (mmadd-2007-bl)
        H = F.sub(x2, x1)
        y2_minus_y1 = F.sub(y2, y1)
        HH = F.mul(H, H)
        I = F.add(HH, HH)
        I = F.add(I, I)
        J = F.mul(H, I)
        r = F.add(y2_minus_y1, y2_minus_y1)
        V = F.mul(x1, I)
        r2 = F.mul(r, r)
        V2 = F.add(V, V)
        x3 = F.sub(F.sub(r2, J), V2)
        y1_J2 = F.mul(y1, J)
        y1_J2 = F.add(y1_J2, y1_J2)
        y3 = F.sub(F.mul(F.sub(V, x3), r), y1_J2)
        z3 = F.add(H, H)
    if z3 == 0:
        return bytes(4 * n8)
    # to affine and out of Montgomery form: X = x3 R^-1 / (z3 R^-1)^2, Y = y3 R^-1 / (z3 R^-1)^3
    R = 1 << (8 * n8)
    zi = pow(z3 * pow(R, -1, q) % q, -1, q)
    X = x3 * pow(R, -1, q) * zi * zi % q
    Y = y3 * pow(R, -1, q) * zi * zi * zi % q
    if X == 0 and Y == 0:
        return bytes(4 * n8)
    return X.to_bytes(n8, "big") + Y.to_bytes(n8, "big")
