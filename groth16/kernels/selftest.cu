// selftest.cu - the field arithmetic's paths side by side, for tests.
//
// For each pair (a[i], b[i]) of the curve's Fq and Fr elements (Montgomery form, < p),
// writes one row of results that must all agree with Python's a*b*R^-1, a^2*R^-1, a+b, a-b:
//   0 mul_portable (portable C++, 64-bit intermediates: what the emulation computes with)
//   1 chain::mul with ModelOps (the carry-chain instruction sequence, flag in a variable)
//   2 operator*   (on a GPU: the PTX carry chain; in the emulation: the portable path)
//   3 chain::sqr with ModelOps        4 sqr() (GPU: the PTX square)
//   5 chain::add with ModelOps        6 operator+ (GPU: PTX)
//   7 chain::sub with ModelOps        8 operator- (GPU: PTX)
// tests/test_cuda_emulation.py checks rows 0, 1, 3, 5, 7 on the host (the model against
// Python); tests/test_cuda_backend.py checks every row on a GPU (the hardware's carry flag
// against the model and Python).
#include "device.cuh"

using namespace zkq;
using namespace zkq::gpu;

constexpr uint32_t SELFTEST_COLUMNS = 9;

namespace zkq {
namespace gpu {

template <class F>
ZKQ_DEV void field_rows(gptr<const F> a, gptr<const F> b, uint64_t n, gptr<F> out) {
    for (uint64_t i = thread_index(); i < n; i += grid_stride()) {
        const F x = ld(a + i), y = ld(b + i);
        F r[SELFTEST_COLUMNS];
        r[0] = F::mul_portable(x, y);
        chain::mul<F, chain::ModelOps>(r[1].v, x.v, y.v);
        r[2] = x * y;
        chain::sqr<F, chain::ModelOps>(r[3].v, x.v);
        r[4] = x.sqr();
        chain::add<F, chain::ModelOps>(r[5].v, x.v, y.v);
        r[6] = x + y;
        chain::sub<F, chain::ModelOps>(r[7].v, x.v, y.v);
        r[8] = x - y;
        for (uint32_t c = 0; c < SELFTEST_COLUMNS; c++) st(out + i * SELFTEST_COLUMNS + c, r[c]);
    }
}

}  // namespace gpu
}  // namespace zkq

// Launch: 1-D, any block size, one thread per pair (grid-stride); out holds n * 9 elements.
ZKQ_KERNEL(selftest_fq, gptr<const Fq> a, gptr<const Fq> b, uint64_t n, gptr<Fq> out) { field_rows<Fq>(a, b, n, out); }
ZKQ_KERNEL(selftest_fr, gptr<const Fr> a, gptr<const Fr> b, uint64_t n, gptr<Fr> out) { field_rows<Fr>(a, b, n, out); }
