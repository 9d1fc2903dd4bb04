// xyzz.cuh - points in XYZZ coordinates ("extended Jacobian"), the GPU MSM's accumulator.
//
// (X, Y, ZZ, ZZZ) stands for the affine point (X/ZZ, Y/ZZZ), with ZZ^3 = ZZZ^2; ZZ = 0 is
// infinity (all-zero bytes are infinity, so a zeroed buffer is a buffer of infinities).
// Adding an affine point costs 8M + 2S (Jacobian's madd: 7M + 4S) and, unlike Jacobian,
// no squaring of the accumulator's Z is needed for the next addition, which is why GPU
// MSMs use it. Formulas are the a = 0 cases of the Explicit-Formulas Database's "xyzz"
// family: madd-2008-s, add-2008-s, dbl-2008-s-1. Like curve.cuh, every function handles
// infinity, doubling and P + (-P) itself, so callers may add any two points.
//
// Plain C++ like the other headers: compiled for the GPU by nvcc/NVRTC, and for the host by
// g++ (the emulation, groth16/backends/cuda_emu.py). On the GPU only G1's mixed addition
// (add_affine over Fq: the MSM's bucket accumulation, nearly all of its additions) is
// inlined where it is used, so those points stay in registers. Everything else is a real
// call (ZKQ_HD_CALL, common.cuh): G2's operations (inlined, each use of a BLS12-381 G2
// addition is tens of thousands of instructions), and the general addition and doubling of
// both groups, which the trees and reductions use a few thousand times per MSM against the
// accumulation's n per window; inlining those too made ptxas take seven minutes on G1 alone.
#pragma once
#include "curve.cuh"
#include "fq2.cuh"

namespace zkq {

// Whether Xyzz<F>'s mixed addition is a call (G2) rather than inlined (G1).
template <class F>
struct xyzz_calls {
    static constexpr bool value = false;
};
template <class B>
struct xyzz_calls<Fp2<B>> {
    static constexpr bool value = true;
};

template <class F>
struct Xyzz {
    F X, Y, ZZ, ZZZ;

    static ZKQ_HD Xyzz infinity() { return {F::zero(), F::zero(), F::zero(), F::zero()}; }
    static ZKQ_HD Xyzz from_affine(const Affine<F>& a) {
        return a.is_inf() ? infinity() : Xyzz{a.x, a.y, F::one(), F::one()};
    }
    ZKQ_HD bool is_inf() const { return ZZ.is_zero(); }
    ZKQ_HD Xyzz operator-() const { return {X, -Y, ZZ, ZZZ}; }

    ZKQ_HD Xyzz dbl() const { return dbl_call(); }
    ZKQ_HD Xyzz add_affine(const Affine<F>& q) const {
        if constexpr (xyzz_calls<F>::value) return add_affine_call(q);
        else return add_affine_body(q);
    }
    ZKQ_HD Xyzz operator+(const Xyzz& q) const { return add_call(q); }
    ZKQ_HD_CALL Xyzz dbl_call() const { return dbl_body(); }
    ZKQ_HD_CALL Xyzz add_affine_call(const Affine<F>& q) const { return add_affine_body(q); }
    ZKQ_HD_CALL Xyzz add_call(const Xyzz& q) const { return add_body(q); }

    // dbl-2008-s-1 (a = 0): 2M + 4S + 3M for the Z's. A point with y = 0 doubles to ZZ = 0.
    ZKQ_HD Xyzz dbl_body() const {
        if (is_inf()) return *this;
        F U = Y.dbl(), V = U.sqr(), W = U * V, S = X * V;
        F XX = X.sqr(), M = XX.dbl() + XX;
        Xyzz r;
        r.X = M.sqr() - S.dbl();
        r.Y = M * (S - r.X) - W * Y;
        r.ZZ = V * ZZ;
        r.ZZZ = W * ZZZ;
        return r;
    }

    // madd-2008-s: this + q for an affine q (8M + 2S).
    ZKQ_HD Xyzz add_affine_body(const Affine<F>& q) const {
        if (q.is_inf()) return *this;
        if (is_inf()) return from_affine(q);
        F U2 = q.x * ZZ, S2 = q.y * ZZZ;
        F P = U2 - X, R = S2 - Y;
        if (P.is_zero()) return R.is_zero() ? dbl() : infinity();  // q == this, or q == -this
        F PP = P.sqr(), PPP = P * PP, Q = X * PP;
        Xyzz r;
        r.X = R.sqr() - PPP - Q.dbl();
        r.Y = R * (Q - r.X) - Y * PPP;
        r.ZZ = ZZ * PP;
        r.ZZZ = ZZZ * PPP;
        return r;
    }

    // add-2008-s: this + q (12M + 2S).
    ZKQ_HD Xyzz add_body(const Xyzz& q) const {
        if (q.is_inf()) return *this;
        if (is_inf()) return q;
        F U1 = X * q.ZZ, U2 = q.X * ZZ;
        F S1 = Y * q.ZZZ, S2 = q.Y * ZZZ;
        F P = U2 - U1, R = S2 - S1;
        if (P.is_zero()) return R.is_zero() ? dbl() : infinity();
        F PP = P.sqr(), PPP = P * PP, Q = U1 * PP;
        Xyzz r;
        r.X = R.sqr() - PPP - Q.dbl();
        r.Y = R * (Q - r.X) - S1 * PPP;
        r.ZZ = ZZ * q.ZZ * PP;
        r.ZZZ = ZZZ * q.ZZZ * PPP;
        return r;
    }
    ZKQ_HD Xyzz& operator+=(const Xyzz& q) { return *this = *this + q; }

    // k * this for a small k (double-and-add from k's top bit).
    ZKQ_HD Xyzz mul_small(uint32_t k) const {
        Xyzz acc = infinity();
        for (int i = 31; i >= 0; i--) {
            if (!acc.is_inf()) acc = acc.dbl();
            if ((k >> i) & 1) acc += *this;
        }
        return acc;
    }

    // The same point in Jacobian coordinates without an inversion: Z = ZZ*ZZZ, so that
    // X/Z^2 = X*ZZ*ZZZ^2 / (ZZ*ZZZ)^2 and Y/Z^3 = Y*ZZ^3*ZZZ^2 / (ZZ*ZZZ)^3.
    ZKQ_HD Jacobian<F> to_jacobian() const {
        if (is_inf()) return Jacobian<F>::infinity();
        F Z3sq = ZZZ.sqr();
        return Jacobian<F>{X * ZZ * Z3sq, Y * ZZ.sqr() * ZZ * Z3sq, ZZ * ZZZ};
    }

    ZKQ_HD Affine<F> to_affine() const {
        if (is_inf()) return Affine<F>::infinity();
        return {X * ZZ.inv(), Y * ZZZ.inv()};
    }
};

}  // namespace zkq
