// setup.cpp - the heavy math of the Groth16 phase-2 setup (groth16/setup/: `zkqueue zkey
// new`, `zkey beacon`, `zkey contribute`), on the field and curve types of zkq.hpp.
//
//  * r1cs passes: count the terms of each signal in A, B, C (pass 1), then fill a
//    signal-major index of them (CSR: per signal, its (constraint, coefficient offset)
//    terms) and write the .zkey's coefficient section (section 4) as the constraints pass,
//    chunk by chunk (pass 2). The coefficients stay in the caller's mapping of the .r1cs.
//  * combine: point row s = sum over the signal's terms of coef * base[constraint], for
//    whole runs of signals at once: the A, B1, B2, C and IC sections of `zkey new` (the
//    bases are the Lagrange-basis points of the prepared .ptau). Terms of one signal share
//    one doubling chain (Straus with GLV half scalars, width-5 NAF; see struct Straus); a
//    coefficient above (r-1)/2 is used as its negative (so -1, -2 cost what 1, 2 cost); a
//    signal with very many terms goes to the Pippenger MSM (zkq_msm_g1/g2).
//  * sub_u: (a_i - b_i) in the uncompressed encoding that the circuit hash reads.
//  * lem_to_u: points from the file encoding (LEM) to the uncompressed one (big-endian,
//    standard form; infinity all zeros), as snarkjs's batchLEMtoU.
//  * scale_g1: every point times one scalar (a contribution's 1/delta on sections 8, 9),
//    each with the same Straus/GLV code.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>
#include <unordered_map>
#include <sys/mman.h>

#include "affine_io.hpp"
#include "batch_inv.hpp"
#include "glv.hpp"
#include "ifma.hpp"
#include "zkq.hpp"

extern "C" int zkq_msm_g1(int curve, const uint64_t* points, const uint64_t* scalars_std, size_t n,
                          uint64_t* out_affine, int threads);
extern "C" int zkq_msm_g2(int curve, const uint64_t* points, const uint64_t* scalars_std, size_t n,
                          uint64_t* out_affine, int threads);

