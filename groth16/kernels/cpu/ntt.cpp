// ntt.cpp - number-theoretic transform over Fr, in place, natural order in and out, with
// snarkjs's roots of unity: omega_s = 5^((r-1)/2^s) (s = 2-adicity), and the size-2^k
// root is omega_s squared s-k times.
//
// Radix-2 decimation in time after a bit-reversal permutation. The first stages work on
// blocks that fit a thread's share and run without synchronisation; the last log2(threads)
// stages split each stage's butterflies between threads.
#include "zkq.hpp"

namespace zkq {
namespace {

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

inline size_t bitrev(size_t x, int bits) {
    size_t r = 0;
    for (int i = 0; i < bits; i++) { r = (r << 1) | (x & 1); x >>= 1; }
    return r;
}

// a[i] *= start * step^i for i in [b, e), start = step^b.
template <class Fr>
void mul_geometric(Fr* a, size_t b, size_t e, const Fr& step, const Fr& scale) {
    if (b >= e) return;
    uint64_t bw = b;
    Fr f = scale * step.pow_words([&](int) { return bw; }, 1);
    for (size_t i = b; i < e; i++) {
        a[i] = a[i] * f;
        f = f * step;
    }
}

template <class Fr, int S>
int ntt(uint64_t* data, size_t n, bool inverse, const uint64_t* shift_words, int threads) {
    if (n == 0 || (n & (n - 1))) return ZKQ_ERR_SIZE;
    int k = 0;
    while ((size_t(1) << k) < n) k++;
    if (k > S) return ZKQ_ERR_SIZE;
    if (!data) return ZKQ_ERR_ARG;
    Fr* a = reinterpret_cast<Fr*>(data);
    Fr shift = Fr::one();
    if (shift_words) {
        std::memcpy(shift.v, shift_words, 32);
        if (shift.geq_modulus() || shift.is_zero()) return ZKQ_ERR_ARG;
    }
    if (n == 1) return ZKQ_OK;  // the transform of one value is itself; shift^0 = 1
    threads = clamp_threads(threads, n / 1024 + 1);  // tiny transforms are not worth a thread

    if (!inverse && shift_words)
        parallel_for(threads, n, [&](size_t b, size_t e, int) { mul_geometric(a, b, e, shift, Fr::one()); });

    Fr omega = root_of_unity<Fr, S>(k);
    if (inverse) omega = omega.inv();
    const size_t half = n / 2;
    std::vector<Fr> tw(half);  // tw[j] = omega^j
    parallel_for(threads, half, [&](size_t b, size_t e, int) {
        if (b >= e) return;
        uint64_t bw = b;
        Fr f = omega.pow_words([&](int) { return bw; }, 1);
        for (size_t j = b; j < e; j++) { tw[j] = f; f = f * omega; }
    });

    parallel_for(threads, n, [&](size_t b, size_t e, int) {
        for (size_t i = b; i < e; i++) {
            size_t j = bitrev(i, k);
            if (i < j) std::swap(a[i], a[j]);
        }
    });

    // Stages with blocks of up to `block` elements: each thread owns whole blocks.
    size_t block = n;
    while (block > 1 && n / block < (size_t)threads) block >>= 1;
    block = std::max<size_t>(block, 2);
    parallel_for(threads, n / block, [&](size_t b, size_t e, int) {
        for (size_t blk = b; blk < e; blk++) {
            Fr* x = a + blk * block;
            for (size_t len = 2; len <= block; len <<= 1) {
                size_t h = len / 2, step = n / len;
                for (size_t s = 0; s < block; s += len) {
                    for (size_t j = 0; j < h; j++) {
                        Fr u = x[s + j], v = x[s + j + h] * tw[j * step];
                        x[s + j] = u + v;
                        x[s + j + h] = u - v;
                    }
                }
            }
        }
    });
    // Remaining stages: split the n/2 butterflies of each stage.
    for (size_t len = block * 2; len <= n; len <<= 1) {
        size_t h = len / 2, step = n / len;
        parallel_for(threads, half, [&](size_t b, size_t e, int) {
            for (size_t t = b; t < e; t++) {
                size_t s = (t / h) * len, j = t % h;
                Fr u = a[s + j], v = a[s + j + h] * tw[j * step];
                a[s + j] = u + v;
                a[s + j + h] = u - v;
            }
        });
    }

    if (inverse) {
        Fr n_inv = Fr::from_uint(1);
        {
            Fr two_inv = Fr::from_uint(2).inv();
            for (int i = 0; i < k; i++) n_inv = n_inv * two_inv;
        }
        Fr step = shift_words ? shift.inv() : Fr::one();
        parallel_for(threads, n, [&](size_t b, size_t e, int) { mul_geometric(a, b, e, step, n_inv); });
    }
    return ZKQ_OK;
}

}  // namespace
}  // namespace zkq

using namespace zkq;

extern "C" {

// In-place NTT of n (a power of two) Montgomery-form Fr elements (4 words each), natural
// order. Forward with coset shift g (Montgomery form, 4 words, or NULL): coefficient i is
// multiplied by g^i first. Inverse: uses omega^-1, multiplies by n^-1, and with a shift
// divides value i by g^i afterwards.
int zkq_ntt(int curve, uint64_t* data_mont, size_t n, int inverse, const uint64_t* coset_shift_mont,
            int threads) {
    return guarded([&]() -> int {
        ZKQ_DISPATCH_CURVE(curve, (ntt<typename CurveT<C>::Fr, CurveT<C>::TWO_ADICITY>(
                                      data_mont, n, inverse != 0, coset_shift_mont, threads)))
    });
}

}  // extern "C"
