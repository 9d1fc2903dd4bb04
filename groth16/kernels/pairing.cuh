// pairing.cuh - the optimal ate pairing on BN254 and BLS12-381: the Fq6 and Fq12 towers,
// Frobenius maps, twist-specific line functions, a multi-Miller loop and the final
// exponentiation, as templates over the shared field types (host-only today; written in
// the ZKQ_HD style so that nvcc could compile it too, except the constant tables, which
// are static constexpr arrays and would need __constant__ copies on a device).
//
// Towers (both curves): Fq2 = Fq[u]/(u^2 + 1), Fq6 = Fq2[v]/(v^3 - xi), Fq12 = Fq6[w]/(w^2 - v),
// xi = 9 + u (BN254), 1 + u (BLS12-381). An Fq12 element c0 + c1 w with ci = ci0 + ci1 v + ci2 v^2
// has Fq2 coefficients of w^0, w^2, w^4 (c0) and w^1, w^3, w^5 (c1).
//
// Twists: BN254 uses the D-type twist y^2 = x^3 + 3/xi, untwisted by (x, y) -> (x w^2, y w^3);
// its tangent/chord lines have non-zero Fq2 coefficients at w^0, w^1, w^3 ("034").
// BLS12-381 uses the M-type twist y^2 = x^3 + 4 xi, untwisted by (x, y) -> (x w^-2, y w^-3);
// after scaling by w^3 (an Fq4 factor that the final exponentiation removes) its lines sit
// at w^0, w^2, w^3 ("014"). G2 points are kept in homogeneous projective coordinates
// (X, Y, Z) ~ (X/Z, Y/Z) during the loop; the line formulas are those of Costello, Lange
// and Naehrig (eprint 2009/615) as arranged in arkworks, each line scaled by a factor in a
// proper subfield (which the final exponentiation also removes).
//
// The constant tables below were generated with Python integers (the derivation is in each
// comment); the bilinearity tests in tests/test_verifier_native.py check them end to end.
#pragma once
#include "common.cuh"
#include "params.cuh"
#include "field.cuh"
#include "fq2.cuh"
#include "curve.cuh"

// The tower and Miller-loop functions are large: forcing them inline (as ZKQ_HD does for
// the base field) makes g++ 12 take minutes and even crash (an ICE in fwprop), so on the
// host they are real calls.
#if defined(__CUDACC__)
#define ZKQ_HD_BIG __host__ __device__
#else
#define ZKQ_HD_BIG __attribute__((noinline))
#endif