namespace zkq {
namespace {

// Coefficients 1 and -1 (every coefficient of a multiplication chain, and snarkjs's
// public-input rows) are marked in the term index instead of pointing into the .r1cs, so
// summing such terms never touches the mapped file (its pages stay out of the RSS).
constexpr uint64_t ONE_COEF = ~uint64_t(0);
constexpr uint64_t MINUS_ONE_COEF = ~uint64_t(0) - 1;
constexpr int WNAF_W = 5;                     // odd multiples 1P..15P per term
constexpr size_t BIG_ROW = 2048;              // terms above which a signal goes to the MSM

// A reader over the constraint section; every read is bounds-checked.
struct Reader {
    const uint8_t* p;
    uint64_t len, pos;
    bool u32(uint32_t& v) {
        if (len - pos < 4) return false;
        std::memcpy(&v, p + pos, 4);
        pos += 4;
        return true;
    }
};

// k (4 words) < r?
template <class Fr>
bool below_r(const uint64_t* k) {
    for (int i = 3; i >= 0; i--) {
        const uint64_t m = Fr::mod(i);
        if (k[i] != m) return k[i] < m;
    }
    return false;
}

// Loads an n8-byte little-endian coefficient (n8 <= 32) into 4 words.
inline void load_coef(const uint8_t* src, int n8, uint64_t* k) {
    k[0] = k[1] = k[2] = k[3] = 0;
    std::memcpy(k, src, n8);
}

// Pass 1: counts[m * n_vars + s] += 1 for every term of signal s in matrix m (0 A, 1 B,
// 2 C). On a malformed section: ZKQ_ERR_SETUP_TRUNC / ZKQ_ERR_SETUP_SIGNAL /
// ZKQ_ERR_COEF_VALUE with info = {constraint, byte position}.
template <class Fr>
int r1cs_count(const uint8_t* sec, uint64_t len, int n8, uint32_t n_constraints, uint32_t n_vars,
               int64_t* counts, int64_t* info) {
    Reader rd{sec, len, 0};
    for (uint32_t c = 0; c < n_constraints; c++) {
        for (int m = 0; m < 3; m++) {
            uint32_t nt;
            if (!rd.u32(nt)) { info[0] = c; info[1] = (int64_t)rd.pos; return ZKQ_ERR_SETUP_TRUNC; }
            for (uint32_t t = 0; t < nt; t++) {
                uint32_t s;
                if (!rd.u32(s) || len - rd.pos < (uint64_t)n8) {
                    info[0] = c; info[1] = (int64_t)rd.pos; return ZKQ_ERR_SETUP_TRUNC;
                }
                if (s >= n_vars) { info[0] = c; info[1] = s; return ZKQ_ERR_SETUP_SIGNAL; }
                uint64_t k[4];
                load_coef(sec + rd.pos, n8, k);
                if (!below_r<Fr>(k)) { info[0] = c; info[1] = (int64_t)rd.pos; return ZKQ_ERR_COEF_VALUE; }
                rd.pos += n8;
                counts[(size_t)m * n_vars + s]++;
            }
        }
    }
    info[0] = (int64_t)rd.pos;
    return ZKQ_OK;
}

template <class Fr>
void neg_mod_r(uint64_t* k);

// Pass 2 over constraints [c_begin, c_end), starting at byte *pos (pass 1 checked the
// section), stopping early (*c_done: the first constraint not done) before the section-4
// entries would pass `cap`; when not even constraint c_begin fits, *n_coefs is what it needs. cursor[m * n_vars + s]: where signal s's next term of matrix m goes in
// term_c / term_k (the caller starts it at the signal's CSR row start). Writes one
// section-4 entry (matrix, constraint, signal, coef * R^2 mod r) per A and B term to coefs
// and returns their number in *n_coefs.
template <class Fr>
int r1cs_fill(const uint8_t* sec, uint64_t len, int n8, uint32_t c_begin, uint32_t c_end, uint32_t n_vars,
              uint64_t* pos, int64_t* cursor, uint32_t* term_c, uint64_t* term_k, uint8_t* coefs,
              uint64_t cap, uint32_t* c_done, uint64_t* n_coefs) {
    Reader rd{sec, len, *pos};
    uint64_t nc = 0;
    const Fr r2 = Fr::r2();
    uint32_t c = c_begin;
    for (; c < c_end; c++) {
        // Stop before a constraint whose A and B terms would not fit in coefs.
        {
            Reader pk = rd;
            uint32_t na, nb;
            if (!pk.u32(na)) return ZKQ_ERR_SETUP_TRUNC;
            pk.pos += (uint64_t)na * (4 + n8);
            if (pk.pos > len || !pk.u32(nb)) return ZKQ_ERR_SETUP_TRUNC;
            if (nc + na + nb > cap) {
                if (nc == 0) { *n_coefs = na + (uint64_t)nb; *c_done = c; *pos = rd.pos; return ZKQ_OK; }
                break;
            }
        }
        for (int m = 0; m < 3; m++) {
            uint32_t nt;
            if (!rd.u32(nt)) return ZKQ_ERR_SETUP_TRUNC;
            for (uint32_t t = 0; t < nt; t++) {
                uint32_t s;
                if (!rd.u32(s) || len - rd.pos < (uint64_t)n8 || s >= n_vars) return ZKQ_ERR_SETUP_TRUNC;
                const int64_t at = cursor[(size_t)m * n_vars + s]++;
                term_c[at] = c;
                term_k[at] = rd.pos;
                {
                    uint64_t k[4];
                    load_coef(sec + rd.pos, n8, k);
                    if (k[0] == 1 && !(k[1] | k[2] | k[3])) term_k[at] = ONE_COEF;
                    else {
                        neg_mod_r<Fr>(k);
                        if (k[0] == 1 && !(k[1] | k[2] | k[3])) term_k[at] = MINUS_ONE_COEF;
                    }
                }
                if (m < 2) {
                    // coef * R^2 mod r: the Montgomery product of coef and R^3 mod r.
                    uint64_t k[4];
                    load_coef(sec + rd.pos, n8, k);
                    const Fr v = load_words<Fr>(k) * r2 * r2;
                    uint8_t* e = coefs + nc * (12 + 32);
                    const uint32_t head[3] = {(uint32_t)m, c, s};
                    std::memcpy(e, head, 12);
                    store_words(v, reinterpret_cast<uint64_t*>(k));
                    std::memcpy(e + 12, k, 32);
                    nc++;
                }
                rd.pos += n8;
            }
        }
    }
    *pos = rd.pos;
    *n_coefs = nc;
    *c_done = c;
    return ZKQ_OK;
}

// Width-w NAF of k (4 words, k < 2^255; w <= 8): digits d[0..len) (odd or zero,
// |d| < 2^(w-1)); returns len. Runs of zero bits are skipped a word's worth at a time (the
// bit-at-a-time loop was ~6% of `zkey new`).
int wnaf(const uint64_t* kin, int8_t* d, int w = WNAF_W) {
    uint64_t k[5] = {kin[0], kin[1], kin[2], kin[3], 0};
    int len = 0;
    const int64_t full = int64_t(1) << w, half = int64_t(1) << (w - 1);
    while (k[0] | k[1] | k[2] | k[3] | k[4]) {
        if (!(k[0] & 1)) {
            // z zero digits, then k >>= z
            const int z = k[0] ? __builtin_ctzll(k[0]) : 64;
            std::memset(d + len, 0, (size_t)z);
            len += z;
            if (z == 64) {
                for (int i = 0; i < 4; i++) k[i] = k[i + 1];
                k[4] = 0;
            } else {
                for (int i = 0; i < 4; i++) k[i] = (k[i] >> z) | (k[i + 1] << (64 - z));
                k[4] >>= z;
            }
            continue;
        }
        int64_t digit = (int64_t)(k[0] & (full - 1));
        if (digit >= half) digit -= full;
        // k -= digit
        if (digit > 0) {
            uint64_t borrow = (uint64_t)digit;
            for (int i = 0; i < 5 && borrow; i++) { const uint64_t o = k[i]; k[i] -= borrow; borrow = o < borrow; }
        } else {
            uint64_t carry = (uint64_t)(-digit);
            for (int i = 0; i < 5 && carry; i++) { k[i] += carry; carry = k[i] < carry; }
        }
        d[len++] = (int8_t)digit;
        for (int i = 0; i < 4; i++) k[i] = (k[i] >> 1) | (k[i + 1] << 63);
        k[4] >>= 1;
    }
    return len;
}

// r - k for k < r (4 words).
template <class Fr>
void neg_mod_r(uint64_t* k) {
    uint64_t borrow = 0;
    for (int i = 0; i < 4; i++) {
        const uint64_t m = Fr::mod(i);
        const uint64_t d = m - k[i] - borrow;
        borrow = (m < k[i] + borrow) || (k[i] + borrow < k[i]);
        k[i] = d;
    }
}

// k > (r - 1) / 2, i.e. 2k > r - 1, i.e. 2k >= r.
template <class Fr>
bool above_half(const uint64_t* k) {
    uint64_t t[5];
    t[4] = k[3] >> 63;
    for (int i = 3; i > 0; i--) t[i] = (k[i] << 1) | (k[i - 1] >> 63);
    t[0] = k[0] << 1;
    if (t[4]) return true;
    for (int i = 3; i >= 0; i--) {
        const uint64_t m = Fr::mod(i);
        if (t[i] != m) return t[i] > m;
    }
    return true;
}

// One part of a combination: a signal-major term index over one base array.
struct Part {
    const int64_t* rowstart;  // per signal: first term; rowstart[s + 1]: one past its last
    const uint32_t* term_c;   // per term: the base point's index (the constraint)
    const uint64_t* term_k;   // per term: byte offset of its coefficient in the section, ONE_COEF or MINUS_ONE_COEF
    const uint64_t* bases;    // affine LEM points
};

// Straus's simultaneous multiplication with the GLV endomorphism: sum k_i P_i with one
// doubling chain of ~128 steps for all terms. Each coefficient k (made at most (r-1)/2 by
// negating the point) splits into k1 + k2 lambda with |k1|, |k2| < 2^128, so a term is two
// half-length scalars on P and phi(P) = (beta x, y). Every term gets the odd multiples
// P, 3P, ..., 15P (width-5 NAF digits), made affine together with one field inversion for
// the whole batch, so the chain adds them with mixed additions. Terms with coefficient +-1
// are plain additions.
template <int CURVE, class F>
struct Straus {
    static constexpr int NT = 1 << (WNAF_W - 2);  // odd multiples per point
    struct Half {
        uint32_t table;   // index of its point's first multiple in `aff`
        bool phi, neg;    // use phi(P) / negate
        int len;
        int8_t d[136];
    };
    std::vector<Half> halves;
    std::vector<Jacobian<F>> jac;
    std::vector<Affine<F>> aff;
    std::vector<F> pre;
    Jacobian<F> acc;  // the +-1 terms
    int maxlen = 0;
    typename BaseOf<F>::type beta = glv_beta<CURVE, F>();

