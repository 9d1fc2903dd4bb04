// glv.hpp - the GLV endomorphism of G1 and G2 (both curves) and the scalar decomposition
// the MSM uses with it (msm.hpp).
//
// Both curves have j-invariant 0 (y^2 = x^3 + b), so phi(x, y) = (beta x, y) with beta a
// primitive cube root of unity in Fq maps the curve to itself; on the order-r subgroup it
// acts as multiplication by a cube root of unity lambda mod r (lambda^2 + lambda + 1 = 0).
// Since beta lies in Fq, the same map works on the G2 twist over Fq2, but there the
// eigenvalue of a given beta is the OTHER cube root: G1 and G2 use beta and beta^2 for the
// same lambda. Which beta goes with which lambda was found numerically (lambda * G ==
// phi(G) for each group's generator) and is re-checked by tests/test_msm_glv.py.
//
// A scalar k < r becomes k = k1 + k2 lambda (mod r) with |k1|, |k2| < 2^128, so
// k P = k1 P + k2 phi(P): an MSM over 2n points with 128-bit scalars instead of n points
// with 254/255-bit ones, which halves the windows (and their bucket sums).
//
// Decomposition (the textbook GLV rounding): short lattice vectors v1 = (a1, b1),
// v2 = (a2, b2) with a + b lambda = 0 mod r (from the extended Euclidean algorithm on
// (r, lambda)); c1 = round(b2 k / det), c2 = round(-b1 k / det), det = a1 b2 - a2 b1 = +-r,
// then (k1, k2) = (k, 0) - c1 v1 - c2 v2. The divisions are fixed-point: g = round(2^256 b / det)
// precomputed, c = round(k g / 2^256). Whatever c1, c2 come out as, k1 + k2 lambda = k mod r
// holds exactly (only lattice vectors are subtracted); the rounding only bounds the sizes:
// |c - exact| <= 3/4, so |k1| <= 3/4 (|a1| + |a2|) and |k2| <= 3/4 (|b1| + |b2|), below 2^128
// for both curves (bn128 ~2^127.4, bls12381 ~2^127.9).
#pragma once
#include <cstdint>
#include <type_traits>

#include "zkq.hpp"