namespace zkq {

struct bn254_pairing_consts {
    static constexpr int NW = 4;
    static constexpr uint64_t X_ABS = 4965661367192848881ull;  // the BN parameter x > 0
    // G2 twist coefficient b2 = 3/(9+u), Montgomery
    static constexpr uint64_t B2[2][4] = {{0x3bf938e377b802a8ull, 0x020b1b273633535dull, 0x26b7edf049755260ull, 0x2514c6324384a86dull}, {0x38e7ecccd1dcff67ull, 0x65f0b37d93ce0d3eull, 0xd749d0dd22ac00aaull, 0x0141b9ce4a688d4dull}};
    static constexpr uint64_t TWO_INV[4] = {0x87bee7d24f060572ull, 0xd0fd2add2f1c6ae5ull, 0x8f5f7492fcfd4f44ull, 0x1f37631a3d9cbfacull};
    // FROB[k-1][i] = xi^(i*(q^k-1)/6), k = 1..3, i = 0..5 (Fq2 c0, c1), Montgomery
    static constexpr uint64_t FROB[3][6][2][4] = {
     {{{0xd35d438dc58f0d9dull, 0x0a78eb28f5c70b3dull, 0x666ea36f7879462cull, 0x0e0a77c19a07df2full}, {0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull}},
      {{0xaf9ba69633144907ull, 0xca6b1d7387afb78aull, 0x11bded5ef08a2087ull, 0x02f34d751a1f3a7cull}, {0xa222ae234c492d72ull, 0xd00f02a4565de15bull, 0xdc2ff3a253dfc926ull, 0x10a75716b3899551ull}},
      {{0xb5773b104563ab30ull, 0x347f91c8a9aa6454ull, 0x7a007127242e0991ull, 0x1956bcd8118214ecull}, {0x6e849f1ea0aa4757ull, 0xaa1c7b6d89f89141ull, 0xb6e713cdfae0ca3aull, 0x26694fbb4e82ebc3ull}},
      {{0xe4bbdd0c2936b629ull, 0xbb30f162e133bacbull, 0x31a9d1b6f9645366ull, 0x253570bea500f8ddull}, {0xa1d77ce45ffe77c7ull, 0x07affd117826d1dbull, 0x6d16bd27bb7edc6bull, 0x2c87200285defeccull}},
      {{0x7361d77f843abe92ull, 0xa5bb2bd3273411fbull, 0x9c941f314b3e2399ull, 0x15df9cddbb9fd3ecull}, {0x5dddfd154bd8c949ull, 0x62cb29a5a4445b60ull, 0x37bc870a0c7dd2b9ull, 0x24830a9d3171f0fdull}},
      {{0xc970692f41690fe7ull, 0xe240342127694b0bull, 0x32bee66b83c459e8ull, 0x12aabced0ab08841ull}, {0x0d485d2340aebfa9ull, 0x05193418ab2fcc57ull, 0xd3b0a40b8a4910f5ull, 0x2f21ebb535d2925aull}}},
     {{{0xd35d438dc58f0d9dull, 0x0a78eb28f5c70b3dull, 0x666ea36f7879462cull, 0x0e0a77c19a07df2full}, {0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull}},
      {{0xca8d800500fa1bf2ull, 0xf0c5d61468b39769ull, 0x0e201271ad0d4418ull, 0x04290f65bad856e6ull}, {0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull}},
      {{0x3350c88e13e80b9cull, 0x7dce557cdb5e56b9ull, 0x6001b4b8b615564aull, 0x2682e617020217e0ull}, {0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull}},
      {{0x68c3488912edefaaull, 0x8d087f6872aabf4full, 0x51e1a24709081231ull, 0x2259d6b14729c0faull}, {0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull}},
      {{0x71930c11d782e155ull, 0xa6bb947cffbe3323ull, 0xaa303344d4741444ull, 0x2c3b3f0d26594943ull}, {0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull}},
      {{0x08cfc388c494f1abull, 0x19b315148d1373d4ull, 0x584e90fdcb6c0213ull, 0x09e1685bdf2f8849ull}, {0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull}}},
     {{{0xd35d438dc58f0d9dull, 0x0a78eb28f5c70b3dull, 0x666ea36f7879462cull, 0x0e0a77c19a07df2full}, {0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull}},
      {{0x365316184e46d97dull, 0x0af7129ed4c96d9full, 0x659da72fca1009b5ull, 0x08116d8983a20d23ull}, {0xb1df4af7c39c1939ull, 0x3d9f02878a73bf7full, 0x9b2220928caf0ae0ull, 0x26684515eff054a6ull}},
      {{0xc9af22f716ad6badull, 0xb311782a4aa662b2ull, 0x19eeaf64e248c7f4ull, 0x20273e77e3439f82ull}, {0xacc02860f7ce93acull, 0x3933d5817ba76b4cull, 0x69e6188b446c8467ull, 0x0a46036d4417cc55ull}},
      {{0x5764af0aaf46471eull, 0xdc50792e873e0fc1ull, 0x86a673ff881d04f6ull, 0x0b2eddb43c30a74cull}, {0x9a490f32787e8580ull, 0x8fd16d7ff04af8b1ull, 0x4b39888ec6027bf2ull, 0x03dd2e705b52a15dull}},
      {{0x448a93a57b6762dfull, 0xbfd62df528fdeadfull, 0xd858f5d00e9bd47aull, 0x06b03d4d3476ec58ull}, {0x2b19daf4bcc936d1ull, 0xa1a54e7a56f4299full, 0xb533eee05adeaef1ull, 0x170c812b84dda0b2ull}},
      {{0xe0bc4b2275cf559full, 0xc238b945c154e60full, 0x803982a5929a7d5eull, 0x15ce052df7e4a37eull}, {0x2d28efbdbf3799a7ull, 0x9b097e3c1ad60773ull, 0x982d4113af4a535bull, 0x24e18991e3056063ull}}}};
    // hard part of the final exponent, (q^4 - q^2 + 1)/r, 761 bits
    static constexpr int HARD_BITS = 761;
    static constexpr uint64_t HARD[12] = {0xe81bb482ccdf42b1ull, 0x5abf5cc4f49c36d4ull, 0xf1154e7e1da014fdull, 0xdcc7b44c87cdbacfull, 0xaaa441e3954bcf8aull, 0x6b887d56d5095f23ull, 0x79581e16f3fd90c6ull, 0x3b1b1355d189227dull, 0x4e529a5861876f6bull, 0x6c0eb522d5b12278ull, 0x331ec15183177fafull, 0x01baaa710b0759adull};
    // Miller loop digits, most significant first
    static constexpr int LOOP_LEN = 66;
    static constexpr int8_t LOOP[66] = {1, 0, -1, 0, 1, 0, 0, 0, -1, 0, -1, 0, 0, 0, -1, 0, 1, 0, -1, 0, 0, -1, 0, 0, 0, 0, 0, 1, 0, 0, -1, 0, 1, 0, 0, -1, 0, 0, 0, 0, -1, 0, 1, 0, 0, 0, -1, 0, -1, 0, 0, 1, 0, 0, 0, -1, 0, 0, -1, 0, 1, 0, 1, 0, 0, 0};
};

struct bls12381_pairing_consts {
    static constexpr int NW = 6;
    static constexpr uint64_t X_ABS = 0xd201000000010000ull;  // the BLS parameter x = -X_ABS
    // G2 twist coefficient b2 = 4(1+u), Montgomery
    static constexpr uint64_t B2[2][6] = {{0xaa270000000cfff3ull, 0x53cc0032fc34000aull, 0x478fe97a6b0a807full, 0xb1d37ebee6ba24d7ull, 0x8ec9733bbf78ab2full, 0x09d645513d83de7eull}, {0xaa270000000cfff3ull, 0x53cc0032fc34000aull, 0x478fe97a6b0a807full, 0xb1d37ebee6ba24d7ull, 0x8ec9733bbf78ab2full, 0x09d645513d83de7eull}};
    static constexpr uint64_t TWO_INV[6] = {0x1804000000015554ull, 0x855000053ab00001ull, 0x633cb57c253c276full, 0x6e22d1ec31ebb502ull, 0xd3916126f2d14ca2ull, 0x17fbb8571a006596ull};
    // FROB[k-1][i] = xi^(i*(q^k-1)/6), k = 1..3, i = 0..5 (Fq2 c0, c1), Montgomery
    static constexpr uint64_t FROB[3][6][2][6] = {
     {{{0x760900000002fffdull, 0xebf4000bc40c0002ull, 0x5f48985753c758baull, 0x77ce585370525745ull, 0x5c071a97a256ec6dull, 0x15f65ec3fa80e493ull}, {0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull}},
      {{0x07089552b319d465ull, 0xc6695f92b50a8313ull, 0x97e83cccd117228full, 0xa35baecab2dc29eeull, 0x1ce393ea5daace4dull, 0x08f2220fb0fb66ebull}, {0xb2f66aad4ce5d646ull, 0x5842a06bfc497cecull, 0xcf4895d42599d394ull, 0xc11b9cba40a8e8d0ull, 0x2e3813cbe5a0de89ull, 0x110eefda88847fafull}},
      {{0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull}, {0xcd03c9e48671f071ull, 0x5dab22461fcda5d2ull, 0x587042afd3851b95ull, 0x8eb60ebe01bacb9eull, 0x03f97d6e83d050d2ull, 0x18f0206554638741ull}},
      {{0x7bcfa7a25aa30fdaull, 0xdc17dec12a927e7cull, 0x2f088dd86b4ebef1ull, 0xd1ca2087da74d4a7ull, 0x2da2596696cebc1dull, 0x0e2b7eedbbfd87d2ull}, {0x7bcfa7a25aa30fdaull, 0xdc17dec12a927e7cull, 0x2f088dd86b4ebef1ull, 0xd1ca2087da74d4a7ull, 0x2da2596696cebc1dull, 0x0e2b7eedbbfd87d2ull}},
      {{0x890dc9e4867545c3ull, 0x2af322533285a5d5ull, 0x50880866309b7e2cull, 0xa20d1b8c7e881024ull, 0x14e4f04fe2db9068ull, 0x14e56d3f1564853aull}, {0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull}},
      {{0x82d83cf50dbce43full, 0xa2813e53df9d018full, 0xc6f0caa53c65e181ull, 0x7525cf528d50fe95ull, 0x4a85ed50f4798a6bull, 0x171da0fd6cf8eebdull}, {0x3726c30af242c66cull, 0x7c2ac1aad1b6fe70ull, 0xa04007fbba4b14a2ull, 0xef517c3266341429ull, 0x0095ba654ed2226bull, 0x02e370eccc86f7ddull}}},
     {{{0x760900000002fffdull, 0xebf4000bc40c0002ull, 0x5f48985753c758baull, 0x77ce585370525745ull, 0x5c071a97a256ec6dull, 0x15f65ec3fa80e493ull}, {0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull}},
      {{0xecfb361b798dba3aull, 0xc100ddb891865a2cull, 0x0ec08ff1232bda8eull, 0xd5c13cc6f1ca4721ull, 0x47222a47bf7b5c04ull, 0x0110f184e51c5f59ull}, {0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull}},
      {{0x30f1361b798a64e8ull, 0xf3b8ddab7ece5a2aull, 0x16a8ca3ac61577f7ull, 0xc26a2ff874fd029bull, 0x3636b76660701c6eull, 0x051ba4ab241b6160ull}, {0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull}},
      {{0x43f5fffffffcaaaeull, 0x32b7fff2ed47fffdull, 0x07e83a49a2e99d69ull, 0xeca8f3318332bb7aull, 0xef148d1ea0f4c069ull, 0x040ab3263eff0206ull}, {0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull}},
      {{0xcd03c9e48671f071ull, 0x5dab22461fcda5d2ull, 0x587042afd3851b95ull, 0x8eb60ebe01bacb9eull, 0x03f97d6e83d050d2ull, 0x18f0206554638741ull}, {0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull}},
      {{0x890dc9e4867545c3ull, 0x2af322533285a5d5ull, 0x50880866309b7e2cull, 0xa20d1b8c7e881024ull, 0x14e4f04fe2db9068ull, 0x14e56d3f1564853aull}, {0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull}}},
     {{{0x760900000002fffdull, 0xebf4000bc40c0002ull, 0x5f48985753c758baull, 0x77ce585370525745ull, 0x5c071a97a256ec6dull, 0x15f65ec3fa80e493ull}, {0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull}},
      {{0x3e2f585da55c9ad1ull, 0x4294213d86c18183ull, 0x382844c88b623732ull, 0x92ad2afd19103e18ull, 0x1d794e4fac7cf0b9ull, 0x0bd592fc7d825ec8ull}, {0x7bcfa7a25aa30fdaull, 0xdc17dec12a927e7cull, 0x2f088dd86b4ebef1ull, 0xd1ca2087da74d4a7ull, 0x2da2596696cebc1dull, 0x0e2b7eedbbfd87d2ull}},
      {{0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull}, {0x760900000002fffdull, 0xebf4000bc40c0002ull, 0x5f48985753c758baull, 0x77ce585370525745ull, 0x5c071a97a256ec6dull, 0x15f65ec3fa80e493ull}},
      {{0x3e2f585da55c9ad1ull, 0x4294213d86c18183ull, 0x382844c88b623732ull, 0x92ad2afd19103e18ull, 0x1d794e4fac7cf0b9ull, 0x0bd592fc7d825ec8ull}, {0x3e2f585da55c9ad1ull, 0x4294213d86c18183ull, 0x382844c88b623732ull, 0x92ad2afd19103e18ull, 0x1d794e4fac7cf0b9ull, 0x0bd592fc7d825ec8ull}},
      {{0x43f5fffffffcaaaeull, 0x32b7fff2ed47fffdull, 0x07e83a49a2e99d69ull, 0xeca8f3318332bb7aull, 0xef148d1ea0f4c069ull, 0x040ab3263eff0206ull}, {0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull}},
      {{0x7bcfa7a25aa30fdaull, 0xdc17dec12a927e7cull, 0x2f088dd86b4ebef1ull, 0xd1ca2087da74d4a7ull, 0x2da2596696cebc1dull, 0x0e2b7eedbbfd87d2ull}, {0x3e2f585da55c9ad1ull, 0x4294213d86c18183ull, 0x382844c88b623732ull, 0x92ad2afd19103e18ull, 0x1d794e4fac7cf0b9ull, 0x0bd592fc7d825ec8ull}}}};
    // hard part of the final exponent, (q^4 - q^2 + 1)/r, 1268 bits
    static constexpr int HARD_BITS = 1268;
    static constexpr uint64_t HARD[20] = {0xe516c3f438e3ba79ull, 0xfa9912aae208ccf1ull, 0x905ce937335d5b68ull, 0xc71a2629b0dea236ull, 0x83774940996754c8ull, 0x21d160aeb6a1e799ull, 0x2ed0b283ed237db4ull, 0x915c97f36c6f1821ull, 0x67f17fcbde783765ull, 0x2378b9039096d1b7ull, 0x7988f8761bdc51dcull, 0x2076995003fc77a1ull, 0x827eca0ba621315bull, 0xe5a72bce8d63cb9full, 0xf68f7764c28b6f8aull, 0x2f230063cf081517ull, 0x94506632528d6a9aull, 0xd3cde88eeb996ca3ull, 0xc0bd38c3195c899eull, 0x000f686b3d807d01ull};
    // Miller loop digits, most significant first
    static constexpr int LOOP_LEN = 64;
    static constexpr int8_t LOOP[64] = {1, 1, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
};


// An Fq element from NW little-endian 64-bit words (already Montgomery), for any limb width.
template <class F>
ZKQ_HD F fp_from_words(const uint64_t* w) {
    F r;
    for (int i = 0; i < F::N; i++)
        r.v[i] = F::BITS == 64 ? (typename F::limb_t)w[i] : (typename F::limb_t)(w[i / 2] >> (32 * (i % 2)));
    return r;
}

// Per-curve pairing configuration: field types, xi, twist kind, loop and constants.
template <class L = default_limb>
struct bn254_pairing : bn254_pairing_consts {
    using Fq = Fp<bn254_fq_params, L>;
    using Fr = Fp<bn254_fr_params, L>;
    using F2 = Fp2<Fq>;
    static constexpr bool M_TWIST = false;
    static constexpr bool X_NEGATIVE = false;
    static constexpr bool IS_BN = true;
    static constexpr bool G1_COFACTOR = false;   // #E(Fq) = r: every G1 point is in the subgroup
    static ZKQ_HD Fq b1() { return Fq::from_uint(3); }
    // a * (9 + u) = (9 a0 - a1) + (a0 + 9 a1) u
    static ZKQ_HD F2 mul_xi(const F2& a) {
        Fq t0 = a.c0.dbl().dbl().dbl() + a.c0, t1 = a.c1.dbl().dbl().dbl() + a.c1;
        return {t0 - a.c1, a.c0 + t1};
    }
};

template <class L = default_limb>
struct bls12381_pairing : bls12381_pairing_consts {
    using Fq = Fp<bls12381_fq_params, L>;
    using Fr = Fp<bls12381_fr_params, L>;
    using F2 = Fp2<Fq>;
    static constexpr bool M_TWIST = true;
    static constexpr bool X_NEGATIVE = true;
    static constexpr bool IS_BN = false;
    static constexpr bool G1_COFACTOR = true;
    static ZKQ_HD Fq b1() { return Fq::from_uint(4); }
    // a * (1 + u) = (a0 - a1) + (a0 + a1) u
    static ZKQ_HD F2 mul_xi(const F2& a) { return {a.c0 - a.c1, a.c0 + a.c1}; }
};

template <class C>
ZKQ_HD typename C::F2 pairing_const2(const uint64_t (*w)[C::NW]) {
    using Fq = typename C::Fq;
    return {fp_from_words<Fq>(w[0]), fp_from_words<Fq>(w[1])};
}
template <class C> ZKQ_HD typename C::F2 twist_b() { return pairing_const2<C>(C::B2); }
template <class C> ZKQ_HD typename C::F2 frob_coeff(int k, int i) { return pairing_const2<C>(C::FROB[k - 1][i]); }

// Fq2 products as real calls: inlining every Fq multiplication of a tower operation makes
// g++'s compile time grow much faster than the code (seconds per Fq6 product).
template <class F2> ZKQ_HD_BIG F2 mul2(const F2& a, const F2& b) { return a * b; }
template <class F2> ZKQ_HD_BIG F2 sqr2(const F2& a) { return a.sqr(); }

// Fq6 = Fq2[v]/(v^3 - xi)
template <class C>
struct Fp6 {
    using F2 = typename C::F2;
    F2 c0, c1, c2;