    void clear() {
        halves.clear();
        jac.clear();
        acc = Jacobian<F>::infinity();
        maxlen = 0;
    }

    // Adds the term k * P (k: 4 words, < r).
    template <class Fr>
    void add(const uint64_t* kin, Affine<F> P) {
        uint64_t k[4] = {kin[0], kin[1], kin[2], kin[3]};
        if (P.is_inf() || !(k[0] | k[1] | k[2] | k[3])) return;
        if (above_half<Fr>(k)) { neg_mod_r<Fr>(k); P = -P; }
        if (k[0] == 1 && !(k[1] | k[2] | k[3])) { acc = jac_madd(acc, P); return; }
        GlvHalf h[2] = {};
        if (!glv_decompose<CURVE>(k, h[0], h[1])) throw std::runtime_error("GLV decomposition out of bounds");
        const uint32_t t = (uint32_t)jac.size();
        jac.push_back(Jacobian<F>::from_affine(P));
        const Jacobian<F> two = jac_dbl(jac[t]);
        for (int j = 1; j < NT; j++) jac.push_back(jac_add(jac[t + j - 1], two));
        for (int i = 0; i < 2; i++) {
            if (!(h[i].mag[0] | h[i].mag[1])) continue;
            Half hf;
            hf.table = t;
            hf.phi = i == 1;
            hf.neg = h[i].neg;
            const uint64_t m[4] = {h[i].mag[0], h[i].mag[1], 0, 0};
            hf.len = wnaf(m, hf.d);
            maxlen = std::max(maxlen, hf.len);
            halves.push_back(hf);
        }
    }

    // The sum of every term added since clear().
    Jacobian<F> sum() {
        if (halves.empty()) return acc;
        // the multiples, affine, with one inversion (Montgomery's trick)
        const size_t n = jac.size();
        pre.resize(n);
        aff.resize(n);
        F prod = F::one();
        for (size_t i = 0; i < n; i++) {
            pre[i] = prod;
            if (!jac[i].is_inf()) prod = prod * jac[i].Z;
        }
        F inv = field_inv(prod);
        for (size_t i = n; i-- > 0;) {
            if (jac[i].is_inf()) { aff[i] = Affine<F>::infinity(); continue; }
            const F zi = inv * pre[i];
            inv = inv * jac[i].Z;
            const F zi2 = zi.sqr();
            aff[i] = Affine<F>{jac[i].X * zi2, jac[i].Y * zi2 * zi};
        }
        Jacobian<F> chain = Jacobian<F>::infinity();
        for (int b = maxlen - 1; b >= 0; b--) {
            chain = jac_dbl(chain);
            for (const Half& h : halves) {
                if (b >= h.len || !h.d[b]) continue;
                const int dg = h.d[b];
                Affine<F> q = aff[h.table + ((dg > 0 ? dg : -dg) >> 1)];
                if (h.phi && !q.is_inf()) q.x = q.x * beta;
                if ((dg < 0) != h.neg) q = -q;
                chain = jac_madd(chain, q);
            }
        }
        return jac_add(chain, acc);
    }
};

// dst[i] = p[i] + q[i] for n affine pairs, all with ONE field inversion (Montgomery's
// trick): ~6 products per addition where a mixed Jacobian addition costs ~11. Every case is
// handled: p or q at infinity (a copy), p == q (the doubling, lambda = 3x^2 / 2y), p == -q
// (infinity). dst may alias p.
// A fixed-capacity array on transparent huge pages where the kernel allows them (madvise
// mode): the batch Straus reads its tables at random, and with 4 KiB pages most of those
// reads also miss the TLB.
template <class T>
struct HugeArray {
    T* p = nullptr;
    size_t n = 0, cap = 0, bytes = 0;
    HugeArray() = default;
    HugeArray(const HugeArray&) = delete;
    HugeArray& operator=(const HugeArray&) = delete;
    ~HugeArray() { if (p) munmap(p, bytes); }
    void reserve(size_t c) {
        if (c <= cap) return;
        constexpr size_t HUGE = size_t(2) << 20;
        const size_t want = (c * sizeof(T) + HUGE - 1) / HUGE * HUGE;
        void* m = mmap(nullptr, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) throw std::bad_alloc();
        madvise(m, want, MADV_HUGEPAGE);   // advice only: plain pages where it is refused
        if (p) { std::memcpy(m, p, n * sizeof(T)); munmap(p, bytes); }
        p = static_cast<T*>(m);
        bytes = want;
        cap = want / sizeof(T);
    }
    void clear() { n = 0; }
    size_t size() const { return n; }
    void resize(size_t k) {
        if (k > cap) reserve(std::max(k, 2 * cap));
        n = k;
    }
    T& operator[](size_t i) { return p[i]; }
    const T& operator[](size_t i) const { return p[i]; }
};

template <class F, class = void>
struct BatchAdder {
    enum Kind : uint8_t { ADD, DBL, COPY_P, COPY_Q, INF };
    std::vector<F> den, pref;
    std::vector<Kind> kind;

