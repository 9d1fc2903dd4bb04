// test_entry.cpp - test-only entry points: run the shared field and curve templates with
// 32-bit limbs (what the GPU runs) and 64-bit limbs on the host, so tests can compare both
// against Python integers. Not used by the prover.
//
// Compiled at -O1: the 32-bit instantiations of every field and G1/G2 formula are test-only
// and cost g++ ~4x more CPU at -O3 than the rest of this file, for no benefit to tests.
// The namespace is renamed for this file so that none of its (less optimised) template
// instances share a symbol with the -O3 ones of the prover's sources: the linker keeps one
// copy of each inline function, and it must never be this file's.
#pragma GCC optimize("O1")
#define zkq zkq_test_o1
#include "batch_inv.hpp"
#include "glv.hpp"
#include "ifma.hpp"
#include "zkq.hpp"

namespace zkq {
namespace {

enum { OP_MUL = 0, OP_ADD = 1, OP_SUB = 2, OP_SQR = 3, OP_INV = 4, OP_FROM_MONT = 5, OP_TO_MONT = 6 };

template <class F>
int field_op(int op, const uint64_t* a, const uint64_t* b, uint64_t* out, size_t n) {
    constexpr int NW = F::params::NW;
    for (size_t i = 0; i < n; i++) {
        F x = load_words<F>(a + i * NW), y = load_words<F>(b + i * NW), r;
        switch (op) {
            case OP_MUL: r = x * y; break;
            case OP_ADD: r = x + y; break;
            case OP_SUB: r = x - y; break;
            case OP_SQR: r = x.sqr(); break;
            case OP_INV: r = field_inv(x); break;
            case OP_FROM_MONT: r = x.from_mont(); break;
            case OP_TO_MONT: r = x.to_mont(); break;
            default: return ZKQ_ERR_ARG;
        }
        store_words(r, out + i * NW);
    }
    return ZKQ_OK;
}

template <class L>
int field_op_l(int field_id, int op, const uint64_t* a, const uint64_t* b, uint64_t* out, size_t n) {
    switch (field_id) {
        case 0: return field_op<Fp<bn254_fq_params, L>>(op, a, b, out, n);
        case 1: return field_op<Fp<bn254_fr_params, L>>(op, a, b, out, n);
        case 2: return field_op<Fp<bls12381_fq_params, L>>(op, a, b, out, n);
        case 3: return field_op<Fp<bls12381_fr_params, L>>(op, a, b, out, n);
        default: return ZKQ_ERR_ARG;
    }
}

template <class F> struct Words;  // element <-> 64-bit words for Fq and Fq2
template <class P, class L> struct Words<Fp<P, L>> {
    static constexpr int NW = P::NW;
    static Fp<P, L> load(const uint64_t* w) { return load_words<Fp<P, L>>(w); }
    static void store(const Fp<P, L>& x, uint64_t* w) { store_words(x, w); }
};
template <class B> struct Words<Fp2<B>> {
    static constexpr int NW = 2 * Words<B>::NW;
    static Fp2<B> load(const uint64_t* w) { return {Words<B>::load(w), Words<B>::load(w + NW / 2)}; }
    static void store(const Fp2<B>& x, uint64_t* w) { Words<B>::store(x.c0, w); Words<B>::store(x.c1, w + NW / 2); }
};

// For each pair (p, q): out[3i] = p + q with both in Jacobian form with Z != 1 (full
// addition), out[3i+1] = p + q by mixed addition, out[3i+2] = 2p. Affine in and out.
template <class F, class Base>
int point_ops(const uint64_t* p, const uint64_t* q, uint64_t* out, size_t n) {
    using W = Words<F>;
    constexpr int PW = 2 * W::NW;  // words per affine point
    auto load = [&](const uint64_t* w) { return Affine<F>{W::load(w), W::load(w + W::NW)}; };
    auto store = [&](const Jacobian<F>& j, uint64_t* w) {
        Affine<F> a = jac_to_affine(j);
        W::store(a.x, w);
        W::store(a.y, w + W::NW);
    };
    // Rescale to Z = z: (x z^2, y z^3, z) stands for the same point.
    auto rescale = [](const Affine<F>& a, uint32_t zi) {
        if (a.is_inf()) return Jacobian<F>::infinity();
        F z = F::one() * Base::from_uint(zi), z2 = z.sqr();
        return Jacobian<F>{a.x * z2, a.y * z2 * z, z};
    };
    for (size_t i = 0; i < n; i++) {
        Affine<F> a = load(p + i * PW), b = load(q + i * PW);
        store(jac_add(rescale(a, 3), rescale(b, 5)), out + (3 * i) * PW);
        store(jac_madd(rescale(a, 7), b), out + (3 * i + 1) * PW);
        store(jac_dbl(rescale(a, 11)), out + (3 * i + 2) * PW);
    }
    return ZKQ_OK;
}

template <int C, bool G2>
int point_ops_c(int limb_bits, const uint64_t* p, const uint64_t* q, uint64_t* out, size_t n) {
    if (limb_bits == 64) {
        using T = CurveT<C, uint64_t>;
        return G2 ? point_ops<typename T::Fq2, typename T::Fq>(p, q, out, n)
                  : point_ops<typename T::Fq, typename T::Fq>(p, q, out, n);
    }
    if (limb_bits == 32) {
        using T = CurveT<C, uint32_t>;
        return G2 ? point_ops<typename T::Fq2, typename T::Fq>(p, q, out, n)
                  : point_ops<typename T::Fq, typename T::Fq>(p, q, out, n);
    }
    return ZKQ_ERR_ARG;
}

// out[i] = a[i] * b[i] (op 0), a[i]^2 (op 1) or the norm of a[i] as c0 with c1 = 0 (op 2)
// in Fq2 of curve C, 64-bit limbs (so the x86-adx build runs its Fp2 product with two
// reductions and its norm with one).
template <int C>
int fq2_op(int op, const uint64_t* a, const uint64_t* b, uint64_t* out, size_t n) {
    using W = Words<typename CurveT<C>::Fq2>;
    for (size_t i = 0; i < n; i++) {
        auto x = W::load(a + i * W::NW), y = W::load(b + i * W::NW);
        if (op == 0) W::store(x * y, out + i * W::NW);
        else if (op == 1) W::store(x.sqr(), out + i * W::NW);
        else if (op == 2) W::store({x.norm(), CurveT<C>::Fq::zero()}, out + i * W::NW);
        else return ZKQ_ERR_ARG;
    }
    return ZKQ_OK;
}

// p + q for n pairs of affine points through the MSM's eight-lane IFMA code (ifma.hpp):
// the denominators q.x - p.x inverted by its vector chains, the sums by its batch;
// ZKQ_ERR_ARG where this build has neither.
template <class F>
int affine_add8(const uint64_t* p, const uint64_t* q, uint64_t* out, size_t n) {
#if defined(ZKQ_HAVE_IFMA)
    using W = Words<F>;
    std::vector<Affine<F>> ps(n), qs(n), sums(n);
    std::vector<F> inv(n);
    using BI = BatchInv<F>;
    ifma::Chains<typename BI::Chain> chains;
    chains.begin(n);
    for (size_t i = 0; i < n; i++) {
        ps[i] = {W::load(p + 2 * i * W::NW), W::load(p + (2 * i + 1) * W::NW)};
        qs[i] = {W::load(q + 2 * i * W::NW), W::load(q + (2 * i + 1) * W::NW)};
        if (ps[i].x == qs[i].x || ps[i].is_inf() || qs[i].is_inf()) return ZKQ_ERR_ARG;  // not the batch's case
        chains.push(BI::chain(qs[i].x - ps[i].x));
    }
    chains.invert([&](size_t j, const auto& ij) { inv[j] = BI::inverse(qs[j].x - ps[j].x, ij); });
    ifma::AddBatch<F> batch;
    for (size_t i = 0; i < n; i++) batch.push(ps[i], qs[i], inv[i], &sums[i]);
    batch.run();  // the partial batch at the end
    for (size_t i = 0; i < n; i++) {
        W::store(sums[i].x, out + 2 * i * W::NW);
        W::store(sums[i].y, out + (2 * i + 1) * W::NW);
    }
    return ZKQ_OK;
#else
    (void)p, (void)q, (void)out, (void)n;
    return ZKQ_ERR_ARG;
#endif
}

template <int C>
int glv_split(const uint64_t* k, uint64_t* out, size_t n) {
    for (size_t i = 0; i < n; i++) {
        GlvHalf h1, h2;
        if (!glv_decompose<C>(k + 4 * i, h1, h2)) return ZKQ_ERR_INTERNAL;
        uint64_t* o = out + 6 * i;
        o[0] = h1.mag[0]; o[1] = h1.mag[1]; o[2] = h1.neg;
        o[3] = h2.mag[0]; o[4] = h2.mag[1]; o[5] = h2.neg;
    }
    return ZKQ_OK;
}

template <int C>
int glv_constants(uint64_t* out) {
    std::memcpy(out, Glv<C>::lambda, 32);
    std::memcpy(out + 4, Glv<C>::beta_g1, 48);
    std::memcpy(out + 10, Glv<C>::beta_g2, 48);
    return ZKQ_OK;
}

}  // namespace
}  // namespace zkq

