// ifma.hpp - the field products of the MSM's batch-affine tree (msm.hpp, reduce_group),
// eight at a time with AVX-512 IFMA (52-bit multiply-add), one per 64-bit lane of a zmm
// register: the additions once the denominators are inverted (AddBatch: 3 products on G1,
// 8 Fq products on G2, independent of every other pair's) and the batch inversion's
// product chains (Chains: eight chains, one per lane). Built only into the x86 assembly
// variant (native.py's "x86-adx") where the compiler targets IFMA (-march=native on a CPU
// with it); elsewhere, and in the "portable" variant that the tests compare against,
// msm.hpp keeps its scalar loops.
//
// Representation: an element of F_p (NW 64-bit words, Montgomery form x*2^(64 NW) as the
// rest of the library keeps it) becomes N = NW*64/52 + 1 limbs of 52 bits, lane l of limb
// vector i holding bits [52 i, 52 i + 52) of pair l's value. The vector product is
// Montgomery's with R' = 2^(52 N) = 2^(64 NW + SHIFT): vmul(A, B) = A B / R'. So that
// products stay in the library's form, one factor is shifted left by SHIFT bits first
// (mul = vmul(A, B << SHIFT) = A B / 2^(64 NW)): a shift of the limbs, not a product.
// Values are kept below 2p inside a step (see Arith) and fully reduced on the way out, as
// every caller of the scalar code expects.
#pragma once
#if defined(ZKQ_X86_ASM) && defined(__AVX512IFMA__) && defined(__AVX512F__)
#define ZKQ_HAVE_IFMA 1
#include <immintrin.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "zkq.hpp"

namespace zkq {
namespace ifma {

// The coordinate fields whose additions run here: prime fields with 64-bit limbs (G1's)
// and their quadratic extensions (G2's).
template <class F>
struct Vectorized : std::false_type {};
template <class P>
struct Vectorized<Fp<P, uint64_t>> : std::true_type {};
template <class P>
struct Vectorized<Fp2<Fp<P, uint64_t>>> : std::true_type {};

constexpr uint64_t MASK52 = (uint64_t(1) << 52) - 1;

template <int NW>
struct Shape {
    static constexpr int N = NW * 64 / 52 + 1;          // 5 limbs for 4 words, 8 for 6
    static constexpr int SHIFT = 52 * N - 64 * NW;      // 4, 32
};

// One field element per lane, N limbs of 52 bits.
template <int N>
struct Vec {
    __m512i l[N];
};

// The modulus (and small multiples of it) in 52-bit limbs, broadcast to every lane, and
// -p^-1 mod 2^52 for the reduction.
template <class F>
struct Consts {
    static constexpr int NW = F::params::NW;
    static constexpr int N = Shape<NW>::N;
    Vec<N> p, p2;  // p and 2p
    __m512i pinv;