    static ZKQ_HD Fp6 zero() { return {F2::zero(), F2::zero(), F2::zero()}; }
    static ZKQ_HD Fp6 one() { return {F2::one(), F2::zero(), F2::zero()}; }
    ZKQ_HD bool is_zero() const { return c0.is_zero() && c1.is_zero() && c2.is_zero(); }
    ZKQ_HD bool operator==(const Fp6& o) const { return c0 == o.c0 && c1 == o.c1 && c2 == o.c2; }
    ZKQ_HD Fp6 operator+(const Fp6& b) const { return {c0 + b.c0, c1 + b.c1, c2 + b.c2}; }
    ZKQ_HD Fp6 operator-(const Fp6& b) const { return {c0 - b.c0, c1 - b.c1, c2 - b.c2}; }
    ZKQ_HD Fp6 operator-() const { return {-c0, -c1, -c2}; }
    ZKQ_HD Fp6 dbl() const { return {c0.dbl(), c1.dbl(), c2.dbl()}; }
    ZKQ_HD Fp6 operator*(const F2& s) const { return {mul2(c0, s), mul2(c1, s), mul2(c2, s)}; }
    // this * v = xi c2 + c0 v + c1 v^2
    ZKQ_HD Fp6 mul_v() const { return {C::mul_xi(c2), c0, c1}; }

