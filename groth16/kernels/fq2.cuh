// fq2.cuh - the quadratic extension Fq2 = Fq[u]/(u^2 + 1), used for G2 on both curves.
// Memory layout c0 || c1, which is snarkjs's G2 coordinate layout.
#pragma once
#include "field.cuh"

namespace zkq {

template <class F>
struct Fp2 {
    using base = F;
    F c0, c1;  // c0 + c1*u

    static ZKQ_HD Fp2 zero() { return {F::zero(), F::zero()}; }
    static ZKQ_HD Fp2 one() { return {F::one(), F::zero()}; }
    ZKQ_HD_HOT bool is_zero() const { return c0.is_zero() && c1.is_zero(); }
    ZKQ_HD bool operator==(const Fp2& o) const { return c0 == o.c0 && c1 == o.c1; }
    ZKQ_HD bool operator!=(const Fp2& o) const { return !(*this == o); }
    ZKQ_HD bool geq_modulus() const { return c0.geq_modulus() || c1.geq_modulus(); }

    ZKQ_HD_HOT Fp2 operator+(const Fp2& b) const { return {c0 + b.c0, c1 + b.c1}; }
    ZKQ_HD_HOT Fp2 operator-(const Fp2& b) const { return {c0 - b.c0, c1 - b.c1}; }
    ZKQ_HD_HOT Fp2 operator-() const { return {-c0, -c1}; }
    ZKQ_HD_HOT Fp2 dbl() const { return {c0.dbl(), c1.dbl()}; }

    // Karatsuba: (a0 + a1 u)(b0 + b1 u) = a0 b0 - a1 b1 + ((a0 + a1)(b0 + b1) - a0 b0 - a1 b1) u
    ZKQ_HD_CALL Fp2 operator*(const Fp2& b) const {
#if defined(ZKQ_X86_ASM) && !defined(__CUDACC__)
        if constexpr (F::BITS == 64 && (F::params::NW == 4 || F::params::NW == 6)) {
            Fp2 r;  // the same product with two Montgomery reductions instead of three
            x86::fp2_mul<typename F::params>(r.c0.v, r.c1.v, c0.v, c1.v, b.c0.v, b.c1.v);
            return r;
        }
#endif
        F t0 = c0 * b.c0, t1 = c1 * b.c1;
        return {t0 - t1, (c0 + c1) * (b.c0 + b.c1) - t0 - t1};
    }
    ZKQ_HD Fp2 operator*(const F& b) const { return {c0 * b, c1 * b}; }
    // (a0 + a1 u)^2 = (a0 + a1)(a0 - a1) + 2 a0 a1 u
    ZKQ_HD_CALL Fp2 sqr() const { return {(c0 + c1) * (c0 - c1), (c0 * c1).dbl()}; }
    ZKQ_HD_HOT Fp2& operator+=(const Fp2& b) { return *this = *this + b; }
    ZKQ_HD_HOT Fp2& operator-=(const Fp2& b) { return *this = *this - b; }
    ZKQ_HD Fp2& operator*=(const Fp2& b) { return *this = *this * b; }

    // 1/(a0 + a1 u) = (a0 - a1 u) / (a0^2 + a1^2); zero maps to zero.
    ZKQ_HD Fp2 inv() const {
        F t = (c0.sqr() + c1.sqr()).inv();
        return {c0 * t, -(c1 * t)};
    }
    ZKQ_HD Fp2 conj() const { return {c0, -c1}; }
    // The norm c0^2 + c1^2 in F: 1/x = conj(x) / norm(x).
    ZKQ_HD_CALL F norm() const {
#if defined(ZKQ_X86_ASM) && !defined(__CUDACC__)
        if constexpr (F::BITS == 64 && (F::params::NW == 4 || F::params::NW == 6)) {
            F r;  // two double-width squares and one Montgomery reduction instead of two
            x86::fp2_norm<typename F::params>(r.v, c0.v, c1.v);
            return r;
        }
#endif
        return c0.sqr() + c1.sqr();
    }
    ZKQ_HD Fp2 from_mont() const { return {c0.from_mont(), c1.from_mont()}; }
    ZKQ_HD Fp2 to_mont() const { return {c0.to_mont(), c1.to_mont()}; }
};

}  // namespace zkq
