// device.cuh - what the GPU kernels (*.cu) share: the curve's types with 32-bit limbs, the
// kernel declaration, thread indices, memory access, atomics and warp operations.
//
// The curve is fixed at compile time (-DZKQ_CURVE=0 for bn128, 1 for bls12381): one
// module per curve, so every kernel name is plain extern "C" and needs no mangling.
//
// The same .cu files compile two ways:
//  * nvcc / NVRTC: ordinary CUDA. gptr<T> is T*, ZKQ_KERNEL a __global__ function.
//  * g++ (groth16/backends/cuda_emu.py): the threaded host emulation of emu.cuh. Each
//    kernel becomes an exported entry that runs the launch as blocks of virtual threads in
//    a random order, with warp operations in lockstep and every global access checked for
//    data races. gptr<T> is then a class with no operator*, so every global load and store
//    goes through ld/st below: the compiler refuses a kernel that bypasses the checks.
// Kernels state their launch shape above them, and index threads only through tid(),
// bid(), bdim(), gdim() and the helpers built on them.
#pragma once
#include "common.cuh"
#include "curve.cuh"
#include "field.cuh"
#include "fq2.cuh"
#include "mont32.cuh"
#include "params.cuh"
#include "xyzz.cuh"
#if !defined(__CUDACC__)
#include "emu.cuh"
#endif

#if !defined(ZKQ_CURVE)
#error "compile the GPU kernels with -DZKQ_CURVE=0 (bn128) or -DZKQ_CURVE=1 (bls12381)"
#endif

#if defined(__CUDACC__)
namespace zkq {
template <class T>
using gptr = T*;
}
// ZKQ_KERNEL(name, params...) { body }: an extern "C" kernel.
#define ZKQ_KERNEL(name, ...) extern "C" __global__ void name(__VA_ARGS__)
// The same with __launch_bounds__(max_threads, min_blocks): the compiler keeps registers to
// what that many resident blocks of that many threads allow.
#define ZKQ_KERNEL_BOUNDED(name, max_threads, min_blocks, ...) \
    extern "C" __global__ void __launch_bounds__(max_threads, min_blocks) name(__VA_ARGS__)
#define ZKQ_DEV __device__ __forceinline__
// A block-wide array in shared memory, as a gptr<T> named `name`.
#define ZKQ_SHARED(T, name, count) \
    __shared__ T name##_zkq_storage[count];   \
    zkq::gptr<T> name = name##_zkq_storage
