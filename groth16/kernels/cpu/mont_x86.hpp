// mont_x86.hpp - Montgomery multiplication with x86-64 mulx/adcx/adox (BMI2 + ADX), for
// 4-word (BN254 q and r, BLS12-381 r) and 6-word (BLS12-381 q) moduli.
//
// Included by field.cuh only when the CPU library is built with ZKQ_X86_ASM (native.py
// does so when the CPU has both features, and keeps a portable build as the fallback);
// the CUDA build never sees it. Same contract as Fp::operator*: inputs fully reduced,
// output a*b*2^(-64N) mod p, fully reduced.
//
// Algorithm: CIOS without the extra carry word (valid for these moduli: the top word is
// below 2^63 - 1, see field.cuh). Row i adds a*b[i] to t with two independent carry
// chains (adox for the low halves of the products, adcx for the high halves), then adds
// m*p with m = t0 * (-p^-1) mod 2^64, which zeroes word 0; the words are then renamed
// (not moved): row i's t0 register becomes row i+1's top word. The result, below 2p, is
// reduced with a branch-free subtract and cmov.
#pragma once
#include <stdint.h>
#include <x86intrin.h>

namespace zkq {
namespace x86 {
namespace {  // internal linkage: the constants are addressed RIP-relative, not through the GOT

template <class P>
struct Mod {
    static constexpr int NW = P::NW;
    alignas(64) static constexpr uint64_t q[6] = {P::p(0), P::p(1), P::p(2), P::p(3),
                                                  NW > 4 ? P::p(4) : 0, NW > 5 ? P::p(5) : 0};
    // -p^-1 mod 2^64 (Newton iteration doubles the correct low bits each step).
    static constexpr uint64_t inv() {
        uint64_t x = 1;
        for (int k = 0; k < 7; k++) x = x * (2 - P::p(0) * x);
        return 0 - x;
    }
    static constexpr uint64_t minv = inv();
};

}  // namespace

// ---- one row of the product: T0..Tn-1 += a * rdx, Tn = the carry word (zero on entry).
#define ZKQ_X_MA(off, LO_T, HI_T)                       \
    "mulxq " #off "(%[a]), %[lo], %[hi]\n\t"            \
    "adoxq %[lo], %[" LO_T "]\n\t"                      \
    "adcxq %[hi], %[" HI_T "]\n\t"

// ---- one reduction row: T0..Tn += m * q with m = T0 * minv; T0 becomes 0.
#define ZKQ_X_RD(off, LO_T, HI_T)                       \
    "mulxq " #off "+%[q], %[lo], %[hi]\n\t"            \
    "adcxq %[lo], %[" LO_T "]\n\t"                      \
    "adoxq %[hi], %[" HI_T "]\n\t"

#define ZKQ_X_M_START(boff)                             \
    "movq " #boff "(%[b]), %%rdx\n\t"                   \
    "xorl %k[z], %k[z]\n\t"
#define ZKQ_X_R_START(T0)                               \
    "movq %[" T0 "], %%rdx\n\t"                         \
    "imulq %[minv], %%rdx\n\t"                          \
    "xorl %k[z], %k[z]\n\t"

// 4 words. Registers t0..t4 rotate: row i works on (t_i, ..., t_{i+4}) mod 5.
// Row 0 of a product: (t0..t4) = a * b[0] (t starts at zero); the 6-word row 0 goes on
// from the same first four words.
#define ZKQ_X_ROW0_WORDS0123                            \
    "movq 0(%[b]), %%rdx\n\t"                           \
    "xorl %k[z], %k[z]\n\t"                             \
    "mulxq 0(%[a]), %[t0], %[t1]\n\t"                   \
    "mulxq 8(%[a]), %[lo], %[t2]\n\t"                   \
    "adcxq %[lo], %[t1]\n\t"                            \
    "mulxq 16(%[a]), %[lo], %[t3]\n\t"                  \
    "adcxq %[lo], %[t2]\n\t"                            \
    "mulxq 24(%[a]), %[lo], %[t4]\n\t"                  \
    "adcxq %[lo], %[t3]\n\t"
#define ZKQ_X4_ROW0 ZKQ_X_ROW0_WORDS0123 "adcxq %[z], %[t4]\n\t"
// Row i >= 1 of a product: T0..T3 += a * b[i], T4 (fresh) = the carry word.
#define ZKQ_X4_MUL(boff, T0, T1, T2, T3, T4)            \
    ZKQ_X_M_START(boff)                                 \
    ZKQ_X_MA(0, T0, T1) ZKQ_X_MA(8, T1, T2) ZKQ_X_MA(16, T2, T3)   \
    "mulxq 24(%[a]), %[lo], %[hi]\n\t"                  \
    "adoxq %[lo], %[" T3 "]\n\t"                        \
    "movq %[z], %[" T4 "]\n\t"                          \
    "adcxq %[hi], %[" T4 "]\n\t"                        \
    "adoxq %[z], %[" T4 "]\n\t"
// A reduction row's additions of m * q, after ZKQ_X_R_START(T0).
#define ZKQ_X4_RED(T0, T1, T2, T3, T4)                  \
    ZKQ_X_RD(0, T0, T1) ZKQ_X_RD(8, T1, T2) ZKQ_X_RD(16, T2, T3) ZKQ_X_RD(24, T3, T4) \
    "adcxq %[z], %[" T4 "]\n\t"
#define ZKQ_X4_ROW(boff, T0, T1, T2, T3, T4)            \
    ZKQ_X4_MUL(boff, T0, T1, T2, T3, T4) ZKQ_X_R_START(T0) ZKQ_X4_RED(T0, T1, T2, T3, T4)
// The result (t4, t0, t1, t2) < 2p (t3 is zero): subtract p into (lo, hi, rdx, t3), keep the
// difference when it did not borrow.
#define ZKQ_X4_FINAL                                    \
    "movq %[t4], %[lo]\n\t"   "subq 0+%[q], %[lo]\n\t"  \
    "movq %[t0], %[hi]\n\t"   "sbbq 8+%[q], %[hi]\n\t"  \
    "movq %[t1], %%rdx\n\t"   "sbbq 16+%[q], %%rdx\n\t" \
    "movq %[t2], %[t3]\n\t"   "sbbq 24+%[q], %[t3]\n\t" \
    "cmovncq %[lo], %[t4]\n\t"                          \
    "cmovncq %[hi], %[t0]\n\t"                          \
    "cmovncq %%rdx, %[t1]\n\t"                          \
    "cmovncq %[t3], %[t2]\n\t"

template <class P>
inline __attribute__((always_inline)) void mont_mul4(uint64_t* out, const uint64_t* a, const uint64_t* b) {
    using M = Mod<P>;
    uint64_t t0, t1, t2, t3, t4, lo, hi, z;
    __asm__(
        ZKQ_X4_ROW0
        ZKQ_X_R_START("t0") ZKQ_X4_RED("t0", "t1", "t2", "t3", "t4")
        ZKQ_X4_ROW(8, "t1", "t2", "t3", "t4", "t0")
        ZKQ_X4_ROW(16, "t2", "t3", "t4", "t0", "t1")
        ZKQ_X4_ROW(24, "t3", "t4", "t0", "t1", "t2")
        ZKQ_X4_FINAL
        : [t0] "=&r"(t0), [t1] "=&r"(t1), [t2] "=&r"(t2), [t3] "=&r"(t3), [t4] "=&r"(t4),
          [lo] "=&r"(lo), [hi] "=&r"(hi), [z] "=&r"(z)
        : [a] "r"(a), [b] "r"(b), [q] "m"(M::q), [minv] "m"(M::minv),
          "m"(*(const uint64_t(*)[4])a), "m"(*(const uint64_t(*)[4])b)
        : "rdx", "cc");
    out[0] = t4;
    out[1] = t0;
    out[2] = t1;
    out[3] = t2;
}

// 6 words. Registers t0..t6 rotate: row i works on (t_i, ..., t_{i+6}) mod 7.
#define ZKQ_X6_ROW0                                     \
    ZKQ_X_ROW0_WORDS0123                                \
    "mulxq 32(%[a]), %[lo], %[t5]\n\t"                  \
    "adcxq %[lo], %[t4]\n\t"                            \
    "mulxq 40(%[a]), %[lo], %[t6]\n\t"                  \
    "adcxq %[lo], %[t5]\n\t"                            \
    "adcxq %[z], %[t6]\n\t"
#define ZKQ_X6_MUL(boff, T0, T1, T2, T3, T4, T5, T6)    \
    ZKQ_X_M_START(boff)                                 \
    ZKQ_X_MA(0, T0, T1) ZKQ_X_MA(8, T1, T2) ZKQ_X_MA(16, T2, T3) ZKQ_X_MA(24, T3, T4) ZKQ_X_MA(32, T4, T5) \
    "mulxq 40(%[a]), %[lo], %[hi]\n\t"                  \
    "adoxq %[lo], %[" T5 "]\n\t"                        \
    "movq %[z], %[" T6 "]\n\t"                          \
    "adcxq %[hi], %[" T6 "]\n\t"                        \
    "adoxq %[z], %[" T6 "]\n\t"
#define ZKQ_X6_RED(T0, T1, T2, T3, T4, T5, T6)          \
    ZKQ_X_RD(0, T0, T1) ZKQ_X_RD(8, T1, T2) ZKQ_X_RD(16, T2, T3) ZKQ_X_RD(24, T3, T4) \
    ZKQ_X_RD(32, T4, T5) ZKQ_X_RD(40, T5, T6)           \
    "adcxq %[z], %[" T6 "]\n\t"
#define ZKQ_X6_ROW(boff, T0, T1, T2, T3, T4, T5, T6)    \
    ZKQ_X6_MUL(boff, T0, T1, T2, T3, T4, T5, T6) ZKQ_X_R_START(T0) ZKQ_X6_RED(T0, T1, T2, T3, T4, T5, T6)
// The result (t6, t0, t1, t2, t3, t4) < 2p (t5 is zero): the difference with p into
// (lo, hi, rdx, z, t5, SCRATCH), kept when it did not borrow.
#define ZKQ_X6_FINAL(SCRATCH)                           \
    "movq %[t6], %[lo]\n\t"   "subq 0+%[q], %[lo]\n\t"  \
    "movq %[t0], %[hi]\n\t"   "sbbq 8+%[q], %[hi]\n\t"  \
    "movq %[t1], %%rdx\n\t"   "sbbq 16+%[q], %%rdx\n\t" \
    "movq %[t2], %[z]\n\t"    "sbbq 24+%[q], %[z]\n\t"  \
    "movq %[t3], %[t5]\n\t"   "sbbq 32+%[q], %[t5]\n\t" \
    "movq %[t4], %[" SCRATCH "]\n\t" "sbbq 40+%[q], %[" SCRATCH "]\n\t" \
    "cmovncq %[lo], %[t6]\n\t"                          \
    "cmovncq %[hi], %[t0]\n\t"                          \
    "cmovncq %%rdx, %[t1]\n\t"                          \
    "cmovncq %[z], %[t2]\n\t"                           \
    "cmovncq %[t5], %[t3]\n\t"                          \
    "cmovncq %[" SCRATCH "], %[t4]\n\t"

template <class P>
inline __attribute__((always_inline)) void mont_mul6(uint64_t* out, const uint64_t* a, const uint64_t* b) {
    using M = Mod<P>;
    uint64_t t0, t1, t2, t3, t4, t5, t6, lo, hi, z;
    const uint64_t* bp = b;  // its register is reused as scratch by the final subtraction
    __asm__(
        ZKQ_X6_ROW0
        ZKQ_X_R_START("t0") ZKQ_X6_RED("t0", "t1", "t2", "t3", "t4", "t5", "t6")
        ZKQ_X6_ROW(8, "t1", "t2", "t3", "t4", "t5", "t6", "t0")
        ZKQ_X6_ROW(16, "t2", "t3", "t4", "t5", "t6", "t0", "t1")
        ZKQ_X6_ROW(24, "t3", "t4", "t5", "t6", "t0", "t1", "t2")
        ZKQ_X6_ROW(32, "t4", "t5", "t6", "t0", "t1", "t2", "t3")
        ZKQ_X6_ROW(40, "t5", "t6", "t0", "t1", "t2", "t3", "t4")
        ZKQ_X6_FINAL("b")
        : [t0] "=&r"(t0), [t1] "=&r"(t1), [t2] "=&r"(t2), [t3] "=&r"(t3), [t4] "=&r"(t4),
          [t5] "=&r"(t5), [t6] "=&r"(t6), [lo] "=&r"(lo), [hi] "=&r"(hi), [z] "=&r"(z), [b] "+&r"(bp)
        : [a] "r"(a), [q] "m"(M::q), [minv] "m"(M::minv),
          "m"(*(const uint64_t(*)[6])a), "m"(*(const uint64_t(*)[6])b)
        : "rdx", "cc");
    out[0] = t6;
    out[1] = t0;
    out[2] = t1;
    out[3] = t2;
    out[4] = t3;
    out[5] = t4;
}

// ---- double-width products and a separate reduction, for Fp2's product (fp2_mul below):
// three full products but only two reductions, where three Montgomery products reduce
// three times.

// One row of a double-width product: T0..Tn += a * b[i], Tn fresh; then T0, final, is stored.
#define ZKQ_XW_ROW4(boff, T0, T1, T2, T3, T4)           \
    ZKQ_X4_MUL(boff, T0, T1, T2, T3, T4) "movq %[" T0 "], " #boff "(%[out])\n\t"

// out[0..8) = a * b (4 words each), no reduction.
inline __attribute__((always_inline)) void mul_wide4(uint64_t* out, const uint64_t* a, const uint64_t* b) {
    uint64_t t0, t1, t2, t3, t4, lo, hi, z;
    __asm__(
        ZKQ_X4_ROW0
        "movq %[t0], 0(%[out])\n\t"
        ZKQ_XW_ROW4(8, "t1", "t2", "t3", "t4", "t0")
        ZKQ_XW_ROW4(16, "t2", "t3", "t4", "t0", "t1")
        ZKQ_XW_ROW4(24, "t3", "t4", "t0", "t1", "t2")
        "movq %[t4], 32(%[out])\n\t"
        "movq %[t0], 40(%[out])\n\t"
        "movq %[t1], 48(%[out])\n\t"
        "movq %[t2], 56(%[out])\n\t"
        : [t0] "=&r"(t0), [t1] "=&r"(t1), [t2] "=&r"(t2), [t3] "=&r"(t3), [t4] "=&r"(t4),
          [lo] "=&r"(lo), [hi] "=&r"(hi), [z] "=&r"(z), "=m"(*(uint64_t(*)[8])out)
        : [a] "r"(a), [b] "r"(b), [out] "r"(out),
          "m"(*(const uint64_t(*)[4])a), "m"(*(const uint64_t(*)[4])b)
        : "rdx", "cc");
}

#define ZKQ_XW_ROW6(boff, T0, T1, T2, T3, T4, T5, T6)   \
    ZKQ_X6_MUL(boff, T0, T1, T2, T3, T4, T5, T6) "movq %[" T0 "], " #boff "(%[out])\n\t"

// out[0..12) = a * b (6 words each), no reduction.
inline __attribute__((always_inline)) void mul_wide6(uint64_t* out, const uint64_t* a, const uint64_t* b) {
    uint64_t t0, t1, t2, t3, t4, t5, t6, lo, hi, z;
    __asm__(
        ZKQ_X6_ROW0
        "movq %[t0], 0(%[out])\n\t"
        ZKQ_XW_ROW6(8, "t1", "t2", "t3", "t4", "t5", "t6", "t0")
        ZKQ_XW_ROW6(16, "t2", "t3", "t4", "t5", "t6", "t0", "t1")
        ZKQ_XW_ROW6(24, "t3", "t4", "t5", "t6", "t0", "t1", "t2")
        ZKQ_XW_ROW6(32, "t4", "t5", "t6", "t0", "t1", "t2", "t3")
        ZKQ_XW_ROW6(40, "t5", "t6", "t0", "t1", "t2", "t3", "t4")
        "movq %[t6], 48(%[out])\n\t"
        "movq %[t0], 56(%[out])\n\t"
        "movq %[t1], 64(%[out])\n\t"
        "movq %[t2], 72(%[out])\n\t"
        "movq %[t3], 80(%[out])\n\t"
        "movq %[t4], 88(%[out])\n\t"
        : [t0] "=&r"(t0), [t1] "=&r"(t1), [t2] "=&r"(t2), [t3] "=&r"(t3), [t4] "=&r"(t4),
          [t5] "=&r"(t5), [t6] "=&r"(t6), [lo] "=&r"(lo), [hi] "=&r"(hi), [z] "=&r"(z),
          "=m"(*(uint64_t(*)[12])out)
        : [a] "r"(a), [b] "r"(b), [out] "r"(out),
          "m"(*(const uint64_t(*)[6])a), "m"(*(const uint64_t(*)[6])b)
        : "rdx", "cc");
}

// One reduction row on its own (no product first): T0..Tn += m * q, Tn fresh, T0 -> 0.
#define ZKQ_XR_ROW4(T0, T1, T2, T3, T4)                 \
    ZKQ_X_R_START(T0) "movq %[z], %[" T4 "]\n\t" ZKQ_X4_RED(T0, T1, T2, T3, T4)

// out = t * 2^-256 mod p for a double-width t < p * 2^256 (8 words), fully reduced. The
// rows reduce the low half: u = (t_lo + m p) / 2^256 <= p; then u + t_hi <= 2p - 1 (t_hi <
// p by the bound on t), and one conditional subtraction finishes.
template <class P>
inline __attribute__((always_inline)) void redc4(uint64_t* out, const uint64_t* t) {
    using M = Mod<P>;
    uint64_t t0 = t[0], t1 = t[1], t2 = t[2], t3 = t[3], t4, lo, hi, z;
    __asm__(
        ZKQ_XR_ROW4("t0", "t1", "t2", "t3", "t4")
        ZKQ_XR_ROW4("t1", "t2", "t3", "t4", "t0")
        ZKQ_XR_ROW4("t2", "t3", "t4", "t0", "t1")
        ZKQ_XR_ROW4("t3", "t4", "t0", "t1", "t2")
        "addq 32(%[t]), %[t4]\n\t"
        "adcq 40(%[t]), %[t0]\n\t"
        "adcq 48(%[t]), %[t1]\n\t"
        "adcq 56(%[t]), %[t2]\n\t"
        ZKQ_X4_FINAL
        : [t0] "+&r"(t0), [t1] "+&r"(t1), [t2] "+&r"(t2), [t3] "+&r"(t3), [t4] "=&r"(t4),
          [lo] "=&r"(lo), [hi] "=&r"(hi), [z] "=&r"(z)
        : [t] "r"(t), [q] "m"(M::q), [minv] "m"(M::minv), "m"(*(const uint64_t(*)[8])t)
        : "rdx", "cc");
    out[0] = t4;
    out[1] = t0;
    out[2] = t1;
    out[3] = t2;
}

#define ZKQ_XR_ROW6(T0, T1, T2, T3, T4, T5, T6)         \
    ZKQ_X_R_START(T0) "movq %[z], %[" T6 "]\n\t" ZKQ_X6_RED(T0, T1, T2, T3, T4, T5, T6)

// As redc4 for 6 words: out = t * 2^-384 mod p for t < p * 2^384 (12 words).
template <class P>
inline __attribute__((always_inline)) void redc6(uint64_t* out, const uint64_t* t) {
    using M = Mod<P>;
    uint64_t t0 = t[0], t1 = t[1], t2 = t[2], t3 = t[3], t4 = t[4], t5 = t[5], t6, lo, hi, z;
    const uint64_t* tp = t;  // its register is reused by the final subtraction
    __asm__(
        ZKQ_XR_ROW6("t0", "t1", "t2", "t3", "t4", "t5", "t6")
        ZKQ_XR_ROW6("t1", "t2", "t3", "t4", "t5", "t6", "t0")
        ZKQ_XR_ROW6("t2", "t3", "t4", "t5", "t6", "t0", "t1")
        ZKQ_XR_ROW6("t3", "t4", "t5", "t6", "t0", "t1", "t2")
        ZKQ_XR_ROW6("t4", "t5", "t6", "t0", "t1", "t2", "t3")
        ZKQ_XR_ROW6("t5", "t6", "t0", "t1", "t2", "t3", "t4")
        // (t6, t0, t1, t2, t3, t4) + t_hi, then the final subtraction (t's register as scratch)
        "addq 48(%[t]), %[t6]\n\t"
        "adcq 56(%[t]), %[t0]\n\t"
        "adcq 64(%[t]), %[t1]\n\t"
        "adcq 72(%[t]), %[t2]\n\t"
        "adcq 80(%[t]), %[t3]\n\t"
        "adcq 88(%[t]), %[t4]\n\t"
        ZKQ_X6_FINAL("t")
        : [t0] "+&r"(t0), [t1] "+&r"(t1), [t2] "+&r"(t2), [t3] "+&r"(t3), [t4] "+&r"(t4),
          [t5] "+&r"(t5), [t6] "=&r"(t6), [lo] "=&r"(lo), [hi] "=&r"(hi), [z] "=&r"(z), [t] "+&r"(tp)
        : [q] "m"(M::q), [minv] "m"(M::minv), "m"(*(const uint64_t(*)[12])t)
        : "rdx", "cc");
    out[0] = t6;
    out[1] = t0;
    out[2] = t1;
    out[3] = t2;
    out[4] = t3;
    out[5] = t4;
}

#undef ZKQ_X_MA
#undef ZKQ_X_RD
#undef ZKQ_X_M_START
#undef ZKQ_X_R_START
#undef ZKQ_X4_ROW
#undef ZKQ_X6_ROW
#undef ZKQ_X_ROW0_WORDS0123
#undef ZKQ_X4_ROW0
#undef ZKQ_X6_ROW0
#undef ZKQ_X4_MUL
#undef ZKQ_X6_MUL
#undef ZKQ_X4_RED
#undef ZKQ_X6_RED
#undef ZKQ_X4_FINAL
#undef ZKQ_X6_FINAL
#undef ZKQ_XW_ROW4
#undef ZKQ_XW_ROW6
#undef ZKQ_XR_ROW4
#undef ZKQ_XR_ROW6

// out = a + b mod p, and out = a - b mod p, for NW = 4: branch-free (the portable code's
// data-dependent branches mispredict about half the time on random field elements).
template <class P>
inline __attribute__((always_inline)) void mod_add4(uint64_t* out, const uint64_t* a, const uint64_t* b) {
    using M = Mod<P>;
    uint64_t s0 = a[0], s1 = a[1], s2 = a[2], s3 = a[3], d0, d1, d2, d3;
    // a + b < 2p < 2^256 (p's top bit is clear): no carry out. Then subtract p and keep
    // the difference unless it borrowed.
    __asm__(
        "addq 0(%[b]), %[s0]\n\t"
        "adcq 8(%[b]), %[s1]\n\t"
        "adcq 16(%[b]), %[s2]\n\t"
        "adcq 24(%[b]), %[s3]\n\t"
        "movq %[s0], %[d0]\n\t"  "subq 0+%[q], %[d0]\n\t"
        "movq %[s1], %[d1]\n\t"  "sbbq 8+%[q], %[d1]\n\t"
        "movq %[s2], %[d2]\n\t"  "sbbq 16+%[q], %[d2]\n\t"
        "movq %[s3], %[d3]\n\t"  "sbbq 24+%[q], %[d3]\n\t"
        "cmovncq %[d0], %[s0]\n\t"
        "cmovncq %[d1], %[s1]\n\t"
        "cmovncq %[d2], %[s2]\n\t"
        "cmovncq %[d3], %[s3]\n\t"
        : [s0] "+&r"(s0), [s1] "+&r"(s1), [s2] "+&r"(s2), [s3] "+&r"(s3),
          [d0] "=&r"(d0), [d1] "=&r"(d1), [d2] "=&r"(d2), [d3] "=&r"(d3)
        : [b] "r"(b), [q] "m"(M::q), "m"(*(const uint64_t(*)[4])b)
        : "cc");
    out[0] = s0; out[1] = s1; out[2] = s2; out[3] = s3;
}

template <class P>
inline __attribute__((always_inline)) void mod_sub4(uint64_t* out, const uint64_t* a, const uint64_t* b) {
    using M = Mod<P>;
    uint64_t s0 = a[0], s1 = a[1], s2 = a[2], s3 = a[3], m0, m1, m2, m3, z;
    // a - b; on a borrow add p back: p masked by the borrow (sbb z,z = 0 or all ones).
    __asm__(
        "subq 0(%[b]), %[s0]\n\t"
        "sbbq 8(%[b]), %[s1]\n\t"
        "sbbq 16(%[b]), %[s2]\n\t"
        "sbbq 24(%[b]), %[s3]\n\t"
        "sbbq %[z], %[z]\n\t"
        "movq 0+%[q], %[m0]\n\t"  "andq %[z], %[m0]\n\t"
        "movq 8+%[q], %[m1]\n\t"  "andq %[z], %[m1]\n\t"
        "movq 16+%[q], %[m2]\n\t" "andq %[z], %[m2]\n\t"
        "movq 24+%[q], %[m3]\n\t" "andq %[z], %[m3]\n\t"
        "addq %[m0], %[s0]\n\t"
        "adcq %[m1], %[s1]\n\t"
        "adcq %[m2], %[s2]\n\t"
        "adcq %[m3], %[s3]\n\t"
        : [s0] "+&r"(s0), [s1] "+&r"(s1), [s2] "+&r"(s2), [s3] "+&r"(s3),
          [m0] "=&r"(m0), [m1] "=&r"(m1), [m2] "=&r"(m2), [m3] "=&r"(m3), [z] "=&r"(z)
        : [b] "r"(b), [q] "m"(M::q), "m"(*(const uint64_t(*)[4])b)
        : "cc");
    out[0] = s0; out[1] = s1; out[2] = s2; out[3] = s3;
}

// The same for NW = 6, with carry intrinsics (GCC turns them into adc/sbb chains) and a
// mask select: inline assembly would need more registers than x86-64 has free here.
template <class P>
inline __attribute__((always_inline)) void mod_add6(uint64_t* out, const uint64_t* a, const uint64_t* b) {
    using M = Mod<P>;
    unsigned long long s[6], d[6];
    unsigned char c = 0;
    for (int i = 0; i < 6; i++) c = _addcarry_u64(c, a[i], b[i], &s[i]);
    unsigned char br = 0;
    for (int i = 0; i < 6; i++) br = _subborrow_u64(br, s[i], M::q[i], &d[i]);
    const uint64_t keep = 0 - (uint64_t)br;  // all ones: a + b < p, keep the sum
    for (int i = 0; i < 6; i++) out[i] = (s[i] & keep) | (d[i] & ~keep);
}

template <class P>
inline __attribute__((always_inline)) void mod_sub6(uint64_t* out, const uint64_t* a, const uint64_t* b) {
    using M = Mod<P>;
    unsigned long long d[6];
    unsigned char br = 0;
    for (int i = 0; i < 6; i++) br = _subborrow_u64(br, a[i], b[i], &d[i]);
    const uint64_t mask = 0 - (uint64_t)br;  // all ones: went below zero, add p back
    unsigned char c = 0;
    for (int i = 0; i < 6; i++) c = _addcarry_u64(c, d[i], M::q[i] & mask, &d[i]);
    for (int i = 0; i < 6; i++) out[i] = d[i];
}

// out = a * b * 2^(-64 NW) mod p for NW = 4 or 6.
template <class P>
inline __attribute__((always_inline)) void mont_mul(uint64_t* out, const uint64_t* a, const uint64_t* b) {
    if constexpr (P::NW == 4) mont_mul4<P>(out, a, b);
    else mont_mul6<P>(out, a, b);
}

// (c0 + c1 u) = (a0 + a1 u)(b0 + b1 u) in Fp2 = Fp[u]/(u^2 + 1), Montgomery form, NW = 4
// or 6: Karatsuba on double-width products with two reductions instead of three.
//   c1 = (a0 + a1)(b0 + b1) - a0 b0 - a1 b1 = a0 b1 + a1 b0 < 2p^2 < p 2^(64 NW)
//   c0 = a0 b0 - a1 b1, plus p 2^(64 NW) when negative: in [0, p 2^(64 NW))
// Both are within redc's bound. The sums a0 + a1, b0 + b1 are not reduced: below 2p, which
// fits NW words because every p here is below 2^(64 NW - 2).
template <class P>
inline __attribute__((always_inline)) void fp2_mul(uint64_t* c0, uint64_t* c1, const uint64_t* a0,
                                                   const uint64_t* a1, const uint64_t* b0, const uint64_t* b1) {
    using M = Mod<P>;
    constexpr int NW = P::NW, W = 2 * NW;
    unsigned long long t0[W], t1[W], t2[W], sa[NW], sb[NW];
    unsigned char ca = 0, cb = 0;
    for (int i = 0; i < NW; i++) {
        ca = _addcarry_u64(ca, a0[i], a1[i], &sa[i]);
        cb = _addcarry_u64(cb, b0[i], b1[i], &sb[i]);
    }
    auto wide = [](unsigned long long* o, const uint64_t* x, const uint64_t* y) {
        if constexpr (NW == 4) mul_wide4(reinterpret_cast<uint64_t*>(o), x, y);
        else mul_wide6(reinterpret_cast<uint64_t*>(o), x, y);
    };
    wide(t0, a0, b0);
    wide(t1, a1, b1);
    wide(t2, reinterpret_cast<const uint64_t*>(sa), reinterpret_cast<const uint64_t*>(sb));
    unsigned char b2 = 0, b3 = 0, b0w = 0;
    for (int i = 0; i < W; i++) b2 = _subborrow_u64(b2, t2[i], t0[i], &t2[i]);
    for (int i = 0; i < W; i++) b3 = _subborrow_u64(b3, t2[i], t1[i], &t2[i]);
    for (int i = 0; i < W; i++) b0w = _subborrow_u64(b0w, t0[i], t1[i], &t0[i]);
    const uint64_t mask = 0 - (uint64_t)b0w;  // all ones: a0 b0 < a1 b1, add p 2^(64 NW)
    unsigned char c = 0;
    for (int i = 0; i < NW; i++) c = _addcarry_u64(c, t0[NW + i], M::q[i] & mask, &t0[NW + i]);
    if constexpr (NW == 4) {
        redc4<P>(c0, reinterpret_cast<const uint64_t*>(t0));
        redc4<P>(c1, reinterpret_cast<const uint64_t*>(t2));
    } else {
        redc6<P>(c0, reinterpret_cast<const uint64_t*>(t0));
        redc6<P>(c1, reinterpret_cast<const uint64_t*>(t2));
    }
}

// out = a0^2 + a1^2 (the norm of a0 + a1 u), Montgomery form, NW = 4 or 6: the two squares
// are added double-width (a0^2 + a1^2 < 2p^2 < p 2^(64 NW), within redc's bound) and
// reduced once.
template <class P>
inline __attribute__((always_inline)) void fp2_norm(uint64_t* out, const uint64_t* a0, const uint64_t* a1) {
    constexpr int NW = P::NW, W = 2 * NW;
    unsigned long long t0[W], t1[W];
    if constexpr (NW == 4) {
        mul_wide4(reinterpret_cast<uint64_t*>(t0), a0, a0);
        mul_wide4(reinterpret_cast<uint64_t*>(t1), a1, a1);
    } else {
        mul_wide6(reinterpret_cast<uint64_t*>(t0), a0, a0);
        mul_wide6(reinterpret_cast<uint64_t*>(t1), a1, a1);
    }
    unsigned char c = 0;
    for (int i = 0; i < W; i++) c = _addcarry_u64(c, t0[i], t1[i], &t0[i]);
    if constexpr (NW == 4) redc4<P>(out, reinterpret_cast<const uint64_t*>(t0));
    else redc6<P>(out, reinterpret_cast<const uint64_t*>(t0));
}

}  // namespace x86
}  // namespace zkq
