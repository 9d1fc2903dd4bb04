// msm.cu - multi-scalar multiplication sum_i k_i * P_i on G1 and G2 (Pippenger), and the
// small MSMs of a proof's blinding terms.
//
// The host (groth16/backends/cuda_msm.py) runs, for windows of c bits (c <= 16):
//  1. msm_count: every scalar is recoded into signed digits d in [-(2^(c-1) - 1), 2^(c-1)]
//     (a digit above 2^(c-1) becomes d - 2^c and carries 1 into the next window), so a
//     window needs 2^(c-1) buckets and -P is free (negate y). Each nonzero digit names the
//     bucket key = window * 2^(c-1) + |d| - 1; this pass counts entries per key.
//  2. exclusive prefix sums of the counts give each key its slots (`starts`), and
//     msm_scatter writes (point index | sign << 31) into them: a counting sort of the
//     (bucket, point) pairs of every window at once, zero digits dropped.
//  3. Work units: a bucket of `cnt` entries is cut into ceil(cnt / L) units of at most L
//     entries (L about twice the mean bucket size, so only heavy buckets, the 0s and 1s of
//     a real witness, are split); msm_unit_map gives each unit its bucket, and
//     msm_accumulate_* sums each unit's points with mixed additions, one thread per unit.
//  4. msm_unit_tree_* folds the units of each split bucket, F at a time, in a few rounds;
//     msm_gather_* adds each bucket's sum into buckets[key] (which persist across chunks
//     of points, when the sort is done in several).
//  5. msm_bucket_segments_*: per window, segments of S buckets are weighted by their digit
//     (a running sum inside the segment, plus (first digit - 1) times the segment's sum);
//     msm_sum_rows_* adds the segments of each window in a tree of launches.
//  6. msm_combine_*: sum_w 2^(c w) W_w as a tree in one block (pairs, then pairs of pairs).
// msm_small_* is the whole MSM for a few points (blinding: 3 to 5 terms): one thread per
// term does double-and-add on its own scalar, and one thread adds the terms.
// Results are XYZZ points; the host makes them affine.
#include "device.cuh"

using namespace zkq;
using namespace zkq::gpu;

namespace zkq {
namespace gpu {

constexpr uint32_t SIGN_BIT = 0x80000000u;

// Bits [pos, pos + c) of a standard-form scalar of four 64-bit words (c <= 32).
ZKQ_DEV uint32_t scalar_window(const uint64_t k[4], uint32_t pos, uint32_t c) {
    const uint32_t w = pos / 64, sh = pos % 64;
    if (w >= 4) return 0;
    uint64_t v = k[w] >> sh;
    if (sh + c > 64 && w + 1 < 4) v |= k[w + 1] << (64 - sh);
    return (uint32_t)(v & ((uint64_t(1) << c) - 1));
}

ZKQ_DEV bool below_r(const uint64_t k[4]) {
    for (int i = 3; i >= 0; i--)
        if (k[i] != Fr::params::p(i)) return k[i] < Fr::params::p(i);
    return false;
}

// Loads scalar i (zero past the end) and reports a scalar >= r as first + i in *bad (when
// `bad` is given: first is the index of scalars[0] in the whole MSM); such a scalar then
// counts as zero (the host refuses the MSM).
ZKQ_DEV void load_scalar(gptr<const uint64_t> scalars, uint64_t i, uint64_t n, uint64_t k[4],
                         gptr<uint64_t> bad, uint64_t first = 0) {
    k[0] = k[1] = k[2] = k[3] = 0;
    if (i >= n) return;
    for (int j = 0; j < 4; j++) k[j] = ld(scalars + 4 * i + j);
    if (!below_r(k)) {
        if (bad) atomic_min_u64(bad, first + i);
        k[0] = k[1] = k[2] = k[3] = 0;
    }
}

// The next signed digit (window w), updating the carry between windows.
ZKQ_DEV int32_t next_digit(const uint64_t k[4], uint32_t w, uint32_t c, int32_t& carry) {
    const int32_t half = 1 << (c - 1);
    int32_t d = (int32_t)scalar_window(k, w * c, c) + carry;
    carry = 0;
    if (d > half) {
        d -= 2 * half;
        carry = 1;
    }
    return d;
}

ZKQ_DEV uint32_t digit_key(uint32_t w, uint32_t c, int32_t d) {
    return d == 0 ? NO_KEY : w * (1u << (c - 1)) + (uint32_t)(d < 0 ? -d : d) - 1;
}

}  // namespace gpu
}  // namespace zkq