#else  // the host emulation
#define ZKQ_KERNEL(name, ...)                                                                 \
    static void name##_zkq_body(__VA_ARGS__);                                                 \
    extern "C" int name(const zkq::emu::Launch* launch, void* const* argv) {                  \
        return zkq::emu::run(launch, #name, name##_zkq_body, argv);                           \
    }                                                                                         \
    extern "C" const char* name##_zkq_signature() { return zkq::emu::signature(name##_zkq_body); } \
    static void name##_zkq_body(__VA_ARGS__)
#define ZKQ_KERNEL_BOUNDED(name, max_threads, min_blocks, ...) ZKQ_KERNEL(name, __VA_ARGS__)
#define ZKQ_DEV inline
#define ZKQ_SHARED(T, name, count) \
    zkq::gptr<T> name(static_cast<T*>(zkq::emu::shared_request(sizeof(T) * (count))))
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

template <class T>
struct same {
    using type = T;  // keeps a parameter out of template deduction
};

// ---- thread indexing -------------------------------------------------------------------
#if defined(__CUDACC__)
ZKQ_DEV uint32_t tid() { return threadIdx.x; }
ZKQ_DEV uint32_t bid() { return blockIdx.x; }
ZKQ_DEV uint32_t bdim() { return blockDim.x; }
ZKQ_DEV uint32_t gdim() { return gridDim.x; }
#else
inline uint32_t tid() { return emu::g_ctx->cur->tid; }
inline uint32_t bid() { return emu::g_ctx->block_id; }
inline uint32_t bdim() { return (uint32_t)emu::g_ctx->L->block; }
inline uint32_t gdim() { return (uint32_t)emu::g_ctx->L->grid; }
#endif
ZKQ_DEV uint64_t thread_index() { return (uint64_t)bid() * bdim() + tid(); }
ZKQ_DEV uint64_t grid_stride() { return (uint64_t)gdim() * bdim(); }
ZKQ_DEV uint64_t block_base() { return (uint64_t)bid() * bdim(); }  // the same in a warp
ZKQ_DEV uint32_t lane() { return tid() & 31; }

// ---- memory ------------------------------------------------------------------------------
// Field elements and points (multiples of 16 bytes; buffers 256-byte aligned, elements
// packed) move as 16-byte vectors: a quarter of the instructions of a limb-by-limb copy.
#if defined(__CUDACC__)
template <class T>
ZKQ_DEV T ld(const T* p) {
    if constexpr (sizeof(T) % 16 == 0) {
        alignas(16) T r;
        const uint4* src = reinterpret_cast<const uint4*>(p);
        uint4* dst = reinterpret_cast<uint4*>(&r);
#pragma unroll
        for (int i = 0; i < (int)(sizeof(T) / 16); i++) dst[i] = src[i];
        return r;
    } else {
        return *p;
    }
}

template <class T>
ZKQ_DEV void st(T* p, const typename same<T>::type& v) {
    if constexpr (sizeof(T) % 16 == 0) {
        alignas(16) T tmp = v;
        const uint4* src = reinterpret_cast<const uint4*>(&tmp);
        uint4* dst = reinterpret_cast<uint4*>(p);
#pragma unroll
        for (int i = 0; i < (int)(sizeof(T) / 16); i++) dst[i] = src[i];
    } else {
        *p = v;
    }
}
#else
template <class T>
inline std::remove_const_t<T> ld(gptr<T> p) {
    emu::check(p.p, sizeof(T), emu::READ);
    std::remove_const_t<T> r;
    memcpy(&r, p.p, sizeof(T));
    return r;
}

template <class T>
inline void st(gptr<T> p, const typename same<T>::type& v) {
    emu::check(p.p, sizeof(T), emu::WRITE);
    memcpy(p.p, &v, sizeof(T));
}
#endif

// A pointer to the same address as another type (the .zkey's words seen as elements).
template <class U, class T>
ZKQ_DEV gptr<U> gcast(gptr<T> p) {
#if defined(__CUDACC__)
    return reinterpret_cast<U*>(p);
#else
    return gptr<U>(reinterpret_cast<U*>(p.p));
#endif
}

// Dynamic shared memory (the launch's shared_bytes), as T elements.
template <class T>
ZKQ_DEV gptr<T> dynamic_shared() {
#if defined(__CUDACC__)
    extern __shared__ uint4 zkq_dynamic_shared[];
    return reinterpret_cast<T*>(zkq_dynamic_shared);
#else
    return gptr<T>(static_cast<T*>(emu::dynamic_shared()));
#endif
}

// ---- atomics -----------------------------------------------------------------------------
ZKQ_DEV uint32_t atomic_add(gptr<uint32_t> p, uint32_t v) {
#if defined(__CUDACC__)
    return atomicAdd(p, v);
#else
    emu::check(p.p, 4, emu::ATOMIC_RMW);
    const uint32_t old = *p.p;
    *p.p = old + v;
    return old;
#endif
}

ZKQ_DEV void atomic_min_u64(gptr<uint64_t> p, uint64_t v) {
#if defined(__CUDACC__)
    atomicMin(reinterpret_cast<unsigned long long*>(p), (unsigned long long)v);
#else
    emu::check(p.p, 8, emu::ATOMIC_RMW);
    if (v < *p.p) *p.p = v;
#endif
}

// ---- warp and block operations (all 32 lanes / every thread of the block must reach them) --
ZKQ_DEV uint32_t warp_match_any(uint32_t key) {
#if defined(__CUDACC__)
    return __match_any_sync(0xffffffffu, key);
#else
    return (uint32_t)emu::warp_op(emu::OP_MATCH_ANY, key, 0);
#endif
}

ZKQ_DEV uint32_t warp_shfl(uint32_t v, uint32_t src_lane) {
#if defined(__CUDACC__)
    return __shfl_sync(0xffffffffu, v, (int)src_lane);
#else
    return (uint32_t)emu::warp_op(emu::OP_SHFL, v, (int32_t)src_lane);
#endif
}

ZKQ_DEV uint32_t warp_shfl_up(uint32_t v, uint32_t delta) {
#if defined(__CUDACC__)
    return __shfl_up_sync(0xffffffffu, v, delta);
#else
    return (uint32_t)emu::warp_op(emu::OP_SHFL_UP, v, (int32_t)delta);
#endif
}

ZKQ_DEV uint32_t warp_ballot(bool pred) {
#if defined(__CUDACC__)
    return __ballot_sync(0xffffffffu, pred);
#else
    return (uint32_t)emu::warp_op(emu::OP_BALLOT, pred ? 1 : 0, 0);
#endif
}

ZKQ_DEV void block_sync() {
#if defined(__CUDACC__)
    __syncthreads();
#else
    emu::barrier();
#endif
}

ZKQ_DEV uint32_t popc(uint32_t x) {
#if defined(__CUDACC__)
    return __popc(x);
#else
    return (uint32_t)__builtin_popcount(x);
#endif
}

ZKQ_DEV uint32_t lowest_lane(uint32_t mask) {  // mask != 0
#if defined(__CUDACC__)
    return __ffs(mask) - 1;
#else
    return (uint32_t)__builtin_ctz(mask);
#endif
}

// A bucket key that means "no bucket": a zero digit.
constexpr uint32_t NO_KEY = 0xffffffffu;

// counts[key] += 1 unless key is NO_KEY. The lanes of a warp holding the same key add once
// together (a window of real witnesses puts most scalars in a few buckets: 0/1 bits, small
// counters), so one hot bucket costs one atomic per warp, not per lane. Warp-uniform.
ZKQ_DEV void count_key(gptr<uint32_t> counts, uint32_t key) {
    const uint32_t peers = warp_match_any(key);
    if (key != NO_KEY && lane() == lowest_lane(peers)) atomic_add(counts + key, popc(peers));
}

// A distinct slot for this key: cursor[key]++ (the lanes of a warp with one key share one
// atomic and take consecutive slots). Warp-uniform, as count_key.
ZKQ_DEV uint32_t reserve_slot(gptr<uint32_t> cursor, uint32_t key) {
    const uint32_t peers = warp_match_any(key);
    const uint32_t leader = lowest_lane(peers);
    uint32_t base = 0;
    if (key != NO_KEY && lane() == leader) base = atomic_add(cursor + key, popc(peers));
    base = warp_shfl(base, leader);
    return base + popc(peers & ((1u << lane()) - 1u));
}

// ---- bits --------------------------------------------------------------------------------
ZKQ_DEV uint64_t bit_reverse(uint64_t x, uint32_t bits) {
    if (bits == 0) return 0;
#if defined(__CUDACC__)
    return __brevll(x) >> (64 - bits);
#else
    uint64_t r = 0;
    for (uint32_t i = 0; i < bits; i++) {
        r = (r << 1) | (x & 1);
        x >>= 1;
    }
    return r;
#endif
}

}  // namespace gpu
}  // namespace zkq