using namespace zkq;

extern "C" {

// out[i] = op(a[i], b[i]) in field field_id (0 bn Fq, 1 bn Fr, 2 bls Fq, 3 bls Fr) with
// limb_bits 32 or 64 limbs; elements as 64-bit words either way. op: 0 mul (Montgomery),
// 1 add, 2 sub, 3 sqr, 4 inv, 5 from_mont, 6 to_mont (unary ops ignore b).
int zkq_test_field_op(int field_id, int limb_bits, int op, const uint64_t* a, const uint64_t* b, uint64_t* out,
                      size_t n) {
    return guarded([&]() -> int {
        if (limb_bits == 64) return field_op_l<uint64_t>(field_id, op, a, b, out, n);
        if (limb_bits == 32) return field_op_l<uint32_t>(field_id, op, a, b, out, n);
        return ZKQ_ERR_ARG;
    });
}

int zkq_test_field_mul(int field_id, int limb_bits, const uint64_t* a, const uint64_t* b, uint64_t* out, size_t n) {
    return zkq_test_field_op(field_id, limb_bits, OP_MUL, a, b, out, n);
}

// Affine G1 points (Montgomery coordinates): out gets 3 points per input pair:
// p + q (full Jacobian addition), p + q (mixed addition), 2p.
int zkq_test_g1_add(int curve, int limb_bits, const uint64_t* p, const uint64_t* q, uint64_t* out, size_t n) {
    return guarded([&]() -> int { ZKQ_DISPATCH_CURVE(curve, (point_ops_c<C, false>(limb_bits, p, q, out, n))) });
}

// As zkq_test_g1_add on G2.
int zkq_test_g2_add(int curve, int limb_bits, const uint64_t* p, const uint64_t* q, uint64_t* out, size_t n) {
    return guarded([&]() -> int { ZKQ_DISPATCH_CURVE(curve, (point_ops_c<C, true>(limb_bits, p, q, out, n))) });
}

// Fq2 elements of a curve (c0 || c1, Montgomery words): out = a * b (op 0), a^2 (op 1) or
// norm(a) = a0^2 + a1^2 (op 2, as c0; c1 = 0).
int zkq_test_fq2_op(int curve, int op, const uint64_t* a, const uint64_t* b, uint64_t* out, size_t n) {
    return guarded([&]() -> int { ZKQ_DISPATCH_CURVE(curve, (fq2_op<C>(op, a, b, out, n))) });
}

// n affine sums p + q (x || y, Montgomery words; p.x != q.x, neither at infinity) on G1
// (g2 = 0) or G2 through the MSM's AVX-512 IFMA chains and batch; ZKQ_ERR_ARG where they
// are not built.
int zkq_test_affine_add8(int curve, int g2, const uint64_t* p, const uint64_t* q, uint64_t* out, size_t n) {
    return guarded([&]() -> int {
        ZKQ_DISPATCH_CURVE(curve, (g2 ? affine_add8<typename CurveT<C>::Fq2>(p, q, out, n)
                                      : affine_add8<typename CurveT<C>::Fq>(p, q, out, n)))
    });
}

// GLV decomposition of n standard-form scalars (each < r): out gets 6 words per scalar,
// |k1| (2 words), k1 < 0, |k2| (2 words), k2 < 0, with k = k1 + k2 lambda mod r.
int zkq_test_glv_decompose(int curve, const uint64_t* scalars, uint64_t* out, size_t n) {
    return guarded([&]() -> int { ZKQ_DISPATCH_CURVE(curve, (glv_split<C>(scalars, out, n))) });
}

// The GLV constants of a curve: out[0..3] lambda, out[4..9] beta of G1, out[10..15] beta
// of G2 (standard form, 6 words each, zero-padded on bn128).
int zkq_test_glv_constants(int curve, uint64_t* out) {
    return guarded([&]() -> int { ZKQ_DISPATCH_CURVE(curve, (glv_constants<C>(out))) });
}

}  // extern "C"