// counts[key] += number of (scalar, window) digits with that key; *bad = lowest index
// (first + i) of a scalar >= r (left as is when there is none).
// Launch: 1-D, block size a multiple of 32 (warp-aggregated atomics), one thread per scalar
// (grid-stride; the loop is warp-uniform so whole warps meet at the atomics).
ZKQ_KERNEL(msm_count, gptr<const uint64_t> scalars, uint64_t n, uint64_t first, uint32_t c, uint32_t windows,
           gptr<uint32_t> counts, gptr<uint64_t> bad) {
    for (uint64_t base = block_base(); base < n; base += grid_stride()) {
        const uint64_t i = base + tid();
        uint64_t k[4];
        load_scalar(scalars, i, n, k, bad, first);
        int32_t carry = 0;
        for (uint32_t w = 0; w < windows; w++) count_key(counts, digit_key(w, c, next_digit(k, w, c, carry)));
    }
}

// The counting sort's second pass: entry (i | sign) goes to slot cursor[key]++ (cursor
// starts as the exclusive prefix sum of msm_count's counts). Order inside a key is
// arbitrary; the sums do not depend on it.
// Launch: as msm_count.
ZKQ_KERNEL(msm_scatter, gptr<const uint64_t> scalars, uint64_t n, uint32_t c, uint32_t windows,
           gptr<uint32_t> cursor, gptr<uint32_t> vals) {
    for (uint64_t base = block_base(); base < n; base += grid_stride()) {
        const uint64_t i = base + tid();
        uint64_t k[4];
        load_scalar(scalars, i, n, k, nullptr);
        int32_t carry = 0;
        for (uint32_t w = 0; w < windows; w++) {
            const int32_t d = next_digit(k, w, c, carry);
            const uint32_t key = digit_key(w, c, d);
            const uint32_t slot = reserve_slot(cursor, key);
            if (key != NO_KEY) st(vals + slot, (uint32_t)i | (d < 0 ? SIGN_BIT : 0u));
        }
    }
}

// unit_bucket[unit_start[b] + j] = b for j < unit_start[b + 1] - unit_start[b].
// Launch: 1-D, any block size, one thread per bucket (grid-stride), buckets of them.
ZKQ_KERNEL(msm_unit_map, gptr<const uint32_t> unit_start, uint64_t buckets, gptr<uint32_t> unit_bucket) {
    for (uint64_t b = thread_index(); b < buckets; b += grid_stride()) {
        const uint32_t lo = ld(unit_start + b), hi = ld(unit_start + b + 1);
        for (uint32_t u = lo; u < hi; u++) st(unit_bucket + u, (uint32_t)b);
    }
}

