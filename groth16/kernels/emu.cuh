// emu.cuh - the host emulation of a CUDA launch: blocks of virtual threads, lockstep warp
// operations, barriers, and an ownership shadow that turns data races into errors.
//
// Only g++ includes this (device.cuh's host branch); nvcc and NVRTC never see it.
// groth16/backends/cuda_emu.py compiles the .cu files with it and calls each kernel's
// exported entry with a Launch (grid, block, seed, the argument arrays' address ranges).
//
// How a launch runs:
//  * Blocks run one after another in a random order (seeded); inside a block every thread
//    is a fiber (ucontext) with its own stack. The scheduler picks a random ready thread
//    and runs it until it finishes or reaches a warp operation or __syncthreads.
//  * Warp operations (match_any, shuffles, ballot, syncwarp) complete when all 32 lanes of
//    the warp have reached one, then every lane gets its result: the lanes are in lockstep
//    exactly where the hardware needs them to be. A lane that exits while its warp waits at
//    a full-mask operation is an error (on a GPU: undefined behaviour, usually a hang).
//  * __syncthreads completes when every thread of the block that has not exited is there.
//  * Every global load, store and atomic goes through ld/st/atomics (device.cuh; kernel
//    arguments are gptr<T>, which has no operator* on the host, so a kernel cannot bypass
//    it). Each 4-byte word of each argument array records the thread that wrote it and the
//    thread(s) that read it in this launch. A write to a word another thread wrote
//    (write-write), a read of a word another thread wrote (read-after-write), a write to a
//    word another thread read (write-after-read), a plain access to a word used atomically,
//    and any access outside every argument array abort the launch with a message naming
//    the kernel, the threads, the argument and the offset. Shared memory is checked the
//    same way, with its record cleared at each __syncthreads.
// What it does not model: memory ordering between blocks beyond the above (cross-thread
// communication through global memory inside one launch is reported, even when a GPU
// would order it with a fence), timing, and anything about performance.
#pragma once
#if defined(__CUDACC__)
#error "emu.cuh is the host emulation; the GPU build never includes it"
#endif

#include <sys/mman.h>
#include <ucontext.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace zkq {

// A pointer into global (or shared) memory. On the GPU it is T*; here it carries the
// address only, and loads and stores go through ld/st, which check the ownership shadow.
template <class T>
struct gptr {
    T* p = nullptr;
    gptr() = default;
    gptr(T* q) : p(q) {}  // NOLINT: implicit, as T* converts
    gptr(decltype(nullptr)) : p(nullptr) {}
    template <class U, class = std::enable_if_t<std::is_convertible<U*, T*>::value>>
    gptr(gptr<U> o) : p(o.p) {}  // NOLINT
    gptr operator+(int64_t i) const { return gptr(p + i); }
    gptr operator-(int64_t i) const { return gptr(p - i); }
    gptr& operator+=(int64_t i) { p += i; return *this; }
    int64_t operator-(gptr o) const { return p - o.p; }
    bool operator==(gptr o) const { return p == o.p; }
    bool operator!=(gptr o) const { return p != o.p; }
    explicit operator bool() const { return p != nullptr; }
};

