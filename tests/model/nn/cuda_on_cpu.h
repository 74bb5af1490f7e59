// CUDA kernels on the CPU, for tests (issue 37: most sessions have no GPU). Include this before a
// kernels' header (model/nn/metrics_kernels.cuh) and call cuda_on_cpu::Launch(grid, block, body),
// where body calls one kernel: each thread block runs in turn, its threads as fibers on this
// thread, one at a time, each running to its next barrier before the next thread runs, and the
// kernel runs as written, its shared memory, warp shuffles and barriers (the block's and a warp's,
// which a warp may meet apart from the other warps) included. What a GPU does apart,
// each thread's own order of operations, is kept; what it leaves open (the order of threads
// between barriers) is one fixed order here. The host's expf and logf are not the device's: a test
// compares kernels with kernels, or with the CPU's code where the arithmetic is exact.
// A fiber starts on its own stack through ucontext (makecontext) once, and keeps running the
// launches' blocks. On x86-64 it then switches with the compilers' __builtin_setjmp and
// __builtin_longjmp, a few registers and no system call: swapcontext also saves the signal mask,
// a system call a switch, and took 85% of these tests' time (a kernel's warp reduction is ten
// switches a thread). Elsewhere every switch is swapcontext.
// Not for use with AddressSanitizer (its stack bookkeeping does not follow the fibers' stacks):
// the sanitizer run leaves these tests out.
#pragma once

#include <ucontext.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static  // one block runs at a time: a block's shared memory is the function's statics

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SSAVIZ_FIBER_JUMPS 1
#else
#define SSAVIZ_FIBER_JUMPS 0
#endif

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};