namespace zkq {
namespace gpu {

// One work unit's entries, [lo, hi) of the sorted list.
struct Unit {
    uint32_t bucket, lo, hi;
};

// Unit u (< *total_units): its bucket, and its L entries (fewer in a bucket's last unit).
ZKQ_DEV Unit unit_range(uint32_t u, gptr<const uint32_t> unit_bucket, gptr<const uint32_t> unit_start,
                        gptr<const uint32_t> starts, gptr<const uint32_t> counts, uint32_t L) {
    const uint32_t b = ld(unit_bucket + u);
    const uint32_t first = ld(starts + b), end = first + ld(counts + b);
    const uint32_t lo = first + (u - ld(unit_start + b)) * L;
    return {b, lo, lo + L < end ? lo + L : end};
}

template <class F>
ZKQ_DEV Xyzz<F> accumulate(gptr<const Affine<F>> points, gptr<const uint32_t> vals, uint32_t lo, uint32_t hi) {
    Xyzz<F> acc = Xyzz<F>::infinity();
    for (uint32_t j = lo; j < hi; j++) {
        const uint32_t v = ld(vals + j);
        Affine<F> p = ld(points + (v & ~SIGN_BIT));
        if (v & SIGN_BIT) p.y = -p.y;  // -infinity is infinity: y = 0 stays 0
        acc = acc.add_affine(p);
    }
    return acc;
}

// Round of the units' tree: unit u leads a run of F units `stride` apart inside its bucket
// when (u - first unit of the bucket) is a multiple of F * stride; it adds the other F - 1
// into its own partial sum. No two leaders share a unit, and non-leaders only stay.
template <class F>
ZKQ_DEV void unit_tree(gptr<const uint32_t> unit_bucket, gptr<const uint32_t> unit_start,
                       gptr<const uint32_t> total_units, uint32_t stride, uint32_t fan, gptr<Xyzz<F>> partial) {
    const uint32_t total = ld(total_units);
    for (uint64_t u = thread_index(); u < total; u += grid_stride()) {
        const uint32_t b = ld(unit_bucket + u);
        const uint32_t first = ld(unit_start + b), end = ld(unit_start + b + 1);
        const uint32_t rel = (uint32_t)u - first;
        if (rel % (fan * stride) != 0 || rel + stride >= end - first) continue;
        Xyzz<F> acc = ld(partial + u);
        for (uint32_t i = 1; i < fan && u + i * stride < end; i++) acc = acc + ld(partial + u + i * stride);
        st(partial + u, acc);
    }
}

// buckets[b] (+)= the sum of bucket b's units (in partial[unit_start[b]] after the tree).
template <class F>
ZKQ_DEV void gather(gptr<const uint32_t> unit_start, uint64_t nbuckets, uint32_t first_chunk,
                    gptr<const Xyzz<F>> partial, gptr<Xyzz<F>> buckets) {
    for (uint64_t b = thread_index(); b < nbuckets; b += grid_stride()) {
        const uint32_t lo = ld(unit_start + b), hi = ld(unit_start + b + 1);
        if (first_chunk) st(buckets + b, lo < hi ? ld(partial + lo) : Xyzz<F>::infinity());
        else if (lo < hi) st(buckets + b, ld(buckets + b) + ld(partial + lo));
    }
}

// seg[w * segs + s] = sum over the digits d of segment s of window w of d * B(w, d).
// Segment s holds digits [lo, hi), lo = s * S + 1; with the running sum R_d = sum_{d' >= d}
// B_d' inside the segment, sum_d R_d = sum_d (d - lo + 1) B_d, and (lo - 1) * R_lo adds the rest.
template <class F>
ZKQ_DEV void bucket_segments(gptr<const Xyzz<F>> buckets, uint32_t windows, uint32_t c, uint32_t S,
                             gptr<Xyzz<F>> seg) {
    const uint32_t half = 1u << (c - 1);
    const uint32_t segs = (half + S - 1) / S;
    for (uint64_t t = thread_index(); t < (uint64_t)windows * segs; t += grid_stride()) {
        const uint32_t w = (uint32_t)(t / segs), s = (uint32_t)(t % segs);
        const uint32_t lo = 1 + s * S;
        const uint32_t hi = lo + S < half + 1 ? lo + S : half + 1;
        Xyzz<F> run = Xyzz<F>::infinity(), total = Xyzz<F>::infinity();
        for (uint32_t d = hi; d-- > lo;) {
            run = run + ld(buckets + (uint64_t)w * half + (d - 1));
            total = total + run;
        }
        if (lo > 1) total = total + run.mul_small(lo - 1);
        st(seg + t, total);
    }
}

// out[r * ocols + g] = sum of in[r * cols + g * fan .. + fan) (within the row).
template <class F>
ZKQ_DEV void sum_rows(gptr<const Xyzz<F>> in, uint32_t rows, uint32_t cols, uint32_t fan, gptr<Xyzz<F>> out) {
    const uint32_t ocols = (cols + fan - 1) / fan;
    for (uint64_t t = thread_index(); t < (uint64_t)rows * ocols; t += grid_stride()) {
        const uint32_t r = (uint32_t)(t / ocols), g = (uint32_t)(t % ocols);
        Xyzz<F> acc = Xyzz<F>::infinity();
        for (uint32_t j = g * fan; j < cols && j < g * fan + fan; j++) acc = acc + ld(in + (uint64_t)r * cols + j);
        st(out + t, acc);
    }
}

// out = sum_w 2^(c w) sums[w], as a tree over the block's threads in shared memory:
// after level l, thread i (a multiple of 2^(l+1)) holds sum_{j < 2^(l+1)} 2^(c j) W_(i+j).
template <class F>
ZKQ_DEV void combine(gptr<const Xyzz<F>> sums, uint32_t windows, uint32_t c, gptr<Xyzz<F>> out,
                     gptr<Xyzz<F>> sh) {
    const uint32_t i = tid(), T = bdim();
    st(sh + i, i < windows ? ld(sums + i) : Xyzz<F>::infinity());
    block_sync();
    for (uint32_t step = 1; step < T; step *= 2) {
        if (i % (2 * step) == 0) {
            Xyzz<F> hi = ld(sh + i + step);
            for (uint32_t k = 0; k < c * step && !hi.is_inf(); k++) hi = hi.dbl();
            st(sh + i, ld(sh + i) + hi);
        }
        block_sync();
    }
    if (i == 0) st(out, ld(sh));
}

// Group g: out[g] = sum_i scalars[g][i] * points[g][i] for i < k (XYZZ points, standard-form
// scalars); one thread per term, double-and-add from the scalar's top bit.
template <class F>
ZKQ_DEV void small_msm(gptr<const Xyzz<F>> points, gptr<const uint64_t> scalars, uint32_t k,
                       gptr<uint64_t> bad, gptr<Xyzz<F>> out, gptr<Xyzz<F>> sh) {
    const uint32_t g = bid(), i = tid();
    if (i < k) {
        uint64_t s[4];
        load_scalar(scalars + (uint64_t)g * k * 4, i, k, s, bad);
        const Xyzz<F> p = ld(points + (uint64_t)g * k + i);
        Xyzz<F> acc = Xyzz<F>::infinity();
        for (int bit = 255; bit >= 0; bit--) {
            if (!acc.is_inf()) acc = acc.dbl();
            if ((s[bit / 64] >> (bit % 64)) & 1) acc = acc + p;
        }
        st(sh + i, acc);
    }
    block_sync();
    if (i == 0) {
        Xyzz<F> acc = Xyzz<F>::infinity();
        for (uint32_t j = 0; j < k; j++) acc = acc + ld(sh + j);
        st(out + g, acc);
    }
}

}  // namespace gpu
}  // namespace zkq

