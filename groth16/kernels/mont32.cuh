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
// Bounds (p < 2^(32N - 1) for every modulus here, so 2p < 2^(32N)): the product keeps its
// running value below 2p between rows (the argument is at chain::mul), so it ends with one
// conditional subtraction of p; the square is the product with both operands equal. Results
// are fully reduced, as everywhere.
//
// Instruction counts: bench/gpu_sass.py compiles these for sm_90 and counts the SASS against
// sppark's fp_t for the same modulus (docs/gpu-kernels.md has the table).
#pragma once
#include "common.cuh"

namespace zkq {
namespace chain {

#if defined(__CUDA_ARCH__)
// -1/p mod 2^32 in constant memory, for the product's m = t_0 * (-1/p). BLS12-381 r's is
// 2^32 - 1: seen as an immediate, ptxas turns m into -t_0 and then splits each m * p_j into
// separate low and high multiply-adds (a BLS12-381 Fr product was 247 integer instructions
// against 191 for BN254's r); a value it cannot see keeps every m * p_j one IMAD.WIDE.U32
// (199). The modulus limbs themselves stay immediates.
template <class F>
__constant__ uint32_t const_minv = F::minv();

// One PTX instruction per method; the carry flag is the hardware's.
struct PtxOps {
    template <class F>
    static __device__ __forceinline__ uint32_t minv() { return const_minv<F>; }
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
    template <class F>
    static ZKQ_HD_HOT uint32_t minv() { return F::minv(); }
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

// acc[2k], acc[2k+1] += x * y(k) for k = 0..K-1 as 64-bit multiply-adds: one carry chain in
// which each lo/hi pair of one product (mad.lo.cc then madc.hi.cc on the same operands, into
// adjacent limbs) becomes a single IMAD.WIDE.U32(.X) in SASS. With CarryIn the chain takes the
// flag left by the instruction before it; with CarryOut it leaves its carry in the flag,
// otherwise the last high half takes no carry out (the caller's bound says it is zero).
template <int K, bool CarryIn, bool CarryOut, class Ops, class Y>
ZKQ_HD_HOT void mad_pairs(Ops& o, uint32_t* acc, uint32_t x, Y y) {
#pragma unroll
    for (int k = 0; k < K; k++) {
        if (k == 0 && !CarryIn) o.mad_lo_cc(acc[0], x, y(0), acc[0]);
        else o.madc_lo_cc(acc[2 * k], x, y(k), acc[2 * k]);
        if (k == K - 1 && !CarryOut) o.madc_hi(acc[2 * k + 1], x, y(k), acc[2 * k + 1]);
        else o.madc_hi_cc(acc[2 * k + 1], x, y(k), acc[2 * k + 1]);
    }
}

// r = a * b * 2^(-32N) mod p, fully reduced: CIOS, one row per limb b_i, with the running value
// held in two accumulators so that every limb product is one 32x32 -> 64 multiply-add into a
// pair of limbs and the two halves of a row are independent chains:
//   T = E + lone + 2^32 * O,
// E (N + 1 limbs) takes the products at even limb positions (a_0 b_i, a_2 b_i, ..., and m p_0,
// m p_2, ...) as pairs (0,1), (2,3), ...; O (N limbs, limb k at position k + 1) takes the odd
// ones (a_1 b_i at its pair (0,1), ...); `lone` is one limb at position 0 left over by the
// previous row's shift. Each row:
//   E[0] += lone (its carry is position 1: it enters O's chain), O += a_odd * b_i,
//   E += a_even * b_i, m = E[0] * (-1/p), E += m p_even, O += m p_odd,
// after which E[0] = 0 and T/2^32 is again of that shape with the roles swapped: the new E is
// O (now aligned at position 0), lone = E[1], and the new O is E[2..N].
// Bounds: T < 2p before a row and T + a b_i + m p < 2p * 2^32 after it (a < p, b_i, m < 2^32),
// so O * 2^32 < 2p * 2^32 < 2^(32(N+1)): O never carries out of its N limbs (its chains end
// without a carry out), E needs the one extra limb E[N], and the result T < 2p.
template <class F, class Ops>
ZKQ_HD_HOT void mul(uint32_t* r, const uint32_t* a_in, const uint32_t* b_in) {
    constexpr int N = F::N, H = N / 2;
    static_assert(N % 2 == 0, "limb pairs");
    Ops o;
    // Operands in registers first: read through a pointer at every use, each asm statement
    // gets its own load, and ptxas no longer sees the lo/hi pair of one product as one.
    uint32_t a[N], b[N];
#pragma unroll
    for (int k = 0; k < N; k++) {
        a[k] = a_in[k];
        b[k] = b_in[k];
    }
    uint32_t E[N + 1], O[N], lone = 0;
    const uint32_t inv = Ops::template minv<F>();
    auto a_even = [&](int k) { return a[2 * k]; };
    auto a_odd = [&](int k) { return a[2 * k + 1]; };
    auto p_even = [](int k) { return F::mod(2 * k); };
    auto p_odd = [](int k) { return F::mod(2 * k + 1); };
#pragma unroll
    for (int i = 0; i < N; i++) {
        if (i == 0) {  // T = 0: plain products, no carries
#pragma unroll
            for (int k = 0; k < H; k++) {
                const uint64_t e = (uint64_t)a[2 * k] * b[0], d = (uint64_t)a[2 * k + 1] * b[0];
                E[2 * k] = (uint32_t)e;
                E[2 * k + 1] = (uint32_t)(e >> 32);
                O[2 * k] = (uint32_t)d;
                O[2 * k + 1] = (uint32_t)(d >> 32);
            }
            E[N] = 0;
        } else {
            o.add_cc(E[0], E[0], lone);
            mad_pairs<H, true, false>(o, O, b[i], a_odd);
            mad_pairs<H, false, true>(o, E, b[i], a_even);
            o.addc(E[N], 0, 0);
        }
        const uint32_t m = o.mul_lo(E[0], inv);
        mad_pairs<H, false, true>(o, E, m, p_even);
        o.addc(E[N], E[N], 0);
        mad_pairs<H, false, false>(o, O, m, p_odd);
        // Divide by 2^32 (E[0] is now 0): O becomes the even accumulator, E[2..N] the odd one.
        lone = E[1];
#pragma unroll
        for (int k = 0; k < N; k++) {
            const uint32_t next_odd = k < N - 1 ? E[k + 2] : 0;
            E[k] = O[k];
            O[k] = next_odd;
        }
    }
    // T = E + lone + 2^32 O < 2p < 2^(32N): merge without a carry out, then subtract p once.
    uint32_t t[N];
    o.add_cc(t[0], E[0], lone);
#pragma unroll
    for (int k = 1; k < N - 1; k++) o.addc_cc(t[k], E[k], O[k - 1]);
    o.addc(t[N - 1], E[N - 1], O[N - 2]);
    reduce_once<F>(o, r, t);
}

// r = a^2 * 2^(-32N) mod p: the product's code with both operands a (as many instructions as a
// product, fewer than a dedicated square built from half the cross products then costs once
// its doubling and separate reduction are counted; see docs/gpu-kernels.md).
template <class F, class Ops>
ZKQ_HD_HOT void sqr(uint32_t* r, const uint32_t* a) {
    mul<F, Ops>(r, a, a);
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
