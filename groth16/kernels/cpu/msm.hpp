// msm.hpp - multi-scalar multiplication on G1 and G2 (Pippenger), and the point checks
// used to reject corrupt .zkey point sections. Instantiated by msm_g1.cpp and msm_g2.cpp
// (separate files so the two compile in parallel).
//
// Algorithm, per window of c bits:
//  * scalars are recoded once into signed digits in [-(2^(c-1) - 1), 2^(c-1)] (a digit above
//    2^(c-1) becomes digit - 2^c with a carry into the next window), so a window needs only
//    2^(c-1) buckets; a negative digit adds -P, which is free in affine coordinates.
//  * points are counting-sorted by bucket, then every bucket is summed as a binary tree in
//    affine coordinates: all pairs of all buckets of one tree level share ONE field
//    inversion (Montgomery's batch trick), so an addition costs about 6 multiplications
//    instead of the 11 of a mixed Jacobian addition.
//  * buckets are combined with the running-sum trick (sum_b b*B_b = sum_b sum_{j>=b} B_j).
// Windows are independent, so threads take whole windows; the window sums are combined
// (c doublings between them) at the end.
#pragma once
#include <malloc.h>

#include <atomic>
#include <climits>
#include <cstdlib>

#include "zkq.hpp"

namespace zkq {
namespace {

// What the batch-affine pass does with one pair (p, q) of a bucket.
enum : uint8_t { K_ADD, K_DBL, K_LEFT, K_RIGHT, K_INF };

// Points summed per pass of a window: bounds the scratch memory (a bucket's partial sum is
// carried from one chunk to the next as one more point in that bucket).
constexpr size_t CHUNK = size_t(1) << 17;

template <class F>
struct Scratch {
    std::vector<Affine<F>> work;  // bucket contents, bucket after bucket
    std::vector<Affine<F>> acc;   // bucket sums carried between chunks
    std::vector<F> den, pre;      // per pair: denominator (then its inverse), prefix products
    std::vector<uint8_t> kind;
    std::vector<uint32_t> cnt, start, cursor, active;
};

// Points reduced together: buckets [lo, hi) whose points fit this many bytes are summed
// to the end before the next group starts, so every tree level works in the L2 cache
// instead of streaming the whole window through memory once per level. Each level of a
// group costs one field inversion; a group of ~4k points keeps that below 2%.
constexpr size_t GROUP_BYTES = size_t(512) << 10;

// Sums the points of buckets [lo, hi) in place: afterwards bucket b's sum is
// work[start[b]] (when cnt[b] == 1; cnt[b] == 0 means empty). One tree level per loop
// iteration.
template <class F>
void reduce_group(Scratch<F>& s, uint32_t lo, uint32_t hi) {
    auto& work = s.work;
    s.active.clear();
    for (uint32_t b = lo; b < hi; b++)
        if (s.cnt[b] >= 2) s.active.push_back(b);
    while (!s.active.empty()) {
        size_t np = 0;
        for (uint32_t b : s.active) np += s.cnt[b] / 2;
        s.den.resize(np);
        s.pre.resize(np);
        s.kind.resize(np);
        F* den = s.den.data();
        F* pre = s.pre.data();
        uint8_t* kind = s.kind.data();
        // Pass 1: denominators and their prefix products.
        F prod = F::one();
        size_t k = 0;
        for (uint32_t b : s.active) {
            const Affine<F>* w = &work[s.start[b]];
            uint32_t half = s.cnt[b] / 2;
            for (uint32_t i = 0; i < half; i++, k++) {
                const Affine<F>& p = w[2 * i];
                const Affine<F>& q = w[2 * i + 1];
                uint8_t kd;
                F d;
                if (p.is_inf()) { kd = K_RIGHT; d = F::one(); }
                else if (q.is_inf()) { kd = K_LEFT; d = F::one(); }
                else if (p.x == q.x) {
                    if (p.y == q.y) { kd = K_DBL; d = p.y.dbl(); }  // lambda = 3x^2 / 2y
                    else { kd = K_INF; d = F::one(); }              // P + (-P)
                } else { kd = K_ADD; d = q.x - p.x; }
                kind[k] = kd;
                den[k] = d;
                pre[k] = prod;
                prod = prod * d;
            }
        }
        // Pass 2: one inversion, then every pair's inverse, back to front.
        F inv = field_inv(prod);
        for (size_t j = np; j-- > 0;) {
            F ij = inv * pre[j];
            inv = inv * den[j];
            den[j] = ij;
        }
        // Pass 3: the sums, front to back so pair i's result may overwrite slot i (slots
        // 2i and 2i+1 are already read).
        k = 0;
        size_t kept = 0;
        for (uint32_t b : s.active) {
            Affine<F>* w = &work[s.start[b]];
            uint32_t m = s.cnt[b], half = m / 2;
            for (uint32_t i = 0; i < half; i++, k++) {
                const Affine<F> p = w[2 * i];
                const Affine<F>& q = w[2 * i + 1];
                switch (kind[k]) {
                    case K_ADD: {
                        F lam = (q.y - p.y) * den[k];
                        F x3 = lam.sqr() - p.x - q.x;
                        w[i] = Affine<F>{x3, lam * (p.x - x3) - p.y};
                        break;
                    }
                    case K_DBL: {
                        F xx = p.x.sqr();
                        F lam = (xx.dbl() + xx) * den[k];
                        F x3 = lam.sqr() - p.x.dbl();
                        w[i] = Affine<F>{x3, lam * (p.x - x3) - p.y};
                        break;
                    }
                    case K_LEFT: w[i] = p; break;
                    case K_RIGHT: w[i] = q; break;
                    default: w[i] = Affine<F>::infinity(); break;
                }
            }
            if (m & 1) w[half] = w[m - 1];
            s.cnt[b] = (m + 1) / 2;
            if (s.cnt[b] >= 2) s.active[kept++] = b;
        }
        s.active.resize(kept);
    }
}

// Sums the points of every bucket 1..nb in place (see reduce_group), group by group.
template <class F>
void reduce_buckets(Scratch<F>& s, uint32_t nb) {
    const size_t group_points = std::max<size_t>(64, GROUP_BYTES / sizeof(Affine<F>));
    uint32_t lo = 1;
    while (lo <= nb) {
        size_t pts = 0;
        uint32_t hi = lo;
        while (hi <= nb && (pts == 0 || pts + s.cnt[hi] <= group_points)) pts += s.cnt[hi++];
        reduce_group(s, lo, hi);
        lo = hi;
    }
}

// sum over i of digit_i * P_i for one window.
template <class F>
Jacobian<F> window_sum(const Affine<F>* pts, const int16_t* dig, size_t n, int c, Scratch<F>& s) {
    const uint32_t nb = 1u << (c - 1);
    s.acc.assign(nb + 1, Affine<F>::infinity());
    s.cnt.resize(nb + 1);
    s.start.resize(nb + 1);
    s.cursor.resize(nb + 1);
    for (size_t c0 = 0; c0 < n; c0 += CHUNK) {
        const size_t c1 = std::min(n, c0 + CHUNK);
        for (uint32_t b = 0; b <= nb; b++) s.cnt[b] = s.acc[b].is_inf() ? 0 : 1;
        for (size_t i = c0; i < c1; i++) {
            int d = dig[i];
            if (d) s.cnt[d < 0 ? -d : d]++;
        }
        uint32_t pos = 0;
        for (uint32_t b = 0; b <= nb; b++) {
            s.start[b] = s.cursor[b] = pos;
            pos += s.cnt[b];
        }
        s.work.resize(pos);
        for (uint32_t b = 1; b <= nb; b++)
            if (s.cnt[b] && !s.acc[b].is_inf()) s.work[s.cursor[b]++] = s.acc[b];
        for (size_t i = c0; i < c1; i++) {
            int d = dig[i];
            if (!d) continue;
            Affine<F>& dst = s.work[s.cursor[d < 0 ? -d : d]++];
            dst = pts[i];
            if (d < 0) dst.y = -dst.y;
        }
        reduce_buckets(s, nb);
        for (uint32_t b = 1; b <= nb; b++)
            s.acc[b] = s.cnt[b] ? s.work[s.start[b]] : Affine<F>::infinity();
    }
    Jacobian<F> running = Jacobian<F>::infinity(), total = Jacobian<F>::infinity();
    for (uint32_t b = nb; b >= 1; b--) {
        if (!s.acc[b].is_inf()) running = jac_madd(running, s.acc[b]);
        if (!running.is_inf()) total = jac_add(total, running);
    }
    return total;
}

// Window width from a cost model in field multiplications: per window about 8 per point
// (batch-affine addition plus sorting) and 30 per bucket (two Jacobian additions).
int choose_window(size_t n, int scalar_bits) {
    int best = 1;
    double best_cost = 1e300;
    for (int c = 1; c <= 15; c++) {
        int windows = (scalar_bits + 1 + c - 1) / c;
        double cost = windows * (8.0 * (double)n + 30.0 * (double)(1u << (c - 1)));
        if (cost < best_cost) { best_cost = cost; best = c; }
    }
    return best;
}

// Bits [pos, pos + c) of a 4-word scalar.
inline uint32_t scalar_bits_at(const uint64_t* k, int pos, int c) {
    int w = pos / 64, sh = pos % 64;
    if (w >= 4) return 0;
    uint64_t v = k[w] >> sh;
    if (sh + c > 64 && w + 1 < 4) v |= k[w + 1] << (64 - sh);
    return (uint32_t)(v & ((1ull << c) - 1));
}

template <class F, class Fr>
int msm(const uint64_t* point_words, const uint64_t* scalars, size_t n, uint64_t* out, int threads) {
    constexpr int NWF = (int)(sizeof(F) / 8);  // 64-bit words per coordinate
    if (!out || (n && (!point_words || !scalars))) return ZKQ_ERR_ARG;
    if (n == 0) {
        std::memset(out, 0, 2 * NWF * 8);
        return ZKQ_OK;
    }
    const Affine<F>* pts = reinterpret_cast<const Affine<F>*>(point_words);
    int scalar_bits = 0;  // bit length of r
    for (int i = 255; i >= 0; i--)
        if ((Fr::params::p(i / 64) >> (i % 64)) & 1) { scalar_bits = i + 1; break; }
    const int c = choose_window(n, scalar_bits);
    const int windows = (scalar_bits + 1 + c - 1) / c;  // +1: the signed recoding's last carry
    const int32_t half = 1 << (c - 1);

    // Signed digits, window-major so a window's digits are contiguous.
    std::vector<int16_t> dig((size_t)windows * n);
    std::atomic<size_t> bad{SIZE_MAX};
    parallel_for(threads, n, [&](size_t b, size_t e, int) {
        for (size_t i = b; i < e; i++) {
            const uint64_t* k = scalars + 4 * i;
            Fr kr;
            std::memcpy(kr.v, k, 32);
            bool skip = pts[i].is_inf();
            if (kr.geq_modulus()) {
                size_t cur = bad.load();
                while (i < cur && !bad.compare_exchange_weak(cur, i)) {}
                skip = true;
            }
            int32_t carry = 0;
            for (int w = 0; w < windows; w++) {
                int32_t d = skip ? 0 : (int32_t)scalar_bits_at(k, w * c, c) + carry;
                carry = 0;
                if (d > half) { d -= 2 * half; carry = 1; }
                dig[(size_t)w * n + i] = (int16_t)d;
            }
        }
    });
    if (bad.load() != SIZE_MAX) return ZKQ_ERR_SCALAR_RANGE;

    std::vector<Jacobian<F>> sums(windows);
    std::atomic<int> next{0};
    auto worker = [&]() {
        Scratch<F> s;
        for (int w; (w = next.fetch_add(1)) < windows;)
            sums[w] = window_sum(pts, dig.data() + (size_t)w * n, n, c, s);
    };
    int nt = clamp_threads(threads, (size_t)windows);
    std::vector<std::thread> pool;
    std::vector<std::exception_ptr> errs(nt);
    for (int t = 1; t < nt; t++)
        pool.emplace_back([&, t] { try { worker(); } catch (...) { errs[t] = std::current_exception(); } });
    try { worker(); } catch (...) { errs[0] = std::current_exception(); }
    for (auto& th : pool) th.join();
    for (auto& e : errs) if (e) std::rethrow_exception(e);

    Jacobian<F> acc = Jacobian<F>::infinity();
    for (int w = windows - 1; w >= 0; w--) {
        for (int j = 0; j < c; j++) acc = jac_dbl(acc);
        acc = jac_add(acc, sums[w]);
    }
    Affine<F> r = jac_to_affine(acc);
    std::memcpy(out, &r, sizeof(r));
    // The scratch of the threads above (up to ~12 MB per thread for G2 at 2^16) sits in
    // glibc's per-thread arenas after they exit; hand it back so that five MSMs in a row
    // do not each keep their own share resident (peak RSS is one of the bench's measures).
    std::vector<int16_t>().swap(dig);
    malloc_trim(0);
    return ZKQ_OK;
}

template <class F>
int check_points(const uint64_t* words, size_t n, const F& b, int64_t* bad_index, int threads) {
    if (n && !words) return ZKQ_ERR_ARG;
    const Affine<F>* pts = reinterpret_cast<const Affine<F>*>(words);
    // Lowest bad index across threads, with its code.
    std::atomic<size_t> bad{SIZE_MAX};
    std::vector<int> code(clamp_threads(threads, n), ZKQ_OK);
    std::vector<size_t> first(code.size(), SIZE_MAX);
    parallel_for(threads, n, [&](size_t s, size_t e, int t) {
        for (size_t i = s; i < e && i < bad.load(); i++) {
            const Affine<F>& p = pts[i];
            int err = ZKQ_OK;
            if (p.x.geq_modulus() || p.y.geq_modulus()) err = ZKQ_ERR_POINT_RANGE;
            else if (!p.on_curve(b)) err = ZKQ_ERR_POINT_CURVE;
            if (err) {
                code[t] = err;
                first[t] = i;
                size_t cur = bad.load();
                while (i < cur && !bad.compare_exchange_weak(cur, i)) {}
                break;
            }
        }
    });
    if (bad_index) *bad_index = -1;
    size_t lo = bad.load();
    if (lo == SIZE_MAX) return ZKQ_OK;
    if (bad_index) *bad_index = (int64_t)lo;
    for (size_t t = 0; t < code.size(); t++)
        if (first[t] == lo) return code[t];
    return ZKQ_ERR_INTERNAL;
}

}  // namespace
}  // namespace zkq