    void run(size_t n, const Affine<F>* p, const Affine<F>* q, Affine<F>* dst) {
        if (!n) return;
        den.resize(n);
        pref.resize(n);
        kind.resize(n);
        F prod = F::one();
        for (size_t i = 0; i < n; i++) {
            Kind k;
            if (p[i].is_inf()) k = COPY_Q;
            else if (q[i].is_inf()) k = COPY_P;
            else if (p[i].x != q[i].x) k = ADD;
            else if (p[i].y == q[i].y && !p[i].y.is_zero()) k = DBL;
            else k = INF;
            kind[i] = k;
            den[i] = k == ADD ? q[i].x - p[i].x : k == DBL ? p[i].y.dbl() : F::one();
            pref[i] = prod;
            prod = prod * den[i];
        }
        F inv = field_inv(prod);
        for (size_t i = n; i-- > 0;) {
            const F di = inv * pref[i];
            inv = inv * den[i];
            const Affine<F>& a = p[i];
            const Affine<F>& b = q[i];
            switch (kind[i]) {
                case ADD: {
                    const F lam = (b.y - a.y) * di;
                    const F x3 = lam.sqr() - a.x - b.x;
                    dst[i] = Affine<F>{x3, lam * (a.x - x3) - a.y};
                    break;
                }
                case DBL: {
                    const F xx = a.x.sqr();
                    const F lam = (xx.dbl() + xx) * di;
                    const F x3 = lam.sqr() - a.x.dbl();
                    dst[i] = Affine<F>{x3, lam * (a.x - x3) - a.y};
                    break;
                }
                case COPY_P: dst[i] = a; break;
                case COPY_Q: dst[i] = b; break;
                default: dst[i] = Affine<F>::infinity(); break;
            }
        }
    }
};

#if defined(ZKQ_HAVE_IFMA)
// The same with AVX-512 IFMA (ifma.hpp, as the MSM's batch-affine tree uses it): the batch
// inversion runs as eight product chains in the lanes of a vector (G2: chains of norms in
// Fq, batch_inv.hpp), and the additions eight at a time. A doubling goes through the same
// vector formula as an addition: with q = (x, y + 3x^2) and 1 / 2y as the inverted
// denominator, lambda = (q.y - p.y) / 2y = 3x^2 / 2y and x3 = lambda^2 - 2x, y3 =
// lambda (x - x3) - y are exactly the doubling's. The additions made up ~45% of
// `zkey new`'s time on Poseidon with the scalar loop above (Poseidon 2^16, one thread).
template <class F>
struct BatchAdder<F, std::enable_if_t<ifma::Vectorized<F>::value>> {
    enum Kind : uint8_t { ADD, DBL, COPY_P, COPY_Q, INF };
    using BI = BatchInv<F>;
    using C = typename BI::Chain;
    std::vector<F> den;
    std::vector<Kind> kind;
    std::vector<uint32_t> ord;   // chain value j is pair ord[j]'s denominator
    ifma::Chains<C> chains;
    ifma::AddBatch<F> batch;

    void run(size_t n, const Affine<F>* p, const Affine<F>* q, Affine<F>* dst) {
        if (!n) return;
        den.resize(n);
        kind.resize(n);
        ord.clear();
        chains.begin(n);
        for (size_t i = 0; i < n; i++) {
            Kind k;
            if (p[i].is_inf()) k = COPY_Q;
            else if (q[i].is_inf()) k = COPY_P;
            else if (p[i].x != q[i].x) k = ADD;
            else if (p[i].y == q[i].y && !p[i].y.is_zero()) k = DBL;
            else k = INF;
            kind[i] = k;
            if (k != ADD && k != DBL) continue;
            den[i] = k == ADD ? q[i].x - p[i].x : p[i].y.dbl();
            ord.push_back((uint32_t)i);
            chains.push(BI::chain(den[i]));
        }
        if (!ord.empty())
            chains.invert([&](size_t j, const C& ij) { den[ord[j]] = BI::inverse(den[ord[j]], ij); });
        // Front to back: a queued pair has copied its inputs, so dst may alias p.
        for (size_t i = 0; i < n; i++) {
            switch (kind[i]) {
                case ADD: batch.push(p[i], q[i], den[i], &dst[i]); break;
                case DBL: {
                    const F xx = p[i].x.sqr();
                    const Affine<F> t{p[i].x, p[i].y + xx.dbl() + xx};
                    batch.push(p[i], t, den[i], &dst[i]);
                    break;
                }
                case COPY_P: dst[i] = p[i]; break;
                case COPY_Q: dst[i] = q[i]; break;
                default: dst[i] = Affine<F>::infinity(); break;
            }
        }
        batch.run();
    }
};
#endif

// Straus with GLV and wNAF (as struct Straus) over many signals at once, in affine
// coordinates: every step of every signal's chain (a doubling or the addition of one digit's
// odd multiple) is one affine addition, and the steps of up to SLOTS signals in flight go
// through one BatchAdder call, i.e. share one field inversion. A signal's chain is its digit
// events sorted by bit, high to low; a slot that finishes takes the block's next signal, so
// the batches stay full.
//
// Odd-multiple tables: a base point that several terms of the block use (a Lagrange point
// of a constraint with many terms: Poseidon's linear layers) gets ONE table, wider (w = 7 or
// 8: 32 or 64 multiples, fewer additions per term), shared by those terms; any other term
// gets its own width-5 table (8 multiples). All tables are made together, batch-affine.
template <int CURVE, class F>
struct BatchStraus {
    static constexpr size_t SLOTS = 4096;
    static constexpr int MAX_BITS = 136;          // wNAF digits of a GLV half (< 2^128)
    static constexpr uint32_t SHARE_MIN = 3;      // uses of a base from which it gets a shared table
    static constexpr uint32_t SHARE_WIDE = 12;    // ... from which that table is width 8, not 7
    struct Event {
        uint32_t entry;  // index into tab
        uint8_t bit;
        uint8_t flags;   // 1: phi, 2: negate
    };
    struct Slot {
        uint32_t row;
        uint32_t e, e_end;
        int b;
        Affine<F> acc;
    };
    struct Term {
        const uint64_t* base;   // affine LEM words in the caller's (unaligned) mapping
        uint64_t k[4];   // at most (r - 1) / 2
        bool neg;        // the term is -k * base
    };
    struct BaseUse {
        uint32_t count;
        uint32_t table;  // index into tables, or NONE
    };
    struct Table {
        uint32_t start;  // first point in tab
        uint32_t size;   // odd multiples
    };
    static constexpr uint32_t NONE = ~uint32_t(0);
    typename BaseOf<F>::type beta = glv_beta<CURVE, F>();
    HugeArray<Affine<F>> tab;   // odd multiples: random reads, so 2 MiB pages
    std::vector<Affine<F>> two, pa, qa;
    std::vector<Event> ev, row_ev;
    std::vector<uint32_t> ev_start, term_start;
    std::vector<Term> terms;
    std::vector<Table> tables;
    std::unordered_map<const uint64_t*, BaseUse> uses;
    std::vector<Jacobian<F>> pm1;
    std::vector<Slot> slots;
    std::vector<uint32_t> live, idx, order, cost;
    BatchAdder<F> adder;

