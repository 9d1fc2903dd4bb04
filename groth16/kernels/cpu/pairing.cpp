// pairing.cpp - C ABI of the pairing, point validation and batched Groth16 verification.
//
// Curve ids: 0 = bn128, 1 = bls12381. Points are affine in the .zkey encoding: little-endian
// 64-bit words, each coordinate in Montgomery form, G1 = x || y, G2 = x.c0 || x.c1 || y.c0 || y.c1,
// infinity = all zeros. Scalars are standard form, 4 words, and must be < r.
//
// Return codes (mirrored in groth16/verifier.py):
//   zkq_pairing_check, zkq_groth16_verify_batch: 1 = the product is 1 (valid), 0 = it is not;
//   negative = error: -ZKQ_ERR_CURVE, -ZKQ_ERR_ARG, -ZKQ_ERR_ALLOC, -ZKQ_ERR_INTERNAL,
//   -ZKQ_ERR_SCALAR_RANGE (a public signal or rho >= r), -ZKQ_ERR_POINT_RANGE /
//   -ZKQ_ERR_POINT_CURVE (an input of zkq_pairing_check, or a verification-key point, has a
//   coordinate >= q or is off the curve), and for zkq_groth16_verify_batch
//   -(ZKQ_PROOF_POINT_BASE + 3*i + k): point k (0 = A, 1 = B, 2 = C) of proof i fails
//   zkq_g1_validate / zkq_g2_validate.
//   zkq_g1_validate, zkq_g2_validate: 0 ok, 1 coordinate >= q, 2 not on the curve, 3 not in
//   the r-order subgroup, -ZKQ_ERR_CURVE unknown curve.
// Verification-key points are checked for range and curve membership only (the key is
// trusted input from the .zkey); proof points also get the subgroup check.
#include <cstring>
#include <new>
#include <vector>

#include "errors.hpp"
#include "pairing.cuh"

#define ZKQ_PROOF_POINT_BASE 1000

