// msm_g1.cpp - the C ABI of G1 MSM, G1 fixed-base tables and G1 point checks (algorithm in
// msm.hpp).
#include "msm.hpp"

using namespace zkq;

extern "C" {

// out_affine = sum scalars[i] * points[i] on G1 (affine, Montgomery, infinity = zeros).
// points: n * 2 * NWq words; scalars_std: n * 4 words, standard form, each < r.
int zkq_msm_g1(int curve, const uint64_t* points, const uint64_t* scalars_std, size_t n,
               uint64_t* out_affine, int threads) {
    return guarded([&]() -> int {
        ZKQ_DISPATCH_CURVE(curve, (msm<typename CurveT<C>::Fq, typename CurveT<C>::Fr>(
                                      points, scalars_std, n, out_affine, threads)))
    });
}

// As zkq_msm_g1, with `table` (null, or built by zkq_msm_g1_table_build for these points)
// and `window_bits` (0: the cost model's choice; 1..15 forces c; ignored with a table).
int zkq_msm_g1_ex(int curve, const uint64_t* points, const uint64_t* scalars_std, size_t n,
                  const uint64_t* table, int window_bits, uint64_t* out_affine, int threads) {
    return guarded([&]() -> int {
        ZKQ_DISPATCH_CURVE(curve, (msm<typename CurveT<C>::Fq, typename CurveT<C>::Fr>(
                                      points, scalars_std, n, out_affine, threads, table, window_bits)))
    });
}

// out[0..4] = window bits c, windows, stride, levels, table bytes of the MSM plan for n
// points on `threads` threads with a fixed-base table of at most budget_bytes (0: no table).
int zkq_msm_g1_plan(int curve, size_t n, int threads, uint64_t budget_bytes, int64_t* out) {
    return guarded([&]() -> int {
        ZKQ_DISPATCH_CURVE(curve, (msm_plan_abi<typename CurveT<C>::Fq>(n, threads, budget_bytes, out)))
    });
}

// Builds the fixed-base table of plan (c, stride, levels) for n G1 points into buf
// (buf_bytes long, at least the plan's table bytes).
int zkq_msm_g1_table_build(int curve, const uint64_t* points, size_t n, int c, int stride, int levels,
                           uint64_t* buf, size_t buf_bytes, int threads) {
    return guarded([&]() -> int {
        ZKQ_DISPATCH_CURVE(curve, (msm_table_build_abi<typename CurveT<C>::Fq, typename CurveT<C>::Fr>(
                                      points, n, c, stride, levels, buf, buf_bytes, threads)))
    });
}

// 0 when every point has coordinates < q and lies on the curve (zeros = infinity allowed);
// otherwise ZKQ_ERR_POINT_RANGE / ZKQ_ERR_POINT_CURVE with *bad_index the first bad point.
int zkq_check_g1(int curve, const uint64_t* points, size_t n, int64_t* bad_index, int threads) {
    return guarded([&]() -> int {
        ZKQ_DISPATCH_CURVE(curve, (check_points(points, n, CurveT<C>::b1(), bad_index, threads)))
    });
}

}  // extern "C"
