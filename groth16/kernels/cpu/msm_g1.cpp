// msm_g1.cpp - the C ABI of G1 MSM and G1 point checks (algorithm in msm.hpp).
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

// 0 when every point has coordinates < q and lies on the curve (zeros = infinity allowed);
// otherwise ZKQ_ERR_POINT_RANGE / ZKQ_ERR_POINT_CURVE with *bad_index the first bad point.
int zkq_check_g1(int curve, const uint64_t* points, size_t n, int64_t* bad_index, int threads) {
    return guarded([&]() -> int {
        ZKQ_DISPATCH_CURVE(curve, (check_points(points, n, CurveT<C>::b1(), bad_index, threads)))
    });
}

}  // extern "C"
