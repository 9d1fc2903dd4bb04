// prove.cpp - the whole Groth16 prove on the CPU in one call (zkq_prove), following
// snarkjs's groth16_prove.js as groth16/prover.py does step for step:
//
//   A, B  = <A_k, w>, <B_k, w> on the domain;  C = A * B pointwise
//   A, B, C -> values on the odd coset (ntt.hpp, to_coset);  h = from_mont(A*B - C)
//   five MSMs: A, B1 (G1, all wires), B2 (G2, all wires), L (G1, private wires), H (G1, h)
//   blinding with r and s (drawn by the caller).
//
// Scheduling: after the cheap evaluation of A, B, C (all threads), the coset transforms and
// the MSMs run as steps on one lane per thread. An MSM is several steps: recoding its
// scalars, its tasks (bucket sets, msm.hpp's MsmRun) and combining their sums. A lane takes
// the first step in list order whose inputs are ready: the three transforms, h (which frees
// their buffers), then the MSMs' steps, H's first (it waits for h: until then the lanes take
// the G2 MSM's, then A's, B1's, L's). As the tasks of all five MSMs are one pool, a lane
// that runs out of work waits for one task at most (whole MSMs per lane left one thread
// idle for up to a G1 MSM: 10-20% of the prove when B's queries hold many points at
// infinity, as Poseidon circuits' do). Every step computes exact field or group elements,
// so the result does not depend on which lane ran what: the proof is deterministic for
// given inputs, r and s.
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>

#include "fr_ops.hpp"
#include "msm.hpp"
#include "ntt.hpp"

