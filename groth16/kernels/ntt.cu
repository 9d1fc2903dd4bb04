// ntt.cu - number-theoretic transform over Fr, radix 2, natural order in and out.
//
// The host (groth16/backends/cuda.py) runs: ntt_bitrev (out-of-place permutation, with the
// forward coset shift g^i folded in), then ntt_stage for h = 1, 2, 4, ..., n/2 (one launch
// per stage: a launch boundary is the only grid-wide barrier), then, for the inverse,
// fr_scale by n^-1 * g^-i. Roots are snarkjs's (groth16.curves.Curve.root_of_unity).
//
// Powers x^i (twiddles, coset factors) are never stored n at a time: the host uploads two
// short tables lo[j] = x^j (j < 2^lo_bits) and hi[j] = s * x^(j * 2^lo_bits), and a factor
// is one product s * x^i = lo[i mod 2^lo_bits] * hi[i >> lo_bits]. Both tables fit in L2.
#include "device.cuh"

using namespace zkq;
using namespace zkq::gpu;

namespace zkq {
namespace gpu {

ZKQ_DEV Fr table_power(const Fr* lo, const Fr* hi, uint32_t lo_bits, uint64_t i) {
    return ld(lo + (i & ((uint64_t(1) << lo_bits) - 1))) * ld(hi + (i >> lo_bits));
}

}  // namespace gpu
}  // namespace zkq

// out[bitrev(i)] = in[i] (times lo/hi's factor(i) when scaled != 0). out must not alias in.
// Launch: 1-D, any block size, one thread per element (grid-stride).
ZKQ_KERNEL void ntt_bitrev(const Fr* in, Fr* out, uint64_t n, uint32_t log_n, const Fr* lo, const Fr* hi,
                           uint32_t lo_bits, uint32_t scaled) {
    for (uint64_t i = thread_index(); i < n; i += grid_stride()) {
        Fr x = ld(in + i);
        if (scaled) x = x * table_power(lo, hi, lo_bits, i);
        st(out + bit_reverse(i, log_n), x);
    }
}

// One radix-2 stage on blocks of 2h elements: butterfly t pairs a[i] and a[i + h] with
// i = (t / h) * 2h + t % h and twiddle omega_n^((t % h) * n / 2h) (lo/hi tables of omega_n).
// Launch: 1-D, any block size, one thread per butterfly, n/2 of them (grid-stride).
ZKQ_KERNEL void ntt_stage(Fr* a, uint64_t n, uint32_t log_n, uint32_t log_h, const Fr* lo, const Fr* hi,
                          uint32_t lo_bits) {
    const uint64_t h = uint64_t(1) << log_h;
    for (uint64_t t = thread_index(); t < n / 2; t += grid_stride()) {
        const uint64_t j = t & (h - 1);
        const uint64_t i = ((t >> log_h) << (log_h + 1)) + j;
        const Fr u = ld(a + i);
        Fr v = ld(a + i + h);
        if (j != 0) v = v * table_power(lo, hi, lo_bits, j << (log_n - 1 - log_h));
        st(a + i, u + v);
        st(a + i + h, u - v);
    }
}

// a[i] *= factor(i) from the lo/hi tables (the inverse's n^-1 * g^-i).
// Launch: 1-D, any block size, one thread per element (grid-stride).
ZKQ_KERNEL void fr_scale(Fr* a, uint64_t n, const Fr* lo, const Fr* hi, uint32_t lo_bits) {
    for (uint64_t i = thread_index(); i < n; i += grid_stride()) st(a + i, ld(a + i) * table_power(lo, hi, lo_bits, i));
}