    // Karatsuba-style (Devegili et al., eprint 2006/471): 6 Fq2 multiplications
    ZKQ_HD_BIG Fp6 operator*(const Fp6& b) const {
        F2 v0 = mul2(c0, b.c0), v1 = mul2(c1, b.c1), v2 = mul2(c2, b.c2);
        return {v0 + C::mul_xi(mul2(c1 + c2, b.c1 + b.c2) - v1 - v2),
                mul2(c0 + c1, b.c0 + b.c1) - v0 - v1 + C::mul_xi(v2),
                mul2(c0 + c2, b.c0 + b.c2) - v0 - v2 + v1};
    }
    // CH-SQR2 (Chung-Hasan)
    ZKQ_HD_BIG Fp6 sqr() const {
        F2 s0 = sqr2(c0), s1 = mul2(c0, c1).dbl(), s2 = sqr2(c0 - c1 + c2);
        F2 s3 = mul2(c1, c2).dbl(), s4 = sqr2(c2);
        return {s0 + C::mul_xi(s3), s1 + C::mul_xi(s4), s1 + s2 + s3 - s0 - s4};
    }
    // this * (b0 + b1 v): 5 Fq2 multiplications
    ZKQ_HD_BIG Fp6 mul_01(const F2& b0, const F2& b1) const {
        F2 v0 = mul2(c0, b0), v1 = mul2(c1, b1);
        return {v0 + C::mul_xi(mul2(c2, b1)),
                mul2(c0 + c1, b0 + b1) - v0 - v1,
                mul2(c2, b0) + v1};
    }
    // this * (b1 v)
    ZKQ_HD Fp6 mul_1(const F2& b1) const { return {C::mul_xi(mul2(c2, b1)), mul2(c0, b1), mul2(c1, b1)}; }

