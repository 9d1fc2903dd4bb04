// fr_ops.hpp - pointwise Fr kernels of the prover: products, the H scalars, the range check
// of standard-form values, and the evaluation of A and B on the domain from the .zkey
// coefficient section. Shared by fr_ops.cpp (one C entry per kernel) and prove.cpp (the
// whole prove in one call).
#pragma once
#include <atomic>
#include <climits>

#include "zkq.hpp"

namespace zkq {
namespace {

template <class Fr>
int fr_mul(const uint64_t* a, const uint64_t* b, uint64_t* out, size_t n, int threads) {
    if (n && (!a || !b || !out)) return ZKQ_ERR_ARG;
    const Fr* x = reinterpret_cast<const Fr*>(a);
    const Fr* y = reinterpret_cast<const Fr*>(b);
    Fr* o = reinterpret_cast<Fr*>(out);
    parallel_for(clamp_threads(threads, n / 4096 + 1), n, [&](size_t s, size_t e, int) {
        for (size_t i = s; i < e; i++) o[i] = x[i] * y[i];
    });
    return ZKQ_OK;
}

// h = from_mont(a*b - c): the H MSM takes standard-form scalars.
template <class Fr>
int h_scalars(const uint64_t* a, const uint64_t* b, const uint64_t* c, uint64_t* out, size_t n, int threads) {
    if (n && (!a || !b || !c || !out)) return ZKQ_ERR_ARG;
    const Fr* x = reinterpret_cast<const Fr*>(a);
    const Fr* y = reinterpret_cast<const Fr*>(b);
    const Fr* z = reinterpret_cast<const Fr*>(c);
    Fr* o = reinterpret_cast<Fr*>(out);
    parallel_for(clamp_threads(threads, n / 4096 + 1), n, [&](size_t s, size_t e, int) {
        for (size_t i = s; i < e; i++) o[i] = (x[i] * y[i] - z[i]).from_mont();
    });
    return ZKQ_OK;
}

// Index of the first of n standard-form values (4 words each, any alignment: .wtns
// sections are not 8-byte aligned) that is not below r, or -1 when all are.
template <class Fr>
int64_t first_not_below_r(const uint64_t* words, size_t n) {
    for (size_t i = 0; i < n; i++) {
        Fr v;
        std::memcpy(v.v, words + 4 * i, 32);
        if (v.geq_modulus()) return (int64_t)i;
    }
    return -1;
}

constexpr size_t COEF_BYTES = 44;  // matrix u32, constraint u32, signal u32, value 32 bytes

struct Coef {
    uint32_t matrix, constraint, signal;
    uint64_t value[4];
};

// Entries are packed at 44 bytes, so the value is not 8-byte aligned: memcpy, not a cast.
inline Coef read_coef(const uint8_t* p) {
    Coef c;
    std::memcpy(&c.matrix, p, 4);
    std::memcpy(&c.constraint, p + 4, 4);
    std::memcpy(&c.signal, p + 8, 4);
    std::memcpy(c.value, p + 12, 32);
    return c;
}

// A[constraint] += value (*) w[signal] (Montgomery product: value is coef * R^2, w standard
// form, so the product is coef*w in Montgomery form); matrix 1 goes to B.
template <class Fr>
int evaluate_ab(const uint8_t* coefs, size_t ncoefs, const uint64_t* witness, size_t nvars, size_t domain,
                uint64_t* a_out, uint64_t* b_out, int64_t* bad_index, int threads) {
    if (bad_index) *bad_index = -1;
    if ((ncoefs && (!coefs || !witness)) || (domain && (!a_out || !b_out))) return ZKQ_ERR_ARG;
    // Validate first (cheap, one pass), so the accumulation below can trust every entry.
    int nt = clamp_threads(threads, ncoefs / 65536 + 1);
    std::atomic<size_t> bad{SIZE_MAX};
    std::vector<int> code(nt, ZKQ_OK);
    std::vector<size_t> first(nt, SIZE_MAX);
    parallel_for(nt, ncoefs, [&](size_t s, size_t e, int t) {
        for (size_t i = s; i < e && i < bad.load(); i++) {
            Coef c = read_coef(coefs + i * COEF_BYTES);
            Fr v;
            std::memcpy(v.v, c.value, 32);
            int err = c.matrix > 1 ? ZKQ_ERR_COEF_MATRIX
                    : c.constraint >= domain ? ZKQ_ERR_COEF_CONSTRAINT
                    : c.signal >= nvars ? ZKQ_ERR_COEF_SIGNAL
                    : v.geq_modulus() ? ZKQ_ERR_COEF_VALUE : ZKQ_OK;
            if (err) {
                code[t] = err;
                first[t] = i;
                keep_lowest(bad, i);
                break;
            }
        }
    });
    if (bad.load() != SIZE_MAX) {
        size_t lo = bad.load();
        if (bad_index) *bad_index = (int64_t)lo;
        for (int t = 0; t < nt; t++)
            if (first[t] == lo) return code[t];
        return ZKQ_ERR_INTERNAL;
    }
    Fr* A = reinterpret_cast<Fr*>(a_out);
    Fr* B = reinterpret_cast<Fr*>(b_out);
    std::memset(a_out, 0, domain * 32);
    std::memset(b_out, 0, domain * 32);
    // Each thread owns a range of constraints and scans every entry: no two threads write
    // the same row, whatever the entry order, and the scan is cheap next to the multiply.
    nt = clamp_threads(threads, std::min(domain, ncoefs / 16384 + 1));
    parallel_for(nt, domain, [&](size_t lo, size_t hi, int) {
        for (size_t i = 0; i < ncoefs; i++) {
            const uint8_t* p = coefs + i * COEF_BYTES;
            uint32_t row;
            std::memcpy(&row, p + 4, 4);
            if (row < lo || row >= hi) continue;
            Coef c = read_coef(p);
            Fr v, w;
            std::memcpy(v.v, c.value, 32);
            std::memcpy(w.v, witness + 4 * (size_t)c.signal, 32);
            Fr* dst = c.matrix ? B : A;
            dst[row] = dst[row] + v * w;
        }
    });
    return ZKQ_OK;
}

}  // namespace
}  // namespace zkq
