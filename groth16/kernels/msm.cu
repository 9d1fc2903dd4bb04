// msm.cu - multi-scalar multiplication sum_i k_i * P_i on G1 and G2 (Pippenger).
//
// The host (groth16/backends/cuda.py, CudaBackend._msm) runs, for windows of c bits:
//  1. msm_count: every scalar is recoded into signed digits d in [-(2^(c-1) - 1), 2^(c-1)]
//     (a digit above 2^(c-1) becomes d - 2^c and carries 1 into the next window), so a
//     window needs 2^(c-1) buckets and -P is free (negate y). Each nonzero digit names
//     the bucket key = window * 2^(c-1) + |d| - 1; this pass counts entries per key.
//  2. an exclusive prefix sum of the counts (CuPy's cumsum) gives each key its slots, and
//     msm_scatter writes (key, point index | sign << 31) into them: a counting sort by
//     key, with zero digits dropped.
//  3. msm_level_points_*, then msm_level_parts_* until one slice is left: a segmented sum
//     of the sorted entries that stays balanced when one bucket holds most points (real
//     witnesses are full of 0/1 values). The sorted list is cut into slices of S entries,
//     one thread each. A run of equal keys that starts and ends inside a slice is a whole
//     bucket: that thread alone adds it to buckets[key]. The first and last run of a
//     slice may continue in a neighbour: they go to the next level's list as two partial
//     sums (head, tail), which is again sorted by key. The list shrinks S/2-fold per level;
//     on the level with a single slice every run goes to its bucket.
//  4. msm_window_parts_*: per window, groups of buckets are weighted by their digit with
//     the running-sum trick; msm_window_sums_* adds the groups of each window.
//  5. msm_finish_*: Horner over the windows (c doublings between them), one thread.
// Buckets accumulate with +=, so the host may feed the points in several chunks before
// step 4 (that bounds the sort's memory). The result is XYZZ; the host makes it affine.
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

