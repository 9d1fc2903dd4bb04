// msm.hpp - multi-scalar multiplication on G1 and G2 (Pippenger), optionally with a
// precomputed table of the fixed bases, and the point checks used to reject corrupt .zkey
// point sections. Instantiated by msm_g1.cpp and msm_g2.cpp (separate files so the two
// compile in parallel).
//
// Algorithm:
//  * GLV (glv.hpp): every scalar k becomes k1 + k2 lambda with |k1|, |k2| < 2^128, so the
//    MSM runs over 2n points (P_i and phi(P_i) = (beta x, y), made on the fly) with
//    128-bit scalars: half the windows of a 254/255-bit MSM, hence half the bucket sums.
//  * each half is recoded once into signed c-bit digits in [-(2^(c-1) - 1), 2^(c-1)] (a
//    digit above 2^(c-1) becomes digit - 2^c with a carry into the next window), so a
//    window needs only 2^(c-1) buckets; a negative digit (or a negative half) adds -P,
//    which is free in affine coordinates.
//  * points are counting-sorted by bucket, then every bucket is summed as a binary tree in
//    affine coordinates: all pairs of all buckets of one tree level share ONE field
//    inversion (Montgomery's batch trick), so an addition costs about 6 multiplications
//    instead of the 11 of a mixed Jacobian addition.
//  * buckets are combined as sum_b b*B_b = sum_r r*S_r + m * sum_q q*T_q (b = q*m + r,
//    m ~ sqrt(#buckets); S_r, T_q plain sums made in the same batch-affine tree, see
//    weighted_sum): Jacobian additions only for the ~2 sqrt(#buckets) weighted terms.
//  * windows that share a table level are summed in ONE bucket set ("sub-window", see
//    MsmPlan): with a full table of 2^(j*c) P_i there is a single bucket set and no
//    doublings at all; without one, every window is its own sub-window.
// Sub-windows are the threads' tasks; when they do not divide evenly among the threads,
// the leftovers are sliced so that every thread is busy to the end.
#pragma once
#include <atomic>
#include <climits>
#include <cstdlib>

#include "batch_inv.hpp"
#include "glv.hpp"
#include "ifma.hpp"
#include "zkq.hpp"

namespace zkq {
namespace {

// What the batch-affine pass does with one pair (p, q) of a bucket.
enum : uint8_t { K_ADD, K_DBL, K_LEFT, K_RIGHT, K_INF };

// Points summed per pass of a window: bounds the scratch memory (a bucket's partial sum is
// carried from one chunk to the next as one more point in that bucket). 1 MB of points
// (2^14 bn128 G1 points), the same bytes for the wider points of BLS12-381 and G2: the
// points are scattered into their buckets' slots, and a chunk that stays in the cache is
// what counts (8 MB was 3-13% slower than 2 MB on bn128 G1; 1 MB and 2 MB measured the same
// on both curves and groups, 2^14 and 2^16 points, bench/kernels.py), and the smaller chunk
// takes 1 MB less peak memory per MSM thread.
constexpr size_t CHUNK_BYTES = size_t(1) << 20;
template <class F>
constexpr size_t chunk_points() { return CHUNK_BYTES / sizeof(Affine<F>); }

// Independent product chains of the batch inversion (see reduce_group).
constexpr int LANES = 4;

// inv[l] = 1 / t[l] for the LANES = 4 chain products with one field inversion:
// 1/t0 = t1 / (t0 t1), and so on up a two-level product tree. A zero product (empty
// chain products are one, and no denominator is zero) never occurs.
template <class F>
void invert_lanes(const F* t, F* inv) {
    static_assert(LANES == 4, "the product tree below is written for four lanes");
    const F t01 = t[0] * t[1], t23 = t[2] * t[3];
    const F i = field_inv(t01 * t23);
    const F i01 = i * t23, i23 = i * t01;
    inv[0] = i01 * t[1];
    inv[1] = i01 * t[0];
    inv[2] = i23 * t[3];
    inv[3] = i23 * t[2];
}

// Montgomery's batch inversion of reduce_group's denominators (passes 1 and 2): every value
// pushed joins the product chain k % LANES (one chain is a string of dependent products
// that waits on each one's latency; independent chains overlap in the pipeline); one field
// inversion then gives every value's inverse, back to front.
template <class C>
struct ScalarChains {
    std::vector<C> val, pre;  // per value: itself, the product of its chain before it
    C prod[LANES];
    size_t k = 0;