namespace {

using namespace zkq;

template <class C> using G1A = Affine<typename C::Fq>;
template <class C> using G2A = Affine<typename C::F2>;
template <class C> using G1J = Jacobian<typename C::Fq>;

// Fq2 with its products as calls, for the G2 point arithmetic of the subgroup check:
// curve.cuh's Jacobian<Fp2> with every Fq product inlined is ~0.2 MB of code per curve
// and dominates this file's compile time. Same layout as Fp2.
template <class F2>
struct F2c {
    F2 a;
    static F2c zero() { return {F2::zero()}; }
    static F2c one() { return {F2::one()}; }
    bool is_zero() const { return a.is_zero(); }
    bool operator==(const F2c& o) const { return a == o.a; }
    F2c operator+(const F2c& o) const { return {a + o.a}; }
    F2c operator-(const F2c& o) const { return {a - o.a}; }
    F2c operator-() const { return {-a}; }
    F2c dbl() const { return {a.dbl()}; }
    F2c operator*(const F2c& o) const { return {mul2(a, o.a)}; }
    F2c sqr() const { return {sqr2(a)}; }
    F2c inv() const { return {a.inv()}; }
    F2c& operator+=(const F2c& o) { return *this = *this + o; }
};
template <class C> using G2J = Jacobian<F2c<typename C::F2>>;

template <class C>
G1A<C> load_g1(const uint64_t* w) {
    using Fq = typename C::Fq;
    return {fp_from_words<Fq>(w), fp_from_words<Fq>(w + C::NW)};
}
template <class C>
G2A<C> load_g2(const uint64_t* w) {
    using Fq = typename C::Fq;
    const int n = C::NW;
    return {{fp_from_words<Fq>(w), fp_from_words<Fq>(w + n)},
            {fp_from_words<Fq>(w + 2 * n), fp_from_words<Fq>(w + 3 * n)}};
}

// The group order r as 4 words, standard form.
template <class C>
void order_words(uint64_t out[4]) {
    for (int i = 0; i < 4; i++) out[i] = C::Fr::params::p(i);
}

// Point operations as real calls (see ZKQ_HD_BIG in pairing.cuh: compile time).
template <class F> __attribute__((noinline)) Jacobian<F> jdbl(const Jacobian<F>& p) { return p.dbl(); }
template <class F> __attribute__((noinline)) Jacobian<F> jadd(const Jacobian<F>& p, const Jacobian<F>& q) { return p + q; }
template <class F> __attribute__((noinline)) Affine<F> jaffine(const Jacobian<F>& p) { return p.to_affine(); }

// k*P for a standard-form scalar (4 words), skipping leading zero bits.
template <class F>
__attribute__((noinline)) Jacobian<F> mul_scalar(const Jacobian<F>& p, const uint64_t* k) {
    int top = 255;
    while (top >= 0 && !((k[top / 64] >> (top % 64)) & 1)) top--;
    Jacobian<F> acc = Jacobian<F>::infinity();
    for (int i = top; i >= 0; i--) {
        acc = jdbl(acc);
        if ((k[i / 64] >> (i % 64)) & 1) acc = jadd(acc, p);
    }
    return acc;
}

template <class C>
int g1_check(const G1A<C>& p, bool subgroup) {
    if (p.x.geq_modulus() || p.y.geq_modulus()) return 1;
    if (!p.on_curve(C::b1())) return 2;
    if (subgroup && C::G1_COFACTOR && !p.is_inf()) {
        uint64_t r[4];
        order_words<C>(r);
        if (!mul_scalar(G1J<C>::from_affine(p), r).is_inf()) return 3;
    }
    return 0;
}

template <class C>
int g2_check(const G2A<C>& p, bool subgroup) {
    if (p.x.geq_modulus() || p.y.geq_modulus()) return 1;
    if (!p.on_curve(twist_b<C>())) return 2;
    if (subgroup && !p.is_inf()) {
        uint64_t r[4];
        order_words<C>(r);
        Affine<F2c<typename C::F2>> pc{{p.x}, {p.y}};
        if (!mul_scalar(G2J<C>::from_affine(pc), r).is_inf()) return 3;
    }
    return 0;
}

// 0 when prod e(P_i, Q_i) after the final exponentiation is one.
template <class C>
bool product_is_one(const std::vector<G1A<C>>& ps, const std::vector<G2A<C>>& qs) {
    std::vector<G2Proj<C>> work(ps.size());
    Fp12<C> f = miller_loop<C>(ps.data(), qs.data(), (int)ps.size(), work.data());
    return final_exponentiation<C>(f).is_one();
}

template <class C>
int pairing_check(const uint64_t* g1s, const uint64_t* g2s, uint64_t n) {
    std::vector<G1A<C>> ps(n);
    std::vector<G2A<C>> qs(n);
    for (uint64_t i = 0; i < n; i++) {
        ps[i] = load_g1<C>(g1s + 2 * C::NW * i);
        qs[i] = load_g2<C>(g2s + 4 * C::NW * i);
        int a = g1_check<C>(ps[i], false), b = g2_check<C>(qs[i], false);
        if (a == 1 || b == 1) return -ZKQ_ERR_POINT_RANGE;
        if (a == 2 || b == 2) return -ZKQ_ERR_POINT_CURVE;
    }
    return product_is_one<C>(ps, qs) ? 1 : 0;
}

// e(P, Q) as snarkjs publishes it (vk_alphabeta_12). snarkjs's final exponentiations raise
// to a multiple of (q^12 - 1)/r: on BN254 the Fuentes-Castaneda chain adds the factor
// 2x(6x^2 + 3x + 1), on BLS12-381 the factor 3 (which our fast chain also carries). Checked
// against snarkjs's verification keys by tests/test_interop.py. Writes the Fq12 as 12
// Montgomery Fq elements, c0.c0.c0 first (snarkjs's nesting order).
static const uint64_t BN_SNARKJS_FACTOR[3] = {0x2e5d4e223ddedaf4ull, 0x1ea96b02d9d9e38dull, 0x3bec47df15e307c8ull};

template <class C>
int pairing_value(const uint64_t* g1, const uint64_t* g2, uint64_t* out) {
    std::vector<G1A<C>> ps{load_g1<C>(g1)};
    std::vector<G2A<C>> qs{load_g2<C>(g2)};
    int a = g1_check<C>(ps[0], false), b = g2_check<C>(qs[0], false);
    if (a == 1 || b == 1) return -ZKQ_ERR_POINT_RANGE;
    if (a == 2 || b == 2) return -ZKQ_ERR_POINT_CURVE;
    std::vector<G2Proj<C>> work(1);
    Fp12<C> f = miller_loop<C>(ps.data(), qs.data(), 1, work.data());
    f = C::IS_BN ? final_exponentiation<C>(f).pow_words(BN_SNARKJS_FACTOR, 190) : final_exponentiation<C>(f);
    static_assert(sizeof(f) == 12 * C::NW * 8, "Fp12 is 12 packed Fq elements");
    std::memcpy(out, &f, sizeof(f));
    return 0;
}

template <class C>
bool scalar_below_r(const uint64_t* k) {
    for (int i = 3; i >= 0; i--) {
        uint64_t m = C::Fr::params::p(i);
        if (k[i] != m) return k[i] < m;
    }
    return false;
}

template <class C>
typename C::Fr load_words_fr(const uint64_t* w) {
    using Fr = typename C::Fr;
    return fp_from_words<Fr>(w);
}

template <class C>
void store_scalar(const typename C::Fr& x, uint64_t out[4]) {
    for (int i = 0; i < 4; i++) out[i] = 0;
    for (int i = 0; i < C::Fr::N; i++) {
        int bit = i * C::Fr::BITS;
        out[bit / 64] |= (uint64_t)x.v[i] << (bit % 64);
    }
}

// prod_i e(-rho_i A_i, B_i) * e(sum rho_i alpha, beta) * e(sum rho_i vk_x_i, gamma)
//   * e(sum rho_i C_i, delta) == 1, with vk_x_i = IC_0 + sum_j pub_ij IC_j, so that
//   sum_i rho_i vk_x_i = (sum_i rho_i) IC_0 + sum_j (sum_i rho_i pub_ij) IC_j: one MSM over IC.
template <class C>
int verify_batch(const uint64_t* alpha1, const uint64_t* beta2, const uint64_t* gamma2,
                 const uint64_t* delta2, const uint64_t* ic, uint64_t n_ic,
                 const uint64_t* proofs_a, const uint64_t* proofs_b, const uint64_t* proofs_c,
                 const uint64_t* publics, const uint64_t* rho, uint64_t n_proofs) {
    using Fr = typename C::Fr;
    const int nw = C::NW;
    if (n_ic == 0 || n_proofs == 0) return -ZKQ_ERR_ARG;
    const uint64_t n_pub = n_ic - 1;

    // The key: range and curve only.
    G1A<C> alpha = load_g1<C>(alpha1);
    G2A<C> beta = load_g2<C>(beta2), gamma = load_g2<C>(gamma2), delta = load_g2<C>(delta2);
    std::vector<G1A<C>> ics(n_ic);
    int bad = g1_check<C>(alpha, false);
    for (const G2A<C>* q : {&beta, &gamma, &delta}) bad = bad ? bad : g2_check<C>(*q, false);
    for (uint64_t j = 0; j < n_ic; j++) {
        ics[j] = load_g1<C>(ic + 2 * nw * j);
        bad = bad ? bad : g1_check<C>(ics[j], false);
    }
    if (bad == 1) return -ZKQ_ERR_POINT_RANGE;
    if (bad == 2) return -ZKQ_ERR_POINT_CURVE;

    for (uint64_t i = 0; i < n_proofs; i++) {
        if (!scalar_below_r<C>(rho + 4 * i)) return -ZKQ_ERR_SCALAR_RANGE;
        for (uint64_t j = 0; j < n_pub; j++)
            if (!scalar_below_r<C>(publics + 4 * (i * n_pub + j))) return -ZKQ_ERR_SCALAR_RANGE;
    }

    std::vector<G1A<C>> ps;
    std::vector<G2A<C>> qs;
    ps.reserve(n_proofs + 3);
    qs.reserve(n_proofs + 3);
    G1J<C> c_sum = G1J<C>::infinity();
    for (uint64_t i = 0; i < n_proofs; i++) {
        G1A<C> a = load_g1<C>(proofs_a + 2 * nw * i);
        G2A<C> b = load_g2<C>(proofs_b + 4 * nw * i);
        G1A<C> c = load_g1<C>(proofs_c + 2 * nw * i);
        if (g1_check<C>(a, true)) return -(int)(ZKQ_PROOF_POINT_BASE + 3 * i + 0);
        if (g2_check<C>(b, true)) return -(int)(ZKQ_PROOF_POINT_BASE + 3 * i + 1);
        if (g1_check<C>(c, true)) return -(int)(ZKQ_PROOF_POINT_BASE + 3 * i + 2);
        const uint64_t* k = rho + 4 * i;
        // -rho_i A_i
        ps.push_back(jaffine(-mul_scalar(G1J<C>::from_affine(a), k)));
        qs.push_back(b);
        c_sum = jadd(c_sum, mul_scalar(G1J<C>::from_affine(c), k));
    }

    // Scalars of the IC MSM. A Montgomery product of a Montgomery-form rho and a
    // standard-form signal is the standard-form product, so s_j comes out standard.
    std::vector<Fr> s(n_ic, Fr::zero());
    for (uint64_t i = 0; i < n_proofs; i++) {
        Fr r_std = load_words_fr<C>(rho + 4 * i);
        Fr r_mont = r_std.to_mont();
        s[0] += r_std;
        for (uint64_t j = 0; j < n_pub; j++)
            s[j + 1] += r_mont * load_words_fr<C>(publics + 4 * (i * n_pub + j));
    }
    uint64_t w[4];
    G1J<C> vk_sum = G1J<C>::infinity();
    for (uint64_t j = 0; j < n_ic; j++) {
        store_scalar<C>(s[j], w);
        vk_sum = jadd(vk_sum, mul_scalar(G1J<C>::from_affine(ics[j]), w));
    }
    store_scalar<C>(s[0], w);  // sum rho_i
    ps.push_back(jaffine(mul_scalar(G1J<C>::from_affine(alpha), w)));
    qs.push_back(beta);
    ps.push_back(jaffine(vk_sum));
    qs.push_back(gamma);
    ps.push_back(jaffine(c_sum));
    qs.push_back(delta);
    return product_is_one<C>(ps, qs) ? 1 : 0;
}

template <class Fn>
int guarded_neg(Fn&& fn) {
    try {
        return fn();
    } catch (const std::bad_alloc&) {
        return -ZKQ_ERR_ALLOC;
    } catch (...) {
        return -ZKQ_ERR_INTERNAL;
    }
}

using BN = bn254_pairing<uint64_t>;
using BLS = bls12381_pairing<uint64_t>;

}  // namespace