    Consts() {
        uint64_t w[NW + 1] = {}, w2[NW + 1] = {};
        for (int i = 0; i < NW; i++) w[i] = F::mod(i);
        for (int i = 0; i <= NW; i++) w2[i] = (i < NW ? w[i] << 1 : 0) | (i > 0 ? w[i - 1] >> 63 : 0);
        for (int i = 0; i < N; i++) {
            p.l[i] = _mm512_set1_epi64((long long)bits52(w, i));
            p2.l[i] = _mm512_set1_epi64((long long)bits52(w2, i));
        }
        pinv = _mm512_set1_epi64((long long)(F::minv() & MASK52));
    }
    // Bits [52 i, 52 i + 52) of a little-endian word array of NW + 1 words.
    static uint64_t bits52(const uint64_t* w, int i) {
        int bit = 52 * i, word = bit / 64, off = bit % 64;
        uint64_t v = w[word] >> off;
        if (off > 12 && word + 1 <= NW) v |= w[word + 1] << (64 - off);
        return v & MASK52;
    }
};

// x normalized: every limb below 2^52, the carries (signed: a limb may be negative after a
// subtraction) moved up. The top limb keeps the sign of the whole value.
template <int N>
inline __attribute__((always_inline)) void normalize(Vec<N>& x) {
    const __m512i mask = _mm512_set1_epi64((long long)MASK52);
    for (int i = 0; i < N - 1; i++) {
        x.l[i + 1] = _mm512_add_epi64(x.l[i + 1], _mm512_srai_epi64(x.l[i], 52));
        x.l[i] = _mm512_and_si512(x.l[i], mask);
    }
}

// a + c - b, normalized (c a multiple of p above b, so the result is positive).
template <int N>
inline __attribute__((always_inline)) Vec<N> sub_plus(const Vec<N>& a, const Vec<N>& b, const Vec<N>& c) {
    Vec<N> r;
    for (int i = 0; i < N; i++) r.l[i] = _mm512_sub_epi64(_mm512_add_epi64(a.l[i], c.l[i]), b.l[i]);
    normalize(r);
    return r;
}

// x - m where that is not negative, else x (x, m normalized).
template <int N>
inline __attribute__((always_inline)) void sub_if_geq(Vec<N>& x, const Vec<N>& m) {
    Vec<N> t;
    for (int i = 0; i < N; i++) t.l[i] = _mm512_sub_epi64(x.l[i], m.l[i]);
    normalize(t);
    const __mmask8 keep = _mm512_cmpge_epi64_mask(t.l[N - 1], _mm512_setzero_si512());
    for (int i = 0; i < N; i++) x.l[i] = _mm512_mask_mov_epi64(x.l[i], keep, t.l[i]);
}

// x << SHIFT bits, for x < 2^(64 NW): a shift of the 52-bit limbs, no product.
template <int N, int SHIFT>
inline __attribute__((always_inline)) Vec<N> shl(const Vec<N>& x) {
    static_assert(SHIFT < 52, "one neighbour limb supplies the shifted-in bits");
    const __m512i mask = _mm512_set1_epi64((long long)MASK52);
    Vec<N> r;
    r.l[0] = _mm512_and_si512(_mm512_slli_epi64(x.l[0], SHIFT), mask);
    for (int i = 1; i < N; i++)
        r.l[i] = _mm512_or_si512(_mm512_and_si512(_mm512_slli_epi64(x.l[i], SHIFT), mask),
                                 _mm512_srli_epi64(x.l[i - 1], 52 - SHIFT));
    return r;
}

// a b / 2^(52 N) mod p, as a value below a b / 2^(52 N) + p (Montgomery's bound; a, b
// normalized). Operand-scanning product, then N word-by-word Montgomery reductions; every
// column sum stays far below 2^64 (at most 4 N terms of 52 bits and the carries).
template <class F, int N>
inline __attribute__((always_inline)) Vec<N> vmul(const Vec<N>& a, const Vec<N>& b, const Consts<F>& k) {
    __m512i z[2 * N];
    for (int i = 0; i < 2 * N; i++) z[i] = _mm512_setzero_si512();
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            z[i + j] = _mm512_madd52lo_epu64(z[i + j], a.l[i], b.l[j]);
            z[i + j + 1] = _mm512_madd52hi_epu64(z[i + j + 1], a.l[i], b.l[j]);
        }
    for (int i = 0; i < N; i++) {
        // m makes column i divisible by 2^52; madd52lo reads only the low 52 bits of z[i].
        const __m512i m = _mm512_madd52lo_epu64(_mm512_setzero_si512(), z[i], k.pinv);
        for (int j = 0; j < N; j++) {
            z[i + j] = _mm512_madd52lo_epu64(z[i + j], m, k.p.l[j]);
            z[i + j + 1] = _mm512_madd52hi_epu64(z[i + j + 1], m, k.p.l[j]);
        }
        z[i + 1] = _mm512_add_epi64(z[i + 1], _mm512_srli_epi64(z[i], 52));
    }
    Vec<N> r;
    for (int i = 0; i < N; i++) r.l[i] = z[N + i];
    normalize(r);
    return r;
}

// Reads word-major lanes (w[j][l]: word j of lane l's element) into 52-bit limbs.
template <int NW, int N>
inline __attribute__((always_inline)) Vec<N> from_words(const uint64_t (*w)[8]) {
    const __m512i mask = _mm512_set1_epi64((long long)MASK52);
    __m512i word[NW];
    for (int j = 0; j < NW; j++) word[j] = _mm512_load_si512(w[j]);
    Vec<N> r;
    for (int i = 0; i < N; i++) {
        const int bit = 52 * i, j = bit / 64, off = bit % 64;
        __m512i v = _mm512_srli_epi64(word[j], off);
        if (off > 12 && j + 1 < NW) v = _mm512_or_si512(v, _mm512_slli_epi64(word[j + 1], 64 - off));
        r.l[i] = _mm512_and_si512(v, mask);
    }
    return r;
}

// The inverse of from_words, for x < 2^(64 NW) with normalized limbs.
template <int NW, int N>
inline __attribute__((always_inline)) void to_words(const Vec<N>& x, uint64_t (*w)[8]) {
    for (int j = 0; j < NW; j++) {
        const int bit = 64 * j, i = bit / 52, off = bit % 52;
        __m512i v = _mm512_srli_epi64(x.l[i], off);
        for (int s = 52 - off, k = i + 1; s < 64 && k < N; s += 52, k++)
            v = _mm512_or_si512(v, _mm512_slli_epi64(x.l[k], s));
        _mm512_store_si512(w[j], v);
    }
}

// Vector elements of F (D = 1) or of Fq2 = F[u]/(u^2 + 1) (D = 2), on top of the 52-bit
// limbs. Every operation takes and gives values below 2p per component: for a, b < 2p,
// mul(a, b) = vmul(a, b << SHIFT) < 4p^2 2^SHIFT / 2^(52 N) + p = p (4p / 2^(64 NW) + 1),
// below 2p as 4p < 2^(64 NW); sums and differences drop 2p once. canon() fully reduces.
template <class B, int D>
struct Arith {
    static constexpr int NW = B::params::NW;
    static constexpr int N = Shape<NW>::N;
    static constexpr int SHIFT = Shape<NW>::SHIFT;
    static_assert(B::mod(NW - 1) < (uint64_t(1) << 62), "4p < 2^(64 NW): products stay below 2p");
    using V = Vec<N>;
    struct E {
        V c[D];
    };
    Consts<B> k;

