// field.cuh - prime-field arithmetic in Montgomery form, generic over the limb width.
//
// Fp<Params, L> holds one element as N little-endian limbs of type L (uint64_t on the
// host, uint32_t on the GPU; tests instantiate both on the host so the GPU's limb
// arithmetic is checked here too). Elements are kept fully reduced, in [0, p).
// The memory layout with 64-bit limbs is exactly snarkjs's "LEM" encoding, so points read
// from a .zkey are used in place.
//
// Multiplication is CIOS Montgomery without the final carry word: valid because every
// modulus here has its top bit clear and its top limb below 2^(bits-1) - 1
// (BN254 0x3064.., BLS12-381 q 0x1a01.., r 0x73ed..).
#pragma once
#include "common.cuh"
#if defined(ZKQ_X86_ASM) && !defined(__CUDACC__)
#include "cpu/mont_x86.hpp"  // mulx/adx product; the CPU library's fast build only (native.py)
#endif
#if defined(__CUDACC__)
#include "mont32.cuh"  // PTX carry chains: the GPU's product, square, sum and difference
#endif

namespace zkq {

template <class P, class L = default_limb>
struct Fp {
    using limb_t = L;
    using wide_t = typename wide<L>::type;
    using params = P;
    static constexpr int BITS = 8 * sizeof(L);
    static constexpr int N = P::NW * 64 / BITS;  // limbs per element
    static constexpr int BYTES = P::NW * 8;

    L v[N];

    // Limb i of a 64-bit-word constant, split for 32-bit limbs.
    template <class W>
    static ZKQ_HD_HOT constexpr L limb(W words, int i) {
        return BITS == 64 ? (L)words(i) : (L)(words(i / 2) >> (32 * (i % 2)));
    }
    static ZKQ_HD_HOT constexpr L mod(int i) { return limb(P::p, i); }

    // -p^-1 mod 2^BITS, by Newton iteration (each step doubles the correct low bits).
    static ZKQ_HD_HOT constexpr L minv() {
        L x = 1;
        for (int k = 0; k < 7; k++) x = x * (L)(2 - mod(0) * x);
        return (L)(0 - x);
    }

    static ZKQ_HD_HOT Fp zero() { Fp r; for (int i = 0; i < N; i++) r.v[i] = 0; return r; }
    static ZKQ_HD_HOT Fp one() { Fp r; for (int i = 0; i < N; i++) r.v[i] = limb(P::r, i); return r; }
    static ZKQ_HD Fp r2() { Fp r; for (int i = 0; i < N; i++) r.v[i] = limb(P::r2, i); return r; }

    // Montgomery form of a small integer.
    static ZKQ_HD Fp from_uint(uint32_t x) {
        Fp r = zero();
        r.v[0] = x;
        return r * r2();
    }

    ZKQ_HD_HOT bool is_zero() const {
        L acc = 0;
        for (int i = 0; i < N; i++) acc |= v[i];
        return acc == 0;
    }
    ZKQ_HD_HOT bool operator==(const Fp& o) const {
        L acc = 0;
        for (int i = 0; i < N; i++) acc |= v[i] ^ o.v[i];
        return acc == 0;
    }
    ZKQ_HD_HOT bool operator!=(const Fp& o) const { return !(*this == o); }

    // True when the raw limbs are >= p (an unreduced, i.e. invalid, encoding).
    ZKQ_HD bool geq_modulus() const {
        for (int i = N - 1; i >= 0; i--) {
            if (v[i] != mod(i)) return v[i] > mod(i);
        }
        return true;
    }

    // this -= p when this >= p; used after additions, whose sum is below 2p < 2^(N*BITS).
    ZKQ_HD_HOT void reduce_once() {
        L t[N];
        L borrow = 0;
        for (int i = 0; i < N; i++) {
            wide_t d = (wide_t)v[i] - mod(i) - borrow;
            t[i] = (L)d;
            borrow = (L)(d >> BITS) & 1;
        }
        if (!borrow)
            for (int i = 0; i < N; i++) v[i] = t[i];
    }

    ZKQ_HD_HOT Fp operator+(const Fp& b) const {
#if defined(__CUDA_ARCH__)
        if constexpr (BITS == 32) {
            Fp r;
            chain::add<Fp, chain::PtxOps>(r.v, v, b.v);
            return r;
        }
#endif
#if defined(ZKQ_X86_ASM) && !defined(__CUDACC__)
        if constexpr (BITS == 64 && P::NW == 4) {
            Fp r;
            x86::mod_add4<P>(r.v, v, b.v);
            return r;
        } else if constexpr (BITS == 64 && P::NW == 6) {
            Fp r;
            x86::mod_add6<P>(r.v, v, b.v);
            return r;
        }
#endif
        Fp r;
        L carry = 0;
        for (int i = 0; i < N; i++) {
            wide_t s = (wide_t)v[i] + b.v[i] + carry;
            r.v[i] = (L)s;
            carry = (L)(s >> BITS);
        }
        r.reduce_once();
        return r;
    }

