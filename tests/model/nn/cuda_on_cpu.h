// CUDA kernels on the CPU, for tests (issue 37: most sessions have no GPU). Include this before a
// kernels' header (model/nn/metrics_kernels.cuh) and call cuda_on_cpu::Launch(grid, block, body),
// where body calls one kernel: each thread block runs in turn, its threads as fibers (ucontext) on
// this thread, one at a time, each running to its next barrier before the next thread runs, and the
// kernel runs as written, its shared memory, warp shuffles and barriers (the block's and a warp's,
// which a warp may meet apart from the other warps) included. What a GPU does apart,
// each thread's own order of operations, is kept; what it leaves open (the order of threads
// between barriers) is one fixed order here. The host's expf and logf are not the device's: a test
// compares kernels with kernels, or with the CPU's code where the arithmetic is exact.
// Not for use with AddressSanitizer (its stack bookkeeping does not follow swapcontext): the
// sanitizer run leaves these tests out.
#pragma once

#include <ucontext.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
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

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};

namespace cuda_on_cpu {

struct Block {
    struct Thread {
        ucontext_t context;
        std::unique_ptr<char[]> stack;
        bool done = false;
        bool waits_for_block = false;  // at a __syncthreads
    };
    std::vector<Thread> threads;
    ucontext_t scheduler;
    int current = 0;
    const std::function<void()>* body = nullptr;
};
inline Block g_block;
inline dim3 g_thread_index, g_block_index, g_grid, g_block_dim;

inline void ThreadMain() {
    (*g_block.body)();
    g_block.threads[g_block.current].done = true;  // uc_link returns to the scheduler
}

// Runs `body` (a kernel's call) as `grid` blocks of `block` threads, blocks in turn.
inline void Launch(dim3 grid, dim3 block, const std::function<void()>& body) {
    constexpr size_t kStack = 256 << 10;
    const unsigned n = block.x * block.y * block.z;
    g_grid = grid;
    g_block_dim = block;
    g_block.body = &body;
    g_block.threads.resize(n);
    for (Block::Thread& t : g_block.threads)
        if (!t.stack) t.stack = std::make_unique<char[]>(kStack);
    for (unsigned by = 0; by < grid.y; ++by)
        for (unsigned bx = 0; bx < grid.x; ++bx) {
            g_block_index = {bx, by, 0};
            for (Block::Thread& t : g_block.threads) {
                t.done = t.waits_for_block = false;
                getcontext(&t.context);
                t.context.uc_stack.ss_sp = t.stack.get();
                t.context.uc_stack.ss_size = kStack;
                t.context.uc_link = &g_block.scheduler;
                makecontext(&t.context, ThreadMain, 0);
            }
            // Rounds: each thread not done runs to its next barrier (or its end). A warp's lanes
            // meet the same warp barriers, so a round is the time between two of them for each
            // warp; a thread at a __syncthreads waits there until every thread not done does.
            for (bool any = true; any;) {
                any = false;
                bool all_wait = true;
                for (const Block::Thread& t : g_block.threads) all_wait = all_wait && (t.done || t.waits_for_block);
                if (all_wait)
                    for (Block::Thread& t : g_block.threads) t.waits_for_block = false;
                for (unsigned i = 0; i < n; ++i) {
                    if (g_block.threads[i].done || g_block.threads[i].waits_for_block) continue;
                    any = true;
                    g_block.current = static_cast<int>(i);
                    g_thread_index = {i % block.x, i / block.x % block.y, i / (block.x * block.y)};
                    swapcontext(&g_block.scheduler, &g_block.threads[i].context);
                }
            }
        }
}

inline void Barrier() { swapcontext(&g_block.threads[g_block.current].context, &g_block.scheduler); }
inline void BlockBarrier() {
    g_block.threads[g_block.current].waits_for_block = true;
    Barrier();
}

// A warp's exchange: every thread writes its value, then reads lane `from(lane)`'s (its own where
// that is past the warp's end), as a shuffle does when all 32 lanes take part.
template <class T, class From>
T Shuffle(T v, From from) {
    static std::vector<T> slots;
    slots.resize(g_block.threads.size());
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
