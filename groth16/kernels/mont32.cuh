// mont32.cuh - Montgomery arithmetic on 32-bit limbs written as carry chains: the GPU's
// field multiplication, squaring, addition and subtraction (field.cuh dispatches here when
// compiled for a GPU).
//
// Each algorithm is written once against an `Ops` policy of single instructions:
//  * PtxOps (GPU only): each method is one PTX instruction (mad.lo.cc.u32, madc.hi.cc.u32,
//    addc.u32, ...); the carry flag lives in the hardware between them. Chains span several
//    asm statements, which is safe because the compiler itself never emits carry-flag
//    instructions (only these asm statements read or write it) and ptxas orders them.
//  * ModelOps (host and GPU): the same instructions with the carry flag in a variable, so
//    tests run the exact instruction sequence on the CPU (selftest.cu) and, on a GPU,
//    compare it with the hardware's.
// The portable path, Fp::mul_portable in field.cuh (CIOS with 64-bit intermediates), is
// what the host emulation computes with; tests check all three agree.
//
// Bounds (p < 2^(32N - 1) for every modulus here, so 2p < 2^(32N)):
//  * mul (CIOS): the accumulator t has N + 1 limbs; at each step t + a*b_i + m*p < 2p*2^32 <
//    2^(32(N+1)), so no chain carries out of limb N, and t < 2p after each shift.
//  * sqr (SOS): the off-diagonal half-products, doubled, plus the diagonal, give a^2 in 2N
//    limbs; the reduction keeps an N + 1 limb window acc < 2^(32N) + p (acc_i = (T mod
//    2^(32(N+i+1)) + q_i p) / 2^(32(i+1)) with q_i < 2^(32(i+1))), so again nothing carries
//    out, and the result (T + q p)/R < p^2/R + p < 2p.
// Both end with one conditional subtraction of p: results are fully reduced, as everywhere.
#pragma once
#include "common.cuh"