namespace cuda_on_cpu {

struct Block {
    struct Thread {  // never moved once made: a saved context may point into itself
        ucontext_t context;
        void* jump[5];  // where it waits (__builtin_setjmp's buffer)
        std::unique_ptr<char[]> stack;
        bool started = false;
        bool done = false;
        bool waits_for_block = false;  // at a __syncthreads
    };
    std::vector<std::unique_ptr<Thread>> threads;  // as many as the largest launch's block; each runs ThreadMain
    unsigned n = 0;                                // this launch's threads a block
    ucontext_t scheduler;
    void* scheduler_jump[5];
    int current = 0;
    const std::function<void()>* body = nullptr;
};
inline Block g_block;
inline dim3 g_thread_index, g_block_index, g_grid, g_block_dim;

[[noreturn]] __attribute__((noinline)) inline void JumpTo(void** to) {
#if SSAVIZ_FIBER_JUMPS
    __builtin_longjmp(to, 1);
#else
    (void)to;
    std::abort();
#endif
}

// The running fiber to the scheduler; back when the scheduler resumes it.
__attribute__((noinline)) inline void Barrier() {
    Block::Thread& t = *g_block.threads[g_block.current];
#if SSAVIZ_FIBER_JUMPS
    if (__builtin_setjmp(t.jump) == 0) JumpTo(g_block.scheduler_jump);
#else
    swapcontext(&t.context, &g_block.scheduler);
#endif
}

// A fiber: the launches' body, block after block (the scheduler resumes it past its last Barrier
// for the next block).
inline void ThreadMain() {
    for (;;) {
        (*g_block.body)();
        g_block.threads[g_block.current]->done = true;
        Barrier();
    }
}

// The scheduler to thread i, until it next waits.
__attribute__((noinline)) inline void Resume(unsigned i) {
    Block::Thread& t = *g_block.threads[i];
    g_block.current = static_cast<int>(i);
    g_thread_index = {i % g_block_dim.x, i / g_block_dim.x % g_block_dim.y, i / (g_block_dim.x * g_block_dim.y)};
#if SSAVIZ_FIBER_JUMPS
    if (__builtin_setjmp(g_block.scheduler_jump) != 0) return;  // it waits
    if (t.started) JumpTo(t.jump);
    t.started = true;
#endif
    swapcontext(&g_block.scheduler, &t.context);  // its first entry (with jumps, it comes back by one)
}

// Runs `body` (a kernel's call) as `grid` blocks of `block` threads, blocks in turn.
inline void Launch(dim3 grid, dim3 block, const std::function<void()>& body) {
    constexpr size_t kStack = 256 << 10;
    const unsigned n = block.x * block.y * block.z;
    g_grid = grid;
    g_block_dim = block;
    g_block.body = &body;
    g_block.n = n;
    while (g_block.threads.size() < n) {
        auto t = std::make_unique<Block::Thread>();
        t->stack = std::make_unique<char[]>(kStack);
        getcontext(&t->context);
        t->context.uc_stack.ss_sp = t->stack.get();
        t->context.uc_stack.ss_size = kStack;
        t->context.uc_link = nullptr;  // ThreadMain never returns
        makecontext(&t->context, ThreadMain, 0);
        g_block.threads.push_back(std::move(t));
    }
    for (unsigned by = 0; by < grid.y; ++by)
        for (unsigned bx = 0; bx < grid.x; ++bx) {
            g_block_index = {bx, by, 0};
            for (unsigned i = 0; i < n; ++i) g_block.threads[i]->done = g_block.threads[i]->waits_for_block = false;
            // Rounds: each thread not done runs to its next barrier (or its end). A warp's lanes
            // meet the same warp barriers, so a round is the time between two of them for each
            // warp; a thread at a __syncthreads waits there until every thread not done does.
            for (bool any = true; any;) {
                any = false;
                bool all_wait = true;
                for (unsigned i = 0; i < n; ++i) all_wait = all_wait && (g_block.threads[i]->done || g_block.threads[i]->waits_for_block);
                if (all_wait)
                    for (unsigned i = 0; i < n; ++i) g_block.threads[i]->waits_for_block = false;
                for (unsigned i = 0; i < n; ++i) {
                    if (g_block.threads[i]->done || g_block.threads[i]->waits_for_block) continue;
                    any = true;
                    Resume(i);
                }
            }
        }
}

inline void BlockBarrier() {
    g_block.threads[g_block.current]->waits_for_block = true;
    Barrier();
}

// A warp's exchange: every thread writes its value, then reads lane `from(lane)`'s (its own where
// that is past the warp's end), as a shuffle does when all 32 lanes take part.
template <class T, class From>
T Shuffle(T v, From from) {
    static std::vector<T> slots;
    slots.resize(g_block.n);
    const unsigned tid = static_cast<unsigned>(g_block.current), lane = tid % 32, source = from(lane);
    slots[tid] = v;
    Barrier();
    const T r = source < 32 ? slots[tid - lane + source] : v;
    Barrier();
    return r;
}

}  // namespace cuda_on_cpu

#define threadIdx (cuda_on_cpu::g_thread_index)
#define blockIdx (cuda_on_cpu::g_block_index)
#define gridDim (cuda_on_cpu::g_grid)
#define blockDim (cuda_on_cpu::g_block_dim)

inline void __syncthreads() { cuda_on_cpu::BlockBarrier(); }
// A warp's barrier: every lane of a warp meets the same ones, so a round of Launch is the time
// between two of them for each warp, whatever the other warps do.
inline void __syncwarp(unsigned /*mask: all lanes*/ = 0xffffffffu) { cuda_on_cpu::Barrier(); }
template <class T>
T __shfl_down_sync(unsigned /*mask: all lanes*/, T v, int offset) {
    return cuda_on_cpu::Shuffle(v, [&](unsigned lane) { return lane + static_cast<unsigned>(offset); });
}
template <class T>
T __shfl_xor_sync(unsigned /*mask: all lanes*/, T v, int mask) {
    return cuda_on_cpu::Shuffle(v, [&](unsigned lane) { return lane ^ static_cast<unsigned>(mask); });
}
inline unsigned __float_as_uint(float f) {
    unsigned u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}
// Blocks run in turn on one thread: an atomic is a plain update.
inline unsigned atomicMax(unsigned* at, unsigned v) {
    const unsigned old = *at;
    *at = std::max(old, v);
    return old;
}
inline unsigned atomicMin(unsigned* at, unsigned v) {
    const unsigned old = *at;
    *at = std::min(old, v);
    return old;
}
using std::max;
using std::min;
using std::isfinite;