    ZKQ_HD_BIG Fp6 inv() const {
        F2 t0 = sqr2(c0) - C::mul_xi(mul2(c1, c2));
        F2 t1 = C::mul_xi(sqr2(c2)) - mul2(c0, c1);
        F2 t2 = sqr2(c1) - mul2(c0, c2);
        F2 d = (mul2(c0, t0) + C::mul_xi(mul2(c2, t1) + mul2(c1, t2))).inv();
        return {mul2(t0, d), mul2(t1, d), mul2(t2, d)};
    }
};

// Fq12 = Fq6[w]/(w^2 - v)
template <class C>
struct Fp12 {
    using F2 = typename C::F2;
    using F6 = Fp6<C>;
    F6 c0, c1;

    static ZKQ_HD Fp12 one() { return {F6::one(), F6::zero()}; }
    ZKQ_HD bool operator==(const Fp12& o) const { return c0 == o.c0 && c1 == o.c1; }
    ZKQ_HD bool is_one() const { return *this == one(); }
    ZKQ_HD_BIG Fp12 operator*(const Fp12& b) const {
        F6 v0 = c0 * b.c0, v1 = c1 * b.c1;
        return {v0 + v1.mul_v(), (c0 + c1) * (b.c0 + b.c1) - v0 - v1};
    }
    // complex squaring: (a + b w)^2 = (a + b)(a + v b) - ab - v ab + 2ab w
    ZKQ_HD_BIG Fp12 sqr() const {
        F6 ab = c0 * c1;
        return {(c0 + c1) * (c0 + c1.mul_v()) - ab - ab.mul_v(), ab.dbl()};
    }
    ZKQ_HD Fp12& operator*=(const Fp12& b) { return *this = *this * b; }
    // Conjugation = the q^6 Frobenius; the inverse on the cyclotomic subgroup.
    ZKQ_HD Fp12 conj() const { return {c0, -c1}; }
    ZKQ_HD_BIG Fp12 inv() const {
        F6 d = (c0.sqr() - c1.sqr().mul_v()).inv();
        return {c0 * d, -(c1 * d)};
    }

