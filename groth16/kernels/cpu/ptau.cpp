// ptau.cpp - the heavy math of a public-beacon powers of tau (groth16/setup/ptau_beacon.py:
// `zkqueue ptau beacon`), the same file as snarkjs's `powersoftau new` + `powersoftau
// beacon` + `powersoftau prepare phase2`.
//
// The beacon's secrets (tau, alpha, beta) are public, so every point of the file is
// [s]G for a scalar s computed in the field: s = a * b^i (tau powers, times alpha or beta)
// or a Lagrange value s = c w^i / (tau - w^i) - t w^i (the prepared sections). Fixed-base
// multiplication with a W-bit window table T[j][d] = d 2^(Wj) G makes each point
// ceil(256 / W) mixed additions; a block of points goes affine with one inversion.
//
//  * zkq_ptau_table: the window table of a base point.
//  * zkq_ptau_points: points [start, start + n) of a geometric or Lagrange run.
//  * zkq_ptau_lem_to_c: the compressed encoding (snarkjs's batchLEMtoC) the response hash reads.
//  * zkq_blake2b_*: BLAKE2b-512 with @noble/hashes' buffering, whose state snarkjs writes
//    into the contribution record (the 216-byte "partial hash"): the bytes left in its
//    block buffer depend on how the input was split into update calls, so update follows
//    noble's algorithm step for step (see blake2b_update).
#include <cstdint>
#include <cstring>
#include <vector>

#include "affine_io.hpp"
#include "zkq.hpp"

