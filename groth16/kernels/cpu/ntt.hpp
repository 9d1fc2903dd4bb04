// ntt.hpp - number-theoretic transforms over Fr with snarkjs's roots of unity:
// omega_s = 5^((r-1)/2^s) (s = 2-adicity), and the size-2^k root is omega_s squared s-k times.
//
// Two in-place radix-2 transforms that need no bit-reversal pass when used as a pair:
//   dif: natural order in, bit-reversed order out (decimation in frequency);
//   dit: bit-reversed order in, natural order out (decimation in time).
// Cache use: stages whose blocks are larger than NTT_BLOCK elements ("outer" stages) run
// two at a time (radix-2^2: four elements loaded, two stages applied, four stored), so the
// array streams through memory half as often; the remaining stages work block by block,
// each block staying in the L2 cache through all of them. Threads split the butterflies of
// an outer pass and take whole blocks of the inner stages.
//
// to_coset() is the prover's step "values on the domain -> values on the odd coset":
// dif with omega^-1, a pointwise multiply by g^i / n (in bit-reversed order), dit with
// omega; the multiply runs on each block between its inner dif and dit stages, while the
// block is in cache.
#pragma once
#include "zkq.hpp"

namespace zkq {
namespace {

// Elements per block of the inner stages: 128 KiB of Fr, well inside a core's L2 with the
// stage's twiddles beside it.
constexpr size_t NTT_BLOCK = size_t(1) << 12;

// omega of the size-2^k subgroup, Montgomery form.
template <class Fr, int S>
Fr root_of_unity(int k) {
    uint64_t e[4];  // (r - 1) >> S
    uint64_t p[4];
    for (int i = 0; i < 4; i++) p[i] = Fr::params::p(i);
    p[0] -= 1;  // r is odd, so no borrow
    for (int i = 0; i < 4; i++) e[i] = (p[i] >> S) | (i < 3 ? p[i + 1] << (64 - S) : 0);
    Fr w = Fr::from_uint(5).pow_words([&](int i) { return e[i]; }, 4);
    for (int i = k; i < S; i++) w = w.sqr();
    return w;
}

// k with 2^k = n, or -1 when n is not a power of two.
inline int log2_exact(size_t n) {
    if (n == 0 || (n & (n - 1))) return -1;
    int k = 0;
    while ((size_t(1) << k) < n) k++;
    return k;
}

inline size_t bitrev(size_t x, int bits) {
    size_t r = 0;
    for (int i = 0; i < bits; i++) { r = (r << 1) | (x & 1); x >>= 1; }
    return r;
}

// 2^-k: the inverse transform's factor 1/n.
template <class Fr>
Fr inv_pow2(int k) {
    Fr two_inv = Fr::from_uint(2).inv(), x = Fr::one();
    for (int i = 0; i < k; i++) x = x * two_inv;
    return x;
}

template <class Fr>
Fr pow_u64(const Fr& x, uint64_t e) {
    return x.pow_words([&](int) { return e; }, 1);
}

// out[i] = start * step^i for i in [0, n), threads filling contiguous ranges.
template <class Fr>
void fill_geometric(Fr* out, size_t n, const Fr& start, const Fr& step, int threads) {
    parallel_for(clamp_threads(threads, n / 4096 + 1), n, [&](size_t b, size_t e, int) {
        if (b >= e) return;
        Fr f = start * pow_u64(step, b);
        for (size_t i = b; i < e; i++) { out[i] = f; f = f * step; }
    });
}

// a[i] *= start * step^i for i in [0, n).
template <class Fr>
void mul_geometric(Fr* a, size_t n, const Fr& start, const Fr& step, int threads) {
    parallel_for(clamp_threads(threads, n / 4096 + 1), n, [&](size_t b, size_t e, int) {
        if (b >= e) return;
        Fr f = start * pow_u64(step, b);
        for (size_t i = b; i < e; i++) { a[i] = a[i] * f; f = f * step; }
    });
}

// Twiddles of every stage of a size-n transform (none for n = 1), stage after stage: for
// len = 2, 4, ..., n the len/2 powers w^j of w = omega_n^(n/len) at offset len/2 - 1
// (n - 1 elements in all). One contiguous run per stage keeps the twiddles a block uses in
// few cache lines; one n/2 table read with stride n/len would touch a line per twiddle.
// The inverse transform reads the same table: w^-j = -w^(len/2 - j).
template <class Fr>
struct Twiddles {
    std::vector<Fr> t;
    Twiddles(const Fr& omega, size_t n, int threads) : t(n - 1) {
        if (n < 2) return;  // a size-1 transform has no butterflies
        fill_geometric(t.data() + n / 2 - 1, n / 2, Fr::one(), omega, threads);
        for (size_t len = n / 2; len >= 2; len /= 2) {
            Fr* dst = t.data() + len / 2 - 1;
            const Fr* src = t.data() + len - 1;  // the stage of 2*len: w_len = w_2len^2
            for (size_t j = 0; j < len / 2; j++) dst[j] = src[2 * j];
        }
    }
    const Fr* stage(size_t len) const { return t.data() + len / 2 - 1; }
};

// DIF butterfly of stage `h` = len/2: (x, y) -> (x + y, (x - y) w^j); inverse uses w^-j.
template <bool INV, class Fr>
inline void dif_bf(Fr& x, Fr& y, const Fr* tw, size_t h, size_t j) {
    Fr u = x, v = y;
    x = u + v;
    if (j == 0) y = u - v;
    else if (INV) y = (v - u) * tw[h - j];  // (u - v) * (-w^(h-j))
    else y = (u - v) * tw[j];
}

// DIT butterfly of stage `h` = len/2: (x, y) -> (x + y w^j, x - y w^j); inverse uses w^-j.
template <bool INV, class Fr>
inline void dit_bf(Fr& x, Fr& y, const Fr* tw, size_t h, size_t j) {
    Fr u = x;
    if (j == 0) { Fr v = y; x = u + v; y = u - v; return; }
    Fr p = y * tw[INV ? h - j : j];  // inverse: y w^-j = -p
    if (INV) { x = u - p; y = u + p; }
    else { x = u + p; y = u - p; }
}

// Butterflies j in [j0, j1) of the block at x of length len, for stage len alone, or for
// stages len and len/2 together (TWO; j < len/4), as DIF or DIT.
template <bool DIF, bool INV, bool TWO, class Fr>
inline void pass(Fr* x, size_t len, size_t j0, size_t j1, const Twiddles<Fr>& tw) {
    if (!TWO) {
        const size_t h = len / 2;
        const Fr* t = tw.stage(len);
        for (size_t j = j0; j < j1; j++) {
            if (DIF) dif_bf<INV>(x[j], x[j + h], t, h, j);
            else dit_bf<INV>(x[j], x[j + h], t, h, j);
        }
        return;
    }
    const size_t q = len / 4;
    const Fr* t1 = tw.stage(len);      // stage len: h = 2q
    const Fr* t2 = tw.stage(len / 2);  // stage len/2: h = q
    for (size_t j = j0; j < j1; j++) {
        Fr a = x[j], b = x[j + q], c = x[j + 2 * q], d = x[j + 3 * q];
        if (DIF) {  // stage len, then len/2 on both halves
            dif_bf<INV>(a, c, t1, 2 * q, j);
            dif_bf<INV>(b, d, t1, 2 * q, j + q);
            dif_bf<INV>(a, b, t2, q, j);
            dif_bf<INV>(c, d, t2, q, j);
        } else {    // stage len/2 on both halves, then len
            dit_bf<INV>(a, b, t2, q, j);
            dit_bf<INV>(c, d, t2, q, j);
            dit_bf<INV>(a, c, t1, 2 * q, j);
            dit_bf<INV>(b, d, t1, 2 * q, j + q);
        }
        x[j] = a; x[j + q] = b; x[j + 2 * q] = c; x[j + 3 * q] = d;
    }
}

// Every stage of length in [lo, hi] on the blocks of x[0, span), in DIF order (hi down to
// lo) or DIT order (lo up to hi), two stages per pass where two remain.
template <bool DIF, bool INV, class Fr>
void block_stages(Fr* x, size_t span, size_t lo, size_t hi, const Twiddles<Fr>& tw) {
    auto run = [&](size_t len, bool two) {
        size_t jn = two ? len / 4 : len / 2;
        for (size_t s = 0; s < span; s += len) {
            if (two) pass<DIF, INV, true>(x + s, len, 0, jn, tw);
            else pass<DIF, INV, false>(x + s, len, 0, jn, tw);
        }
    };
    if (DIF) {
        size_t len = hi;
        for (; len / 2 >= lo; len /= 4) run(len, true);
        if (len >= lo) run(len, false);
    } else {
        size_t len = lo;
        for (; len * 2 <= hi; len *= 4) run(len * 2, true);
        if (len <= hi) run(len, false);
    }
}

// Outer stage(s) over the whole array, butterflies split between threads: stage `len`
// alone or with len/2 (TWO).
template <bool DIF, bool INV, bool TWO, class Fr>
void outer_pass(Fr* a, size_t n, size_t len, const Twiddles<Fr>& tw, int threads) {
    const size_t per_block = TWO ? len / 4 : len / 2;
    parallel_for(threads, n / len * per_block, [&](size_t b, size_t e, int) {
        while (b < e) {
            size_t blk = b / per_block, j0 = b % per_block, j1 = std::min(per_block, j0 + (e - b));
            pass<DIF, INV, TWO>(a + blk * len, len, j0, j1, tw);
            b += j1 - j0;
        }
    });
}

// The outer DIF stages (n down to above NTT_BLOCK) or DIT stages (above NTT_BLOCK up to n).
template <bool DIF, bool INV, class Fr>
void outer_stages(Fr* a, size_t n, const Twiddles<Fr>& tw, int threads) {
    const size_t block = std::min(n, NTT_BLOCK);
    if (DIF) {
        size_t len = n;
        for (; len / 2 > block; len /= 4) outer_pass<DIF, INV, true>(a, n, len, tw, threads);
        if (len > block) outer_pass<DIF, INV, false>(a, n, len, tw, threads);
    } else {
        size_t len = 2 * block;
        for (; len * 2 <= n; len *= 4) outer_pass<DIF, INV, true>(a, n, len * 2, tw, threads);
        if (len <= n) outer_pass<DIF, INV, false>(a, n, len, tw, threads);
    }
}

// In-place DIF (natural in, bit-reversed out) of n >= 2 elements; INV uses omega^-1 and
// leaves the result multiplied by n.
template <bool INV, class Fr>
void dif(Fr* a, size_t n, const Twiddles<Fr>& tw, int threads) {
    const size_t block = std::min(n, NTT_BLOCK);
    outer_stages<true, INV>(a, n, tw, threads);
    parallel_for(threads, n / block, [&](size_t b, size_t e, int) {
        for (size_t i = b; i < e; i++) block_stages<true, INV>(a + i * block, block, 2, block, tw);
    });
}

// In-place bit-reversal permutation of n = 2^k elements.
template <class Fr>
void bitrev_permute(Fr* a, size_t n, int k, int threads) {
    parallel_for(clamp_threads(threads, n / 4096 + 1), n, [&](size_t b, size_t e, int) {
        for (size_t i = b; i < e; i++) {
            size_t j = bitrev(i, k);
            if (i < j) std::swap(a[i], a[j]);
        }
    });
}

// Values of a polynomial on <omega> (natural order) -> its values on the coset
// g<omega>, in place. `scale[j]` = g^bitrev(j) / n (see coset_scale).
template <class Fr>
void to_coset(Fr* a, size_t n, const Twiddles<Fr>& tw, const Fr* scale, int threads) {
    const size_t block = std::min(n, NTT_BLOCK);
    outer_stages<true, true>(a, n, tw, threads);
    parallel_for(threads, n / block, [&](size_t b, size_t e, int) {
        for (size_t i = b; i < e; i++) {
            Fr* x = a + i * block;
            const Fr* sc = scale + i * block;
            block_stages<true, true>(x, block, 2, block, tw);   // inverse DIF: bit-reversed coefficients * n
            for (size_t j = 0; j < block; j++) x[j] = x[j] * sc[j];  // coefficient i times g^i / n
            block_stages<false, false>(x, block, 2, block, tw);  // forward DIT towards natural order
        }
    });
    outer_stages<false, false>(a, n, tw, threads);
}

// g^bitrev(j) / n for j < n: the pointwise step of to_coset, in dif's output order.
template <class Fr>
std::vector<Fr> coset_scale(const Fr& g, size_t n, int k, int threads) {
    std::vector<Fr> s(n);
    fill_geometric(s.data(), n, inv_pow2<Fr>(k), g, threads);
    bitrev_permute(s.data(), n, k, threads);
    return s;
}

// Natural-order NTT in place (the backend op behind zkq_ntt): forward with coset shift g
// multiplies coefficient i by g^i first; inverse multiplies by n^-1 and, with a shift,
// divides value i by g^i afterwards.
template <class Fr, int S>
int ntt(uint64_t* data, size_t n, bool inverse, const uint64_t* shift_words, int threads) {
    const int k = log2_exact(n);
    if (k < 0 || k > S) return ZKQ_ERR_SIZE;
    if (!data) return ZKQ_ERR_ARG;
    Fr* a = reinterpret_cast<Fr*>(data);
    Fr shift = Fr::one();
    if (shift_words) {
        std::memcpy(shift.v, shift_words, 32);
        if (shift.geq_modulus() || shift.is_zero()) return ZKQ_ERR_ARG;
    }
    if (n == 1) return ZKQ_OK;  // the transform of one value is itself; shift^0 = 1
    threads = clamp_threads(threads, n / 1024 + 1);  // tiny transforms are not worth a thread
    if (!inverse && shift_words) mul_geometric(a, n, Fr::one(), shift, threads);
    Twiddles<Fr> tw(root_of_unity<Fr, S>(k), n, threads);
    if (inverse) dif<true>(a, n, tw, threads);
    else dif<false>(a, n, tw, threads);
    bitrev_permute(a, n, k, threads);
    if (inverse) {
        mul_geometric(a, n, inv_pow2<Fr>(k), shift_words ? shift.inv() : Fr::one(), threads);
    }
    return ZKQ_OK;
}

}  // namespace
}  // namespace zkq