    void begin(size_t np) {
        val.resize(np);
        pre.resize(np);
        for (int l = 0; l < LANES; l++) prod[l] = C::one();
        k = 0;
    }
    void push(const C& c) {
        val[k] = c;
        pre[k] = prod[k % LANES];
        prod[k % LANES] = prod[k % LANES] * c;
        k++;
    }
    // out(j, 1 / value j) for every value pushed, from the last to the first.
    template <class Out>
    void invert(Out&& out) {
        C inv[LANES];
        invert_lanes(prod, inv);
        for (size_t j = k; j-- > 0;) {
            C& lane = inv[j % LANES];
            const C ij = lane * pre[j];
            lane = lane * val[j];
            out(j, ij);
        }
    }
};
#if defined(ZKQ_HAVE_IFMA)
template <class C>
using Chains = ifma::Chains<C>;  // eight chains in the lanes of a vector
#else
template <class C>
using Chains = ScalarChains<C>;
#endif

template <class F>
struct Scratch {
    using Chain = typename BatchInv<F>::Chain;
    std::vector<Affine<F>> work;  // bucket contents, bucket after bucket
    std::vector<Affine<F>> acc;   // bucket sums carried between chunks
    std::vector<F> den;           // per pair: denominator (then its inverse)
    std::vector<Chain> chn, pre;  // per pair: its chain value (Fq2: the norm), prefix products
    Chains<Chain> chains;         // reduce_group's batch inversion
    std::vector<uint8_t> kind;
    std::vector<uint32_t> cnt, start, cursor, active;
};

// Points reduced together: buckets [lo, hi) whose points fit this many bytes are summed
// to the end before the next group starts, so every tree level works in the L2 cache
// instead of streaming the whole window through memory once per level. Each level of a
// group costs one field inversion; a group of ~4k points keeps that below 2%.
constexpr size_t GROUP_BYTES = size_t(512) << 10;

// The general addition p + q (p.x != q.x, neither at infinity) of the batch-affine pass,
// given inv = 1 / (q.x - p.x): one pair at a time here; eight at a time with AVX-512 IFMA
// for prime fields (ifma.hpp), where the results land by finish() at the latest.
template <class F, class = void>
struct PairAdder {
    void add(const Affine<F>& p, const Affine<F>& q, const F& inv, Affine<F>* dst) {
        F lam = (q.y - p.y) * inv;
        F x3 = lam.sqr() - p.x - q.x;
        *dst = Affine<F>{x3, lam * (p.x - x3) - p.y};  // dst may be p's slot: p is read first
    }
    void finish() {}
};
#if defined(ZKQ_HAVE_IFMA)
template <class F>
struct PairAdder<F, std::enable_if_t<ifma::Vectorized<F>::value>> {
    ifma::AddBatch<F> batch;
    void add(const Affine<F>& p, const Affine<F>& q, const F& inv, Affine<F>* dst) { batch.push(p, q, inv, dst); }
    void finish() { batch.run(); }
};
#endif

// Sums the points of buckets [lo, hi) in place: afterwards bucket b's sum is
// work[start[b]] (when cnt[b] == 1; cnt[b] == 0 means empty). One tree level per loop
// iteration.
template <class F>
void reduce_group(Scratch<F>& s, uint32_t lo, uint32_t hi) {
    auto& work = s.work;
    s.active.clear();
    for (uint32_t b = lo; b < hi; b++)
        if (s.cnt[b] >= 2) s.active.push_back(b);
    using BI = BatchInv<F>;
    using C = typename BI::Chain;
    while (!s.active.empty()) {
        size_t np = 0;
        for (uint32_t b : s.active) np += s.cnt[b] / 2;
        s.den.resize(np);
        s.kind.resize(np);
        F* den = s.den.data();
        uint8_t* kind = s.kind.data();
        // Pass 1: denominators, and their chain values into the batch inversion.
        s.chains.begin(np);
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
                s.chains.push(BI::chain(d));
            }
        }
        // Pass 2: one inversion for all chains, then every pair's inverse, back to front.
        s.chains.invert([&](size_t j, const C& ij) { den[j] = BI::inverse(den[j], ij); });
        // Pass 3: the sums, front to back so pair i's result may overwrite slot i (slots
        // 2i and 2i+1 are already read; a queued addition has copied its inputs, and no
        // later pair of this level reads slot i).
        PairAdder<F> adder;
        k = 0;
        size_t kept = 0;
        for (uint32_t b : s.active) {
            Affine<F>* w = &work[s.start[b]];
            uint32_t m = s.cnt[b], half = m / 2;
            for (uint32_t i = 0; i < half; i++, k++) {
                const Affine<F> p = w[2 * i];
                const Affine<F>& q = w[2 * i + 1];
                switch (kind[k]) {
                    case K_ADD: adder.add(p, q, den[k], &w[i]); break;
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
        adder.finish();
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

// The points an MSM sums, as seen by the bucket pass: virtual point u = j*2n + v is, for
// v < n, 2^(j*stride*c) * P_v, and for v >= n its endomorphism image phi(2^(j*stride*c) * P_(v-n))
// = (beta x, y). Level 0 (j = 0) is the caller's points; levels 1.. come from a
// precomputed table (msm_table_build) when there is one.
template <class F>
struct GlvPoints {
    using B = typename BaseOf<F>::type;
    const Affine<F>* base;   // the caller's n points
    const F* endo_x;         // beta x_i, the x of phi(P_i) (its y is P_i's), made once per MSM
                             // (every window reads it), or null
    const Affine<F>* table;  // levels 1 .. levels-1, n points each (null when levels == 1)
    size_t n;
    B beta;

    const Affine<F>* level(size_t j) const { return j == 0 ? base : table ? table + (j - 1) * n : nullptr; }

    // Walks the points u, u+1, ... in order: no division per point (a 64-bit division costs
    // as much as a few percent of the whole MSM).
    struct Cursor {
        const GlvPoints* g;
        size_t j, v;            // level, and index among its 2n points
        const Affine<F>* lvl;   // level j's n points

        void next() {
            if (++v == 2 * g->n) {
                v = 0;
                lvl = g->level(++j);
            }
        }
        // The current point, negated when `neg`.
        Affine<F> get(bool neg) const {
            if (v < g->n) return Affine<F>{lvl[v].x, neg ? -lvl[v].y : lvl[v].y};
            const size_t i = v - g->n;
            if (j == 0 && g->endo_x) return Affine<F>{g->endo_x[i], neg ? -lvl[i].y : lvl[i].y};
            return Affine<F>{lvl[i].x * g->beta, neg ? -lvl[i].y : lvl[i].y};
        }
    };
    Cursor at(size_t u) const {
        const size_t j = u / (2 * n);
        return Cursor{this, j, u - j * 2 * n, level(j)};
    }
};

// sum_b b * B_b over b = 1..n of the affine points B (1-based), with the running-sum trick
// (sum_b b*B_b = sum_b sum_{j>=b} B_j): one mixed and one full Jacobian addition per point.
template <class F>
Jacobian<F> running_sum(const Affine<F>* B, uint32_t n) {
    Jacobian<F> running = Jacobian<F>::infinity(), total = Jacobian<F>::infinity();
    for (uint32_t b = n; b >= 1; b--) {
        if (!B[b].is_inf()) running = jac_madd(running, B[b]);
        if (!running.is_inf()) total = jac_add(total, running);
    }
    return total;
}

// sum_b b * s.acc[b] over the buckets b = 1..nb (their sums, affine). With b = q*m + r
// (m = 2^k >= sqrt(nb), 0 <= r < m):
//   sum_b b*B_b = sum_r r * S_r + m * sum_q q * T_q,  S_r = sum_q B_(qm+r),  T_q = sum_r B_(qm+r)
// S_r and T_q are plain sums, made in the bucket pass's batch-affine tree (every bucket
// goes into one S and one T: two affine additions of about 6 products each), and only
// their ~2 sqrt(nb) weighted sums take Jacobian additions, where the running sum over all
// nb buckets took a mixed and a full Jacobian addition (~27 products) per bucket. Reuses the
// scratch's arrays (the buckets' sums are read from s.acc first, then overwritten).
template <class F>
Jacobian<F> weighted_sum(Scratch<F>& s, uint32_t nb) {
    int k = 0;
    while ((1u << (2 * k)) < nb) k++;
    const uint32_t m = 1u << k, qn = nb >> k;
    // scratch bucket r (1..m-1) collects S_r, bucket m-1+q (q = 1..qn) collects T_q: for
    // nb a power of two, nb2 <= nb, within the scratch's nb + 1 entries
    const uint32_t nb2 = m - 1 + qn;
    const Affine<F>* acc = s.acc.data();
    for (uint32_t b = 0; b <= nb2; b++) s.cnt[b] = 0;
    for (uint32_t b = 1; b <= nb; b++) {
        if (acc[b].is_inf()) continue;
        if (b & (m - 1)) s.cnt[b & (m - 1)]++;
        if (b >> k) s.cnt[m - 1 + (b >> k)]++;
    }
    uint32_t pos = 0;
    for (uint32_t b = 0; b <= nb2; b++) {
        s.start[b] = s.cursor[b] = pos;
        pos += s.cnt[b];
    }
    s.work.resize(pos);
    for (uint32_t b = 1; b <= nb; b++) {
        if (acc[b].is_inf()) continue;
        if (b & (m - 1)) s.work[s.cursor[b & (m - 1)]++] = acc[b];
        if (b >> k) s.work[s.cursor[m - 1 + (b >> k)]++] = acc[b];
    }
    reduce_buckets(s, nb2);
    // the sums, 1-based, into s.acc (its buckets are all in s.work now): S_1..S_(m-1), then
    // T_1..T_qn
    Affine<F>* sums = s.acc.data();
    for (uint32_t b = 1; b <= nb2; b++) sums[b] = s.cnt[b] ? s.work[s.start[b]] : Affine<F>::infinity();
    Jacobian<F> total_r = running_sum(sums, m - 1);
    Jacobian<F> total_q = running_sum(sums + (m - 1), qn);
    for (int i = 0; i < k; i++) total_q = jac_dbl(total_q);
    return jac_add(total_r, total_q);
}

// sum over u in [lo, hi) of dig[u] * (point u of src), with 2^(c-1) buckets: one sub-window, or a
// slice of one when a sub-window is split between threads.
template <class F, class Src>
Jacobian<F> window_sum(const Src& src, const int16_t* dig, size_t lo, size_t hi, int c, Scratch<F>& s) {
    const uint32_t nb = 1u << (c - 1);
    s.acc.assign(nb + 1, Affine<F>::infinity());
    s.cnt.resize(nb + 1);
    s.start.resize(nb + 1);
    s.cursor.resize(nb + 1);
    for (size_t c0 = lo; c0 < hi; c0 += chunk_points<F>()) {
        const size_t c1 = std::min(hi, c0 + chunk_points<F>());
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
        auto cur = src.at(c0);
        for (size_t i = c0; i < c1; i++, cur.next()) {
            int d = dig[i];
            if (!d) continue;
            // negate before the store: patching y after a 64-byte vector store stalls on
            // store-to-load forwarding (measured ~8% of the whole MSM)
            s.work[s.cursor[d < 0 ? -d : d]++] = cur.get(d < 0);
        }
        reduce_buckets(s, nb);
        for (uint32_t b = 1; b <= nb; b++)
            s.acc[b] = s.cnt[b] ? s.work[s.start[b]] : Affine<F>::infinity();
    }
    return weighted_sum(s, nb);
}

// ---- planning ---------------------------------------------------------------------------
//
// An MSM over n points runs on 2n GLV points with 128-bit scalars: `windows` signed digits
// of c bits each (+1 bit for the recoding's last carry). Digit window w = j*stride + t is
// summed in sub-window t together with the other windows of the same t, using the table
// level j (2^(j*stride*c) P): sub-window t covers levels*2n points, and the sub-window sums
// are combined with c doublings between them (Horner). Without a table levels = 1 and
// stride = windows (plain Pippenger); a full table has stride = 1 (one bucket set, no
// doublings); anything between trades table memory for bucket sets.
struct MsmPlan {
    int c = 1, windows = 1, stride = 1, levels = 1;
};

// Cost model, in field multiplications of the thread that finishes last:
//  * COST_POINT per point put into a bucket (the batch-affine addition: ~6 products with
//    its share of the batch inversion, plus the sort and the memory traffic),
//  * COST_BUCKET per bucket of a bucket set (weighted_sum: the bucket's sum goes into two
//    more batch-affine sums, plus its copies; measured against c's neighbours with
//    bench/kernels.py --sweep, 1 and 2 threads, 2^12 and 2^14 points).
// Sub-windows are tasks; when they do not divide evenly among the threads, each of the
// leftover ones is split into `threads` slices (each slice its own bucket set), so every
// thread stays busy to the end. bench/kernels.py --sweep measures the chosen c against
// its neighbours.
constexpr double COST_POINT = 8.0, COST_BUCKET = 12.0;

inline double plan_cost(size_t n, const MsmPlan& p, int threads) {
    const double pts = 2.0 * (double)n * p.levels;  // points per sub-window
    const double buckets = (double)(1u << (p.c - 1));
    const int whole = p.stride / threads, left = p.stride % threads;
    double cost = whole * (COST_POINT * pts + COST_BUCKET * buckets);
    if (left) cost += left * (COST_POINT * pts / threads + COST_BUCKET * buckets);
    return cost;
}

inline int glv_windows(int c) { return (GLV_HALF_BITS + 1 + c - 1) / c; }

constexpr int MAX_C = 15;  // digits are int16_t: |digit| <= 2^(MAX_C - 1)

// The best plan without a table.
inline MsmPlan plain_plan(size_t n, int threads) {
    MsmPlan best;
    double best_cost = 1e300;
    for (int c = 1; c <= MAX_C; c++) {
        MsmPlan p;
        p.c = c;
        p.windows = p.stride = glv_windows(c);
        p.levels = 1;
        double cost = plan_cost(n, p, threads);
        if (cost < best_cost) { best_cost = cost; best = p; }
    }
    return best;
}

// Bytes of a table for `plan` (levels 1.. of n points; level 0 is the caller's points).
template <class F>
size_t table_bytes(size_t n, const MsmPlan& plan);

// The best plan whose table fits `budget` bytes; the plain plan when no table that fits
// is modelled to save at least TABLE_MIN_SAVING. The model counts a table's points like
// the caller's, but they are read once each from memory (a full table at 2^14 bn128
// points is 9-18 MB) and the endomorphism's x of each is made on the fly; measured
// (bench/kernels.py --baseline, 2 threads), tables modelled to save 10-13% (2^14, 2^16)
// gave 0.87-1.05x, those modelled at 19% (2^12) 1.15x. Below that line a table does
// not earn back its build.
constexpr double TABLE_MIN_SAVING = 0.15;
template <class F>
MsmPlan table_plan(size_t n, int threads, size_t budget) {
    const MsmPlan plain = plain_plan(n, threads);
    MsmPlan best = plain;
    double best_cost = (1.0 - TABLE_MIN_SAVING) * plan_cost(n, plain, threads);
    for (int c = 4; c <= MAX_C; c++) {
        const int w = glv_windows(c);
        for (int stride = 1; stride < w; stride++) {
            MsmPlan p;
            p.c = c;
            p.stride = stride;
            p.levels = (w + stride - 1) / stride;
            p.windows = p.levels * stride;
            if (p.levels < 2 || table_bytes<F>(n, p) > budget) continue;
            double cost = plan_cost(n, p, threads);
            if (cost < best_cost) { best_cost = cost; best = p; }
        }
    }
    return best;
}

// ---- precomputed tables -------------------------------------------------------------------
//
// A table is one caller-owned buffer of 64-bit words: TABLE_HEADER words (below), then levels
// 1 .. levels-1 of n affine points each, level j holding 2^(j*stride*c) P_i. The header
// records what the table was built for, so an MSM given a table of other points (or another
// curve/group/length) fails with ZKQ_ERR_ARG instead of summing the wrong points.
enum : size_t { TH_MAGIC, TH_CURVE, TH_GROUP, TH_N, TH_C, TH_STRIDE, TH_LEVELS, TH_FINGERPRINT, TABLE_HEADER };
constexpr uint64_t TABLE_MAGIC = 0x31544d534d514b5aull;  // "ZKQMSMT1"

template <class F>
size_t table_bytes(size_t n, const MsmPlan& plan) {
    if (plan.levels < 2) return 0;
    return TABLE_HEADER * 8 + (size_t)(plan.levels - 1) * n * sizeof(Affine<F>);
}

// A cheap fingerprint of a point array (a few points' words, the length): catches a table
// used with other bases; it is no proof that the two match.
template <class F>
uint64_t points_fingerprint(const Affine<F>* pts, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull ^ n;
    const size_t pick[3] = {0, n / 2, n - 1};
    for (size_t i : pick) {
        const uint64_t* w = reinterpret_cast<const uint64_t*>(&pts[i]);
        for (size_t k = 0; k < sizeof(Affine<F>) / 8; k++) h = (h ^ w[k]) * 0x100000001b3ull;
    }
    return h;
}

// pts[i] = 2^times * pts[i] for i in [0, m), in affine coordinates: every doubling round
// shares one field inversion among the m points (Montgomery's trick).
template <class F>
void batch_double(Affine<F>* pts, size_t m, int times, Scratch<F>& s) {
    using BI = BatchInv<F>;
    using C = typename BI::Chain;
    s.den.resize(m);
    s.pre.resize(m);
    if (!BI::SAME) s.chn.resize(m);
    F* den = s.den.data();
    C* chn = BI::SAME ? reinterpret_cast<C*>(den) : s.chn.data();
    C* pre = s.pre.data();
    for (int round = 0; round < times; round++) {
        C prod = C::one();
        for (size_t i = 0; i < m; i++) {
            // lambda = 3x^2 / 2y; infinity and points of order 2 (y = 0) double to infinity
            const bool skip = pts[i].y.is_zero();
            den[i] = skip ? F::one() : pts[i].y.dbl();
            if constexpr (!BI::SAME) chn[i] = BI::chain(den[i]);
            pre[i] = prod;
            prod = prod * chn[i];
        }
        C inv = field_inv(prod);
        for (size_t i = m; i-- > 0;) {
            F di = BI::inverse(den[i], inv * pre[i]);
            inv = inv * chn[i];
            Affine<F>& p = pts[i];
            if (p.y.is_zero()) { p = Affine<F>::infinity(); continue; }
            F xx = p.x.sqr();
            F lam = (xx.dbl() + xx) * di;
            F x3 = lam.sqr() - p.x.dbl();
            p = Affine<F>{x3, lam * (p.x - x3) - p.y};
        }
    }
}

// Builds the table of `plan` for n points into buf (buf_words long). Returns ZKQ_ERR_ARG
// when buf is too small or there is nothing to tabulate.
template <class F, class Fr>
int msm_table_build(const uint64_t* point_words, size_t n, const MsmPlan& plan, uint64_t* buf,
                    size_t buf_words, int threads) {
    if (!point_words || !buf || n == 0 || plan.levels < 2) return ZKQ_ERR_ARG;
    if (buf_words * 8 < table_bytes<F>(n, plan)) return ZKQ_ERR_ARG;
    const Affine<F>* pts = reinterpret_cast<const Affine<F>*>(point_words);
    Affine<F>* levels = reinterpret_cast<Affine<F>*>(buf + TABLE_HEADER);
    const int shift = plan.stride * plan.c;  // bits between two levels
    parallel_for(threads, n, [&](size_t b, size_t e, int) {
        Scratch<F> s;
        for (int j = 1; j < plan.levels; j++) {
            Affine<F>* dst = levels + (size_t)(j - 1) * n;
            const Affine<F>* src = j == 1 ? pts : dst - n;
            std::copy(src + b, src + e, dst + b);
            batch_double(dst + b, e - b, shift, s);
        }
    });
    buf[TH_MAGIC] = TABLE_MAGIC;
    buf[TH_CURVE] = (uint64_t)curve_of<Fr>();
    buf[TH_GROUP] = std::is_same<F, typename BaseOf<F>::type>::value ? 1 : 2;
    buf[TH_N] = n;
    buf[TH_C] = (uint64_t)plan.c;
    buf[TH_STRIDE] = (uint64_t)plan.stride;
    buf[TH_LEVELS] = (uint64_t)plan.levels;
    buf[TH_FINGERPRINT] = points_fingerprint(pts, n);
    return ZKQ_OK;
}

// The plan recorded in a table's header, after checking that the table belongs to these
// points; false when it does not.
template <class F, class Fr>
bool table_header_plan(const uint64_t* table, const Affine<F>* pts, size_t n, MsmPlan& plan) {
    const uint64_t group = std::is_same<F, typename BaseOf<F>::type>::value ? 1 : 2;
    if (table[TH_MAGIC] != TABLE_MAGIC || table[TH_CURVE] != (uint64_t)curve_of<Fr>() ||
        table[TH_GROUP] != group || table[TH_N] != n || table[TH_FINGERPRINT] != points_fingerprint(pts, n))
        return false;
    plan.c = (int)table[TH_C];
    plan.stride = (int)table[TH_STRIDE];
    plan.levels = (int)table[TH_LEVELS];
    plan.windows = plan.stride * plan.levels;
    return plan.c >= 1 && plan.c <= MAX_C && plan.levels >= 2 && plan.stride >= 1 &&
           plan.windows >= glv_windows(plan.c);
}

// Bits [pos, pos + c) of a 2-word magnitude (zero beyond it).
inline uint32_t half_bits_at(const uint64_t* k, int pos, int c) {
    int w = pos / 64, sh = pos % 64;
    if (w >= 2) return 0;
    uint64_t v = k[w] >> sh;
    if (sh + c > 64 && w + 1 < 2) v |= k[w + 1] << (64 - sh);
    return (uint32_t)(v & ((1ull << c) - 1));
}

// The signed c-bit digits of one GLV half (magnitude m0 + m1 2^64, negated when `neg`),
// window w's digit stored at dig[at[w]] (see MsmRun::prepare). Everything it reads is an
// argument: with -fno-strict-aliasing, a digit store could alias anything reached through
// a pointer (a lambda's captures, the run's members), which the compiler would then
// reload after every digit.
inline void recode_half(uint64_t m0, uint64_t m1, bool neg, int c, int windows, int16_t* dig,
                        const size_t* at) {
    const int32_t half = 1 << (c - 1);
    const uint64_t mag[2] = {m0, m1};
    int32_t carry = 0;
    for (int w = 0; w < windows; w++) {
        int32_t d = (int32_t)half_bits_at(mag, w * c, c) + carry;
        carry = 0;
        if (d > half) { d -= 2 * half; carry = 1; }
        dig[at[w]] = (int16_t)(neg ? -d : d);
    }
}

// One MSM cut into tasks: plan() checks the arguments and fixes the plan and the tasks (no
// heavy work), prepare() recodes the scalars into the digits every task reads, run_task(k)
// sums task k's bucket set, finish() combines the tasks' sums into the result and frees the
// digits. msm() runs the four in a row; prove.cpp puts the tasks of its five MSMs in one
// pool, so that no thread idles while another finishes the last MSM of the prove.
//
// Tasks: whole sub-windows while every thread gets one; the leftover sub-windows are cut
// into one slice per thread (see plan_cost).
template <class F, class Fr>
class MsmRun {
  public:
    // point_words: n affine points (Montgomery, zeros = infinity); scalars: n standard-form
    // 4-word values, each < r (prepare() returns ZKQ_ERR_SCALAR_RANGE otherwise). table:
    // null, or a buffer from msm_table_build for exactly these points (ZKQ_ERR_ARG when its
    // header says otherwise). window_bits: 0 picks c by the cost model (plain_plan); a value
    // in 1..MAX_C forces it (measurements, tests); ignored with a table, whose c is fixed.
    // The arrays must outlive the run.
    int plan(const uint64_t* point_words, const uint64_t* scalars, size_t n, int threads,
             const uint64_t* table = nullptr, int window_bits = 0) {
        if (n && (!point_words || !scalars)) return ZKQ_ERR_ARG;
        if (window_bits < 0 || window_bits > MAX_C) return ZKQ_ERR_ARG;
        pts_ = reinterpret_cast<const Affine<F>*>(point_words);
        scalars_ = scalars;
        n_ = n;
        table_ = table;
        if (n == 0) return ZKQ_OK;
        if (table) {
            if (!table_header_plan<F, Fr>(table, pts_, n, plan_)) return ZKQ_ERR_ARG;
        } else if (window_bits) {
            plan_.c = window_bits;
            plan_.windows = plan_.stride = glv_windows(window_bits);
        } else {
            plan_ = plain_plan(n, threads);
        }
        const size_t sub = sub_points();
        const int nt = std::max(1, threads), S = plan_.stride;
        const int whole = S - S % nt;
        for (int t = 0; t < whole; t++) tasks_.push_back({t, 0, sub});
        for (int t = whole; t < S; t++)
            for (int k = 0; k < nt; k++) {
                size_t lo = sub * k / nt, hi = sub * (k + 1) / nt;
                if (lo < hi) tasks_.push_back({t, lo, hi});
            }
        partial_.assign(tasks_.size(), Jacobian<F>::infinity());
        return ZKQ_OK;
    }

    size_t task_count() const { return tasks_.size(); }
    // Bytes of the run's input points (a one-shot prove releases their pages after finish()).
    size_t points_bytes() const { return n_ * sizeof(Affine<F>); }

    // The signed digits of k1 (virtual point i) and k2 (virtual point n + i), the halves'
    // signs folded in; window w = j*S + t is stored at ((t*L + j) * 2n + v) so that a
    // sub-window's digits are contiguous. Also phi(P_i)'s x coordinates when there is no
    // table: every window reads them (half the memory of the input points; y is P_i's own),
    // so they are made once instead of one product per point per window. With a table each
    // point is read once per MSM anyway.
    int prepare(int threads) {
        if (n_ == 0) return ZKQ_OK;
        constexpr int CURVE = curve_of<Fr>();
        const int c = plan_.c, L = plan_.levels, S = plan_.stride, windows = plan_.windows;
        const size_t vn = 2 * n_;
        dig_.resize((size_t)windows * vn);
        // where window w = j*S + t starts: (t*L + j) * vn
        std::vector<size_t> start(windows);
        for (int w = 0; w < windows; w++) start[w] = ((size_t)(w % S) * L + w / S) * vn;
        std::atomic<size_t> bad{SIZE_MAX};
        std::atomic<bool> internal{false};
        parallel_for(threads, n_, [&](size_t b, size_t e, int) {
            for (size_t i = b; i < e; i++) {
                const uint64_t* k = scalars_ + 4 * i;
                Fr kr;
                std::memcpy(kr.v, k, 32);
                GlvHalf h[2] = {};
                bool skip = pts_[i].is_inf();
                if (kr.geq_modulus()) {
                    keep_lowest(bad, i);
                    skip = true;
                } else if (!skip && !glv_decompose<CURVE>(k, h[0], h[1])) {
                    internal = true;
                    skip = true;
                }
                if (skip) h[0] = h[1] = GlvHalf{};  // all digits zero
                for (int part = 0; part < 2; part++)
                    recode_half(h[part].mag[0], h[part].mag[1], h[part].neg, c, windows,
                                dig_.data() + i + part * n_, start.data());
            }
        });
        if (bad.load() != SIZE_MAX) return ZKQ_ERR_SCALAR_RANGE;
        if (internal) return ZKQ_ERR_INTERNAL;
        beta_ = glv_beta<CURVE, F>();
        if (!table_ && plan_.windows > 1) {
            endo_x_.resize(n_);
            parallel_for(threads, n_, [&](size_t b, size_t e, int) {
                for (size_t i = b; i < e; i++) endo_x_[i] = pts_[i].x * beta_;
            });
        }
        return ZKQ_OK;
    }

    // Task k's bucket set, summed with scratch s (after prepare()).
    void run_task(size_t k, Scratch<F>& s) {
        const GlvPoints<F> src{pts_, endo_x_.empty() ? nullptr : endo_x_.data(),
                               table_ ? reinterpret_cast<const Affine<F>*>(table_ + TABLE_HEADER) : nullptr, n_,
                               beta_};
        const Task& tk = tasks_[k];
        partial_[k] = window_sum(src, dig_.data() + (size_t)tk.t * sub_points(), tk.lo, tk.hi, plan_.c, s);
    }

    // The result (affine words) from the sums of all tasks; frees the run's memory.
    void finish(uint64_t* out) {
        std::vector<Jacobian<F>> sums(plan_.stride, Jacobian<F>::infinity());
        for (size_t k = 0; k < tasks_.size(); k++) sums[tasks_[k].t] = jac_add(sums[tasks_[k].t], partial_[k]);
        Jacobian<F> acc = Jacobian<F>::infinity();
        for (int t = plan_.stride - 1; t >= 0; t--) {
            for (int j = 0; j < plan_.c; j++) acc = jac_dbl(acc);
            acc = jac_add(acc, sums[t]);
        }
        Affine<F> r = jac_to_affine(acc);
        std::memcpy(out, &r, sizeof(r));
        std::vector<int16_t>().swap(dig_);
        std::vector<F>().swap(endo_x_);
    }

  private:
    struct Task { int t; size_t lo, hi; };
    // Points of one sub-window: its table levels' 2n GLV points each.
    size_t sub_points() const { return (size_t)plan_.levels * 2 * n_; }

    const Affine<F>* pts_ = nullptr;
    const uint64_t* scalars_ = nullptr;
    size_t n_ = 0;
    const uint64_t* table_ = nullptr;
    MsmPlan plan_;
    std::vector<Task> tasks_;
    std::vector<int16_t> dig_;
    std::vector<F> endo_x_;
    std::vector<Jacobian<F>> partial_;
    typename BaseOf<F>::type beta_{};
};

// sum scalars[i] * P_i on `threads` threads (arguments as MsmRun::plan); out: the affine
// result (zeros for infinity).
template <class F, class Fr>
int msm(const uint64_t* point_words, const uint64_t* scalars, size_t n, uint64_t* out, int threads,
        const uint64_t* table = nullptr, int window_bits = 0) {
    if (!out) return ZKQ_ERR_ARG;
    MsmRun<F, Fr> run;
    int rc = run.plan(point_words, scalars, n, threads, table, window_bits);
    if (rc == ZKQ_OK) rc = run.prepare(threads);
    if (rc != ZKQ_OK) return rc;
    std::atomic<size_t> next{0};
    auto worker = [&]() {
        Scratch<F> s;
        for (size_t k; (k = next.fetch_add(1)) < run.task_count();) run.run_task(k, s);
    };
    const int nt = clamp_threads(threads, run.task_count());
    std::vector<std::thread> pool;
    std::vector<std::exception_ptr> errs(nt);
    for (int t = 1; t < nt; t++)
        pool.emplace_back([&, t] { try { worker(); } catch (...) { errs[t] = std::current_exception(); } });
    try { worker(); } catch (...) { errs[0] = std::current_exception(); }
    for (auto& th : pool) th.join();
    for (auto& e : errs) if (e) std::rethrow_exception(e);
    run.finish(out);
    return ZKQ_OK;
}

// ---- what the C ABI of msm_g1.cpp / msm_g2.cpp calls ----------------------------------------

// out[0..4] = c, windows, stride, levels, table bytes of the plan for n points and `threads`
// with a table of at most budget_bytes (0: the plain plan, table bytes 0).
template <class F>
int msm_plan_abi(size_t n, int threads, uint64_t budget_bytes, int64_t* out) {
    if (!out) return ZKQ_ERR_ARG;
    MsmPlan p = n && budget_bytes ? table_plan<F>(n, threads, budget_bytes) : plain_plan(n, threads);
    const int64_t v[5] = {p.c, p.windows, p.stride, p.levels, (int64_t)table_bytes<F>(n, p)};
    std::memcpy(out, v, sizeof(v));
    return ZKQ_OK;
}

// Builds the table of plan (c, stride, levels), as msm_plan_abi returned it, into buf.
template <class F, class Fr>
int msm_table_build_abi(const uint64_t* points, size_t n, int c, int stride, int levels, uint64_t* buf,
                        size_t buf_bytes, int threads) {
    MsmPlan p;
    p.c = c;
    p.stride = stride;
    p.levels = levels;
    p.windows = stride * levels;
    if (c < 1 || c > MAX_C || stride < 1 || levels < 2 || p.windows < glv_windows(c)) return ZKQ_ERR_ARG;
    return msm_table_build<F, Fr>(points, n, p, buf, buf_bytes / 8, threads);
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
                keep_lowest(bad, i);
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