    V mul(const V& a, const V& b) const { return vmul<B>(a, shl<N, SHIFT>(b), k); }
    V add(const V& a, const V& b) const {
        V r;
        for (int i = 0; i < N; i++) r.l[i] = _mm512_add_epi64(a.l[i], b.l[i]);
        normalize(r);
        sub_if_geq(r, k.p2);
        return r;
    }
    V sub(const V& a, const V& b) const {
        V r = sub_plus(a, b, k.p2);
        sub_if_geq(r, k.p2);
        return r;
    }
    void canon(V& a) const { sub_if_geq(a, k.p); }

    E mul(const E& a, const E& b) const {
        if constexpr (D == 1) {
            return {{mul(a.c[0], b.c[0])}};
        } else {  // Karatsuba, u^2 = -1
            const V t0 = mul(a.c[0], b.c[0]), t1 = mul(a.c[1], b.c[1]);
            const V t2 = mul(add(a.c[0], a.c[1]), add(b.c[0], b.c[1]));
            return {{sub(t0, t1), sub(sub(t2, t0), t1)}};
        }
    }
    E sqr(const E& a) const {
        if constexpr (D == 1) {
            return {{mul(a.c[0], a.c[0])}};
        } else {  // (a0 + a1 u)^2 = (a0 + a1)(a0 - a1) + 2 a0 a1 u
            const V m = mul(a.c[0], a.c[1]);
            return {{mul(add(a.c[0], a.c[1]), sub(a.c[0], a.c[1])), add(m, m)}};
        }
    }
    E sub(const E& a, const E& b) const {
        E r;
        for (int d = 0; d < D; d++) r.c[d] = sub(a.c[d], b.c[d]);
        return r;
    }
    void canon(E& a) const {
        for (int d = 0; d < D; d++) canon(a.c[d]);
    }
};

// The base field and degree of a coordinate field: F itself (1) or Fp2<F> (2).
template <class F>
struct Coord {
    using base = F;
    static constexpr int D = 1;
};
template <class B>
struct Coord<Fp2<B>> {
    using base = B;
    static constexpr int D = 2;
};

// Up to eight pending affine additions p + q (p.x != q.x, neither at infinity) with their
// inverted denominators 1 / (q.x - p.x). Inputs are copied in as the pairs are queued, so
// the caller may overwrite a queued pair's slots before the batch runs; outputs are
// written by run(), lane by lane, to the queued destinations.
template <class F>
struct AddBatch {
    using B = typename Coord<F>::base;
    static constexpr int D = Coord<F>::D;
    static constexpr int NW = B::params::NW;
    static constexpr int WORDS = D * NW;  // 64-bit words of one coordinate
    using A = Arith<B, D>;
    using W = uint64_t[8];
    static_assert(sizeof(F) == 8 * WORDS, "a coordinate is its words, c0 before c1");
    alignas(64) W px[WORDS], py[WORDS], qx[WORDS], qy[WORDS], inv[WORDS];
    Affine<F>* out[8];
    int n = 0;
    A a;

    // Queues p + q into *dst; runs the batch when it is full.
    inline __attribute__((always_inline)) void push(const Affine<F>& p, const Affine<F>& q, const F& inv_den,
                                                    Affine<F>* dst) {
        const uint64_t *p_x = words(p.x), *p_y = words(p.y), *q_x = words(q.x), *q_y = words(q.y);
        const uint64_t* i_d = words(inv_den);
        for (int j = 0; j < WORDS; j++) {
            px[j][n] = p_x[j];
            py[j][n] = p_y[j];
            qx[j][n] = q_x[j];
            qy[j][n] = q_y[j];
            inv[j][n] = i_d[j];
        }
        out[n++] = dst;
        if (n == 8) run();
    }

