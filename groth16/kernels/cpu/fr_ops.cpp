// fr_ops.cpp - the C ABI of the pointwise Fr kernels (algorithms in fr_ops.hpp).
#include "fr_ops.hpp"

using namespace zkq;

extern "C" {

// out[i] = a[i] * b[i], Montgomery form in and out (n elements of 4 words; out may alias).
int zkq_fr_mul(int curve, const uint64_t* a, const uint64_t* b, uint64_t* out, size_t n, int threads) {
    return guarded([&]() -> int {
        ZKQ_DISPATCH_CURVE(curve, (fr_mul<typename CurveT<C>::Fr>(a, b, out, n, threads)))
    });
}

// out[i] = from_mont(a[i] * b[i] - c[i]) (standard form: the H MSM's scalars).
int zkq_h_scalars(int curve, const uint64_t* a, const uint64_t* b, const uint64_t* c, uint64_t* out,
                  size_t n, int threads) {
    return guarded([&]() -> int {
        ZKQ_DISPATCH_CURVE(curve, (h_scalars<typename CurveT<C>::Fr>(a, b, c, out, n, threads)))
    });
}

// *bad_index = the first of n standard-form values (4 words each) that is >= r, or -1.
int zkq_fr_first_not_below_r(int curve, const uint64_t* values_std, size_t n, int64_t* bad_index) {
    return guarded([&]() -> int {
        if (!bad_index || (n && !values_std)) return ZKQ_ERR_ARG;
        ZKQ_DISPATCH_CURVE(curve, (*bad_index = first_not_below_r<typename CurveT<C>::Fr>(values_std, n), ZKQ_OK))
    });
}

// A and B evaluations on the domain (Montgomery form, domain x 4 words each) from .zkey
// section 4 entries (44 bytes each, after the u32 count) and a standard-form witness of
// nvars x 4 words. On a bad entry returns ZKQ_ERR_COEF_* with *bad_index its index.
int zkq_evaluate_ab(int curve, const uint8_t* coefs, size_t ncoefs, const uint64_t* witness_std, size_t nvars,
                    size_t domain, uint64_t* a_out, uint64_t* b_out, int64_t* bad_index, int threads) {
    return guarded([&]() -> int {
        ZKQ_DISPATCH_CURVE(curve, (evaluate_ab<typename CurveT<C>::Fr>(coefs, ncoefs, witness_std, nvars, domain,
                                                                      a_out, b_out, bad_index, threads)))
    });
}

}  // extern "C"
