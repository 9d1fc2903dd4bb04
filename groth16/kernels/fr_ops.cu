// fr_ops.cu - pointwise kernels of the prover over Fr (products, the H scalars, the
// evaluation of A and B from the key's coefficients) and the point checks of a .zkey.
//
// Arrays are the backend interface's: Fr elements are 32 bytes (the .zkey/.wtns words read
// as eight 32-bit limbs), points are affine in Montgomery form with infinity as zeros.
// Every kernel is a 1-D grid-stride loop; the host picks the grid (groth16/backends/cuda.py).
#include "device.cuh"

using namespace zkq;
using namespace zkq::gpu;

// out[i] = a[i] * b[i] (Montgomery in and out; out may alias a or b).
// Launch: 1-D, any block size, one thread per element (grid-stride).
ZKQ_KERNEL(fr_mul, gptr<const Fr> a, gptr<const Fr> b, gptr<Fr> out, uint64_t n) {
    for (uint64_t i = thread_index(); i < n; i += grid_stride()) st(out + i, ld(a + i) * ld(b + i));
}

// out[i] = from_mont(a[i] * b[i] - c[i]): the H MSM's standard-form scalars.
// Launch: 1-D, any block size, one thread per element (grid-stride).
ZKQ_KERNEL(fr_h_scalars, gptr<const Fr> a, gptr<const Fr> b, gptr<const Fr> c, gptr<Fr> out, uint64_t n) {
    for (uint64_t i = thread_index(); i < n; i += grid_stride())
        st(out + i, (ld(a + i) * ld(b + i) - ld(c + i)).from_mont());
}

// Rows of A then B on the domain from the key's coefficients, sorted by row on the host
// (CSR: row r's entries are [row_start[r], row_start[r+1])): out[r] = sum value * w[signal].
// value is coef*R^2 and w standard form, so each Montgomery product is coef*w in Montgomery
// form. One thread owns a row, so there is no race and no atomic.
// Launch: 1-D, any block size, one thread per row (grid-stride); rows = 2 * domain.
ZKQ_KERNEL(fr_evaluate_ab, gptr<const uint32_t> row_start, gptr<const uint32_t> signal, gptr<const Fr> value,
           gptr<const Fr> witness, uint64_t rows, gptr<Fr> out) {
    for (uint64_t r = thread_index(); r < rows; r += grid_stride()) {
        Fr acc = Fr::zero();
        const uint32_t end = ld(row_start + r + 1);
        for (uint32_t e = ld(row_start + r); e < end; e++) acc += ld(value + e) * ld(witness + ld(signal + e));
        st(out + r, acc);
    }
}

namespace zkq {
namespace gpu {

// *bad = min over bad points of (index << 1 | why), why 0: a coordinate >= q, 1: off the curve.
template <class F>
ZKQ_DEV void check_points(gptr<const Affine<F>> points, uint64_t n, gptr<const F> b, gptr<uint64_t> bad) {
    const F bb = ld(b);
    for (uint64_t i = thread_index(); i < n; i += grid_stride()) {
        const Affine<F> p = ld(points + i);
        if (p.x.geq_modulus() || p.y.geq_modulus()) atomic_min_u64(bad, i << 1);
        else if (!p.on_curve(bb)) atomic_min_u64(bad, (i << 1) | 1);
    }
}

}  // namespace gpu
}  // namespace zkq

// Launch: 1-D, any block size, one thread per point (grid-stride). b: the curve's b, Montgomery.
ZKQ_KERNEL(check_g1, gptr<const Affine<Fq>> points, uint64_t n, gptr<const Fq> b, gptr<uint64_t> bad) {
    check_points(points, n, b, bad);
}

// As check_g1 on the twist: b is an Fq2 element.
ZKQ_KERNEL(check_g2, gptr<const Affine<Fq2>> points, uint64_t n, gptr<const Fq2> b, gptr<uint64_t> bad) {
    check_points(points, n, b, bad);
}
