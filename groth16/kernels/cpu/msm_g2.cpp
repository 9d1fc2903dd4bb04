// msm_g2.cpp - the C ABI of G2 MSM, G2 fixed-base tables and G2 point checks (algorithm in
// msm.hpp).
#include "msm.hpp"

using namespace zkq;

extern "C" {

// As zkq_msm_g1 on G2: points are n * 4 * NWq words (x.c0, x.c1, y.c0, y.c1).
int zkq_msm_g2(int curve, const uint64_t* points, const uint64_t* scalars_std, size_t n,
               uint64_t* out_affine, int threads) {
    return guarded([&]() -> int {
        ZKQ_DISPATCH_CURVE(curve, (msm<typename CurveT<C>::Fq2, typename CurveT<C>::Fr>(
                                      points, scalars_std, n, out_affine, threads)))
    });
}

// As zkq_msm_g1_ex on G2.
int zkq_msm_g2_ex(int curve, const uint64_t* points, const uint64_t* scalars_std, size_t n,
                  const uint64_t* table, int window_bits, uint64_t* out_affine, int threads) {
    return guarded([&]() -> int {
        ZKQ_DISPATCH_CURVE(curve, (msm<typename CurveT<C>::Fq2, typename CurveT<C>::Fr>(
                                      points, scalars_std, n, out_affine, threads, table, window_bits)))
    });
}

// As zkq_msm_g1_plan on G2.
int zkq_msm_g2_plan(int curve, size_t n, int threads, uint64_t budget_bytes, int64_t* out) {
    return guarded([&]() -> int {
        ZKQ_DISPATCH_CURVE(curve, (msm_plan_abi<typename CurveT<C>::Fq2>(n, threads, budget_bytes, out)))
    });
}

// As zkq_msm_g1_table_build on G2.
int zkq_msm_g2_table_build(int curve, const uint64_t* points, size_t n, int c, int stride, int levels,
                           uint64_t* buf, size_t buf_bytes, int threads) {
    return guarded([&]() -> int {
        ZKQ_DISPATCH_CURVE(curve, (msm_table_build_abi<typename CurveT<C>::Fq2, typename CurveT<C>::Fr>(
                                      points, n, c, stride, levels, buf, buf_bytes, threads)))
    });
}

// As zkq_check_g1 on G2 (twist b2: 3/(9+u) bn128, 4(1+u) bls12381).
int zkq_check_g2(int curve, const uint64_t* points, size_t n, int64_t* bad_index, int threads) {
    return guarded([&]() -> int {
        ZKQ_DISPATCH_CURVE(curve, (check_points(points, n, CurveT<C>::b2(), bad_index, threads)))
    });
}

}  // extern "C"