extern "C" {

// 1 if prod_i e(P_i, Q_i) == 1, 0 if not. No subgroup check (see zkq_g*_validate).
int zkq_pairing_check(int curve, const uint64_t* g1s, const uint64_t* g2s, uint64_t n) {
    return guarded_neg([&] {
        if (curve == 0) return pairing_check<BN>(g1s, g2s, n);
        if (curve == 1) return pairing_check<BLS>(g1s, g2s, n);
        return -ZKQ_ERR_CURVE;
    });
}

int zkq_pairing_value(int curve, const uint64_t* g1, const uint64_t* g2, uint64_t* out) {
    return guarded_neg([&] {
        if (curve == 0) return pairing_value<BN>(g1, g2, out);
        if (curve == 1) return pairing_value<BLS>(g1, g2, out);
        return -ZKQ_ERR_CURVE;
    });
}

int zkq_g1_validate(int curve, const uint64_t* p) {
    if (curve == 0) return g1_check<BN>(load_g1<BN>(p), true);
    if (curve == 1) return g1_check<BLS>(load_g1<BLS>(p), true);
    return -ZKQ_ERR_CURVE;
}

int zkq_g2_validate(int curve, const uint64_t* p) {
    if (curve == 0) return g2_check<BN>(load_g2<BN>(p), true);
    if (curve == 1) return g2_check<BLS>(load_g2<BLS>(p), true);
    return -ZKQ_ERR_CURVE;
}

int zkq_groth16_verify_batch(int curve, const uint64_t* alpha1, const uint64_t* beta2,
                             const uint64_t* gamma2, const uint64_t* delta2,
                             const uint64_t* ic, uint64_t n_ic,
                             const uint64_t* proofs_a, const uint64_t* proofs_b,
                             const uint64_t* proofs_c, const uint64_t* publics_std,
                             const uint64_t* rho_std, uint64_t n_proofs) {
    return guarded_neg([&] {
        if (curve == 0)
            return verify_batch<BN>(alpha1, beta2, gamma2, delta2, ic, n_ic, proofs_a, proofs_b,
                                    proofs_c, publics_std, rho_std, n_proofs);
        if (curve == 1)
            return verify_batch<BLS>(alpha1, beta2, gamma2, delta2, ic, n_ic, proofs_a, proofs_b,
                                     proofs_c, publics_std, rho_std, n_proofs);
        return -ZKQ_ERR_CURVE;
    });
}

}  // extern "C"