    void begin(size_t rows) {
        terms.clear();
        term_start.assign(1, 0);
        pm1.assign(rows, Jacobian<F>::infinity());
    }

    // Adds the term k * base to the current (last begun) row (k: 4 words, < r).
    template <class Fr>
    void add(const uint64_t* kin, const uint64_t* base) {
        Term t{base, {kin[0], kin[1], kin[2], kin[3]}, false};
        const Affine<F> P = load_point<F>(base);
        if (P.is_inf() || !(t.k[0] | t.k[1] | t.k[2] | t.k[3])) return;
        if (above_half<Fr>(t.k)) { neg_mod_r<Fr>(t.k); t.neg = true; }
        if (t.k[0] == 1 && !(t.k[1] | t.k[2] | t.k[3])) {
            const size_t row = term_start.size() - 1;
            pm1[row] = jac_madd(pm1[row], t.neg ? -P : P);
            return;
        }
        terms.push_back(t);
    }

    void end_row() { term_start.push_back((uint32_t)terms.size()); }

    uint32_t new_table(const uint64_t* base, int w) {
        const uint32_t start = (uint32_t)tab.size(), size = 1u << (w - 2);
        tab.resize(start + size);
        tab[start] = load_point<F>(base);
        tables.push_back(Table{start, size});
        return (uint32_t)tables.size() - 1;
    }

    // Tables and digit events of every term added since begin().
    void prepare() {
        uses.clear();
        for (const Term& t : terms) {
            auto it = uses.try_emplace(t.base, BaseUse{0, NONE}).first;
            it->second.count++;
        }
        tab.clear();
        tables.clear();
        ev.clear();
        ev_start.assign(1, 0);
        const size_t rows = term_start.size() - 1;
        for (size_t r = 0; r < rows; r++) {
            for (uint32_t i = term_start[r]; i < term_start[r + 1]; i++) {
                const Term& t = terms[i];
                BaseUse& u = uses.find(t.base)->second;
                int w = WNAF_W;
                uint32_t tb;
                if (u.count >= SHARE_MIN) {
                    w = u.count >= SHARE_WIDE ? 8 : 7;
                    if (u.table == NONE) u.table = new_table(t.base, w);
                    tb = u.table;
                } else {
                    tb = new_table(t.base, w);
                }
                const uint32_t start = tables[tb].start;
                GlvHalf h[2] = {};
                if (!glv_decompose<CURVE>(t.k, h[0], h[1])) throw std::runtime_error("GLV decomposition out of bounds");
                for (int j = 0; j < 2; j++) {
                    if (!(h[j].mag[0] | h[j].mag[1])) continue;
                    const uint64_t m[4] = {h[j].mag[0], h[j].mag[1], 0, 0};
                    int8_t d[MAX_BITS];
                    const int len = wnaf(m, d, w);
                    const bool neg = h[j].neg != t.neg;
                    for (int b = 0; b < len; b++) {
                        if (!d[b]) continue;
                        const int dg = d[b];
                        row_ev.push_back(Event{start + (uint32_t)((dg > 0 ? dg : -dg) >> 1), (uint8_t)b,
                                               (uint8_t)((j == 1 ? 1 : 0) | (((dg < 0) != neg) ? 2 : 0))});
                    }
                }
            }
            // the row's events, high bits first (a counting sort by bit)
            uint32_t at[MAX_BITS + 1] = {};
            for (const Event& e : row_ev) at[MAX_BITS - e.bit]++;
            for (int b = 1; b <= MAX_BITS; b++) at[b] += at[b - 1];
            const size_t base = ev.size();
            ev.resize(base + row_ev.size());
            for (const Event& e : row_ev) ev[base + at[MAX_BITS - 1 - e.bit]++] = e;
            row_ev.clear();
            ev_start.push_back((uint32_t)ev.size());
        }
    }

