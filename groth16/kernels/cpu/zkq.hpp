// zkq.hpp - what every CPU kernel source shares: the field/curve types per curve id, a
// fork-join helper over std::thread, and the exception guard of the C ABI.
#pragma once
#include <atomic>
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <exception>
#include <new>
#include <thread>
#include <vector>

#include "curve.cuh"
#include "errors.hpp"
#include "fq2.cuh"
#include "params.cuh"

namespace zkq {

// Types and constants of one curve for a limb width. Curve ids are the C ABI's
// (0 = bn128, 1 = bls12381), the same as groth16.curves.Curve.native_id.
template <int CURVE, class L = uint64_t> struct CurveT;

template <class L> struct CurveT<0, L> {
    using Fq = Fp<bn254_fq_params, L>;
    using Fr = Fp<bn254_fr_params, L>;
    using Fq2 = Fp2<Fq>;
    static constexpr int TWO_ADICITY = 28;
    static Fq b1() { return Fq::from_uint(3); }
    // twist b2 = 3 / (9 + u)
    static Fq2 b2() { return Fq2{Fq::from_uint(3), Fq::zero()} * Fq2{Fq::from_uint(9), Fq::from_uint(1)}.inv(); }
};

template <class L> struct CurveT<1, L> {
    using Fq = Fp<bls12381_fq_params, L>;
    using Fr = Fp<bls12381_fr_params, L>;
    using Fq2 = Fp2<Fq>;
    static constexpr int TWO_ADICITY = 32;
    static Fq b1() { return Fq::from_uint(4); }
    // twist b2 = 4 (1 + u)
    static Fq2 b2() { return Fq2{Fq::from_uint(4), Fq::from_uint(4)}; }
};

// Out-of-line group operations. The shared headers force-inline everything (what the GPU
// wants); on the host a fully inlined Jacobian addition over Fq2 is ~15k instructions and
// costs g++ ~15 s per call site, so cold paths (bucket reduction, window combination,
// conversion to affine) call these, compiled once per type per source file.
template <class F> [[gnu::noinline]] Jacobian<F> jac_add(const Jacobian<F>& a, const Jacobian<F>& b) { return a + b; }
template <class F> [[gnu::noinline]] Jacobian<F> jac_madd(const Jacobian<F>& a, const Affine<F>& b) { return a.add_affine(b); }
template <class F> [[gnu::noinline]] Jacobian<F> jac_dbl(const Jacobian<F>& a) { return a.dbl(); }
template <class F> [[gnu::noinline]] Affine<F> jac_to_affine(const Jacobian<F>& a) { return a.to_affine(); }
template <class F> [[gnu::noinline]] F field_inv(const F& a) { return a.inv(); }

// Lowers `lowest` to i unless another thread already recorded a lower index: the first bad
// entry is reported whichever thread finds it.
inline void keep_lowest(std::atomic<size_t>& lowest, size_t i) {
    size_t cur = lowest.load();
    while (i < cur && !lowest.compare_exchange_weak(cur, i)) {}
}

// Number of workers to use: at least 1, at most the number of tasks.
inline int clamp_threads(int threads, size_t tasks) {
    if (threads < 1) threads = 1;
    if ((size_t)threads > tasks) threads = (int)std::max<size_t>(tasks, 1);
    return threads;
}

// Runs fn(begin, end, worker) over [0, n) split into `threads` contiguous ranges; the
// calling thread takes the first range. Plain std::thread (no OpenMP): Celery workers fork,
// and OpenMP's thread pool does not survive a fork.
template <class Fn>
void parallel_for(int threads, size_t n, Fn&& fn) {
    threads = clamp_threads(threads, n);
    if (threads == 1) { fn((size_t)0, n, 0); return; }
    std::vector<std::thread> pool;
    std::exception_ptr err;
    std::vector<std::exception_ptr> errs(threads);
    size_t chunk = (n + threads - 1) / threads;
    for (int t = 1; t < threads; t++) {
        size_t b = std::min(n, t * chunk), e = std::min(n, b + chunk);
        pool.emplace_back([&, b, e, t] {
            try { fn(b, e, t); } catch (...) { errs[t] = std::current_exception(); }
        });
    }
    try { fn((size_t)0, std::min(n, chunk), 0); } catch (...) { errs[0] = std::current_exception(); }
    for (auto& th : pool) th.join();
    for (auto& e : errs) if (e) std::rethrow_exception(e);
}

// Exceptions must not cross the C ABI: map them to codes.
template <class Fn>
int guarded(Fn&& fn) {
    try {
        return fn();
    } catch (const std::bad_alloc&) {
        return ZKQ_ERR_ALLOC;
    } catch (...) {
        return ZKQ_ERR_INTERNAL;
    }
}

// 64-bit words <-> elements of any limb width (identical bytes on a little-endian host,
// but spelled out so the 32-bit instantiation never depends on it).
template <class F>
inline F load_words(const uint64_t* w) {
    F r;
    if constexpr (F::BITS == 64) {
        std::memcpy(r.v, w, sizeof(r.v));
    } else {
        for (int i = 0; i < F::N; i++) r.v[i] = (typename F::limb_t)(w[i / 2] >> (32 * (i % 2)));
    }
    return r;
}
template <class F>
inline void store_words(const F& x, uint64_t* w) {
    if constexpr (F::BITS == 64) {
        std::memcpy(w, x.v, sizeof(x.v));
    } else {
        for (int i = 0; i < F::N / 2; i++) w[i] = (uint64_t)x.v[2 * i] | ((uint64_t)x.v[2 * i + 1] << 32);
    }
}

// Dispatch on the runtime curve id to a template taking the curve as a parameter.
#define ZKQ_DISPATCH_CURVE(curve, CALL)              \
    switch (curve) {                                 \
        case 0: { constexpr int C = 0; return CALL; } \
        case 1: { constexpr int C = 1; return CALL; } \
        default: return ZKQ_ERR_CURVE;               \
    }

}  // namespace zkq