namespace emu {

// The layout cuda_emu.py's ctypes structures mirror: all 64-bit fields, no padding.
struct Region {
    uint64_t base, bytes;  // one argument's array; bytes = 0 for a scalar argument
};
struct Launch {
    uint64_t grid, block, seed, dyn_shared_bytes, n_regions;
    const Region* regions;
    char* error;          // the message when the launch fails (NUL-terminated)
    uint64_t error_cap;
};

enum Op : int { OP_SYNC, OP_MATCH_ANY, OP_SHFL, OP_SHFL_UP, OP_SHFL_DOWN, OP_SHFL_XOR, OP_BALLOT };

constexpr int32_t NOBODY = -1, MANY = -2, ATOMIC = -3;
constexpr size_t STACK_BYTES = 512 << 10;  // per virtual thread; BLS12-381 G2 code at -O1 needs ~100 KB
constexpr size_t SHARED_BYTES = 228 << 10; // a Hopper block's most shared memory

struct Word {
    int32_t writer = NOBODY, reader = NOBODY;
};

struct Shadow {
    uint64_t base = 0, bytes = 0;
    int first_arg = -1;             // for messages; -2: shared memory
    std::vector<Word> words;        // allocated at the first access
};

struct Fiber {
    ucontext_t ctx;
    uint32_t tid = 0;
    enum State { READY, AT_WARP, AT_BARRIER, DONE } state = READY;
    int op = 0;
    int32_t arg = 0;
    uint64_t in = 0, out = 0;
    uint32_t shared_calls = 0;      // ZKQ_SHARED requests made, in order
    void* stack = nullptr;
};

struct Ctx {
    const Launch* L = nullptr;
    const char* kernel = "";
    void (*thunk)(void*) = nullptr;
    void* closure = nullptr;
    std::vector<Shadow> global;     // merged argument ranges, sorted by base
    Shadow shared;                  // this block's shared memory (dynamic first, then static)
    std::vector<uint8_t> shared_mem;     // SHARED_BYTES, never reallocated: threads hold pointers
    size_t shared_used = 0;
    std::vector<size_t> shared_offsets;  // offset of the k-th ZKQ_SHARED request
    uint32_t block_id = 0;
    std::vector<Fiber> fibers;
    Fiber* cur = nullptr;
    ucontext_t sched;
    bool failed = false;
    uint64_t rng = 0;
    char msg[768] = {0};
};

inline thread_local Ctx* g_ctx = nullptr;
inline thread_local std::vector<void*> g_stacks;  // reused across launches

inline uint64_t next_rand(Ctx& c) {  // xorshift64*
    c.rng ^= c.rng >> 12;
    c.rng ^= c.rng << 25;
    c.rng ^= c.rng >> 27;
    return c.rng * 0x2545F4914F6CDD1Dull;
}

inline void* stack_for(size_t i) {
    while (g_stacks.size() <= i) {
        void* m = mmap(nullptr, STACK_BYTES + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                       -1, 0);
        if (m == MAP_FAILED) return nullptr;
        mprotect(m, 4096, PROT_NONE);  // a guard page: a stack overflow faults instead of corrupting
        g_stacks.push_back(m);
    }
    return static_cast<char*>(g_stacks[i]) + 4096;
}

// Stops the current thread for good after an error (the launch is abandoned).
[[noreturn]] inline void abandon() {
    Ctx& c = *g_ctx;
    swapcontext(&c.cur->ctx, &c.sched);
    __builtin_unreachable();
}

template <class... A>
inline void fail(const char* fmt, A... a) {
    Ctx& c = *g_ctx;
    if (!c.failed) {
        c.failed = true;
        snprintf(c.msg, sizeof c.msg, fmt, a...);
    }
    if (c.cur) abandon();
}

inline uint32_t global_tid(const Ctx& c, uint32_t tid) { return c.block_id * (uint32_t)c.L->block + tid; }

inline void describe_thread(char* out, size_t cap, const Ctx& c, int32_t who) {
    if (who == MANY) snprintf(out, cap, "several threads");
    else if (who == ATOMIC) snprintf(out, cap, "atomic operations");
    else snprintf(out, cap, "thread %d (block %u, thread %u)", who, (uint32_t)(who / c.L->block),
                  (uint32_t)(who % c.L->block));
}

inline Shadow* find(Ctx& c, uint64_t addr, size_t n) {
    Shadow& s = c.shared;
    if (s.bytes && addr >= s.base && addr + n <= s.base + s.bytes) return &s;
    auto it = std::upper_bound(c.global.begin(), c.global.end(), addr,
                               [](uint64_t a, const Shadow& r) { return a < r.base; });
    if (it == c.global.begin()) return nullptr;
    --it;
    return addr + n <= it->base + it->bytes ? &*it : nullptr;
}

enum Access { READ, WRITE, ATOMIC_RMW };

inline void check(const void* p, size_t n, Access how) {
    Ctx& c = *g_ctx;
    const uint64_t addr = reinterpret_cast<uint64_t>(p);
    const char* verb = how == READ ? "reads" : how == WRITE ? "writes" : "atomically updates";
    const int32_t me = (int32_t)global_tid(c, c.cur->tid);
    Shadow* s = find(c, addr, n);
    if (!s)
        fail("kernel %s: thread %d (block %u, thread %u) %s %zu bytes at %#llx, outside every argument array "
             "and shared memory (out of bounds)", c.kernel, me, c.block_id, c.cur->tid, verb, n,
             (unsigned long long)addr);
    if (addr % 4 || n % 4)
        fail("kernel %s: thread %d %s %zu bytes at a misaligned address %#llx", c.kernel, me, verb, n,
             (unsigned long long)addr);
    if (s->words.empty()) s->words.resize(s->bytes / 4 + 1);
    const uint64_t first = (addr - s->base) / 4;
    for (uint64_t w = first; w < first + n / 4; w++) {
        Word& x = s->words[w];
        int32_t other = NOBODY;
        const char *what = nullptr, *did = "wrote";
        if (how == READ) {
            if (x.writer != NOBODY && x.writer != me) other = x.writer, what = "read-after-write";
            else if (x.reader == NOBODY) x.reader = me;
            else if (x.reader != me) x.reader = MANY;
        } else if (how == WRITE) {
            if (x.writer != NOBODY && x.writer != me) other = x.writer, what = "write-write";
            else if (x.reader != NOBODY && x.reader != me) other = x.reader, what = "write-after-read", did = "read";
            else x.writer = me;
        } else {
            if (x.writer != NOBODY && x.writer != ATOMIC) other = x.writer, what = "atomic-after-write";
            else if (x.reader != NOBODY) other = x.reader, what = "atomic-after-read", did = "read";
            else x.writer = ATOMIC;
        }
        if (what) {
            char who[96], where[96];
            describe_thread(who, sizeof who, c, other);
            if (s->first_arg == -2) snprintf(where, sizeof where, "shared memory offset %llu",
                                             (unsigned long long)(w * 4));
            else snprintf(where, sizeof where, "argument %d at byte offset %llu", s->first_arg,
                          (unsigned long long)(addr - s->base + (w - first) * 4));
            fail("kernel %s: data race (%s): thread %d (block %u, thread %u) %s %s, which %s %s earlier in this "
                 "launch", c.kernel, what, me, c.block_id, c.cur->tid, verb, where, who, did);
        }
    }
}

// ---- fibers and the block scheduler ------------------------------------------------------

inline void fiber_main() {
    Ctx& c = *g_ctx;
    c.thunk(c.closure);
    c.cur->state = Fiber::DONE;
    swapcontext(&c.cur->ctx, &c.sched);
}

// Suspends the current thread until the scheduler resumes it.
inline void yield_to_scheduler() {
    Ctx& c = *g_ctx;
    swapcontext(&c.cur->ctx, &c.sched);
}

inline uint64_t warp_op(int op, uint64_t value, int32_t arg) {
    Ctx& c = *g_ctx;
    Fiber& f = *c.cur;
    f.state = Fiber::AT_WARP;
    f.op = op;
    f.in = value;
    f.arg = arg;
    yield_to_scheduler();
    return f.out;
}

inline void barrier() {
    Ctx& c = *g_ctx;
    c.cur->state = Fiber::AT_BARRIER;
    yield_to_scheduler();
}

// Completes warp w's operation when all its lanes are there; errors if that cannot happen.
inline void try_warp(Ctx& c, uint32_t w) {
    const uint32_t lo = 32 * w, hi = std::min<uint32_t>(lo + 32, (uint32_t)c.L->block);
    bool any_waiting = false, all_waiting = true, any_done = false;
    for (uint32_t i = lo; i < hi; i++) {
        const auto st = c.fibers[i].state;
        any_waiting |= st == Fiber::AT_WARP;
        all_waiting &= st == Fiber::AT_WARP;
        any_done |= st == Fiber::DONE;
    }
    if (!any_waiting) return;
    if (hi - lo != 32) {
        c.failed = true;
        snprintf(c.msg, sizeof c.msg, "kernel %s: a warp operation in a partial warp (block size %llu is not a "
                 "multiple of 32)", c.kernel, (unsigned long long)c.L->block);
        return;
    }
    if (any_done) {
        c.failed = true;
        snprintf(c.msg, sizeof c.msg, "kernel %s: block %u warp %u: a lane exited while the others wait at a "
                 "full-mask warp operation (divergent warp op)", c.kernel, c.block_id, w);
        return;
    }
    if (!all_waiting) return;
    Fiber* lane = &c.fibers[lo];
    const int op = lane[0].op;
    for (int l = 1; l < 32; l++) {
        if (lane[l].op != op) {
            c.failed = true;
            snprintf(c.msg, sizeof c.msg, "kernel %s: block %u warp %u: lanes 0 and %d are at different warp "
                     "operations (%d, %d)", c.kernel, c.block_id, w, l, op, lane[l].op);
            return;
        }
    }
    for (int l = 0; l < 32; l++) {
        uint64_t r = 0;
        const int32_t a = lane[l].arg;
        switch (op) {
            case OP_SYNC: break;
            case OP_MATCH_ANY:
                for (int k = 0; k < 32; k++) r |= (uint64_t)(lane[k].in == lane[l].in) << k;
                break;
            case OP_SHFL: r = lane[a & 31].in; break;
            case OP_SHFL_UP: r = l - a >= 0 ? lane[l - a].in : lane[l].in; break;
            case OP_SHFL_DOWN: r = l + a < 32 ? lane[l + a].in : lane[l].in; break;
            case OP_SHFL_XOR: r = lane[(l ^ a) & 31].in; break;
            case OP_BALLOT:
                for (int k = 0; k < 32; k++) r |= (uint64_t)(lane[k].in != 0) << k;
                break;
        }
        lane[l].out = r;
    }
    for (int l = 0; l < 32; l++) lane[l].state = Fiber::READY;
}

inline void try_barrier(Ctx& c) {
    bool any = false;
    for (auto& f : c.fibers) {
        if (f.state == Fiber::READY || f.state == Fiber::AT_WARP) return;
        any |= f.state == Fiber::AT_BARRIER;
    }
    if (!any) return;
    for (auto& f : c.fibers)
        if (f.state == Fiber::AT_BARRIER) f.state = Fiber::READY;
    std::fill(c.shared.words.begin(), c.shared.words.end(), Word{});  // a barrier orders shared memory
}

inline void run_block(Ctx& c, uint32_t b) {
    const uint32_t n = (uint32_t)c.L->block;
    c.block_id = b;
    c.fibers.assign(n, Fiber{});
    // Fresh shared memory holds garbage on a GPU: poison it so a kernel cannot rely on zeros.
    memset(c.shared_mem.data(), 0xA5, c.shared_used);
    std::fill(c.shared.words.begin(), c.shared.words.end(), Word{});
    for (uint32_t t = 0; t < n; t++) {
        Fiber& f = c.fibers[t];
        f.tid = t;
        f.stack = stack_for(t);
        if (!f.stack) {
            c.failed = true;
            snprintf(c.msg, sizeof c.msg, "kernel %s: cannot map a stack for thread %u", c.kernel, t);
            return;
        }
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = f.stack;
        f.ctx.uc_stack.ss_size = STACK_BYTES;
        f.ctx.uc_link = nullptr;
        makecontext(&f.ctx, fiber_main, 0);
    }
    std::vector<uint32_t> ready;
    ready.reserve(n);
    while (!c.failed) {
        ready.clear();
        for (uint32_t t = 0; t < n; t++)
            if (c.fibers[t].state == Fiber::READY) ready.push_back(t);
        if (ready.empty()) {
            bool all_done = true;
            for (auto& f : c.fibers) all_done &= f.state == Fiber::DONE;
            if (!all_done) {
                c.failed = true;
                snprintf(c.msg, sizeof c.msg, "kernel %s: block %u deadlocks: threads wait at a barrier or a warp "
                         "operation that the others never reach", c.kernel, b);
            }
            return;
        }
        // Run every ready thread once, in a random order, then look at the warps and barrier.
        for (size_t i = ready.size(); i > 1; i--) std::swap(ready[i - 1], ready[next_rand(c) % i]);
        for (uint32_t t : ready) {
            Fiber& f = c.fibers[t];
            c.cur = &f;
            swapcontext(&c.sched, &f.ctx);
            c.cur = nullptr;
            if (c.failed) return;
            if (f.state != Fiber::AT_BARRIER) try_warp(c, t / 32);
            if (c.failed) return;
        }
        try_barrier(c);
    }
}

inline void merge_regions(Ctx& c) {
    std::vector<std::pair<Region, int>> rs;
    for (uint64_t i = 0; i < c.L->n_regions; i++)
        if (c.L->regions[i].bytes) rs.push_back({c.L->regions[i], (int)i});
    std::sort(rs.begin(), rs.end(), [](auto& a, auto& b) { return a.first.base < b.first.base; });
    for (auto& [r, arg] : rs) {
        if (!c.global.empty() && r.base < c.global.back().base + c.global.back().bytes) {
            Shadow& last = c.global.back();  // overlapping views of one array share one record
            last.bytes = std::max(last.base + last.bytes, r.base + r.bytes) - last.base;
            continue;
        }
        Shadow s;
        s.base = r.base;
        s.bytes = r.bytes;
        s.first_arg = arg;
        c.global.push_back(std::move(s));
    }
}

template <class T>
struct arg_of {
    static T get(void* const p) { return *static_cast<T*>(p); }
};

template <class... A, size_t... I>
inline void invoke(void (*fn)(A...), void* const* argv, std::index_sequence<I...>) {
    fn(arg_of<std::decay_t<A>>::get(argv[I])...);
}

// Argument kinds, so cuda_emu.py can check what it passes: p pointer, Q u64, I u32, i i32.
template <class T> struct kind_of;
template <class T> struct kind_of<gptr<T>> { static constexpr char c = 'p'; };
template <> struct kind_of<uint64_t> { static constexpr char c = 'Q'; };
template <> struct kind_of<uint32_t> { static constexpr char c = 'I'; };
template <> struct kind_of<int32_t> { static constexpr char c = 'i'; };

template <class... A>
inline const char* signature(void (*)(A...)) {
    static const char sig[] = {kind_of<std::decay_t<A>>::c..., '\0'};
    return sig;
}

// Runs one launch of `fn`. Returns 0, or 1 with the reason in launch->error.
template <class... A>
inline int run(const Launch* L, const char* kernel, void (*fn)(A...), void* const* argv) {
    Ctx c;
    c.L = L;
    c.kernel = kernel;
    c.rng = L->seed ? L->seed : 0x9E3779B97F4A7C15ull;
    merge_regions(c);
    c.shared_mem.assign(SHARED_BYTES, 0);
    c.shared_used = (L->dyn_shared_bytes + 15) / 16 * 16;
    c.shared.first_arg = -2;
    c.shared.base = reinterpret_cast<uint64_t>(c.shared_mem.data());
    c.shared.bytes = c.shared_used;
    if (L->dyn_shared_bytes > SHARED_BYTES) {
        c.failed = true;
        snprintf(c.msg, sizeof c.msg, "kernel %s: %llu bytes of dynamic shared memory asked for, more than a block "
                 "has", kernel, (unsigned long long)L->dyn_shared_bytes);
    }
    struct Closure {
        void (*fn)(A...);
        void* const* argv;
    } cl{fn, argv};
    c.closure = &cl;
    c.thunk = [](void* p) {
        auto* k = static_cast<Closure*>(p);
        invoke(k->fn, k->argv, std::index_sequence_for<A...>{});
    };
    Ctx* saved = g_ctx;
    g_ctx = &c;
    std::vector<uint32_t> order(L->grid);
    for (uint32_t i = 0; i < L->grid; i++) order[i] = i;
    for (size_t i = order.size(); i > 1; i--) std::swap(order[i - 1], order[next_rand(c) % i]);
    if (L->block == 0 || L->block > 1024) {
        c.failed = true;
        snprintf(c.msg, sizeof c.msg, "kernel %s: block size %llu is not in 1..1024", kernel,
                 (unsigned long long)L->block);
    }
    for (uint32_t b : order) {
        if (c.failed) break;
        run_block(c, b);
    }
    g_ctx = saved;
    if (c.failed && L->error && L->error_cap) {
        strncpy(L->error, c.msg, L->error_cap - 1);
        L->error[L->error_cap - 1] = 0;
    }
    return c.failed ? 1 : 0;
}

// ---- shared memory -----------------------------------------------------------------------

// The k-th ZKQ_SHARED request of a thread: every thread of the block gets the same bytes,
// placed after the dynamic area by the first thread that asks.
inline void* shared_request(size_t bytes) {
    Ctx& c = *g_ctx;
    const uint32_t k = c.cur->shared_calls++;
    if (k >= c.shared_offsets.size()) {
        const size_t at = c.shared_used;
        if (at + bytes > SHARED_BYTES)
            fail("kernel %s: static shared memory beyond the %zu bytes a block has", c.kernel, SHARED_BYTES);
        c.shared_offsets.push_back(at);
        c.shared_used = (at + bytes + 15) / 16 * 16;
        memset(c.shared_mem.data() + at, 0xA5, c.shared_used - at);
        c.shared.bytes = c.shared_used;
        c.shared.words.resize(c.shared.bytes / 4 + 1);
    }
    return c.shared_mem.data() + c.shared_offsets[k];
}

inline void* dynamic_shared() { return g_ctx->shared_mem.data(); }

}  // namespace emu
}  // namespace zkq