    Affine<F> point(const Event& e) const {
        Affine<F> q = tab[e.entry];
        if ((e.flags & 1) && !q.is_inf()) q.x = q.x * beta;
        if (e.flags & 2) q = -q;
        return q;
    }

    // The odd multiples P, 3P, 5P, ... of every table: 2P, then rounds of + 2P.
    void build_tables() {
        const size_t n = tables.size();
        if (!n) return;
        pa.resize(n);
        two.resize(n);
        uint32_t most = 0;
        for (size_t i = 0; i < n; i++) {
            pa[i] = tab[tables[i].start];
            most = std::max(most, tables[i].size);
        }
        adder.run(n, pa.data(), pa.data(), two.data());
        for (uint32_t j = 1; j < most; j++) {
            pa.clear();
            qa.clear();
            idx.clear();
            for (size_t i = 0; i < n; i++) {
                if (tables[i].size <= j) continue;
                idx.push_back((uint32_t)i);
                pa.push_back(tab[tables[i].start + j - 1]);
                qa.push_back(two[i]);
            }
            adder.run(idx.size(), pa.data(), qa.data(), pa.data());
            for (size_t m = 0; m < idx.size(); m++) tab[tables[idx[m]].start + j] = pa[m];
        }
    }

    // The slot's next step: 0 done, 1 doubling (q = acc), 2 addition of q. Additions to
    // infinity and doublings of it are free, so they are done here.
    int next(Slot& s, Affine<F>& q) const {
        for (;;) {
            if (s.e < s.e_end && ev[s.e].bit == s.b) {
                q = point(ev[s.e++]);
                // The slots' tables together outgrow the caches: fetch this slot's next
                // point (and its later events) while the other slots take their turn.
                if (s.e < s.e_end) __builtin_prefetch(&tab[ev[s.e].entry]);
                __builtin_prefetch(&ev[s.e] + 16);
                if (s.acc.is_inf()) { s.acc = q; continue; }
                return 2;
            }
            if (s.b == 0) return 0;
            s.b--;
            if (s.acc.is_inf()) continue;
            q = s.acc;
            return 1;
        }
    }

    bool load(Slot& s, uint32_t row) const {
        s.row = row;
        s.e = ev_start[row];
        s.e_end = ev_start[row + 1];
        s.acc = Affine<F>::infinity();
        s.b = s.e < s.e_end ? ev[s.e].bit : 0;
        return s.e < s.e_end;
    }

    // Every row's sum into res (Jacobian, the +-1 terms included).
    void run(std::vector<Jacobian<F>>& res) {
        const uint32_t rows = (uint32_t)(term_start.size() - 1);
        prepare();
        build_tables();
        res.assign(rows, Jacobian<F>::infinity());
        // Rows start longest first (steps: digit events plus the doublings below the top
        // one): with more rows than slots, the batches stay SLOTS wide until the last rows,
        // which are the shortest, so the tail of small batches (each paying a whole field
        // inversion) is short. Started in signal order, a block's few long rows (Poseidon:
        // up to ~60 terms, ~2000 steps against ~300) ran on alone for most of its rounds.
        order.resize(rows);
        cost.resize(rows);
        for (uint32_t r = 0; r < rows; r++) {
            order[r] = r;
            cost[r] = ev_start[r + 1] - ev_start[r] + (ev_start[r + 1] > ev_start[r] ? ev[ev_start[r]].bit : 0);
        }
        std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return cost[a] > cost[b]; });
        uint32_t next_row = 0;
        slots.resize(std::min<size_t>(SLOTS, rows));
        live.clear();
        for (size_t k = 0; k < slots.size(); k++) live.push_back((uint32_t)k);
        bool fresh_start = true;
        while (!live.empty()) {
            pa.clear();
            qa.clear();
            idx.clear();
            size_t keep = 0;
            for (size_t li = 0; li < live.size(); li++) {
                Slot& s = slots[live[li]];
                Affine<F> q;
                int op = 0;
                bool has = !fresh_start;
                for (;;) {
                    if (has) {
                        op = next(s, q);
                        if (op) break;
                        res[s.row] = jac_madd(pm1[s.row], s.acc);
                        has = false;
                    }
                    if (next_row >= rows) break;
                    has = load(s, order[next_row++]);
                    if (!has) res[s.row] = pm1[s.row];
                }
                if (!op) continue;   // no rows left for this slot
                live[keep++] = live[li];
                idx.push_back(live[li]);
                pa.push_back(s.acc);
                qa.push_back(q);
            }
            fresh_start = false;
            live.resize(keep);
            adder.run(idx.size(), pa.data(), qa.data(), pa.data());
            for (size_t j = 0; j < idx.size(); j++) slots[idx[j]].acc = pa[j];
        }
    }
};

template <class F, class Fr>
struct Combiner {
    const Part* parts;
    int nparts;
    const uint8_t* coefs;
    int n8;

    // Number of terms of signal s over all parts.
    size_t row_terms(uint64_t s) const {
        size_t m = 0;
        for (int p = 0; p < nparts; p++) m += (size_t)(parts[p].rowstart[s + 1] - parts[p].rowstart[s]);
        return m;
    }

    void coef_of(uint64_t off, uint64_t* k) const {
        if (off == ONE_COEF) { k[0] = 1; k[1] = k[2] = k[3] = 0; }
        else if (off == MINUS_ONE_COEF) { for (int i = 0; i < 4; i++) k[i] = Fr::mod(i); k[0] -= 1; }
        else load_coef(coefs + off, n8, k);
    }

