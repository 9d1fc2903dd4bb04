// params.cuh - the four prime fields zkqueue proves over, as little-endian 64-bit words.
//
// Each parameter set gives the modulus P, R = 2^(64*NW) mod P (Montgomery one) and
// R2 = R^2 mod P (to enter Montgomery form). Values are read through constexpr functions
// rather than arrays so that device code can use them without a copy in device memory.
// They were computed with Python integers; groth16/curves.py recomputes and checks them
// against its own constants at import (tests/test_kernels.py compares both).
#pragma once
#include "common.cuh"

namespace zkq {

#define ZKQ_W4(a, b, c, d) (i == 0 ? a : i == 1 ? b : i == 2 ? c : d)
#define ZKQ_W6(a, b, c, d, e, f) (i == 0 ? a : i == 1 ? b : i == 2 ? c : i == 3 ? d : i == 4 ? e : f)

// BN254 base field q.
struct bn254_fq_params {
    static constexpr int NW = 4;
    static ZKQ_HD constexpr uint64_t p(int i) { return ZKQ_W4(0x3c208c16d87cfd47ull, 0x97816a916871ca8dull, 0xb85045b68181585dull, 0x30644e72e131a029ull); }
    static ZKQ_HD constexpr uint64_t r(int i) { return ZKQ_W4(0xd35d438dc58f0d9dull, 0x0a78eb28f5c70b3dull, 0x666ea36f7879462cull, 0x0e0a77c19a07df2full); }
    static ZKQ_HD constexpr uint64_t r2(int i) { return ZKQ_W4(0xf32cfc5b538afa89ull, 0xb5e71911d44501fbull, 0x47ab1eff0a417ff6ull, 0x06d89f71cab8351full); }
};

// BN254 scalar field r (the group order).
struct bn254_fr_params {
    static constexpr int NW = 4;
    static ZKQ_HD constexpr uint64_t p(int i) { return ZKQ_W4(0x43e1f593f0000001ull, 0x2833e84879b97091ull, 0xb85045b68181585dull, 0x30644e72e131a029ull); }
    static ZKQ_HD constexpr uint64_t r(int i) { return ZKQ_W4(0xac96341c4ffffffbull, 0x36fc76959f60cd29ull, 0x666ea36f7879462eull, 0x0e0a77c19a07df2full); }
    static ZKQ_HD constexpr uint64_t r2(int i) { return ZKQ_W4(0x1bb8e645ae216da7ull, 0x53fe3ab1e35c59e3ull, 0x8c49833d53bb8085ull, 0x0216d0b17f4e44a5ull); }
};

// BLS12-381 base field q (381 bits in six words).
struct bls12381_fq_params {
    static constexpr int NW = 6;
    static ZKQ_HD constexpr uint64_t p(int i) { return ZKQ_W6(0xb9feffffffffaaabull, 0x1eabfffeb153ffffull, 0x6730d2a0f6b0f624ull, 0x64774b84f38512bfull, 0x4b1ba7b6434bacd7ull, 0x1a0111ea397fe69aull); }
    static ZKQ_HD constexpr uint64_t r(int i) { return ZKQ_W6(0x760900000002fffdull, 0xebf4000bc40c0002ull, 0x5f48985753c758baull, 0x77ce585370525745ull, 0x5c071a97a256ec6dull, 0x15f65ec3fa80e493ull); }
    static ZKQ_HD constexpr uint64_t r2(int i) { return ZKQ_W6(0xf4df1f341c341746ull, 0x0a76e6a609d104f1ull, 0x8de5476c4c95b6d5ull, 0x67eb88a9939d83c0ull, 0x9a793e85b519952dull, 0x11988fe592cae3aaull); }
};

// BLS12-381 scalar field r.
struct bls12381_fr_params {
    static constexpr int NW = 4;
    static ZKQ_HD constexpr uint64_t p(int i) { return ZKQ_W4(0xffffffff00000001ull, 0x53bda402fffe5bfeull, 0x3339d80809a1d805ull, 0x73eda753299d7d48ull); }
    static ZKQ_HD constexpr uint64_t r(int i) { return ZKQ_W4(0x00000001fffffffeull, 0x5884b7fa00034802ull, 0x998c4fefecbc4ff5ull, 0x1824b159acc5056full); }
    static ZKQ_HD constexpr uint64_t r2(int i) { return ZKQ_W4(0xc999e990f3f29c6dull, 0x2b6cedcb87925c23ull, 0x05d314967254398full, 0x0748d9d99f59ff11ull); }
};

#undef ZKQ_W4
#undef ZKQ_W6

}  // namespace zkq