namespace zkq {
namespace chain {

#if defined(__CUDA_ARCH__)
// One PTX instruction per method; the carry flag is the hardware's.
struct PtxOps {
#define ZKQ_PTX4(name, ins)                                                                                \
    __device__ __forceinline__ void name(uint32_t& d, uint32_t a, uint32_t b, uint32_t c) {              \
        asm volatile(ins " %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));                         \
    }
#define ZKQ_PTX3(name, ins)                                                                                \
    __device__ __forceinline__ void name(uint32_t& d, uint32_t a, uint32_t b) {                          \
        asm volatile(ins " %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));                                     \
    }
    ZKQ_PTX4(mad_lo_cc, "mad.lo.cc.u32")
    ZKQ_PTX4(madc_lo_cc, "madc.lo.cc.u32")
    ZKQ_PTX4(mad_hi_cc, "mad.hi.cc.u32")
    ZKQ_PTX4(madc_hi_cc, "madc.hi.cc.u32")
    ZKQ_PTX4(madc_hi, "madc.hi.u32")
    ZKQ_PTX4(mad_hi, "mad.hi.u32")
    ZKQ_PTX3(add_cc, "add.cc.u32")
    ZKQ_PTX3(addc_cc, "addc.cc.u32")
    ZKQ_PTX3(addc, "addc.u32")
    ZKQ_PTX3(sub_cc, "sub.cc.u32")
    ZKQ_PTX3(subc_cc, "subc.cc.u32")
    ZKQ_PTX3(subc, "subc.u32")
#undef ZKQ_PTX4
#undef ZKQ_PTX3
    __device__ __forceinline__ uint32_t mul_lo(uint32_t a, uint32_t b) { return a * b; }
};
#endif

// The same instructions with the carry flag (the borrow, after sub.cc/subc.cc) in `cf`.
struct ModelOps {
    uint32_t cf = 0;
    using u64 = uint64_t;
    ZKQ_HD_HOT void mad_lo_cc(uint32_t& d, uint32_t a, uint32_t b, uint32_t c) { u64 s = (u64)(uint32_t)(a * b) + c; d = (uint32_t)s; cf = (uint32_t)(s >> 32); }
    ZKQ_HD_HOT void madc_lo_cc(uint32_t& d, uint32_t a, uint32_t b, uint32_t c) { u64 s = (u64)(uint32_t)(a * b) + c + cf; d = (uint32_t)s; cf = (uint32_t)(s >> 32); }
    ZKQ_HD_HOT void mad_hi_cc(uint32_t& d, uint32_t a, uint32_t b, uint32_t c) { u64 s = (((u64)a * b) >> 32) + c; d = (uint32_t)s; cf = (uint32_t)(s >> 32); }
    ZKQ_HD_HOT void madc_hi_cc(uint32_t& d, uint32_t a, uint32_t b, uint32_t c) { u64 s = (((u64)a * b) >> 32) + c + cf; d = (uint32_t)s; cf = (uint32_t)(s >> 32); }
    ZKQ_HD_HOT void madc_hi(uint32_t& d, uint32_t a, uint32_t b, uint32_t c) { d = (uint32_t)((((u64)a * b) >> 32) + c + cf); }
    ZKQ_HD_HOT void mad_hi(uint32_t& d, uint32_t a, uint32_t b, uint32_t c) { d = (uint32_t)((((u64)a * b) >> 32) + c); }
    ZKQ_HD_HOT void add_cc(uint32_t& d, uint32_t a, uint32_t b) { u64 s = (u64)a + b; d = (uint32_t)s; cf = (uint32_t)(s >> 32); }
    ZKQ_HD_HOT void addc_cc(uint32_t& d, uint32_t a, uint32_t b) { u64 s = (u64)a + b + cf; d = (uint32_t)s; cf = (uint32_t)(s >> 32); }
    ZKQ_HD_HOT void addc(uint32_t& d, uint32_t a, uint32_t b) { d = a + b + cf; }
    ZKQ_HD_HOT void sub_cc(uint32_t& d, uint32_t a, uint32_t b) { u64 s = (u64)a - b; d = (uint32_t)s; cf = (uint32_t)(s >> 63); }
    ZKQ_HD_HOT void subc_cc(uint32_t& d, uint32_t a, uint32_t b) { u64 s = (u64)a - b - cf; d = (uint32_t)s; cf = (uint32_t)(s >> 63); }
    ZKQ_HD_HOT void subc(uint32_t& d, uint32_t a, uint32_t b) { d = a - b - cf; }
    ZKQ_HD_HOT uint32_t mul_lo(uint32_t a, uint32_t b) { return a * b; }
};

// r = t - p if t >= p, else t (t < 2p in N limbs).
template <class F, class Ops>
ZKQ_HD_HOT void reduce_once(Ops& o, uint32_t* r, const uint32_t* t) {
    constexpr int N = F::N;
    uint32_t s[N], borrow;
    o.sub_cc(s[0], t[0], F::mod(0));
#pragma unroll
    for (int j = 1; j < N; j++) o.subc_cc(s[j], t[j], F::mod(j));
    o.subc(borrow, 0, 0);  // all ones when t < p
#pragma unroll
    for (int j = 0; j < N; j++) r[j] = borrow ? t[j] : s[j];
}

// t[0..N] += x * y_j (j = 0..N-1) shifted by `at` limbs into t: the low halves in one chain,
// the high halves in another. t[N] must be 0 on entry when at == 0 (see the bounds above).
template <int N, class Ops, class Y>
ZKQ_HD_HOT void mul_add_row(Ops& o, uint32_t* t, uint32_t x, Y y) {
    o.mad_lo_cc(t[0], x, y(0), t[0]);
#pragma unroll
    for (int j = 1; j < N; j++) o.madc_lo_cc(t[j], x, y(j), t[j]);
    o.addc(t[N], t[N], 0);
    o.mad_hi_cc(t[1], x, y(0), t[1]);
#pragma unroll
    for (int j = 1; j < N - 1; j++) o.madc_hi_cc(t[j + 1], x, y(j), t[j + 1]);
    o.madc_hi(t[N], x, y(N - 1), t[N]);
}

// r = a * b * 2^(-32N) mod p (CIOS), fully reduced.
template <class F, class Ops>
ZKQ_HD_HOT void mul(uint32_t* r, const uint32_t* a, const uint32_t* b) {
    constexpr int N = F::N;
    Ops o;
    uint32_t t[N + 1];
#pragma unroll
    for (int j = 0; j <= N; j++) t[j] = 0;
    const uint32_t inv = F::minv();
#pragma unroll
    for (int i = 0; i < N; i++) {
        mul_add_row<N>(o, t, b[i], [&](int j) { return a[j]; });
        const uint32_t m = o.mul_lo(t[0], inv);
        mul_add_row<N>(o, t, m, [](int j) { return F::mod(j); });
#pragma unroll
        for (int j = 0; j < N; j++) t[j] = t[j + 1];
        t[N] = 0;
    }
    reduce_once<F>(o, r, t);
}

// r = a^2 * 2^(-32N) mod p: half the cross products, doubled, plus the squares (SOS), then
// a word-by-word Montgomery reduction through an N + 1 limb window.
template <class F, class Ops>
ZKQ_HD_HOT void sqr(uint32_t* r, const uint32_t* a) {
    constexpr int N = F::N;
    Ops o;
    uint32_t T[2 * N];
#pragma unroll
    for (int j = 0; j < 2 * N; j++) T[j] = 0;
    // Cross products a_i a_j (i < j) at limb i + j: row i touches limbs 2i+1 .. i+N, and
    // limb i+N is still zero when the row starts.
#pragma unroll
    for (int i = 0; i < N - 1; i++) {
        const int len = N - 1 - i;  // products in this row
        uint32_t* row = T + 2 * i + 1;  // limb of a_i a_(i+1)
        if (len == 1) {
            o.mad_lo_cc(row[0], a[i], a[i + 1], row[0]);
            o.addc(row[1], row[1], 0);
            o.mad_hi(row[1], a[i], a[i + 1], row[1]);
            continue;
        }
        o.mad_lo_cc(row[0], a[i], a[i + 1], row[0]);
#pragma unroll
        for (int k = 1; k < len; k++) o.madc_lo_cc(row[k], a[i], a[i + 1 + k], row[k]);
        o.addc(row[len], row[len], 0);
        o.mad_hi_cc(row[1], a[i], a[i + 1], row[1]);
#pragma unroll
        for (int k = 1; k < len - 1; k++) o.madc_hi_cc(row[k + 1], a[i], a[i + 1 + k], row[k + 1]);
        o.madc_hi(row[len], a[i], a[i + len], row[len]);
    }
    // Double (the cross sum is below a^2 / 2, so nothing is lost), then add the squares.
    o.add_cc(T[0], T[0], T[0]);
#pragma unroll
    for (int j = 1; j < 2 * N - 1; j++) o.addc_cc(T[j], T[j], T[j]);
    o.addc(T[2 * N - 1], T[2 * N - 1], T[2 * N - 1]);
    o.mad_lo_cc(T[0], a[0], a[0], T[0]);
    o.madc_hi_cc(T[1], a[0], a[0], T[1]);
#pragma unroll
    for (int i = 1; i < N - 1; i++) {
        o.madc_lo_cc(T[2 * i], a[i], a[i], T[2 * i]);
        o.madc_hi_cc(T[2 * i + 1], a[i], a[i], T[2 * i + 1]);
    }
    o.madc_lo_cc(T[2 * N - 2], a[N - 1], a[N - 1], T[2 * N - 2]);
    o.madc_hi(T[2 * N - 1], a[N - 1], a[N - 1], T[2 * N - 1]);
    // Reduction: acc = T's low N limbs; each round adds m*p, drops a limb, takes the next of T.
    uint32_t acc[N + 1];
#pragma unroll
    for (int j = 0; j < N; j++) acc[j] = T[j];
    acc[N] = 0;
    const uint32_t inv = F::minv();
#pragma unroll
    for (int i = 0; i < N; i++) {
        const uint32_t m = o.mul_lo(acc[0], inv);
        mul_add_row<N>(o, acc, m, [](int j) { return F::mod(j); });
#pragma unroll
        for (int j = 0; j < N; j++) acc[j] = acc[j + 1];
        o.add_cc(acc[N - 1], acc[N - 1], T[N + i]);
        o.addc(acc[N], 0, 0);
    }
    reduce_once<F>(o, r, acc);
}

// r = a + b mod p (a, b < p).
template <class F, class Ops>
ZKQ_HD_HOT void add(uint32_t* r, const uint32_t* a, const uint32_t* b) {
    constexpr int N = F::N;
    Ops o;
    uint32_t s[N];
    o.add_cc(s[0], a[0], b[0]);
#pragma unroll
    for (int j = 1; j < N - 1; j++) o.addc_cc(s[j], a[j], b[j]);
    o.addc(s[N - 1], a[N - 1], b[N - 1]);  // a + b < 2p < 2^(32N): no carry out
    reduce_once<F>(o, r, s);
}

// r = a - b mod p (a, b < p): subtract, then add p back under the borrow's mask.
template <class F, class Ops>
ZKQ_HD_HOT void sub(uint32_t* r, const uint32_t* a, const uint32_t* b) {
    constexpr int N = F::N;
    Ops o;
    uint32_t s[N], mask;
    o.sub_cc(s[0], a[0], b[0]);
#pragma unroll
    for (int j = 1; j < N; j++) o.subc_cc(s[j], a[j], b[j]);
    o.subc(mask, 0, 0);
    o.add_cc(r[0], s[0], F::mod(0) & mask);
#pragma unroll
    for (int j = 1; j < N - 1; j++) o.addc_cc(r[j], s[j], F::mod(j) & mask);
    o.addc(r[N - 1], s[N - 1], F::mod(N - 1) & mask);
}

}  // namespace chain
}  // namespace zkq