namespace zkq {
namespace {

constexpr int NBITS = 256;  // scalars: 4 words, standard form

inline int windows(int w) { return (NBITS + w - 1) / w; }

// Digit j (W bits) of a 4-word scalar; W divides 64.
inline uint32_t digit(const uint64_t* k, int w, int j) {
    const int bit = j * w;
    return (uint32_t)((k[bit / 64] >> (bit % 64)) & ((1ull << w) - 1));
}

// T[j * (2^w - 1) + d - 1] = d * 2^(w j) * G for j < windows(w), 1 <= d < 2^w.
template <class F>
int table(const uint64_t* base, int w, uint64_t* out, int threads) {
    constexpr size_t PW = sizeof(Affine<F>) / 8;
    const int nwin = windows(w);
    const size_t row = (1u << w) - 1;
    // The row bases 2^(wj) G, by doubling (cheap: 256 doublings).
    std::vector<Affine<F>> rowbase(nwin);
    Jacobian<F> b = Jacobian<F>::from_affine(load_point<F>(base));
    for (int j = 0; j < nwin; j++) {
        rowbase[j] = jac_to_affine(b);
        for (int t = 0; t < w; t++) b = jac_dbl(b);
    }
    parallel_for(threads, (size_t)nwin, [&](size_t lo, size_t hi, int) {
        std::vector<Jacobian<F>> pts(row);
        for (size_t j = lo; j < hi; j++) {
            Jacobian<F> acc = Jacobian<F>::infinity();
            for (size_t d = 0; d < row; d++) {
                acc = jac_madd(acc, rowbase[j]);
                pts[d] = acc;
            }
            store_affine(pts, out + j * row * PW);
        }
    });
    return ZKQ_OK;
}

template <class Fr>
Fr fr_pow(Fr base, uint64_t e) {
    Fr acc = Fr::one();
    while (e) {
        if (e & 1) acc = acc * base;
        base = base.sqr();
        e >>= 1;
    }
    return acc;
}

// Scalars of one block, standard form (4 words each).
//   kind 0 (geometric): s_i = a * b^i
//   kind 1 (Lagrange):  s_i = c w^i / (tau - w^i) - t w^i, with (a, b, c, d) = (w, tau, c, t)
template <class Fr>
void block_scalars(int kind, const Fr* prm, uint64_t first, size_t m, uint64_t* out) {
    std::vector<Fr> s(m);
    if (kind == 0) {
        Fr cur = prm[0] * fr_pow(prm[1], first);
        for (size_t i = 0; i < m; i++) { s[i] = cur; cur = cur * prm[1]; }
    } else {
        const Fr &w = prm[0], &tau = prm[1], &c = prm[2], &t = prm[3];
        std::vector<Fr> wi(m), pre(m);
        Fr cur = fr_pow(w, first), acc = Fr::one();
        for (size_t i = 0; i < m; i++) {
            wi[i] = cur;
            pre[i] = acc;
            acc = acc * (tau - cur);   // tau is never a root of unity of a beacon (checked by the caller)
            cur = cur * w;
        }
        Fr inv = field_inv(acc);
        for (size_t i = m; i-- > 0;) {
            const Fr d = tau - wi[i];
            const Fr di = inv * pre[i];
            inv = inv * d;
            s[i] = c * wi[i] * di - t * wi[i];
        }
    }
    for (size_t i = 0; i < m; i++) store_words(s[i].from_mont(), out + 4 * i);
}

template <int CURVE, class F>
int points(int kind, const uint64_t* tab, int w, const uint64_t* params, uint64_t start, uint64_t n,
           uint64_t* out, int threads) {
    using Fr = typename CurveT<CURVE>::Fr;
    constexpr size_t PW = sizeof(Affine<F>) / 8;
    if (kind != 0 && kind != 1) return ZKQ_ERR_ARG;
    Fr prm[4];
    for (int i = 0; i < 4; i++) prm[i] = load_words<Fr>(params + 4 * i).to_mont();
    const int nwin = windows(w);
    const size_t row = (1u << w) - 1;
    const Affine<F>* T = reinterpret_cast<const Affine<F>*>(tab);
    parallel_for(threads, (size_t)n, [&](size_t lo, size_t hi, int) {
        constexpr size_t BLOCK = 1024;
        std::vector<uint64_t> k(4 * BLOCK);
        std::vector<Jacobian<F>> res;
        for (size_t s = lo; s < hi; s += BLOCK) {
            const size_t m = std::min(hi, s + BLOCK) - s;
            block_scalars<Fr>(kind, prm, start + s, m, k.data());
            res.resize(m);
            for (size_t i = 0; i < m; i++) {
                Jacobian<F> acc = Jacobian<F>::infinity();
                for (int j = 0; j < nwin; j++) {
                    const uint32_t d = digit(&k[4 * i], w, j);
                    if (d) acc = jac_madd(acc, T[j * row + d - 1]);
                }
                res[i] = acc;
            }
            store_affine(res, out + s * PW);
        }
    });
    return ZKQ_OK;
}

// wasmcurves' sign: -1 when the standard value is above (q - 1) / 2, i.e. above its negative.
template <class Fq>
inline bool negative(const Fq& y) {
    if (y.is_zero()) return false;
    uint64_t a[Fq::params::NW], b[Fq::params::NW];
    store_words(y.from_mont(), a);
    store_words((-y).from_mont(), b);
    for (int i = Fq::params::NW - 1; i >= 0; i--)
        if (a[i] != b[i]) return a[i] > b[i];
    return false;
}
template <class Fq>
inline bool negative(const Fp2<Fq>& y) { return y.c1.is_zero() ? negative(y.c0) : negative(y.c1); }

// LEMtoC: x big-endian (Fq2: c1 then c0), 0x80 on the first byte when y is negative;
// infinity: zeros with 0x40.
template <class Fq>
inline void put_c(const Affine<Fq>& a, uint8_t* dst) { put_be(a.x, dst); if (negative(a.y)) dst[0] |= 0x80; }
template <class Fq>
inline void put_c(const Affine<Fp2<Fq>>& a, uint8_t* dst) {
    put_be(a.x.c1, dst);
    put_be(a.x.c0, dst + Fq::params::NW * 8);
    if (negative(a.y)) dst[0] |= 0x80;
}

template <class F>
int lem_to_c(const uint64_t* in, uint64_t n, uint8_t* out, int threads) {
    constexpr size_t PW = sizeof(Affine<F>) / 8;
    constexpr size_t CB = PW * 4;  // compressed bytes: half the affine words' bytes
    parallel_for(threads, n, [&](size_t b, size_t e, int) {
        for (size_t i = b; i < e; i++) {
            const Affine<F> a = load_point<F>(in + i * PW);
            if (a.is_inf()) { std::memset(out + i * CB, 0, CB); out[i * CB] = 0x40; }
            else put_c(a, out + i * CB);
        }
    });
    return ZKQ_OK;
}

// ---- BLAKE2b (RFC 7693), with @noble/hashes 1.x's update --------------------------------
struct Blake2b {
    uint64_t h[8];
    uint64_t length;   // bytes taken so far (noble's this.length)
    uint64_t pos;      // bytes waiting in buf (noble's this.pos)
    uint8_t buf[128];
};
static_assert(sizeof(Blake2b) == 8 * 8 + 16 + 128, "Blake2b layout is the Python side's");

constexpr uint64_t IV[8] = {0x6a09e667f3bcc908ull, 0xbb67ae8584caa73bull, 0x3c6ef372fe94f82bull,
                            0xa54ff53a5f1d36f1ull, 0x510e527fade682d1ull, 0x9b05688c2b3e6c1full,
                            0x1f83d9abfb41bd6bull, 0x5be0cd19137e2179ull};
constexpr uint8_t SIGMA[12][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
    {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4}, {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
    {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13}, {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
    {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11}, {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
    {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5}, {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3}};

inline uint64_t rotr(uint64_t x, int n) { return (x >> n) | (x << (64 - n)); }

// One compression of a 128-byte block; t: the byte counter including this block.
void compress(uint64_t* h, const uint8_t* block, uint64_t t, bool last) {
    uint64_t m[16], v[16];
    std::memcpy(m, block, 128);  // little-endian host
    for (int i = 0; i < 8; i++) { v[i] = h[i]; v[i + 8] = IV[i]; }
    v[12] ^= t;
    if (last) v[14] = ~v[14];
    for (int r = 0; r < 12; r++) {
        const uint8_t* s = SIGMA[r];
        auto G = [&](int a, int b, int c, int d, uint64_t x, uint64_t y) {
            v[a] = v[a] + v[b] + x; v[d] = rotr(v[d] ^ v[a], 32);
            v[c] = v[c] + v[d];     v[b] = rotr(v[b] ^ v[c], 24);
            v[a] = v[a] + v[b] + y; v[d] = rotr(v[d] ^ v[a], 16);
            v[c] = v[c] + v[d];     v[b] = rotr(v[b] ^ v[c], 63);
        };
        G(0, 4, 8, 12, m[s[0]], m[s[1]]);
        G(1, 5, 9, 13, m[s[2]], m[s[3]]);
        G(2, 6, 10, 14, m[s[4]], m[s[5]]);
        G(3, 7, 11, 15, m[s[6]], m[s[7]]);
        G(0, 5, 10, 15, m[s[8]], m[s[9]]);
        G(1, 6, 11, 12, m[s[10]], m[s[11]]);
        G(2, 7, 8, 13, m[s[12]], m[s[13]]);
        G(3, 4, 9, 14, m[s[14]], m[s[15]]);
    }
    for (int i = 0; i < 8; i++) h[i] ^= v[i] ^ v[i + 8];
}

// noble's BLAKE2.update: the last block is kept in buf (it may be the final one); whole
// blocks of a call after the first are compressed in place without passing through buf
// (noble also requires 4-byte alignment there, which snarkjs's fresh buffers have).
void blake2b_update(Blake2b* st, const uint8_t* data, uint64_t len) {
    for (uint64_t p = 0; p < len;) {
        if (st->pos == 128) {
            compress(st->h, st->buf, st->length, false);
            st->pos = 0;
        }
        const uint64_t take = std::min<uint64_t>(128 - st->pos, len - p);
        if (take == 128 && p + take < len) {
            for (; p + 128 < len; p += 128) {
                st->length += 128;
                compress(st->h, data + p, st->length, false);
            }
            continue;
        }
        std::memcpy(st->buf + st->pos, data + p, take);
        st->pos += take;
        st->length += take;
        p += take;
    }
}

}  // namespace
}  // namespace zkq

using namespace zkq;

extern "C" {

// The window table of `base` (affine LEM, group 1: G1, 2: G2) for w-bit digits (w: 8 or
// 16): ceil(256 / w) * (2^w - 1) affine LEM points into out.
int zkq_ptau_table(int curve, int group, const uint64_t* base, int w, uint64_t* out, int threads) {
    if ((group != 1 && group != 2) || (w != 8 && w != 16)) return ZKQ_ERR_ARG;
    return guarded([&]() -> int {
        ZKQ_CURVE_GROUP(group, (table<Fq>(base, w, out, threads)), (table<Fp2<Fq>>(base, w, out, threads)))
    });
}

// out (n affine LEM points) = [s_i] G for i in [start, start + n), G the table's base.
// params: four standard-form scalars (4 words each): kind 0: (a, b) with s_i = a b^i;
// kind 1: (w, tau, c, t) with s_i = c w^i / (tau - w^i) - t w^i.
int zkq_ptau_points(int curve, int group, int kind, const uint64_t* tab, int w, const uint64_t* params,
                    uint64_t start, uint64_t n, uint64_t* out, int threads) {
    if ((group != 1 && group != 2) || (w != 8 && w != 16)) return ZKQ_ERR_ARG;
    return guarded([&]() -> int {
        ZKQ_CURVE_GROUP(group, (points<C, Fq>(kind, tab, w, params, start, n, out, threads)),
                       (points<C, Fp2<Fq>>(kind, tab, w, params, start, n, out, threads)))
    });
}

// out (n * half the point's LEM bytes): snarkjs's compressed encoding of n affine LEM points.
int zkq_ptau_lem_to_c(int curve, int group, const uint64_t* in, uint64_t n, uint8_t* out, int threads) {
    if (group != 1 && group != 2) return ZKQ_ERR_ARG;
    return guarded([&]() -> int {
        ZKQ_CURVE_GROUP(group, (lem_to_c<Fq>(in, n, out, threads)), (lem_to_c<Fp2<Fq>>(in, n, out, threads)))
    });
}

// A fresh BLAKE2b-512 state (no key) in st (sizeof(Blake2b) = 208 bytes).
int zkq_blake2b_init(uint8_t* st_bytes) {
    Blake2b st{};
    for (int i = 0; i < 8; i++) st.h[i] = IV[i];
    st.h[0] ^= 0x01010000ull ^ 64;  // digest length 64, no key, fanout 1, depth 1
    std::memcpy(st_bytes, &st, sizeof(st));
    return ZKQ_OK;
}

int zkq_blake2b_update(uint8_t* st_bytes, const uint8_t* data, uint64_t len) {
    Blake2b st;
    std::memcpy(&st, st_bytes, sizeof(st));
    blake2b_update(&st, data, len);
    std::memcpy(st_bytes, &st, sizeof(st));
    return ZKQ_OK;
}

// The 64-byte digest of a state (the state itself is left as it was).
int zkq_blake2b_final(const uint8_t* st_bytes, uint8_t* out) {
    Blake2b st;
    std::memcpy(&st, st_bytes, sizeof(st));
    std::memset(st.buf + st.pos, 0, 128 - st.pos);
    compress(st.h, st.buf, st.length, true);
    std::memcpy(out, st.h, 64);
    return ZKQ_OK;
}

}  // extern "C"