    // this * (a0 + a3 w + a4 v w): the D-type line (coefficients of w^0, w^1, w^3)
    ZKQ_HD_BIG Fp12 mul_034(const F2& a0, const F2& a3, const F2& a4) const {
        F6 v0 = c0 * a0;              // c0 * (a0)
        F6 v1 = c1.mul_01(a3, a4);    // c1 * (a3 + a4 v)
        F6 s = (c0 + c1).mul_01(a0 + a3, a4);
        return {v0 + v1.mul_v(), s - v0 - v1};
    }
    // this * (a0 + a1 v + a4 v w): the M-type line (coefficients of w^0, w^2, w^3)
    ZKQ_HD_BIG Fp12 mul_014(const F2& a0, const F2& a1, const F2& a4) const {
        F6 v0 = c0.mul_01(a0, a1);    // c0 * (a0 + a1 v)
        F6 v1 = c1.mul_1(a4);         // c1 * (a4 v)
        F6 s = (c0 + c1).mul_01(a0, a1 + a4);
        return {v0 + v1.mul_v(), s - v0 - v1};
    }

    // The q^k Frobenius, k = 1, 2, 3: conjugate each Fq2 coefficient k times, then multiply
    // the coefficient of w^i by xi^(i (q^k - 1)/6).
    ZKQ_HD_BIG Fp12 frob(int k) const {
        const F2* in[6] = {&c0.c0, &c1.c0, &c0.c1, &c1.c1, &c0.c2, &c1.c2};  // w^0 .. w^5
        F2 o[6];
        for (int i = 0; i < 6; i++) {
            F2 a = (k & 1) ? in[i]->conj() : *in[i];
            o[i] = i == 0 ? a : mul2(a, frob_coeff<C>(k, i));
        }
        return {{o[0], o[2], o[4]}, {o[1], o[3], o[5]}};
    }

    // this^e for an exponent of `bits` bits in little-endian words; fixed 4-bit window.
    ZKQ_HD_BIG Fp12 pow_words(const uint64_t* e, int bits) const {
        Fp12 tab[16];
        tab[0] = one();
        tab[1] = *this;
        for (int i = 2; i < 16; i++) tab[i] = tab[i - 1] * *this;
        int top = ((bits + 3) / 4) * 4;
        Fp12 acc = one();
        for (int i = top - 4; i >= 0; i -= 4) {
            if (i != top - 4) acc = acc.sqr().sqr().sqr().sqr();
            int d = 0;
            for (int j = 3; j >= 0; j--) {
                int b = i + j;
                d = (d << 1) | (b < bits ? (int)((e[b / 64] >> (b % 64)) & 1) : 0);
            }
            if (d) acc = acc * tab[d];
        }
        return acc;
    }