    // Runs what is queued (a partial batch repeats lane 0 in the idle lanes).
    void run() {
        if (n == 0) return;
        for (int l = n; l < 8; l++)
            for (int j = 0; j < WORDS; j++) {
                px[j][l] = px[j][0];
                py[j][l] = py[j][0];
                qx[j][l] = qx[j][0];
                qy[j][l] = qy[j][0];
                inv[j][l] = inv[j][0];
            }
        const typename A::E Px = load(px), Py = load(py), Qx = load(qx), Qy = load(qy), I = load(inv);
        // The scalar formulas (msm.hpp, PairAdder), all inputs fully reduced:
        const typename A::E lam = a.mul(a.sub(Qy, Py), I);
        typename A::E x3 = a.sub(a.sub(a.sqr(lam), Px), Qx);
        a.canon(x3);
        typename A::E y3 = a.sub(a.mul(lam, a.sub(Px, x3)), Py);
        a.canon(y3);
        store(x3, px);
        store(y3, py);
        for (int l = 0; l < n; l++) {
            uint64_t *x = words(out[l]->x), *y = words(out[l]->y);
            for (int j = 0; j < WORDS; j++) {
                x[j] = px[j][l];
                y[j] = py[j][l];
            }
        }
        n = 0;
    }

  private:
    static const uint64_t* words(const F& f) { return reinterpret_cast<const uint64_t*>(&f); }
    static uint64_t* words(F& f) { return reinterpret_cast<uint64_t*>(&f); }
    static typename A::E load(const W* w) {
        typename A::E e;
        for (int d = 0; d < D; d++) e.c[d] = from_words<NW, A::N>(w + d * NW);
        return e;
    }
    static void store(const typename A::E& e, W* w) {
        for (int d = 0; d < D; d++) to_words<NW, A::N>(e.c[d], w + d * NW);
    }
};

// Montgomery's batch inversion of reduce_group (msm.hpp, passes 1 and 2) in eight product
// chains, one per lane: pair k's chain value goes to lane k % 8 of group k / 8, and each
// group costs one vector product on the way up and two on the way back, where the scalar
// code pays eight and sixteen. F is the chains' prime field (G2's chains hold norms in Fq).
template <class F>
struct Chains {
    static constexpr int NW = F::params::NW;
    using A = Arith<F, 1>;
    using V = typename A::V;
    std::vector<V> val, pre;  // per group: the chain values, the products before them
    alignas(64) uint64_t stage[NW][8];
    V prod;
    size_t k = 0;  // values pushed
    A a;

    // Starts a level of np values.
    void begin(size_t np) {
        const size_t groups = (np + 7) / 8;
        if (val.size() < groups) {
            val.resize(groups);
            pre.resize(groups);
        }
        fill_lanes(0, F::one());
        prod = from_words<NW, A::N>(stage);
        k = 0;
    }

    void push(const F& c) {
        const size_t l = k & 7;
        for (int j = 0; j < NW; j++) stage[j][l] = c.v[j];
        if ((++k & 7) == 0) close_group();
    }

    // out(j, 1 / value j) for every value pushed, from the last to the first.
    template <class Out>
    void invert(Out&& out) {
        if (k & 7) {  // the last group's idle lanes multiply by one
            fill_lanes(k & 7, F::one());
            close_group();
        }
        // The eight lanes' products, inverted together with one field inversion.
        V t = prod;
        a.canon(t);
        to_words<NW, A::N>(t, stage);
        F lane[8], run[8];
        for (int l = 0; l < 8; l++) lane[l] = word_lane(l);
        run[0] = lane[0];
        for (int l = 1; l < 8; l++) run[l] = run[l - 1] * lane[l];
        F inv = field_inv(run[7]);
        for (int l = 7; l > 0; l--) {
            set_lane(l, inv * run[l - 1]);
            inv = inv * lane[l];
        }
        set_lane(0, inv);
        V iv = from_words<NW, A::N>(stage);
        for (size_t g = (k + 7) / 8; g-- > 0;) {
            V ij = a.mul(iv, pre[g]);
            iv = a.mul(iv, val[g]);
            a.canon(ij);
            to_words<NW, A::N>(ij, stage);
            const size_t lanes = std::min<size_t>(8, k - 8 * g);
            for (size_t l = lanes; l-- > 0;) out(8 * g + l, word_lane(l));
        }
    }

  private:
    void close_group() {
        const size_t g = (k - 1) / 8;
        val[g] = from_words<NW, A::N>(stage);
        pre[g] = prod;
        prod = a.mul(prod, val[g]);
    }
    void fill_lanes(size_t from, const F& x) {
        for (size_t l = from; l < 8; l++) set_lane(l, x);
    }
    void set_lane(size_t l, const F& x) {
        for (int j = 0; j < NW; j++) stage[j][l] = x.v[j];
    }
    F word_lane(size_t l) const {
        F x;
        for (int j = 0; j < NW; j++) x.v[j] = stage[j][l];
        return x;
    }
};

}  // namespace ifma
}  // namespace zkq
#endif