namespace zkq {
namespace {

// One step of the prove, on one thread: run(lane) returns an error code; deps must finish
// first.
struct Step {
    std::vector<int> deps;
    std::function<int(int)> run;
};

// True once the caller has set *cancel (from another thread; null: never).
inline bool cancelled(const int* cancel) { return cancel && __atomic_load_n(cancel, __ATOMIC_RELAXED); }

// Runs `steps` on `lanes` threads (the caller's thread is lane 0), each taking the first
// not-started step whose dependencies are done. Returns the first nonzero code (later steps
// are then skipped), ZKQ_ERR_CANCELLED when *cancel was set before a step started;
// exceptions are rethrown after the join.
int run_steps(std::vector<Step>& steps, int lanes, const int* cancel) {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<uint8_t> state(steps.size(), 0);  // 0 waiting, 1 running, 2 done
    int code = ZKQ_OK;
    size_t finished = 0;
    auto ready = [&](size_t i) {
        for (int d : steps[i].deps)
            if (state[d] != 2) return false;
        return true;
    };
    std::exception_ptr err;
    auto lane = [&](int index) {
        std::unique_lock<std::mutex> lock(mu);
        for (;;) {
            if (finished == steps.size() || code != ZKQ_OK) return;
            if (cancelled(cancel)) {
                code = ZKQ_ERR_CANCELLED;
                return;
            }
            size_t pick = steps.size();
            for (size_t i = 0; i < steps.size() && pick == steps.size(); i++)
                if (state[i] == 0 && ready(i)) pick = i;
            if (pick == steps.size()) { cv.wait(lock); continue; }
            state[pick] = 1;
            lock.unlock();
            int rc;
            try {
                rc = steps[pick].run(index);
            } catch (...) {
                rc = ZKQ_ERR_INTERNAL;
                lock.lock();
                if (!err) err = std::current_exception();
                lock.unlock();
            }
            lock.lock();
            state[pick] = 2;
            finished++;
            if (rc != ZKQ_OK && code == ZKQ_OK) code = rc;
            cv.notify_all();
        }
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < lanes; t++) pool.emplace_back(lane, t);
    lane(0);
    for (auto& th : pool) th.join();
    if (err) std::rethrow_exception(err);  // e.g. bad_alloc: guarded() maps it to a code
    return code;
}

template <class F>
std::vector<uint64_t> words_of(const uint64_t* const* points, int count) {
    constexpr size_t W = 2 * sizeof(F) / 8;  // words per affine point
    std::vector<uint64_t> out(count * W);
    for (int i = 0; i < count; i++) std::memcpy(out.data() + i * W, points[i], W * 8);
    return out;
}

// sum k_i P_i over a few affine points (the blinding terms): a tiny MSM.
template <class F, class Fr>
int combine(std::initializer_list<const uint64_t*> points, std::initializer_list<const uint64_t*> scalars,
            uint64_t* out) {
    std::vector<const uint64_t*> p(points), k(scalars);
    std::vector<uint64_t> pw = words_of<F>(p.data(), (int)p.size()), kw(4 * k.size());
    for (size_t i = 0; i < k.size(); i++) std::memcpy(kw.data() + 4 * i, k[i], 32);
    return msm<F, Fr>(pw.data(), kw.data(), p.size(), out, 1);
}

template <int CURVE> using Fr_of = typename CurveT<CURVE>::Fr;

// The coset shift g (Montgomery form, 4 words), checked to be a nonzero element of Fr.
template <class Fr>
bool load_shift(const uint64_t* words, Fr& g) {
    std::memcpy(g.v, words, 32);
    return !g.geq_modulus() && !g.is_zero();
}

struct KeyView {
    const uint8_t* coefs;
    size_t ncoefs, nvars, npublic, domain;
    const uint64_t *a, *b1, *b2, *l, *h;                     // query sections
    const uint64_t *alpha1, *beta1, *delta1, *beta2, *delta2;  // header points
    const uint64_t* tables[5];  // fixed-base tables of a, b1, b2, l, h (msm_table_build), or null
    const int* cancel;          // the caller sets *cancel to stop at the next step; or null
    bool release;  // one-shot process: inputs are private file mappings, drop their pages once used
};

// Drops the whole pages of [p, p + bytes) from the resident set, when `release`. Only for
// private file mappings that were never written: a page touched again is read back from
// the page cache. Peak RSS is one of the bench's measures, and a section's pages are not
// needed once its MSM is done.
inline void release_pages(bool release, const void* p, size_t bytes) {
    if (!release || !bytes) return;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t b = ((uintptr_t)p + page - 1) & ~(page - 1), e = ((uintptr_t)p + bytes) & ~(page - 1);
    if (e > b) madvise((void*)b, e - b, MADV_DONTNEED);
}

// h = from_mont(A*B - C) on the odd coset from A, B on the domain (Montgomery form, n each):
// the transform half of the prove in one call, for tests (prove() runs the same steps on
// its two lanes). a is overwritten with h; b is clobbered.
template <class Fr, int S>
int h_from_ab(Fr* a, Fr* b, size_t n, const Fr& g, int threads) {
    const int k = log2_exact(n);
    if (k < 0 || k > S) return ZKQ_ERR_SIZE;
    std::vector<Fr> c(n);
    uint64_t *aw = reinterpret_cast<uint64_t*>(a), *bw = reinterpret_cast<uint64_t*>(b);
    uint64_t* cw = reinterpret_cast<uint64_t*>(c.data());
    fr_mul<Fr>(aw, bw, cw, n, threads);
    Twiddles<Fr> tw(root_of_unity<Fr, S>(k), n, threads);
    std::vector<Fr> scale = coset_scale(g, n, k, threads);
    for (Fr* v : {a, b, c.data()}) to_coset(v, n, tw, scale.data(), threads);
    return h_scalars<Fr>(aw, bw, cw, aw, n, threads);
}

template <int CURVE>
int prove(const KeyView& key, const uint64_t* witness_words, const Fr_of<CURVE>& g, const uint64_t* rs, uint64_t* pi_a,
          uint64_t* pi_b, uint64_t* pi_c, int64_t* bad_index, double* timings, int threads) {
    using Fq = typename CurveT<CURVE>::Fq;
    using Fq2 = typename CurveT<CURVE>::Fq2;
    using Fr = typename CurveT<CURVE>::Fr;
    constexpr int S = CurveT<CURVE>::TWO_ADICITY;
    constexpr size_t G1W = 2 * sizeof(Fq) / 8, G2W = 2 * sizeof(Fq2) / 8;
    const size_t n = key.domain;
    const int k = log2_exact(n);
    if (k < 0 || k > S) return ZKQ_ERR_SIZE;
    if (key.npublic >= key.nvars) return ZKQ_ERR_ARG;
    if (threads < 1) threads = 1;
    if (cancelled(key.cancel)) return ZKQ_ERR_CANCELLED;
    auto clock = std::chrono::steady_clock::now;
    auto t0 = clock();
    // One-shot process (release): keep every large buffer in its own mapping, returned to
    // the system when freed. glibc otherwise raises its mmap threshold to the size of the
    // largest freed block, after which the transform buffers and the MSMs' scratch come
    // from heaps that are not handed back while the next MSM runs.
    if (key.release) mallopt(M_MMAP_THRESHOLD, 64 << 10);

    // The witness, 8-byte aligned (a .wtns section starts at an odd offset).
    std::vector<Fr> w(key.nvars);
    std::memcpy(w.data(), witness_words, key.nvars * 32);
    release_pages(key.release, witness_words, key.nvars * 32);
    const uint64_t* ws = reinterpret_cast<const uint64_t*>(w.data());

    std::vector<Fr> a(n), b(n), c(n);
    uint64_t* aw = reinterpret_cast<uint64_t*>(a.data());
    uint64_t* bw = reinterpret_cast<uint64_t*>(b.data());
    uint64_t* cw = reinterpret_cast<uint64_t*>(c.data());
    int rc = evaluate_ab<Fr>(key.coefs, key.ncoefs, ws, key.nvars, n, aw, bw, bad_index, threads);
    if (rc != ZKQ_OK) return rc;
    release_pages(key.release, key.coefs, key.ncoefs * COEF_BYTES);
    fr_mul<Fr>(aw, bw, cw, n, threads);
    Twiddles<Fr> tw(root_of_unity<Fr, S>(k), n, threads);
    std::vector<Fr> scale = coset_scale(g, n, k, threads);
    auto t1 = clock();

    uint64_t raw_a[G1W], raw_b1[G1W], raw_l[G1W], raw_h[G1W], raw_b2[G2W];
    const size_t npriv = key.nvars - key.npublic - 1;
    const int lanes = threads;
    std::vector<Step> steps;
    auto coset = [&](std::vector<Fr>& v) {
        Fr* p = v.data();
        return [&, p](int) { to_coset(p, n, tw, scale.data(), 1); return ZKQ_OK; };
    };
    steps.push_back({{}, coset(a)});  // 0
    steps.push_back({{}, coset(b)});  // 1
    steps.push_back({{}, coset(c)});  // 2
    const int h_step = (int)steps.size();
    steps.push_back({{0, 1, 2}, [&](int) {  // h, into a
        int e = h_scalars<Fr>(aw, bw, cw, aw, n, 1);
        for (auto* v : {&b, &c, &scale, &tw.t}) std::vector<Fr>().swap(*v);  // for the MSMs' scratch
        return e;
    }});
    // An MSM over a section (with its table, if any) as steps: recoding (after `deps`), its
    // tasks, then the result. In a one-shot process, the section's pages are released
    // afterwards and freed memory goes back to the system (peak RSS is one of the bench's
    // measures); a resident key's worker keeps its sections for the next proof.
    std::vector<Scratch<Fq>> scratch_g1(lanes);
    std::vector<Scratch<Fq2>> scratch_g2(lanes);
    auto add_msm = [&](auto& run, auto& scratch, int query, const uint64_t* pts, const uint64_t* scalars,
                       size_t count, uint64_t* out, std::vector<int> deps) {
        int e = run.plan(pts, scalars, count, threads, key.tables[query]);
        if (e != ZKQ_OK) return e;
        const int prep = (int)steps.size();
        steps.push_back({std::move(deps), [&run](int) { return run.prepare(1); }});
        std::vector<int> done{prep};
        for (size_t k = 0; k < run.task_count(); k++) {
            done.push_back((int)steps.size());
            steps.push_back({{prep}, [&run, &scratch, k](int lane) {
                run.run_task(k, scratch[lane]);
                return ZKQ_OK;
            }});
        }
        steps.push_back({std::move(done), [&, pts, out](int) {
            run.finish(out);
            if (key.release) {
                release_pages(true, pts, run.points_bytes());
                malloc_trim(0);
            }
            return ZKQ_OK;
        }});
        return ZKQ_OK;
    };
    MsmRun<Fq2, Fr> run_b2;
    MsmRun<Fq, Fr> run_h, run_a, run_b1, run_l;
    if ((rc = add_msm(run_h, scratch_g1, 4, key.h, aw, n, raw_h, {h_step})) ||
        (rc = add_msm(run_b2, scratch_g2, 2, key.b2, ws, key.nvars, raw_b2, {})) ||
        (rc = add_msm(run_a, scratch_g1, 0, key.a, ws, key.nvars, raw_a, {})) ||
        (rc = add_msm(run_b1, scratch_g1, 1, key.b1, ws, key.nvars, raw_b1, {})) ||
        (rc = add_msm(run_l, scratch_g1, 3, key.l, ws + 4 * (key.npublic + 1), npriv, raw_l, {})))
        return rc;
    rc = run_steps(steps, lanes, key.cancel);
    if (rc != ZKQ_OK) return rc;
    auto t2 = clock();

    // pi_a = A + alpha1 + r delta1; pi_b = B2 + beta2 + s delta2; b1 = B1 + beta1 + s delta1;
    // pi_c = L + H + s pi_a + r b1 - r s delta1. rs = (r, s, -r*s mod r), standard form.
    static const uint64_t one[4] = {1, 0, 0, 0};
    const uint64_t *r = rs, *s = rs + 4, *mrs = rs + 8;
    uint64_t b1[G1W];
    if ((rc = combine<Fq, Fr>({raw_a, key.alpha1, key.delta1}, {one, one, r}, pi_a)) ||
        (rc = combine<Fq2, Fr>({raw_b2, key.beta2, key.delta2}, {one, one, s}, pi_b)) ||
        (rc = combine<Fq, Fr>({raw_b1, key.beta1, key.delta1}, {one, one, s}, b1)) ||
        (rc = combine<Fq, Fr>({raw_l, raw_h, pi_a, b1, key.delta1}, {one, one, s, r, mrs}, pi_c)))
        return rc;
    auto t3 = clock();
    if (timings) {
        timings[0] = std::chrono::duration<double>(t1 - t0).count();
        timings[1] = std::chrono::duration<double>(t2 - t1).count();
        timings[2] = std::chrono::duration<double>(t3 - t2).count();
    }
    return ZKQ_OK;
}

template <int CURVE>
int prove_with_shift(const KeyView& key, const uint64_t* witness, const uint64_t* shift_words, const uint64_t* rs,
                     uint64_t* pi_a, uint64_t* pi_b, uint64_t* pi_c, int64_t* bad_index, double* timings,
                     int threads) {
    Fr_of<CURVE> g;
    if (!load_shift(shift_words, g)) return ZKQ_ERR_ARG;
    return prove<CURVE>(key, witness, g, rs, pi_a, pi_b, pi_c, bad_index, timings, threads);
}

template <int CURVE>
int h_from_ab_with_shift(uint64_t* a, uint64_t* b, size_t n, const uint64_t* shift_words, int threads) {
    using Fr = Fr_of<CURVE>;
    Fr g;
    if (!load_shift(shift_words, g)) return ZKQ_ERR_ARG;
    return h_from_ab<Fr, CurveT<CURVE>::TWO_ADICITY>(reinterpret_cast<Fr*>(a), reinterpret_cast<Fr*>(b), n, g,
                                                   threads);
}

}  // namespace
}  // namespace zkq