    // Squaring in the cyclotomic subgroup (order dividing q^4 - q^2 + 1: reached after
    // the easy part of the final exponentiation): Granger and Scott, eprint 2009/565, in
    // arkworks' arrangement for this tower. Not valid for other elements.
    ZKQ_HD_BIG Fp12 cyclotomic_sqr() const {
        const F2 &r0 = c0.c0, &r4 = c0.c1, &r3 = c0.c2, &r2 = c1.c0, &r1 = c1.c1, &r5 = c1.c2;
        F2 tmp = mul2(r0, r1);
        F2 t0 = mul2(r0 + r1, C::mul_xi(r1) + r0) - tmp - C::mul_xi(tmp);
        F2 t1 = tmp.dbl();
        tmp = mul2(r2, r3);
        F2 t2 = mul2(r2 + r3, C::mul_xi(r3) + r2) - tmp - C::mul_xi(tmp);
        F2 t3 = tmp.dbl();
        tmp = mul2(r4, r5);
        F2 t4 = mul2(r4 + r5, C::mul_xi(r5) + r4) - tmp - C::mul_xi(tmp);
        F2 t5 = tmp.dbl();
        Fp12 o;
        o.c0.c0 = (t0 - r0).dbl() + t0;           // 3 t0 - 2 r0
        o.c1.c1 = (t1 + r1).dbl() + t1;           // 3 t1 + 2 r1
        F2 x5 = C::mul_xi(t5);
        o.c1.c0 = (r2 + x5).dbl() + x5;           // 3 xi t5 + 2 r2
        o.c0.c2 = (t4 - r3).dbl() + t4;           // 3 t4 - 2 r3
        o.c0.c1 = (t2 - r4).dbl() + t2;           // 3 t2 - 2 r4
        o.c1.c2 = (r5 + t3).dbl() + t3;           // 3 t3 + 2 r5
        return o;
    }

    // this^k for a cyclotomic element and a 64-bit k (square-and-multiply).
    ZKQ_HD_BIG Fp12 cyclotomic_pow(uint64_t k) const {
        Fp12 acc = one();
        bool started = false;
        for (int i = 63; i >= 0; i--) {
            if (started) acc = acc.cyclotomic_sqr();
            if ((k >> i) & 1) { acc = started ? acc * *this : *this; started = true; }
        }
        return acc;
    }

