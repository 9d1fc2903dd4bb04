// ntt.cpp - the C ABI of the natural-order NTT (algorithm in ntt.hpp).
#include "ntt.hpp"

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