    // Every term of signal s into the batch's current row.
    template <int CURVE>
    void row_terms_into(uint64_t s, BatchStraus<CURVE, F>& st) const {
        for (int p = 0; p < nparts; p++) {
            const Part& pt = parts[p];
            for (int64_t t = pt.rowstart[s]; t < pt.rowstart[s + 1]; t++) {
                uint64_t k[4];
                coef_of(pt.term_k[t], k);
                st.template add<Fr>(k, pt.bases + (size_t)pt.term_c[t] * (sizeof(Affine<F>) / 8));
            }
        }
    }
};

}  // namespace

// The combination of rows [s_begin, s_begin + nrows) into out (nrows affine LEM points).
template <int C, class F>
int combine(int group, int nparts, const uint64_t* part_words, const uint8_t* coefs, int n8, uint64_t s_begin,
            uint64_t nrows, uint64_t* out, int threads) {
    using Fr = typename CurveT<C>::Fr;
    std::vector<Part> parts(nparts);
    for (int p = 0; p < nparts; p++) {
        parts[p].rowstart = reinterpret_cast<const int64_t*>(part_words[4 * p]);
        parts[p].term_c = reinterpret_cast<const uint32_t*>(part_words[4 * p + 1]);
        parts[p].term_k = reinterpret_cast<const uint64_t*>(part_words[4 * p + 2]);
        parts[p].bases = reinterpret_cast<const uint64_t*>(part_words[4 * p + 3]);
    }
    Combiner<F, Fr> cb{parts.data(), nparts, coefs, n8};
    constexpr size_t PW = sizeof(Affine<F>) / 8;
    // Signals with very many terms first, each an MSM on all threads.
    std::vector<uint8_t> big(nrows, 0);
    for (uint64_t i = 0; i < nrows; i++) {
        const size_t m = cb.row_terms(s_begin + i);
        if (m <= BIG_ROW) continue;
        big[i] = 1;
        std::vector<uint64_t> pts(m * PW), sc(m * 4);
        size_t j = 0;
        for (int p = 0; p < nparts; p++) {
            const Part& pt = parts[p];
            for (int64_t t = pt.rowstart[s_begin + i]; t < pt.rowstart[s_begin + i + 1]; t++, j++) {
                std::memcpy(&pts[j * PW], pt.bases + (size_t)pt.term_c[t] * PW, PW * 8);
                cb.coef_of(pt.term_k[t], &sc[j * 4]);
            }
        }
        const int rc = group == 1 ? zkq_msm_g1(C, pts.data(), sc.data(), m, out + i * PW, threads)
                                  : zkq_msm_g2(C, pts.data(), sc.data(), m, out + i * PW, threads);
        if (rc != ZKQ_OK) return rc;
    }
    // The rest in blocks of whole signals (about BLOCK_TERMS terms, at most BLOCK_ROWS
    // signals: their odd-multiple tables stay tens of MiB per thread, and a block has
    // several rows per slot of BatchStraus, so its rounds stay full-width), handed out to
    // the threads as they come free.
    constexpr size_t BLOCK_TERMS = (size_t(4) << 20) / sizeof(Affine<F>), BLOCK_ROWS = 16384;
    std::vector<uint64_t> bounds{0};
    for (uint64_t i = 0, terms = 0; i < nrows; i++) {
        terms += big[i] ? 0 : cb.row_terms(s_begin + i);
        if (terms >= BLOCK_TERMS || i + 1 - bounds.back() >= BLOCK_ROWS || i + 1 == nrows) {
            bounds.push_back(i + 1);
            terms = 0;
        }
    }
    const uint64_t nblocks = bounds.size() - 1;
    std::atomic<uint64_t> next{0};
    parallel_for(threads, (size_t)threads, [&](size_t, size_t, int) {
        BatchStraus<C, F> st;
        std::vector<Jacobian<F>> res;
        std::vector<uint64_t> tmp;
        for (uint64_t b; (b = next.fetch_add(1)) < nblocks;) {
            const uint64_t lo = bounds[b], hi = bounds[b + 1];
            st.begin(hi - lo);
            for (uint64_t i = lo; i < hi; i++) {
                if (!big[i]) cb.template row_terms_into<C>(s_begin + i, st);
                st.end_row();
            }
            st.run(res);
            tmp.resize((hi - lo) * PW);
            store_affine(res, tmp.data());
            for (uint64_t i = lo; i < hi; i++)
                if (!big[i]) std::memcpy(out + i * PW, &tmp[(i - lo) * PW], PW * 8);
        }
    });
    return ZKQ_OK;
}

template <class Fq>
inline void put_u(const Affine<Fq>& a, uint8_t* dst) {
    const int nb = Fq::params::NW * 8;
    put_be(a.x, dst);
    put_be(a.y, dst + nb);
}
// Fq2 coordinate: the whole (c0 LE || c1 LE) reversed, i.e. c1 big-endian then c0.
template <class Fq>
inline void put_u(const Affine<Fp2<Fq>>& a, uint8_t* dst) {
    const int nb = Fq::params::NW * 8;
    put_be(a.x.c1, dst);
    put_be(a.x.c0, dst + nb);
    put_be(a.y.c1, dst + 2 * nb);
    put_be(a.y.c0, dst + 3 * nb);
}

template <class F>
int lem_to_u(const uint64_t* in, uint64_t n, uint8_t* out, int threads) {
    constexpr size_t PW = sizeof(Affine<F>) / 8;
    parallel_for(threads, n, [&](size_t b, size_t e, int) {
        for (size_t i = b; i < e; i++) {
            const Affine<F> a = load_point<F>(in + i * PW);
            if (a.is_inf()) std::memset(out + i * PW * 8, 0, PW * 8);
            else put_u(a, out + i * PW * 8);
        }
    });
    return ZKQ_OK;
}