using namespace zkq;

extern "C" {

// The whole Groth16 prove: proof points pi_a (G1), pi_b (G2), pi_c (G1), affine LEM words.
//   coefs: .zkey section 4 after its u32 count (ncoefs entries of 44 bytes);
//   witness_std: nvars x 4 words, standard form, each < r (the caller checks: an MSM
//     returns ZKQ_ERR_SCALAR_RANGE otherwise);
//   a, b1, b2, l, h: .zkey sections 5-9 (nvars, nvars, nvars, nvars - npublic - 1 and
//     domain points); alpha1, beta1, delta1, beta2, delta2: the header's points;
//   coset_shift_mont: g of the odd coset g<omega> (groth16.curves.Curve.coset_shift),
//     Montgomery form, 4 words;
//   rs_std: r, s and -r*s mod r, 3 x 4 words, standard form;
//   timings (3 doubles, or NULL): seconds for A/B evaluation, transforms and MSMs, blinding;
//   tables: NULL, or 5 pointers (each NULL or a table from zkq_msm_g1/g2_table_build for
//     that very section) for A, B1, B2, L, H: a resident key's fixed-base tables;
//   cancel: NULL, or an int another thread sets to nonzero to stop the prove before its next
//     step (ZKQ_ERR_CANCELLED; a step under way runs to its end);
//   release_sections: a one-shot process: the witness and sections are private, never
//     written, file mappings (mmap MAP_PRIVATE): drop each one's pages from the resident set
//     once it is used, and return freed memory to the system between steps.
// Point sections are used in place and not validated here (zkq_check_g1/g2 do that).
// On a bad coefficient entry returns ZKQ_ERR_COEF_* with *bad_index its index.
int zkq_prove(int curve, const uint8_t* coefs, size_t ncoefs, const uint64_t* witness_std, size_t nvars,
              size_t npublic, size_t domain, const uint64_t* a, const uint64_t* b1, const uint64_t* b2,
              const uint64_t* l, const uint64_t* h, const uint64_t* alpha1, const uint64_t* beta1,
              const uint64_t* delta1, const uint64_t* beta2, const uint64_t* delta2,
              const uint64_t* coset_shift_mont, const uint64_t* rs_std,
              uint64_t* pi_a, uint64_t* pi_b, uint64_t* pi_c, int64_t* bad_index, double* timings,
              const uint64_t* const* tables, const int* cancel, int release_sections, int threads) {
    return guarded([&]() -> int {
        if (bad_index) *bad_index = -1;
        for (const void* p : {(const void*)witness_std, (const void*)a, (const void*)b1, (const void*)b2,
                              (const void*)h, (const void*)alpha1, (const void*)beta1, (const void*)delta1,
                              (const void*)beta2, (const void*)delta2, (const void*)coset_shift_mont,
                              (const void*)rs_std, (const void*)pi_a,
                              (const void*)pi_b, (const void*)pi_c})
            if (!p) return ZKQ_ERR_ARG;
        if ((ncoefs && !coefs) || (nvars > npublic + 1 && !l)) return ZKQ_ERR_ARG;
        KeyView key{coefs, ncoefs, nvars, npublic, domain, a, b1, b2, l, h,
                    alpha1, beta1, delta1, beta2, delta2, {}, cancel, release_sections != 0};
        for (int q = 0; q < 5 && tables; q++) key.tables[q] = tables[q];
        ZKQ_DISPATCH_CURVE(curve, (prove_with_shift<C>(key, witness_std, coset_shift_mont, rs_std, pi_a, pi_b,
                                                       pi_c, bad_index, timings, threads)))
    });
}

// h scalars (standard form) from the evaluations of A and B on the domain (Montgomery
// form, n x 4 words each) and the coset shift (as zkq_prove): a is overwritten with h, b
// is clobbered. See h_from_ab.
int zkq_h_from_ab(int curve, uint64_t* a_mont, uint64_t* b_mont, size_t n, const uint64_t* coset_shift_mont,
                  int threads) {
    return guarded([&]() -> int {
        if (!a_mont || !b_mont || !coset_shift_mont) return ZKQ_ERR_ARG;
        ZKQ_DISPATCH_CURVE(curve, (h_from_ab_with_shift<C>(a_mont, b_mont, n, coset_shift_mont, threads)))
    });
}

}  // extern "C"