// Launch shapes of the group kernels below (G = g1 or g2):
//  msm_accumulate_G: 1-D, one thread per unit; launched for an upper bound of units,
//    threads past *total_units stop (grid-stride). Block size by occupancy.
//  msm_unit_tree_G: as msm_accumulate_G, once per round (stride 1, F, F^2, ...).
//  msm_gather_G: 1-D, one thread per bucket (grid-stride).
//  msm_bucket_segments_G: 1-D, one thread per (window, segment) (grid-stride).
//  msm_sum_rows_G: 1-D, one thread per output (grid-stride).
//  msm_combine_G: one block of a power of two >= windows threads (at most 64).
//  msm_small_G: one block of 32 threads per group; k <= 32 terms per group.
#define ZKQ_MSM_KERNELS(G, F, BOUND_THREADS, BOUND_BLOCKS)                                                       \
    ZKQ_KERNEL_BOUNDED(msm_accumulate_##G, BOUND_THREADS, BOUND_BLOCKS, gptr<const Affine<F>> points,           \
                       gptr<const uint32_t> vals, gptr<const uint32_t> starts, gptr<const uint32_t> counts,     \
                       gptr<const uint32_t> unit_bucket, gptr<const uint32_t> unit_start,                       \
                       gptr<const uint32_t> total_units, uint32_t L, gptr<Xyzz<F>> partial) {                   \
        const uint32_t total = ld(total_units);                                                                 \
        for (uint64_t u = thread_index(); u < total; u += grid_stride()) {                                      \
            const Unit r = unit_range((uint32_t)u, unit_bucket, unit_start, starts, counts, L);                 \
            st(partial + u, accumulate<F>(points, vals, r.lo, r.hi));                                           \
        }                                                                                                       \
    }                                                                                                           \
    ZKQ_KERNEL(msm_unit_tree_##G, gptr<const uint32_t> unit_bucket, gptr<const uint32_t> unit_start,            \
               gptr<const uint32_t> total_units, uint32_t stride, uint32_t fan, gptr<Xyzz<F>> partial) {        \
        unit_tree<F>(unit_bucket, unit_start, total_units, stride, fan, partial);                               \
    }                                                                                                           \
    ZKQ_KERNEL(msm_gather_##G, gptr<const uint32_t> unit_start, uint64_t nbuckets, uint32_t first_chunk,        \
               gptr<const Xyzz<F>> partial, gptr<Xyzz<F>> buckets) {                                            \
        gather<F>(unit_start, nbuckets, first_chunk, partial, buckets);                                         \
    }                                                                                                           \
    ZKQ_KERNEL(msm_bucket_segments_##G, gptr<const Xyzz<F>> buckets, uint32_t windows, uint32_t c, uint32_t S,  \
               gptr<Xyzz<F>> seg) {                                                                             \
        bucket_segments<F>(buckets, windows, c, S, seg);                                                        \
    }                                                                                                           \
    ZKQ_KERNEL(msm_sum_rows_##G, gptr<const Xyzz<F>> in, uint32_t rows, uint32_t cols, uint32_t fan,            \
               gptr<Xyzz<F>> out) {                                                                             \
        sum_rows<F>(in, rows, cols, fan, out);                                                                  \
    }                                                                                                           \
    ZKQ_KERNEL(msm_combine_##G, gptr<const Xyzz<F>> sums, uint32_t windows, uint32_t c, gptr<Xyzz<F>> out) {   \
        ZKQ_SHARED(Xyzz<F>, sh, 64);                                                                            \
        combine<F>(sums, windows, c, out, sh);                                                                  \
    }                                                                                                           \
    ZKQ_KERNEL(msm_small_##G, gptr<const Xyzz<F>> points, gptr<const uint64_t> scalars, uint32_t k,             \
               gptr<uint64_t> bad, gptr<Xyzz<F>> out) {                                                         \
        ZKQ_SHARED(Xyzz<F>, sh, 32);                                                                            \
        small_msm<F>(points, scalars, k, bad, out, sh);                                                         \
    }

// One module unit per group (ZKQ_GROUPS = 1: G1, 2: G2; both when unset), so that the two
// compile side by side (groth16/backends/cuda.py, UNITS). __launch_bounds__ of the bucket
// accumulation, per curve and group: (threads, blocks) such that the registers the compiler
// may use let that many blocks stay resident (bench/gpu_registers.tsv has the counts).
#if !defined(ZKQ_GROUPS) || ZKQ_GROUPS == 1
#if ZKQ_CURVE == 0
ZKQ_MSM_KERNELS(g1, Fq, 256, 2)
#else
ZKQ_MSM_KERNELS(g1, Fq, 256, 1)
#endif
#endif
#if !defined(ZKQ_GROUPS) || ZKQ_GROUPS == 2
ZKQ_MSM_KERNELS(g2, Fq2, 128, 2)
#endif