template <class F>
int sub_u(const uint64_t* a, const uint64_t* b, uint64_t n, uint8_t* out, int threads) {
    constexpr size_t PW = sizeof(Affine<F>) / 8;
    parallel_for(threads, n, [&](size_t lo, size_t hi, int) {
        constexpr size_t BLOCK = 1024;
        std::vector<Jacobian<F>> res;
        std::vector<uint64_t> tmp;
        for (size_t s = lo; s < hi; s += BLOCK) {
            const size_t e = std::min(hi, s + BLOCK);
            res.resize(e - s);
            for (size_t i = s; i < e; i++)
                res[i - s] = jac_madd(Jacobian<F>::from_affine(load_point<F>(a + i * PW)), -load_point<F>(b + i * PW));
            tmp.resize((e - s) * PW);
            store_affine(res, tmp.data());
            for (size_t i = s; i < e; i++) {
                const Affine<F> p = load_point<F>(&tmp[(i - s) * PW]);
                if (p.is_inf()) std::memset(out + i * PW * 8, 0, PW * 8);
                else put_u(p, out + i * PW * 8);
            }
        }
    });
    return ZKQ_OK;
}

template <int CURVE, class F>
int scale(const uint64_t* in, uint64_t n, const uint64_t* k, uint64_t* out, int threads) {
    using Fr = typename CurveT<CURVE>::Fr;
    constexpr size_t PW = sizeof(Affine<F>) / 8;
    parallel_for(threads, n, [&](size_t lo, size_t hi, int) {
        constexpr size_t BLOCK = 1024;
        Straus<CURVE, F> st;
        std::vector<Jacobian<F>> res;
        for (size_t s = lo; s < hi; s += BLOCK) {
            const size_t e = std::min(hi, s + BLOCK);
            res.resize(e - s);
            for (size_t i = s; i < e; i++) {
                st.clear();
                st.template add<Fr>(k, load_point<F>(in + i * PW));
                res[i - s] = st.sum();
            }
            store_affine(res, out + s * PW);
        }
    });
    return ZKQ_OK;
}

}  // namespace zkq

using namespace zkq;

extern "C" {

// Pass 1 over a .r1cs constraint section (n8-byte coefficients): per-signal term counts of
// A, B, C into counts (3 * n_vars, zeroed by the caller). info: on success {bytes read},
// on error {constraint, byte position or signal}.
int zkq_setup_r1cs_count(int curve, const uint8_t* sec, uint64_t len, int n8, uint32_t n_constraints,
                         uint32_t n_vars, int64_t* counts, int64_t* info) {
    if (n8 < 1 || n8 > 32) return ZKQ_ERR_ARG;
    return guarded([&]() -> int {
        ZKQ_DISPATCH_CURVE(curve, (r1cs_count<typename CurveT<C>::Fr>(sec, len, n8, n_constraints, n_vars,
                                                                        counts, info)))
    });
}

// Pass 2 over constraints [c_begin, c_end) from byte *pos (see r1cs_fill above).
int zkq_setup_r1cs_fill(int curve, const uint8_t* sec, uint64_t len, int n8, uint32_t c_begin, uint32_t c_end,
                        uint32_t n_vars, uint64_t* pos, int64_t* cursor, uint32_t* term_c, uint64_t* term_k,
                        uint8_t* coefs, uint64_t cap, uint32_t* c_done, uint64_t* n_coefs) {
    if (n8 < 1 || n8 > 32) return ZKQ_ERR_ARG;
    return guarded([&]() -> int {
        ZKQ_DISPATCH_CURVE(curve, (r1cs_fill<typename CurveT<C>::Fr>(sec, len, n8, c_begin, c_end, n_vars, pos,
                                                                       cursor, term_c, term_k, coefs, cap, c_done,
                                                                       n_coefs)))
    });
}

// out[i] = sum over the parts and the terms of signal s_begin + i of coef * base[constraint]
// (group 1: G1, 2: G2). part_words: per part, the addresses of its rowstart (int64),
// term_c (uint32), term_k (uint64) and bases (affine LEM). coefs: the constraint section
// the term_k offsets point into (n8-byte coefficients).
int zkq_setup_combine(int curve, int group, int nparts, const uint64_t* part_words, const uint8_t* coefs,
                      int n8, uint64_t s_begin, uint64_t nrows, uint64_t* out, int threads) {
    if (group != 1 && group != 2) return ZKQ_ERR_ARG;
    return guarded([&]() -> int {
        ZKQ_CURVE_GROUP(group, (combine<C, Fq>(group, nparts, part_words, coefs, n8, s_begin, nrows, out, threads)),
                        (combine<C, Fp2<Fq>>(group, nparts, part_words, coefs, n8, s_begin, nrows, out, threads)))
    });
}

// out (n * point bytes): the uncompressed encoding of n affine LEM points of `group`.
int zkq_setup_lem_to_u(int curve, int group, const uint64_t* in, uint64_t n, uint8_t* out, int threads) {
    if (group != 1 && group != 2) return ZKQ_ERR_ARG;
    return guarded([&]() -> int {
        ZKQ_CURVE_GROUP(group, (lem_to_u<Fq>(in, n, out, threads)), (lem_to_u<Fp2<Fq>>(in, n, out, threads)))
    });
}

// out[i] = uncompressed(a[i] - b[i]) for n affine LEM G1 points.
int zkq_setup_sub_u_g1(int curve, const uint64_t* a, const uint64_t* b, uint64_t n, uint8_t* out, int threads) {
    return guarded([&]() -> int {
        ZKQ_DISPATCH_CURVE(curve, (sub_u<typename CurveT<C>::Fq>(a, b, n, out, threads)))
    });
}

// out[i] = k * in[i] for n affine LEM G1 points; k: 4 words, standard form, < r.
int zkq_setup_scale_g1(int curve, const uint64_t* in, uint64_t n, const uint64_t* k, uint64_t* out, int threads) {
    return guarded([&]() -> int {
        ZKQ_DISPATCH_CURVE(curve, (scale<C, typename CurveT<C>::Fq>(in, n, k, out, threads)))
    });
}

}  // extern "C"
