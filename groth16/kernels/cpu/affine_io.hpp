// affine_io.hpp - curve points to and from the little-endian Montgomery (LEM) words of the
// .zkey/.ptau sections: one affine point read, Jacobian points written as affine with one
// field inversion for the lot (Montgomery's trick), and a coordinate as the big-endian
// standard-form bytes snarkjs writes (LEMtoU, compressed points); and the dispatch of an
// exported call to its curve and group. Shared by setup.cpp and ptau.cpp.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "zkq.hpp"

namespace zkq {

// The affine point whose LEM words start at `w`.
template <class F>
inline Affine<F> load_point(const uint64_t* w) {
    Affine<F> p;
    std::memcpy(&p, w, sizeof(p));
    return p;
}

// Writes Jacobian points as affine LEM words (infinity = zeros) with one field inversion
// for the lot.
template <class F>
void store_affine(const std::vector<Jacobian<F>>& pts, uint64_t* out) {
    const size_t n = pts.size();
    std::vector<F> pre(n);
    F acc = F::one();
    for (size_t i = 0; i < n; i++) {
        pre[i] = acc;
        if (!pts[i].is_inf()) acc = acc * pts[i].Z;
    }
    F inv = field_inv(acc);
    for (size_t i = n; i-- > 0;) {
        Affine<F> a = Affine<F>::infinity();
        if (!pts[i].is_inf()) {
            const F zi = inv * pre[i];
            inv = inv * pts[i].Z;
            const F zi2 = zi.sqr();
            a = Affine<F>{pts[i].X * zi2, pts[i].Y * zi2 * zi};
        }
        std::memcpy(out + i * (sizeof(Affine<F>) / 8), &a, sizeof(a));
    }
}

// Standard-form big-endian bytes of a base-field element (n8q bytes), as snarkjs's LEMtoU
// writes a coordinate.
template <class Fq>
inline void put_be(const Fq& x, uint8_t* dst) {
    uint64_t w[Fq::params::NW];
    store_words(x.from_mont(), w);
    const int nb = Fq::params::NW * 8;
    const uint8_t* b = reinterpret_cast<const uint8_t*>(w);
    for (int i = 0; i < nb; i++) dst[i] = b[nb - 1 - i];
}

}  // namespace zkq

// The body of an exported call on `curve` (0: bn128, 1: bls12381) and `group` (1: G1, 2: G2):
// CALL_G1 or CALL_G2, with C (the curve) and Fq (its base field) in scope.
#define ZKQ_CURVE_GROUP(group, CALL_G1, CALL_G2)                                  \
    switch (curve) {                                                              \
        case 0: { constexpr int C = 0; using Fq = typename zkq::CurveT<C>::Fq;   \
                  return group == 1 ? (CALL_G1) : (CALL_G2); }                  \
        case 1: { constexpr int C = 1; using Fq = typename zkq::CurveT<C>::Fq;   \
                  return group == 1 ? (CALL_G1) : (CALL_G2); }                  \
        default: return ZKQ_ERR_CURVE;                                            \
    }
