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
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "glv.hpp"
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

// Width-w NAF of k (4 words, k < 2^255): digits d[0..len) (odd or zero, |d| < 2^(w-1));
// returns len.
int wnaf(const uint64_t* kin, int8_t* d) {
    uint64_t k[5] = {kin[0], kin[1], kin[2], kin[3], 0};
    int len = 0;
    const int64_t full = 1 << WNAF_W, half = 1 << (WNAF_W - 1);
    while (k[0] | k[1] | k[2] | k[3] | k[4]) {
        int64_t digit = 0;
        if (k[0] & 1) {
            digit = (int64_t)(k[0] & (full - 1));
            if (digit >= half) digit -= full;
            // k -= digit
            if (digit > 0) {
                uint64_t borrow = (uint64_t)digit;
                for (int i = 0; i < 5 && borrow; i++) { const uint64_t o = k[i]; k[i] -= borrow; borrow = o < borrow; }
            } else {
                uint64_t carry = (uint64_t)(-digit);
                for (int i = 0; i < 5 && carry; i++) { k[i] += carry; carry = k[i] < carry; }
            }
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

template <class F>
inline Affine<F> load_point(const uint64_t* w) {
    Affine<F> p;
    std::memcpy(&p, w, sizeof(p));
    return p;
}

// Writes Jacobian points as affine LEM words (infinity = zeros) with one field inversion
// for the lot (Montgomery's trick).
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

    // The signal's sum: every term into one Straus batch.
    template <int CURVE>
    Jacobian<F> row(uint64_t s, Straus<CURVE, F>& st) const {
        st.clear();
        for (int p = 0; p < nparts; p++) {
            const Part& pt = parts[p];
            for (int64_t t = pt.rowstart[s]; t < pt.rowstart[s + 1]; t++) {
                uint64_t k[4];
                coef_of(pt.term_k[t], k);
                st.template add<Fr>(k, load_point<F>(pt.bases + (size_t)pt.term_c[t] * (sizeof(Affine<F>) / 8)));
            }
        }
        return st.sum();
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
    // The rest in blocks, handed out to the threads as they come free.
    constexpr uint64_t BLOCK = 256;
    const uint64_t nblocks = (nrows + BLOCK - 1) / BLOCK;
    std::atomic<uint64_t> next{0};
    parallel_for(threads, (size_t)threads, [&](size_t, size_t, int) {
        Straus<C, F> st;
        std::vector<Jacobian<F>> res;
        std::vector<uint64_t> tmp;
        for (uint64_t b; (b = next.fetch_add(1)) < nblocks;) {
            const uint64_t lo = b * BLOCK, hi = std::min(nrows, lo + BLOCK);
            res.assign(hi - lo, Jacobian<F>::infinity());
            for (uint64_t i = lo; i < hi; i++)
                if (!big[i]) res[i - lo] = cb.template row<C>(s_begin + i, st);
            tmp.resize((hi - lo) * PW);
            store_affine(res, tmp.data());
            for (uint64_t i = lo; i < hi; i++)
                if (!big[i]) std::memcpy(out + i * PW, &tmp[(i - lo) * PW], PW * 8);
        }
    });
    return ZKQ_OK;
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

#define ZKQ_SETUP_GROUP(group, CALL_G1, CALL_G2)                                  \
    switch (curve) {                                                              \
        case 0: { constexpr int C = 0; using Fq = typename CurveT<C>::Fq;        \
                  return group == 1 ? (CALL_G1) : (CALL_G2); }                  \
        case 1: { constexpr int C = 1; using Fq = typename CurveT<C>::Fq;        \
                  return group == 1 ? (CALL_G1) : (CALL_G2); }                  \
        default: return ZKQ_ERR_CURVE;                                            \
    }

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
        ZKQ_SETUP_GROUP(group, (combine<C, Fq>(group, nparts, part_words, coefs, n8, s_begin, nrows, out, threads)),
                        (combine<C, Fp2<Fq>>(group, nparts, part_words, coefs, n8, s_begin, nrows, out, threads)))
    });
}

// out (n * point bytes): the uncompressed encoding of n affine LEM points of `group`.
int zkq_setup_lem_to_u(int curve, int group, const uint64_t* in, uint64_t n, uint8_t* out, int threads) {
    if (group != 1 && group != 2) return ZKQ_ERR_ARG;
    return guarded([&]() -> int {
        ZKQ_SETUP_GROUP(group, (lem_to_u<Fq>(in, n, out, threads)), (lem_to_u<Fp2<Fq>>(in, n, out, threads)))
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