// Loads scalar i (zero past the end), and reports a scalar >= r as (index) in *bad when
// `bad` is set; such a scalar then counts as zero (the host refuses the whole MSM).
ZKQ_DEV void load_scalar(const uint64_t* scalars, uint64_t i, uint64_t n, uint64_t k[4],
                         unsigned long long* bad) {
    k[0] = k[1] = k[2] = k[3] = 0;
    if (i >= n) return;
    for (int j = 0; j < 4; j++) k[j] = scalars[4 * i + j];
    if (!below_r(k)) {
        if (bad) atomic_min_u64(bad, i);
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

// counts[key] += number of (scalar, window) digits with that key; *bad = lowest index of a
// scalar >= r (left as is when there is none).
// Launch: 1-D, block size a multiple of 32 (warp-aggregated atomics), one thread per
// scalar (grid-stride; the loop is warp-uniform so whole warps meet at the atomics).
ZKQ_KERNEL void msm_count(const uint64_t* scalars, uint64_t n, uint32_t c, uint32_t windows, uint32_t* counts,
                          unsigned long long* bad) {
    for (uint64_t base = block_base(); base < n; base += grid_stride()) {
        const uint64_t i = base + thread_in_block();
        uint64_t k[4];
        load_scalar(scalars, i, n, k, bad);
        int32_t carry = 0;
        for (uint32_t w = 0; w < windows; w++) count_key(counts, digit_key(w, c, next_digit(k, w, c, carry)));
    }
}

// Counting sort's second pass: entry (key, i | sign) goes to slot cursor[key]++ (cursor
// starts as the exclusive prefix sum of msm_count's counts). Order inside a key is
// arbitrary; the sums do not depend on it.
// Launch: as msm_count.
ZKQ_KERNEL void msm_scatter(const uint64_t* scalars, uint64_t n, uint32_t c, uint32_t windows, uint32_t* cursor,
                            uint32_t* keys, uint32_t* vals) {
    for (uint64_t base = block_base(); base < n; base += grid_stride()) {
        const uint64_t i = base + thread_in_block();
        uint64_t k[4];
        load_scalar(scalars, i, n, k, nullptr);
        int32_t carry = 0;
        for (uint32_t w = 0; w < windows; w++) {
            const int32_t d = next_digit(k, w, c, carry);
            const uint32_t key = digit_key(w, c, d);
            const uint32_t slot = reserve_slot(cursor, key);
            if (key != NO_KEY) {
                keys[slot] = key;
                vals[slot] = (uint32_t)i | (d < 0 ? SIGN_BIT : 0u);
            }
        }
    }
}

namespace zkq {
namespace gpu {

// Level 1 reads the key's affine points through the sorted entries' (index | sign).
template <class F>
struct SignedPoints {
    const Affine<F>* points;
    const uint32_t* vals;
    ZKQ_DEV Xyzz<F> add_to(const Xyzz<F>& acc, uint64_t j) const {
        const uint32_t v = vals[j];
        Affine<F> p = ld(points + (v & ~SIGN_BIT));
        if (v & SIGN_BIT) p = -p;
        return acc.add_affine(p);
    }
};

// Later levels read the previous level's partial sums.
template <class F>
struct Partials {
    const Xyzz<F>* parts;
    ZKQ_DEV Xyzz<F> add_to(const Xyzz<F>& acc, uint64_t j) const { return acc + ld(parts + j); }
};

template <class F>
ZKQ_DEV void add_to_bucket(Xyzz<F>* buckets, uint32_t key, const Xyzz<F>& sum) {
    Xyzz<F>* b = buckets + key;
    st(b, ld(b) + sum);
}

// One level of the segmented sum (see the file comment). Input: m entries whose keys are
// sorted once NO_KEY entries are ignored. Output (unless this is the last level, i.e. a
// single slice): out_keys/out_parts[2t] = first run of slice t, [2t + 1] = its last run
// when that is another run (NO_KEY when absent).
template <class F, class In>
ZKQ_DEV void reduce_runs(const uint32_t* keys, const In& in, uint64_t m, uint32_t S, uint32_t* out_keys,
                         Xyzz<F>* out_parts, Xyzz<F>* buckets) {
    const uint64_t slices = (m + S - 1) / S;
    const bool last_level = slices == 1;
    for (uint64_t t = thread_index(); t < slices; t += grid_stride()) {
        const uint64_t lo = t * S, hi = lo + S < m ? lo + S : m;
        uint32_t cur = NO_KEY, head = NO_KEY, tail = NO_KEY;
        Xyzz<F> acc = Xyzz<F>::infinity();
        for (uint64_t j = lo; j < hi; j++) {
            const uint32_t k = keys[j];
            if (k == NO_KEY) continue;
            if (k != cur) {
                if (cur != NO_KEY) {  // the run of `cur` ends inside this slice
                    if (!last_level && head == NO_KEY) {
                        head = cur;  // it may have begun in the previous slice
                        st(out_parts + 2 * t, acc);
                    } else {
                        add_to_bucket(buckets, cur, acc);  // a whole bucket: no one else has `cur`
                    }
                }
                cur = k;
                acc = Xyzz<F>::infinity();
            }
            acc = in.add_to(acc, j);
        }
        if (cur != NO_KEY) {  // the run still open at the slice's end may go on in the next
            if (last_level) {
                add_to_bucket(buckets, cur, acc);
            } else if (head == NO_KEY) {
                head = cur;
                st(out_parts + 2 * t, acc);
            } else {
                tail = cur;
                st(out_parts + 2 * t + 1, acc);
            }
        }
        if (!last_level) {
            out_keys[2 * t] = head;
            out_keys[2 * t + 1] = tail;
        }
    }
}

// parts[w * groups + g] = sum over the digits d of group g of window w of d * bucket(w, d).
// Group g holds digits [lo, hi); with the running sum R_d = sum_{d' >= d} B_d',
// sum_d R_d = sum_d (d - lo + 1) B_d, and (lo - 1) * R_lo adds the rest.
template <class F>
ZKQ_DEV void window_parts(const Xyzz<F>* buckets, uint32_t windows, uint32_t c, uint32_t groups, Xyzz<F>* parts) {
    const uint32_t half = 1u << (c - 1);
    const uint32_t per = (half + groups - 1) / groups;
    for (uint64_t t = thread_index(); t < (uint64_t)windows * groups; t += grid_stride()) {
        const uint32_t w = (uint32_t)(t / groups), g = (uint32_t)(t % groups);
        const uint32_t lo = 1 + g * per;
        const uint32_t hi = lo + per < half + 1 ? lo + per : half + 1;
        Xyzz<F> run = Xyzz<F>::infinity(), total = Xyzz<F>::infinity();
        for (uint32_t d = hi; d > lo; d--) {  // digits hi-1 down to lo
            run += ld(buckets + (uint64_t)w * half + (d - 2));
            total += run;
        }
        if (lo > 1 && lo < hi) total += run.mul_small(lo - 1);
        st(parts + t, total);
    }
}

// sums[w] = sum of window w's group parts.
template <class F>
ZKQ_DEV void window_sums(const Xyzz<F>* parts, uint32_t windows, uint32_t groups, Xyzz<F>* sums) {
    for (uint64_t w = thread_index(); w < windows; w += grid_stride()) {
        Xyzz<F> acc = Xyzz<F>::infinity();
        for (uint32_t g = 0; g < groups; g++) acc += ld(parts + w * groups + g);
        st(sums + w, acc);
    }
}

// out[0] = sum_w 2^(c*w) * sums[w], by Horner from the top window.
template <class F>
ZKQ_DEV void finish(const Xyzz<F>* sums, uint32_t windows, uint32_t c, Xyzz<F>* out) {
    if (thread_index() != 0) return;
    Xyzz<F> acc = Xyzz<F>::infinity();
    for (uint32_t w = windows; w-- > 0;) {
        for (uint32_t j = 0; j < c; j++) acc = acc.dbl();
        acc += ld(sums + w);
    }
    st(out, acc);
}

}  // namespace gpu
}  // namespace zkq

// The launch shapes of the group kernels below:
//  msm_level_points_*, msm_level_parts_*: 1-D, any block size, one thread per slice of S
//    entries, ceil(m / S) of them (grid-stride).
//  msm_window_parts_*: 1-D, any block size, one thread per (window, group) (grid-stride).
//  msm_window_sums_*: 1-D, any block size, one thread per window (grid-stride).
//  msm_finish_*: one block of one thread (it is a short serial chain of doublings).
#define ZKQ_MSM_KERNELS(G, F)                                                                                   \
    ZKQ_KERNEL void msm_level_points_##G(const uint32_t* keys, const Affine<F>* points, const uint32_t* vals,  \
                                         uint64_t m, uint32_t S, uint32_t* out_keys, Xyzz<F>* out_parts,        \
                                         Xyzz<F>* buckets) {                                                    \
        reduce_runs<F>(keys, SignedPoints<F>{points, vals}, m, S, out_keys, out_parts, buckets);               \
    }                                                                                                           \
    ZKQ_KERNEL void msm_level_parts_##G(const uint32_t* keys, const Xyzz<F>* parts, uint64_t m, uint32_t S,    \
                                        uint32_t* out_keys, Xyzz<F>* out_parts, Xyzz<F>* buckets) {             \
        reduce_runs<F>(keys, Partials<F>{parts}, m, S, out_keys, out_parts, buckets);                          \
    }                                                                                                           \
    ZKQ_KERNEL void msm_window_parts_##G(const Xyzz<F>* buckets, uint32_t windows, uint32_t c, uint32_t groups, \
                                         Xyzz<F>* parts) {                                                      \
        window_parts<F>(buckets, windows, c, groups, parts);                                                    \
    }                                                                                                           \
    ZKQ_KERNEL void msm_window_sums_##G(const Xyzz<F>* parts, uint32_t windows, uint32_t groups,               \
                                        Xyzz<F>* sums) {                                                        \
        window_sums<F>(parts, windows, groups, sums);                                                           \
    }                                                                                                           \
    ZKQ_KERNEL void msm_finish_##G(const Xyzz<F>* sums, uint32_t windows, uint32_t c, Xyzz<F>* out) {          \
        finish<F>(sums, windows, c, out);                                                                       \
    }

ZKQ_MSM_KERNELS(g1, Fq)
ZKQ_MSM_KERNELS(g2, Fq2)