namespace zkq {

// A signed 256-bit constant as magnitude words and a sign.
struct SignedWords {
    uint64_t w[4];
    bool neg;
};

// The GLV constants of one curve (ids as in zkq.hpp's CurveT).
template <int CURVE> struct Glv;

template <> struct Glv<0> {  // bn128
    static constexpr uint64_t lambda[4] = {0x8b17ea66b99c90ddull, 0x5bfc41088d8daaa7ull, 0xb3c4d79d41a91758ull, 0};
    static constexpr SignedWords a1 = {{0x89d3256894d213e3ull, 0, 0, 0}, false};
    static constexpr SignedWords b1 = {{0x8211bbeb7d4f1128ull, 0x6f4d8248eeb859fcull, 0, 0}, true};
    static constexpr SignedWords a2 = {{0x0be4e1541221250bull, 0x6f4d8248eeb859fdull, 0, 0}, false};
    static constexpr SignedWords b2 = {{0x89d3256894d213e3ull, 0, 0, 0}, false};
    static constexpr SignedWords g1 = {{0xd91d232ec7e0b3d7ull, 0x2ull, 0, 0}, false};
    static constexpr SignedWords g2 = {{0x7a7bd9d4391eb18eull, 0x4ccef014a773d2cfull, 0x2ull, 0}, false};
    // Standard form (not Montgomery); beta_g2 = beta_g1^2.
    static constexpr uint64_t beta_g1[6] = {0x5763473177fffffeull, 0xd4f263f1acdb5c4full, 0x59e26bcea0d48bacull, 0, 0, 0};
    static constexpr uint64_t beta_g2[6] = {0xe4bd44e5607cfd48ull, 0xc28f069fbb966e3dull, 0x5e6dd9e7e0acccb0ull,
                                            0x30644e72e131a029ull, 0, 0};
};

template <> struct Glv<1> {  // bls12381: lambda = z^2 - 1 and lambda^2 + lambda + 1 = r exactly
    static constexpr uint64_t lambda[4] = {0x00000000ffffffffull, 0xac45a4010001a402ull, 0, 0};
    static constexpr SignedWords a1 = {{1, 0, 0, 0}, false};
    static constexpr SignedWords b1 = {{0x0000000100000000ull, 0xac45a4010001a402ull, 0, 0}, false};
    static constexpr SignedWords a2 = {{0x00000000ffffffffull, 0xac45a4010001a402ull, 0, 0}, false};
    static constexpr SignedWords b2 = {{1, 0, 0, 0}, true};
    static constexpr SignedWords g1 = {{2, 0, 0, 0}, false};
    static constexpr SignedWords g2 = {{0x63f6e522f6cfee30ull, 0x7c6becf1e01faaddull, 0x1ull, 0}, false};
    static constexpr uint64_t beta_g1[6] = {0x8bfd00000000aaacull, 0x409427eb4f49fffdull, 0x897d29650fb85f9bull,
                                            0xaa0d857d89759ad4ull, 0xec02408663d4de85ull, 0x1a0111ea397fe699ull};
    static constexpr uint64_t beta_g2[6] = {0x2e01fffffffefffeull, 0xde17d813620a0002ull, 0xddb3a93be6f89688ull,
                                            0xba69c6076a0f77eaull, 0x5f19672fdf76ce51ull, 0};
};

// Bits of |k1|, |k2| (see the header comment); the MSM's windows cover this many bits.
constexpr int GLV_HALF_BITS = 128;

// One half of a decomposed scalar: |k| < 2^128 as two words, and its sign.
struct GlvHalf {
    uint64_t mag[2];
    bool neg;
};

namespace glv_detail {

// out = a * b mod 2^256 (low four words).
inline void mul_lo(const uint64_t* a, const uint64_t* b, uint64_t* out) {
    uint64_t t[4] = {0, 0, 0, 0};
    for (int i = 0; i < 4; i++) {
        unsigned __int128 carry = 0;
        for (int j = 0; i + j < 4; j++) {
            unsigned __int128 p = (unsigned __int128)a[i] * b[j] + t[i + j] + carry;
            t[i + j] = (uint64_t)p;
            carry = p >> 64;
        }
    }
    for (int i = 0; i < 4; i++) out[i] = t[i];
}

// out = round(a * b / 2^256), a and b below 2^256 (the product's words 4..7 after adding 2^255).
inline void mul_round_hi(const uint64_t* a, const uint64_t* b, uint64_t* out) {
    uint64_t t[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int i = 0; i < 4; i++) {
        unsigned __int128 carry = 0;
        for (int j = 0; j < 4; j++) {
            unsigned __int128 p = (unsigned __int128)a[i] * b[j] + t[i + j] + carry;
            t[i + j] = (uint64_t)p;
            carry = p >> 64;
        }
        t[i + 4] = (uint64_t)carry;
    }
    unsigned __int128 s = (unsigned __int128)t[3] + (1ull << 63);
    for (int i = 4; i < 8; i++) {
        s = (s >> 64) + t[i];
        out[i - 4] = (uint64_t)s;
    }
}

// acc += sign * x (mod 2^256).
inline void add_signed(uint64_t* acc, const uint64_t* x, bool negative) {
    unsigned __int128 c = 0;
    if (!negative) {
        for (int i = 0; i < 4; i++) {
            c += (unsigned __int128)acc[i] + x[i];
            acc[i] = (uint64_t)c;
            c >>= 64;
        }
    } else {
        uint64_t borrow = 0;
        for (int i = 0; i < 4; i++) {
            unsigned __int128 d = (unsigned __int128)acc[i] - x[i] - borrow;
            acc[i] = (uint64_t)d;
            borrow = (uint64_t)(d >> 64) & 1;
        }
    }
}

// A two's-complement 256-bit value as a GlvHalf; false when |v| >= 2^128.
inline bool to_half(const uint64_t* v, GlvHalf& out) {
    uint64_t m[4] = {v[0], v[1], v[2], v[3]};
    out.neg = (v[3] >> 63) != 0;
    if (out.neg) {  // magnitude = -v
        unsigned __int128 c = 1;
        for (int i = 0; i < 4; i++) {
            c += (unsigned __int128)(~v[i]);
            m[i] = (uint64_t)c;
            c >>= 64;
        }
    }
    out.mag[0] = m[0];
    out.mag[1] = m[1];
    if (!m[0] && !m[1]) out.neg = false;  // zero has one encoding
    return m[2] == 0 && m[3] == 0;
}

}  // namespace glv_detail

// k (standard form, four words, < r) -> (k1, k2) with k = k1 + k2 lambda mod r, both below
// 2^128 in magnitude. Returns false only if that bound failed (which the constants rule
// out; the MSM reports it as an internal error rather than computing a wrong sum).
template <int CURVE>
inline bool glv_decompose(const uint64_t* k, GlvHalf& k1, GlvHalf& k2) {
    using G = Glv<CURVE>;
    using namespace glv_detail;
    if (k[2] == 0 && k[3] == 0) {  // already short (witness values are often tiny): k2 = 0
        k1 = GlvHalf{{k[0], k[1]}, false};
        k2 = GlvHalf{{0, 0}, false};
        return true;
    }
    uint64_t c1[4], c2[4], t[4];
    mul_round_hi(k, G::g1.w, c1);
    mul_round_hi(k, G::g2.w, c2);
    // k1 = k - c1 a1 - c2 a2, k2 = -c1 b1 - c2 b2 (mod 2^256; the true values are small).
    uint64_t r1[4] = {k[0], k[1], k[2], k[3]}, r2[4] = {0, 0, 0, 0};
    mul_lo(c1, G::a1.w, t);
    add_signed(r1, t, G::g1.neg == G::a1.neg);
    mul_lo(c2, G::a2.w, t);
    add_signed(r1, t, G::g2.neg == G::a2.neg);
    mul_lo(c1, G::b1.w, t);
    add_signed(r2, t, G::g1.neg == G::b1.neg);
    mul_lo(c2, G::b2.w, t);
    add_signed(r2, t, G::g2.neg == G::b2.neg);
    return to_half(r1, k1) && to_half(r2, k2);
}

// The curve id (zkq.hpp's CurveT) of a scalar field type.
template <class Fr>
constexpr int curve_of() {
    static_assert(std::is_same<typename Fr::params, bn254_fr_params>::value ||
                  std::is_same<typename Fr::params, bls12381_fr_params>::value, "unknown scalar field");
    return std::is_same<typename Fr::params, bn254_fr_params>::value ? 0 : 1;
}

// The base field of a coordinate field: Fq for Fq, and Fq for Fq2.
template <class F> struct BaseOf { using type = F; };
template <class B> struct BaseOf<Fp2<B>> { using type = B; };

// beta in Montgomery form for the group whose coordinates live in F (G1: Fq, G2: Fq2).
template <int CURVE, class F>
inline typename BaseOf<F>::type glv_beta() {
    using B = typename BaseOf<F>::type;
    constexpr bool g2 = !std::is_same<B, F>::value;
    const uint64_t* words = g2 ? Glv<CURVE>::beta_g2 : Glv<CURVE>::beta_g1;
    return load_words<B>(words).to_mont();
}

}  // namespace zkq
