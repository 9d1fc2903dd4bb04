// curve.cuh - short Weierstrass points y^2 = x^3 + b (a = 0) over a field F: G1 over Fq,
// G2 over Fq2, on BN254 and BLS12-381.
//
// Affine points use snarkjs's encoding: the point at infinity is x = y = 0 (never on the
// curve, since b != 0). Jacobian points (X, Y, Z) stand for (X/Z^2, Y/Z^3); Z = 0 is
// infinity. Formulas are the a = 0 ones of the Explicit-Formulas Database
// (dbl-2009-l, add-2007-bl, madd-2007-bl); each handles doubling and infinity itself, so
// callers may add any two points.
#pragma once
#include "field.cuh"

namespace zkq {

template <class F>
struct Affine {
    F x, y;
    static ZKQ_HD Affine infinity() { return {F::zero(), F::zero()}; }
    ZKQ_HD bool is_inf() const { return x.is_zero() && y.is_zero(); }
    ZKQ_HD Affine operator-() const { return is_inf() ? *this : Affine{x, -y}; }
    ZKQ_HD bool operator==(const Affine& o) const { return x == o.x && y == o.y; }
    // y^2 == x^3 + b; infinity counts as on the curve.
    ZKQ_HD bool on_curve(const F& b) const { return is_inf() || y.sqr() == x.sqr() * x + b; }
};

template <class F>
struct Jacobian {
    F X, Y, Z;

    static ZKQ_HD Jacobian infinity() { return {F::one(), F::one(), F::zero()}; }
    static ZKQ_HD Jacobian from_affine(const Affine<F>& a) {
        return a.is_inf() ? infinity() : Jacobian{a.x, a.y, F::one()};
    }
    ZKQ_HD bool is_inf() const { return Z.is_zero(); }
    ZKQ_HD Jacobian operator-() const { return {X, -Y, Z}; }

    // dbl-2009-l: 2M + 5S
    ZKQ_HD Jacobian dbl() const {
        if (is_inf()) return *this;
        F A = X.sqr(), B = Y.sqr(), C = B.sqr();
        F D = ((X + B).sqr() - A - C).dbl();
        F E = A.dbl() + A, Fv = E.sqr();
        Jacobian r;
        r.X = Fv - D.dbl();
        r.Y = E * (D - r.X) - C.dbl().dbl().dbl();
        r.Z = (Y * Z).dbl();
        return r;
    }

    // add-2007-bl: 11M + 5S
    ZKQ_HD Jacobian operator+(const Jacobian& q) const {
        if (is_inf()) return q;
        if (q.is_inf()) return *this;
        F Z1Z1 = Z.sqr(), Z2Z2 = q.Z.sqr();
        F U1 = X * Z2Z2, U2 = q.X * Z1Z1;
        F S1 = Y * q.Z * Z2Z2, S2 = q.Y * Z * Z1Z1;
        F H = U2 - U1, rr = (S2 - S1).dbl();
        if (H.is_zero()) return rr.is_zero() ? dbl() : infinity();
        F I = H.dbl().sqr(), J = H * I, V = U1 * I;
        Jacobian r;
        r.X = rr.sqr() - J - V.dbl();
        r.Y = rr * (V - r.X) - (S1 * J).dbl();
        r.Z = ((Z + q.Z).sqr() - Z1Z1 - Z2Z2) * H;
        return r;
    }

    // madd-2007-bl (q affine): 7M + 4S
    ZKQ_HD Jacobian add_affine(const Affine<F>& q) const {
        if (q.is_inf()) return *this;
        if (is_inf()) return from_affine(q);
        F Z1Z1 = Z.sqr();
        F U2 = q.x * Z1Z1, S2 = q.y * Z * Z1Z1;
        F H = U2 - X, rr = (S2 - Y).dbl();
        if (H.is_zero()) return rr.is_zero() ? dbl() : infinity();
        F HH = H.sqr(), I = HH.dbl().dbl(), J = H * I, V = X * I;
        Jacobian r;
        r.X = rr.sqr() - J - V.dbl();
        r.Y = rr * (V - r.X) - (Y * J).dbl();
        r.Z = (Z + H).sqr() - Z1Z1 - HH;
        return r;
    }

    ZKQ_HD Jacobian& operator+=(const Jacobian& q) { return *this = *this + q; }
    ZKQ_HD Jacobian operator-(const Jacobian& q) const { return *this + (-q); }

    ZKQ_HD Affine<F> to_affine() const {
        if (is_inf()) return Affine<F>::infinity();
        F zi = Z.inv(), zi2 = zi.sqr();
        return {X * zi2, Y * zi2 * zi};
    }

    // Projective equality: X1 Z2^2 == X2 Z1^2 and Y1 Z2^3 == Y2 Z1^3.
    ZKQ_HD bool operator==(const Jacobian& q) const {
        if (is_inf() || q.is_inf()) return is_inf() && q.is_inf();
        F z1 = Z.sqr(), z2 = q.Z.sqr();
        return X * z2 == q.X * z1 && Y * z2 * q.Z == q.Y * z1 * Z;
    }

    // k*P for a standard-form scalar of nw little-endian 64-bit words (double-and-add,
    // not constant time: used on public data and for blinding, where the scalar is
    // fresh and never reused).
    ZKQ_HD Jacobian mul_words(const uint64_t* k, int nw) const {
        Jacobian acc = infinity();
        for (int i = nw * 64 - 1; i >= 0; i--) {
            acc = acc.dbl();
            if ((k[i / 64] >> (i % 64)) & 1) acc += *this;
        }
        return acc;
    }
};

}  // namespace zkq
