// common.cuh - portability macros shared by the CPU (g++) and CUDA (nvcc) builds.
//
// Every arithmetic header under groth16/kernels/ is plain C++17 that both compilers
// accept: functions are marked ZKQ_HD so that nvcc emits host and device versions and
// g++ sees ordinary inline functions.
#pragma once
#if defined(__CUDACC_RTC__)
// NVRTC (CuPy's run-time compiler) has no C library headers: declare the fixed-width
// types the kernels use, as glibc spells them on LP64 (so nvcc and NVRTC agree).
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long int64_t;
typedef unsigned long uint64_t;
#else
#include <stdint.h>
#endif

#if defined(__CUDACC__)
#define ZKQ_HD __host__ __device__ __forceinline__
#else
// Host: plain inline, so g++ weighs each call site itself. Forcing every function inline
// (what the GPU wants) made g++ spend ~15 s of CPU on one Fq2 Jacobian addition and ~4 min
// on the whole CPU library; the few leaf operations that must always be inlined (field
// add/sub/mul, a handful of instructions to ~100) use ZKQ_HD_HOT below.
#define ZKQ_HD inline
#endif

// The hot leaf operations of field.cuh (limb add, sub, Montgomery product): force-inlined
// on the host too, where a call would cost as much as the operation. Same as ZKQ_HD on
// the GPU.
#if defined(__CUDACC__)
#define ZKQ_HD_HOT ZKQ_HD
#else
#define ZKQ_HD_HOT inline __attribute__((always_inline))
#endif

// For the few large functions (point additions, Fq2 products) that the GPU should call
// rather than inline at every use: fully inlined, one G2 addition on BLS12-381 is tens of
// thousands of instructions per call site, and NVRTC then compiles for many minutes. On
// the host they are plain inline functions (g++ decides).
#if defined(__CUDACC__)
#define ZKQ_HD_CALL __host__ __device__ __noinline__
#else
#define ZKQ_HD_CALL inline
#endif

namespace zkq {

// Double-width type for a limb type: the product of two limbs fits in it.
template <class L> struct wide;
template <> struct wide<uint32_t> { using type = uint64_t; };
template <> struct wide<uint64_t> { using type = unsigned __int128; };

// The limb a field element is stored in when nothing else is asked for: 64-bit words on
// the host (one 64x64->128 multiply is the cheapest way there), 32-bit words on the GPU
// (its integer multipliers are 32-bit).
#if defined(__CUDA_ARCH__)
using default_limb = uint32_t;
#else
using default_limb = uint64_t;
#endif

}  // namespace zkq
