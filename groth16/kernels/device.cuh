// device.cuh - what the GPU kernels (*.cu) share: the curve's types with 32-bit limbs,
// the kernel and thread-index macros, 16-byte loads, and atomics.
//
// The curve is fixed at compile time (-DZKQ_CURVE=0 for bn128, 1 for bls12381): one
// module per curve, so every kernel name is plain extern "C" and needs no mangling.
//
// Every kernel is written as a grid-stride loop. That is an ordinary CUDA idiom, and it
// lets the same .cu files compile with g++ as a "host emulation" (see the #else branch
// below): one thread (block 0 of 1, thread 0 of 1) runs each loop to its end, so the
// tests run the real kernels, in their real order, from groth16/backends/cuda.py on a
// machine with no GPU. Warp-level code (match/shuffle) exists only in the CUDA branch;
// its host twin is the one-thread case of the same operation.
#pragma once
#include "common.cuh"
#include "curve.cuh"
#include "field.cuh"
#include "fq2.cuh"
#include "params.cuh"
#include "xyzz.cuh"

#if !defined(ZKQ_CURVE)
#error "compile the GPU kernels with -DZKQ_CURVE=0 (bn128) or -DZKQ_CURVE=1 (bls12381)"
#endif

#if defined(__CUDACC__)
#define ZKQ_KERNEL extern "C" __global__
#define ZKQ_DEV __device__ __forceinline__
#else  // host emulation (g++): a grid of one block of one thread
#define ZKQ_KERNEL extern "C"
#define ZKQ_DEV inline
#endif

namespace zkq {
namespace gpu {

using limb = uint32_t;  // the GPU's integer multipliers are 32-bit (also in the emulation)

#if ZKQ_CURVE == 0
using Fq = Fp<bn254_fq_params, limb>;
using Fr = Fp<bn254_fr_params, limb>;
#elif ZKQ_CURVE == 1
using Fq = Fp<bls12381_fq_params, limb>;
using Fr = Fp<bls12381_fr_params, limb>;
#else
#error "ZKQ_CURVE must be 0 (bn128) or 1 (bls12381)"
#endif
using Fq2 = Fp2<Fq>;

// A bucket key that means "no bucket": a zero digit, a slot with nothing in it.
constexpr uint32_t NO_KEY = 0xffffffffu;

// ---- thread indexing -------------------------------------------------------------------
#if defined(__CUDACC__)
ZKQ_DEV uint64_t thread_index() { return (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; }
ZKQ_DEV uint64_t grid_stride() { return (uint64_t)gridDim.x * blockDim.x; }
ZKQ_DEV uint64_t block_base() { return (uint64_t)blockIdx.x * blockDim.x; }  // same in a warp
ZKQ_DEV uint32_t thread_in_block() { return threadIdx.x; }
#else
inline uint64_t thread_index() { return 0; }
inline uint64_t grid_stride() { return 1; }
inline uint64_t block_base() { return 0; }
inline uint32_t thread_in_block() { return 0; }
#endif

// ---- memory ------------------------------------------------------------------------------
// Loads and stores of field elements and points (sizes are multiples of 16 bytes, and
// every buffer is 256-byte aligned with elements packed) as 16-byte vector accesses:
// a quarter of the instructions of the limb-by-limb copy the compiler makes of a struct
// of uint32_t.
template <class T>
ZKQ_DEV T ld(const T* p) {
#if defined(__CUDACC__)
    static_assert(sizeof(T) % 16 == 0, "vector loads need 16-byte multiples");
    alignas(16) T r;
    const uint4* src = reinterpret_cast<const uint4*>(p);
    uint4* dst = reinterpret_cast<uint4*>(&r);
#pragma unroll
    for (int i = 0; i < (int)(sizeof(T) / 16); i++) dst[i] = src[i];
    return r;
#else
    return *p;
#endif
}

template <class T>
ZKQ_DEV void st(T* p, const T& v) {
#if defined(__CUDACC__)
    static_assert(sizeof(T) % 16 == 0, "vector stores need 16-byte multiples");
    alignas(16) T tmp = v;
    const uint4* src = reinterpret_cast<const uint4*>(&tmp);
    uint4* dst = reinterpret_cast<uint4*>(p);
#pragma unroll
    for (int i = 0; i < (int)(sizeof(T) / 16); i++) dst[i] = src[i];
#else
    *p = v;
#endif
}

// ---- atomics -----------------------------------------------------------------------------
ZKQ_DEV void atomic_min_u64(unsigned long long* p, unsigned long long v) {
#if defined(__CUDACC__)
    atomicMin(p, v);
#else
    if (v < *p) *p = v;
#endif
}

// counts[key] += 1 unless key is NO_KEY. On the GPU the lanes of a warp holding the same
// key add once together (a window of real witnesses puts most scalars in a few buckets:
// 0/1 bits, small counters), so one hot bucket costs one atomic per warp, not per lane.
// Must be reached by all 32 lanes of the warp together (callers loop warp-uniformly).
ZKQ_DEV void count_key(uint32_t* counts, uint32_t key) {
#if defined(__CUDACC__)
    const unsigned peers = __match_any_sync(0xffffffffu, key);
    const int leader = __ffs(peers) - 1;
    if (key != NO_KEY && (int)(threadIdx.x & 31) == leader) atomicAdd(&counts[key], (uint32_t)__popc(peers));
#else
    if (key != NO_KEY) counts[key]++;
#endif
}

// A distinct slot for this key: cursor[key]++ (the lanes of a warp with one key share one
// atomic and take consecutive slots). Same warp-uniformity rule as count_key.
ZKQ_DEV uint32_t reserve_slot(uint32_t* cursor, uint32_t key) {
#if defined(__CUDACC__)
    const unsigned peers = __match_any_sync(0xffffffffu, key);
    const int leader = __ffs(peers) - 1;
    const int lane = (int)(threadIdx.x & 31);
    uint32_t base = 0;
    if (key != NO_KEY && lane == leader) base = atomicAdd(&cursor[key], (uint32_t)__popc(peers));
    base = __shfl_sync(0xffffffffu, base, leader);
    return base + (uint32_t)__popc(peers & ((1u << lane) - 1u));
#else
    return key != NO_KEY ? cursor[key]++ : 0;
#endif
}

// ---- bits --------------------------------------------------------------------------------
ZKQ_DEV uint64_t bit_reverse(uint64_t x, uint32_t bits) {
    if (bits == 0) return 0;
#if defined(__CUDACC__)
    return __brevll(x) >> (64 - bits);
#else
    uint64_t r = 0;
    for (uint32_t i = 0; i < bits; i++) { r = (r << 1) | (x & 1); x >>= 1; }
    return r;
#endif
}

}  // namespace gpu
}  // namespace zkq