    // this^x for the curve parameter x (conjugation inverts cyclotomic elements).
    ZKQ_HD Fp12 exp_by_x() const {
        Fp12 t = cyclotomic_pow(C::X_ABS);
        return C::X_NEGATIVE ? t.conj() : t;
    }
};

// A G2 point during the Miller loop, homogeneous projective: (X/Z, Y/Z).
template <class C>
struct G2Proj {
    typename C::F2 x, y, z;
};

// The three non-zero Fq2 coefficients of one line, before multiplying in P's coordinates.
template <class C>
struct LineCoeffs {
    typename C::F2 a, b, c;
};

// Doubling step: R <- 2R, and the tangent line at R (scaled by -2YZ-ish factors).
template <class C>
ZKQ_HD_BIG LineCoeffs<C> line_dbl(G2Proj<C>& r) {
    using F2 = typename C::F2;
    using Fq = typename C::Fq;
    const Fq two_inv = fp_from_words<Fq>(C::TWO_INV);
    F2 a = mul2(r.x, r.y) * two_inv;
    F2 b = sqr2(r.y);
    F2 c = sqr2(r.z);
    F2 e = mul2(twist_b<C>(), c.dbl() + c);  // 3 b2 Z^2
    F2 f = e.dbl() + e;
    F2 g = (b + f) * two_inv;
    F2 h = sqr2(r.y + r.z) - (b + c);        // 2YZ
    F2 i = e - b;
    F2 j = sqr2(r.x);
    F2 e2 = sqr2(e);
    r.x = mul2(a, b - f);
    r.y = sqr2(g) - (e2.dbl() + e2);
    r.z = mul2(b, h);
    if (C::M_TWIST) return {i, j.dbl() + j, -h};
    return {-h, j.dbl() + j, i};
}

// Addition step: R <- R + Q (Q affine), and the chord through R and Q.
template <class C>
ZKQ_HD_BIG LineCoeffs<C> line_add(G2Proj<C>& r, const Affine<typename C::F2>& q) {
    using F2 = typename C::F2;
    F2 theta = r.y - mul2(q.y, r.z);
    F2 lambda = r.x - mul2(q.x, r.z);
    F2 c = sqr2(theta);
    F2 d = sqr2(lambda);
    F2 e = mul2(lambda, d);
    F2 f = mul2(r.z, c);
    F2 g = mul2(r.x, d);
    F2 h = e + f - g.dbl();
    r.x = mul2(lambda, h);
    r.y = mul2(theta, g - h) - mul2(e, r.y);
    r.z = mul2(r.z, e);
    F2 j = mul2(theta, q.x) - mul2(lambda, q.y);
    if (C::M_TWIST) return {j, -theta, lambda};
    return {lambda, -theta, j};
}

// f <- f * line(P)
template <class C>
ZKQ_HD_BIG void line_eval(Fp12<C>& f, const LineCoeffs<C>& l, const Affine<typename C::Fq>& p) {
    if (C::M_TWIST) f = f.mul_014(l.a, l.b * p.x, l.c * p.y);
    else f = f.mul_034(l.a * p.y, l.b * p.x, l.c);
}

// The q-power Frobenius endomorphism on the twist: (conj(x) xi^((q-1)/3), conj(y) xi^((q-1)/2)).
template <class C>
ZKQ_HD_BIG Affine<typename C::F2> twist_frob(const Affine<typename C::F2>& q) {
    return {mul2(q.x.conj(), frob_coeff<C>(1, 2)), mul2(q.y.conj(), frob_coeff<C>(1, 3))};
}

// Multi-Miller loop: prod_i f_{loop, Q_i}(P_i) (times the two extra BN lines), without the
// final exponentiation. Pairs where P or Q is infinity are skipped (they contribute 1).
// `work` holds n G2Proj values. P must be affine G1 and Q affine G2, both on their curves.
template <class C>
ZKQ_HD_BIG Fp12<C> miller_loop(const Affine<typename C::Fq>* ps, const Affine<typename C::F2>* qs,
                           int n, G2Proj<C>* work) {
    using F2 = typename C::F2;
    for (int k = 0; k < n; k++) work[k] = {qs[k].x, qs[k].y, F2::one()};
    auto skip = [&](int k) { return ps[k].is_inf() || qs[k].is_inf(); };
    Fp12<C> f = Fp12<C>::one();
    for (int i = 1; i < C::LOOP_LEN; i++) {
        if (i != 1) f = f.sqr();
        for (int k = 0; k < n; k++)
            if (!skip(k)) line_eval<C>(f, line_dbl<C>(work[k]), ps[k]);
        int d = C::LOOP[i];
        if (d != 0) {
            for (int k = 0; k < n; k++)
                if (!skip(k)) line_eval<C>(f, line_add<C>(work[k], d > 0 ? qs[k] : -qs[k]), ps[k]);
        }
    }
    if (C::IS_BN) {
        // optimal ate for BN: two more lines, through pi(Q) and -pi^2(Q)
        for (int k = 0; k < n; k++) {
            if (skip(k)) continue;
            Affine<F2> q1 = twist_frob<C>(qs[k]);
            Affine<F2> q2 = twist_frob<C>(q1);
            line_eval<C>(f, line_add<C>(work[k], q1), ps[k]);
            line_eval<C>(f, line_add<C>(work[k], -q2), ps[k]);
        }
    }
    if (C::X_NEGATIVE) f = f.conj();  // f_{-|x|} = 1/f_{|x|} up to a vertical line
    return f;
}

// Hard part (q^4 - q^2 + 1)/r for BN curves: Devegili, Scott and Dahab's decomposition
// l0 + l1 q + l2 q^2 + l3 q^3 with l3 = 1, l2 = 6x^2 + 1, l1 = -36x^3 - 18x^2 - 12x + 1,
// l0 = -36x^3 - 30x^2 - 18x - 2 (checked with Python integers: it equals the exponent).
template <class C>
ZKQ_HD_BIG Fp12<C> final_exp_hard_bn(const Fp12<C>& f) {
    Fp12<C> a = f.exp_by_x(), b = a.exp_by_x(), c = b.exp_by_x();
    Fp12<C> fi = f.conj(), ai = a.conj(), bi = b.conj(), c36 = c.conj().cyclotomic_pow(36);
    Fp12<C> y0 = c36 * bi.cyclotomic_pow(30) * ai.cyclotomic_pow(18) * fi.cyclotomic_sqr();
    Fp12<C> y1 = c36 * bi.cyclotomic_pow(18) * ai.cyclotomic_pow(12) * f;
    Fp12<C> y2 = b.cyclotomic_pow(6) * f;
    return y0 * y1.frob(1) * y2.frob(2) * f.frob(3);
}

// Hard part for BLS12 curves, raised to 3 (harmless: 3 is prime to r): Hayashida, Hayasaka
// and Teruya (eprint 2020/875): 3 (q^4 - q^2 + 1)/r = (x - 1)^2 (x + q) (x^2 + q^2 - 1) + 3
// (checked with Python integers).
template <class C>
ZKQ_HD_BIG Fp12<C> final_exp_hard_bls12(const Fp12<C>& f) {
    Fp12<C> t = f.exp_by_x() * f.conj();             // f^(x - 1)
    t = t.exp_by_x() * t.conj();                      // ^(x - 1)
    t = t.exp_by_x() * t.frob(1);                     // ^(x + q)
    t = t.exp_by_x().exp_by_x() * t.frob(2) * t.conj();  // ^(x^2 + q^2 - 1)
    return t * f.cyclotomic_sqr() * f;                // * f^3
}

// f^((q^12 - 1)/r) (times 3 on BLS12-381): easy part (q^6 - 1)(q^2 + 1), then the hard part.
template <class C>
ZKQ_HD_BIG Fp12<C> final_exponentiation(const Fp12<C>& f) {
    Fp12<C> t = f.conj() * f.inv();   // f^(q^6 - 1)
    t = t.frob(2) * t;                // ^(q^2 + 1): now in the cyclotomic subgroup
    return C::IS_BN ? final_exp_hard_bn<C>(t) : final_exp_hard_bls12<C>(t);
}

// The same by plain exponentiation with (q^4 - q^2 + 1)/r: slower; a reference for tests.
template <class C>
ZKQ_HD_BIG Fp12<C> final_exponentiation_reference(const Fp12<C>& f) {
    Fp12<C> t = f.conj() * f.inv();
    t = t.frob(2) * t;
    return t.pow_words(C::HARD, C::HARD_BITS);
}

}  // namespace zkq
