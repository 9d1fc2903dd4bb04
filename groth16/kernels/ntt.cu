// ntt.cu - number-theoretic transforms over Fr in shared-memory passes of several stages.
//
// A transform of n = 2^k elements is log_n radix-2 stages; stage s pairs elements h = 2^s
// apart with the twiddle omega_(2h)^j = omega_n^(j * n / 2h), j = index mod h. The host
// (groth16/backends/cuda_ntt.py) groups the stages into passes of r <= 11 consecutive
// stages: a pass over stages [s_lo, s_lo + r) touches 2^r elements 2^s_lo apart (a "group":
// index = low + jj * 2^s_lo + high * 2^(s_lo + r)), so each group is loaded into shared
// memory once, goes through its r stages there, and is written back: ceil(k / 11) passes
// over global memory instead of k.
//  * Forward (ntt_pass with dif = 0) is decimation in time (Cooley-Tukey): bit-reversed
//    order in, natural order out, stages s = 0 .. k-1: (u, v) -> (u + w v, u - w v).
//  * Inverse (dif = 1) is decimation in frequency (Gentleman-Sande): natural order in,
//    bit-reversed out, stages s = k-1 .. 0: (u, v) -> (u + v, (u - v) w), with w^-1.
// So the prover's inverse-then-coset-forward pair needs no bit reversal at all: the inverse
// leaves the coefficients bit-reversed, its last pass multiplies position i by
// n^-1 g^bitrev(i) (the coset shift of the coefficient that sits there), and the forward
// pass takes them in that order. ntt_permute, the one permutation, serves the public
// natural-order API only.
//
// Twiddles: tw[j] = omega_n^j for j < n/2, computed once per domain by ntt_twiddles and kept
// on the device. Inverse twiddles come from the same table: omega^-j = -omega^(n/2 - j).
// Other powers (the coset factors) are products lo[i mod 2^lo_bits] * hi[i >> lo_bits] of
// two short tables (table_power).
#include "device.cuh"

using namespace zkq;
using namespace zkq::gpu;

namespace zkq {
namespace gpu {

ZKQ_DEV Fr table_power(gptr<const Fr> lo, gptr<const Fr> hi, uint32_t lo_bits, uint64_t i) {
    return ld(lo + (i & ((uint64_t(1) << lo_bits) - 1))) * ld(hi + (i >> lo_bits));
}

// omega_n^e (inverse = 0) or omega_n^-e (inverse = 1), for e < n/2, from the table.
ZKQ_DEV Fr twiddle(gptr<const Fr> tw, uint64_t e, uint32_t log_n, uint32_t inverse) {
    if (!inverse) return ld(tw + e);
    if (e == 0) return Fr::one();
    return -ld(tw + ((uint64_t(1) << (log_n - 1)) - e));
}

}  // namespace gpu
}  // namespace zkq

// tw[j] = omega^j = lo[j mod 2^lo_bits] * hi[j >> lo_bits] for j < count.
// Launch: 1-D, any block size, one thread per entry (grid-stride).
ZKQ_KERNEL(ntt_twiddles, gptr<Fr> tw, uint64_t count, gptr<const Fr> lo, gptr<const Fr> hi, uint32_t lo_bits) {
    for (uint64_t i = thread_index(); i < count; i += grid_stride()) st(tw + i, table_power(lo, hi, lo_bits, i));
}

// One pass of stages [s_lo, s_lo + log_r) on groups of 2^log_r elements (see the file
// comment), 2^log_g groups per block; dif selects the inverse's butterflies and order.
// scale: 0 none; 1 multiply the element stored at index i by lo/hi's factor(i);
// 2 by factor(bitrev_k(i)) (the inverse's n^-1 g^bitrev(i)).
// Launch: blocks of any number of threads (each does its share of the 2^(log_r+log_g-1)
// butterflies), dynamic shared memory of 2^(log_r + log_g) elements, grid-stride over the
// n / 2^(log_r + log_g) blocks of groups.
ZKQ_KERNEL(ntt_pass, gptr<Fr> a, uint32_t log_n, uint32_t s_lo, uint32_t log_r, uint32_t log_g,
           uint32_t dif, gptr<const Fr> tw, uint32_t scale, gptr<const Fr> lo, gptr<const Fr> hi,
           uint32_t lo_bits) {
    gptr<Fr> sh = dynamic_shared<Fr>();
    const uint32_t E = 1u << (log_r + log_g), G = 1u << log_g;
    const uint64_t blocks = (uint64_t(1) << log_n) >> (log_r + log_g);
    const uint64_t low_mask = (uint64_t(1) << s_lo) - 1;
    // Global index of the block's element e: group g = e mod G, position jj = e / G.
    auto index = [&](uint64_t blk, uint32_t e) {
        const uint64_t gid = blk * G + (e & (G - 1));
        const uint64_t jj = e >> log_g;
        return (gid & low_mask) + (jj << s_lo) + ((gid >> s_lo) << (s_lo + log_r));
    };
    for (uint64_t blk = bid(); blk < blocks; blk += gdim()) {
        for (uint32_t e = tid(); e < E; e += bdim()) st(sh + e, ld(a + index(blk, e)));
        block_sync();
        for (uint32_t step = 0; step < log_r; step++) {
            const uint32_t sj = dif ? log_r - 1 - step : step;  // stage s_lo + sj
            const uint32_t s = s_lo + sj;
            for (uint32_t b = tid(); b < E / 2; b += bdim()) {
                const uint32_t g = b & (G - 1), bb = b >> log_g;
                const uint32_t jj = ((bb >> sj) << (sj + 1)) | (bb & ((1u << sj) - 1));
                const uint32_t e0 = (jj << log_g) | g, e1 = ((jj + (1u << sj)) << log_g) | g;
                // j = global index mod 2^s = low + (jj mod 2^sj) * 2^s_lo
                const uint64_t gid = blk * G + g;
                const uint64_t j = (gid & low_mask) + (uint64_t(jj & ((1u << sj) - 1)) << s_lo);
                const Fr w = twiddle(tw, j << (log_n - 1 - s), log_n, dif);
                const Fr u = ld(sh + e0), v = ld(sh + e1);
                if (dif) {
                    st(sh + e0, u + v);
                    st(sh + e1, j == 0 ? u - v : (u - v) * w);
                } else {
                    const Fr vw = j == 0 ? v : v * w;
                    st(sh + e0, u + vw);
                    st(sh + e1, u - vw);
                }
            }
            block_sync();
        }
        for (uint32_t e = tid(); e < E; e += bdim()) {
            const uint64_t i = index(blk, e);
            Fr x = ld(sh + e);
            if (scale) x = x * table_power(lo, hi, lo_bits, scale == 2 ? bit_reverse(i, log_n) : i);
            st(a + i, x);
        }
        block_sync();  // the next group's loads must not overwrite what others still store
    }
}

// out[bitrev(i)] = in[i] (times lo/hi's factor(i) when scaled != 0); out must not alias in.
// The public API's natural-order transforms only (see the file comment).
// Launch: 1-D, any block size, one thread per element (grid-stride).
ZKQ_KERNEL(ntt_permute, gptr<const Fr> in, gptr<Fr> out, uint64_t n, uint32_t log_n, gptr<const Fr> lo,
           gptr<const Fr> hi, uint32_t lo_bits, uint32_t scaled) {
    for (uint64_t i = thread_index(); i < n; i += grid_stride()) {
        Fr x = ld(in + i);
        if (scaled) x = x * table_power(lo, hi, lo_bits, i);
        st(out + bit_reverse(i, log_n), x);
    }
}