    ZKQ_HD_HOT Fp operator-(const Fp& b) const {
#if defined(__CUDA_ARCH__)
        if constexpr (BITS == 32) {
            Fp r;
            chain::sub<Fp, chain::PtxOps>(r.v, v, b.v);
            return r;
        }
#endif
#if defined(ZKQ_X86_ASM) && !defined(__CUDACC__)
        if constexpr (BITS == 64 && P::NW == 4) {
            Fp r;
            x86::mod_sub4<P>(r.v, v, b.v);
            return r;
        } else if constexpr (BITS == 64 && P::NW == 6) {
            Fp r;
            x86::mod_sub6<P>(r.v, v, b.v);
            return r;
        }
#endif
        Fp r;
        L borrow = 0;
        for (int i = 0; i < N; i++) {
            wide_t d = (wide_t)v[i] - b.v[i] - borrow;
            r.v[i] = (L)d;
            borrow = (L)(d >> BITS) & 1;
        }
        if (borrow) {  // went below zero: add p back
            L carry = 0;
            for (int i = 0; i < N; i++) {
                wide_t s = (wide_t)r.v[i] + mod(i) + carry;
                r.v[i] = (L)s;
                carry = (L)(s >> BITS);
            }
        }
        return r;
    }

    ZKQ_HD_HOT Fp operator-() const { return zero() - *this; }
    ZKQ_HD_HOT Fp dbl() const { return *this + *this; }

    // a*b*R^-1 mod p: the GPU's carry chains (mont32.cuh), x86 asm, or the portable CIOS.
    ZKQ_HD_HOT Fp operator*(const Fp& b) const {
#if defined(__CUDA_ARCH__)
        if constexpr (BITS == 32) {
            Fp r;
            chain::mul<Fp, chain::PtxOps>(r.v, v, b.v);
            return r;
        }
#endif
#if defined(ZKQ_X86_ASM) && !defined(__CUDACC__)
        if constexpr (BITS == 64 && (P::NW == 4 || P::NW == 6)) {
            Fp r;
            x86::mont_mul<P>(r.v, v, b.v);
            return r;
        }
#endif
        return mul_portable(*this, b);
    }

    // a*b*R^-1 mod p in portable C++ (CIOS, no final carry word; see the header comment):
    // the host emulation's product, and the GPU's reference in its self-test.
    static ZKQ_HD_HOT Fp mul_portable(const Fp& a, const Fp& b) {
        const L* v = a.v;
        L t[N];
        for (int i = 0; i < N; i++) t[i] = 0;
        const L inv = minv();
        for (int i = 0; i < N; i++) {
            wide_t uv = (wide_t)v[0] * b.v[i] + t[0];
            L A = (L)(uv >> BITS);
            L m = (L)uv * inv;
            wide_t uv2 = (wide_t)m * mod(0) + (L)uv;
            L C = (L)(uv2 >> BITS);
            for (int j = 1; j < N; j++) {
                uv = (wide_t)v[j] * b.v[i] + t[j] + A;
                A = (L)(uv >> BITS);
                uv2 = (wide_t)m * mod(j) + (L)uv + C;
                C = (L)(uv2 >> BITS);
                t[j - 1] = (L)uv2;
            }
            t[N - 1] = A + C;
        }
        Fp r;
        for (int i = 0; i < N; i++) r.v[i] = t[i];
        r.reduce_once();
        return r;
    }

    ZKQ_HD_HOT Fp sqr() const {
#if defined(__CUDA_ARCH__)
        if constexpr (BITS == 32) {  // a dedicated square: half the cross products
            Fp r;
            chain::sqr<Fp, chain::PtxOps>(r.v, v);
            return r;
        }
#endif
        return *this * *this;
    }
    ZKQ_HD_HOT Fp& operator+=(const Fp& b) { return *this = *this + b; }
    ZKQ_HD_HOT Fp& operator-=(const Fp& b) { return *this = *this - b; }
    ZKQ_HD_HOT Fp& operator*=(const Fp& b) { return *this = *this * b; }

    // Out of / into Montgomery form: x*R^-1 and x*R.
    ZKQ_HD Fp from_mont() const { Fp o = zero(); o.v[0] = 1; return *this * o; }
    ZKQ_HD Fp to_mont() const { return *this * r2(); }

    // this^e for an exponent given as NW little-endian 64-bit words (standard form).
    template <class W>
    ZKQ_HD Fp pow_words(W e_words, int nw) const {
        Fp acc = one();
        for (int i = nw * 64 - 1; i >= 0; i--) {
            acc = acc.sqr();
            if ((e_words(i / 64) >> (i % 64)) & 1) acc = acc * *this;
        }
        return acc;
    }

    // Inverse by Fermat: this^(p-2). The inverse of zero is returned as zero.
    ZKQ_HD Fp inv() const {
        struct pm2 {
            ZKQ_HD uint64_t operator()(int i) const { return i == 0 ? P::p(0) - 2 : P::p(i); }
        };
        return pow_words(pm2{}, P::NW);
    }

    // Bit i of the standard-form value held in v (callers pass from_mont()'d values).
    ZKQ_HD uint32_t bit(int i) const { return (uint32_t)(v[i / BITS] >> (i % BITS)) & 1; }
};

}  // namespace zkq
