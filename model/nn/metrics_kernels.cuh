// The kernels of metrics_cuda.h, device code only: metrics_cuda.cu launches them on a GPU, and
// tests/model/nn/test_cuda_kernels.cpp runs them on the CPU (tests/model/nn/cuda_on_cpu.h: each
// thread block's threads as fibers), so every session can run them, with or without a device.
// The fused row statistics: the torch-op path they replace (CompareMapsGeneric) reads every map
// about ten times and launches some thirty kernels a block of rows; these read each row once,
// keeping its sums as row_sums.cuh does.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>

#include "model/nn/metrics_cuda.h"
#include "model/nn/row_sums.cuh"

namespace model::cuda {
namespace {

constexpr int kThreads = 256, kWarps = kThreads / 32, kUnroll = 4;

template <int N>
struct Args {
    const float* maps[N];
    Outputs<N> o;
};

__device__ __forceinline__ double WarpSum(double v) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
    return v;
}

// What a thread block shares to merge its threads' sums.
template <int N>
struct RowShared {
    float tops[kThreads][N][kTop];
    double partial[kWarps][RowSums<N>::Q];
};

// The block's threads' sums of row `row` (query `keys` - 1, maps `x`) merged and written: every
// thread of the block calls it, and the shared memory is free again when it returns.
template <int N>
__device__ __forceinline__ void FinishRow(RowSums<N>& s, RowShared<N>& shared, const Outputs<N>& o, const float* const* x, int64_t row,
                                          int64_t keys) {
    constexpr int Q = RowSums<N>::Q;
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    // The sums: within each warp, then the warps' by thread 0.
    for (int k = 0; k < Q; ++k) {
        const double sum = WarpSum(s.sum[k]);
        if (lane == 0) shared.partial[warp][k] = sum;
    }
    // The five largest: each thread's lists, merged pairwise down to thread 0's.
    for (int m = 0; m < N; ++m)
        for (int k = 0; k < kTop; ++k) shared.tops[tid][m][k] = s.best[m][k];
    __syncthreads();
    for (int stride = kThreads / 2; stride > 0; stride /= 2) {
        if (tid < stride)
            for (int m = 0; m < N; ++m)
                for (int k = 0; k < kTop; ++k) Insert(shared.tops[tid][m], shared.tops[tid + stride][m][k]);
        __syncthreads();
    }
    if (tid == 0) {
        double total[Q] = {};
        for (int w = 0; w < kWarps; ++w)
            for (int k = 0; k < Q; ++k) total[k] += shared.partial[w][k];
        const float* top[N];
        float sink[N];
        for (int m = 0; m < N; ++m) top[m] = shared.tops[0][m], sink[m] = x[m][0];
        WriteRow<N>(total, top, sink, o, row, keys);
    }
    __syncthreads();  // `tops` and `partial` are the next row's
}

template <int N>
__global__ void __launch_bounds__(kThreads) CompareRowsKernel(Args<N> a, int64_t rows, int64_t R, int64_t T, int64_t first) {
    __shared__ RowShared<N> shared;
    const int tid = threadIdx.x;
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const int64_t keys = first + row % R + 1;
        const float* x[N];
        for (int m = 0; m < N; ++m) x[m] = a.maps[m] + row * T;
        RowSums<N> s;
        // kUnroll keys a thread are loaded before any is used, so enough reads are in flight to
        // keep the memory busy. A key past the row reads as 0, which adds exactly 0 to every sum
        // and is never among the five largest (they start at 0): each thread's sums are as if it
        // had stopped at the row's end.
        for (int64_t j0 = tid; j0 < keys; j0 += kThreads * kUnroll) {
            float v[kUnroll][N];
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) {
                const int64_t j = j0 + static_cast<int64_t>(u) * kThreads;
                for (int m = 0; m < N; ++m) v[u][m] = j < keys ? x[m][j] : 0.0f;
            }
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) AddKey(s, v[u]);
        }
        FinishRow(s, shared, a.o, x, row, keys);
    }
}


// One thread block a row of cells (map m, cell row r) and a chunk of `chunk` keys (a multiple of
// `pool`, at most kThreads): each thread takes one key's column down the cell row's `pool` rows,
// so a warp reads consecutive floats, then each cell's maxima are those of its `pool` columns.
__global__ void __launch_bounds__(kThreads) PoolRowsKernel(const float* p, const float* q, int64_t R, int64_t T, int pool, int64_t rows,
                                                           int64_t cols, int chunk, float keep, float* out_p, float* out_q, float* out_d) {
    __shared__ float column[4][kThreads];  // each key's max of p, of q, of p - q and of q - p
    const int64_t m = blockIdx.y / rows, r = blockIdx.y % rows, j0 = static_cast<int64_t>(blockIdx.x) * chunk;
    const int tid = threadIdx.x;
    if (tid < chunk) {
        const int64_t j = j0 + tid, i_end = min(R, (r + 1) * pool);
        float mp = -INFINITY, mq = -INFINITY, up = -INFINITY, down = -INFINITY;
        if (j < T)
            for (int64_t i = r * pool; i < i_end; ++i) {
                const float x = p[(m * R + i) * T + j], y = q[(m * R + i) * T + j];
                mp = Max(mp, x);
                mq = Max(mq, y);
                up = Max(up, x - y);
                down = Max(down, y - x);
            }
        column[0][tid] = mp, column[1][tid] = mq, column[2][tid] = up, column[3][tid] = down;
    }
    __syncthreads();
    const int64_t c = j0 / pool + tid;  // this thread's cell, for the first chunk / pool threads
    if (tid >= chunk / pool || c >= cols) return;
    float mp = -INFINITY, mq = -INFINITY, up = -INFINITY, down = -INFINITY;
    for (int k = tid * pool; k < (tid + 1) * pool; ++k) {  // columns past T hold -inf: they change no max
        mp = Max(mp, column[0][k]);
        mq = Max(mq, column[1][k]);
        up = Max(up, column[2][k]);
        down = Max(down, column[3][k]);
    }
    const int64_t cell = (m * rows + r) * cols + c;
    out_p[cell] = mp;
    out_q[cell] = mq;
    out_d[cell] = up >= down * keep ? up : -down;
}

// Pools wider than kThreads keys: one thread a cell.
__global__ void PoolKernel(const float* p, const float* q, int64_t maps, int64_t R, int64_t T, int pool, int64_t rows, int64_t cols,
                           float keep, float* out_p, float* out_q, float* out_d) {
    const int64_t cell = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (cell >= maps * rows * cols) return;
    const int64_t c = cell % cols, r = cell / cols % rows, m = cell / (cols * rows);
    const int64_t i_end = min(R, (r + 1) * pool), j_begin = c * pool, j_end = min(T, j_begin + pool);
    float mp = -INFINITY, mq = -INFINITY, up = -INFINITY, down = -INFINITY;
    for (int64_t i = r * pool; i < i_end; ++i) {
        const float *a = p + (m * R + i) * T, *b = q + (m * R + i) * T;
        for (int64_t j = j_begin; j < j_end; ++j) {
            const float x = a[j], y = b[j];
            mp = Max(mp, x);
            mq = Max(mq, y);
            up = Max(up, x - y);
            down = Max(down, y - x);
        }
    }
    out_p[cell] = mp;
    out_q[cell] = mq;
    out_d[cell] = up >= down * keep ? up : -down;
}

// Each of N rows' maximum and sum over its visible keys lo..hi - 1 (row `x[m]` of map m), merged
// over the block into `whole[m]`. Every thread of the block calls it; `whole` holds until the
// block's next __syncthreads.
template <int N>
__device__ __forceinline__ void RowMaxSums(float* const* x, int64_t lo, int64_t hi, Running (&partial)[N][kWarps], Running (&whole)[N]) {
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
#pragma unroll
    for (int m = 0; m < N; ++m) {
        // kUnroll keys a thread loaded before any is used (one load in flight a thread left the
        // memory idle: the kernel ran at about a third of the bandwidth at 8,192 tokens). Each
        // thread adds its keys in the order the plain loop did, so the bits are the same; a key
        // past the row reads as -inf, which Add leaves out.
        Running r;
        for (int64_t j0 = lo + tid; j0 < hi; j0 += kThreads * kUnroll) {
            float v[kUnroll];
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) {
                const int64_t j = j0 + static_cast<int64_t>(u) * kThreads;
                v[u] = j < hi ? x[m][j] : -INFINITY;
            }
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) Add(r, v[u]);
        }
        for (int offset = 16; offset > 0; offset >>= 1) {
            Running o;
            o.m = __shfl_down_sync(0xffffffffu, r.m, offset);
            o.sum = __shfl_down_sync(0xffffffffu, r.sum, offset);
            r = Merge(r, o);
        }
        if (lane == 0) partial[m][warp] = r;
    }
    __syncthreads();
    if (tid == 0)
        for (int m = 0; m < N; ++m) {
            Running all = partial[m][0];
            for (int w = 1; w < kWarps; ++w) all = Merge(all, partial[m][w]);
            whole[m] = all;
        }
    __syncthreads();
}

__global__ void __launch_bounds__(kThreads) MaskedSoftmaxKernel(float* scores, int64_t rows, int64_t R, int64_t T, int64_t first,
                                                                int64_t window) {
    __shared__ Running partial[1][kWarps];
    __shared__ Running whole[1];
    const int tid = threadIdx.x;
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        float* const x[1] = {scores + row * T};
        const int64_t i = first + row % R, lo = window > 0 && i - window + 1 > 0 ? i - window + 1 : 0, hi = i + 1;
        RowMaxSums<1>(x, lo, hi, partial, whole);
        const float m = whole[0].m, sum = whole[0].sum, hidden = 0.0f * (1.0f / sum);
        for (int64_t j0 = tid; j0 < T; j0 += kThreads * kUnroll) {
            float v[kUnroll];
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) {
                const int64_t j = j0 + static_cast<int64_t>(u) * kThreads;
                v[u] = j >= lo && j < hi ? x[0][j] : 0.0f;
            }
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) {
                const int64_t j = j0 + static_cast<int64_t>(u) * kThreads;
                if (j < T) x[0][j] = Weight(v[u], j, lo, hi, m, sum, hidden);
            }
        }
        __syncthreads();  // `whole` is the next row's
    }
}

template <int N>
struct SoftmaxArgs {
    float* scores[N];
    Outputs<N> o;
};

// MaskedSoftmaxKernel and CompareRowsKernel in one (issue 37): a row of each of N score maps (one
// shape, one mask) softmaxed in place, and the weights it writes measured while they are in
// registers, so no map is read again. The bits are both kernels': each row's maximum and sum as
// MaskedSoftmaxKernel finds them, each weight as it writes it, and each thread's sums over the
// same keys in the same order as CompareRowsKernel's (the keys past the row's last add exactly 0).
template <int N>
__global__ void __launch_bounds__(kThreads) SoftmaxCompareKernel(SoftmaxArgs<N> a, int64_t rows, int64_t R, int64_t T, int64_t first,
                                                                 int64_t window) {
    __shared__ Running partial[N][kWarps];
    __shared__ Running whole[N];
    __shared__ RowShared<N> shared;
    const int tid = threadIdx.x;
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        float* x[N];
        for (int m = 0; m < N; ++m) x[m] = a.scores[m] + row * T;
        const int64_t i = first + row % R, lo = window > 0 && i - window + 1 > 0 ? i - window + 1 : 0, hi = i + 1;
        RowMaxSums<N>(x, lo, hi, partial, whole);
        float top[N], sum[N], hidden[N];
        for (int m = 0; m < N; ++m) top[m] = whole[m].m, sum[m] = whole[m].sum, hidden[m] = 0.0f * (1.0f / sum[m]);
        RowSums<N> s;
        for (int64_t j0 = tid; j0 < T; j0 += kThreads * kUnroll) {
            float v[kUnroll][N];
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) {
                const int64_t j = j0 + static_cast<int64_t>(u) * kThreads;
                for (int m = 0; m < N; ++m) v[u][m] = j >= lo && j < hi ? x[m][j] : 0.0f;
            }
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) {
                const int64_t j = j0 + static_cast<int64_t>(u) * kThreads;
                if (j >= T) continue;
                float w[N];
#pragma unroll
                for (int m = 0; m < N; ++m) {
                    w[m] = Weight(v[u][m], j, lo, hi, top[m], sum[m], hidden[m]);
                    x[m][j] = w[m];
                    if (j >= hi) w[m] = 0.0f;  // CompareRowsKernel reads keys 0..i only
                }
                AddKey(s, w);
            }
        }
        FinishRow(s, shared, a.o, x, row, hi);  // its last __syncthreads frees `whole` too
    }
}


// A logit before another in the CPU scan's order (analysis_predictions.cpp): the larger, or of two
// equal the earlier. -inf and NaN never enter a list: its empty places hold (-inf, 0), as there.
__device__ __forceinline__ bool Before(float v, int j, float w, int k) { return v > w || (v == w && j < k); }

// Keeps the kTopLogits first of what it is given, in that order. Unrolled with fixed indices, so
// a thread's list stays in registers; ids as int (TopLogits takes V < 2^31).
__device__ __forceinline__ void InsertLogit(float* best, int* id, float v, int j) {
    if (!(v > -INFINITY) || !Before(v, j, best[kTopLogits - 1], id[kTopLogits - 1])) return;
#pragma unroll
    for (int i = 0; i < kTopLogits; ++i)
        if (Before(v, j, best[i], id[i])) {
            const float t = best[i];
            const int u = id[i];
            best[i] = v, id[i] = j;
            v = t, j = u;
        }
}

// One thread block a row of logits: each thread's list of its keys' largest and its count of
// logits above the row's target's, then the lists merged pairwise down to thread 0's and the
// counts summed (integers: exact in any order).
__global__ void __launch_bounds__(kThreads) TopLogitsKernel(const float* logits, int64_t rows, int64_t V, int K, const int64_t* targets,
                                                            int64_t m, float* top, int64_t* top_ids, float* actual, int64_t* rank) {
    __shared__ float best[kThreads][kTopLogits];
    __shared__ int id[kThreads][kTopLogits];
    __shared__ long long above[kWarps];
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const float* x = logits + row * V;
        const int64_t t = row < m ? targets[row] : -1;
        const float a = t >= 0 && t < V ? x[t] : (row < m ? NAN : INFINITY);  // NaN: a target outside the vocabulary counts none above it
        float mine[kTopLogits];
        int mine_id[kTopLogits];
#pragma unroll
        for (int i = 0; i < kTopLogits; ++i) mine[i] = -INFINITY, mine_id[i] = 0;
        long long count = 0;
        for (int64_t j0 = tid; j0 < V; j0 += kThreads * kUnroll) {
            float v[kUnroll];
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) {
                const int64_t j = j0 + static_cast<int64_t>(u) * kThreads;
                v[u] = j < V ? x[j] : -INFINITY;
            }
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) {
                count += v[u] > a;
                InsertLogit(mine, mine_id, v[u], static_cast<int>(j0) + u * kThreads);
            }
        }
        for (int offset = 16; offset > 0; offset >>= 1) count += __shfl_down_sync(0xffffffffu, count, offset);
        if (lane == 0) above[warp] = count;
#pragma unroll
        for (int i = 0; i < kTopLogits; ++i) best[tid][i] = mine[i], id[tid][i] = mine_id[i];
        __syncthreads();
        for (int stride = kThreads / 2; stride > 0; stride /= 2) {
            if (tid < stride)
                for (int i = 0; i < kTopLogits; ++i) InsertLogit(best[tid], id[tid], best[tid + stride][i], id[tid + stride][i]);
            __syncthreads();
        }
        if (tid < K) top[row * K + tid] = best[0][tid], top_ids[row * K + tid] = id[0][tid];
        if (tid == 0 && row < m) {
            long long total = 0;
            for (int w = 0; w < kWarps; ++w) total += above[w];
            actual[row] = a;
            rank[row] = total;
        }
        __syncthreads();  // `best`, `id` and `above` are the next row's
    }
}

// Takes in another largest value, smallest positive value and largest magnitude. Comparisons, not
// fmaxf: a -0 must never win over +0 (its bits would be the largest of all as unsigned).
__device__ __forceinline__ void Extend(float& hi, float& lo, float& magnitude, float other_hi, float other_lo, float other_magnitude) {
    hi = other_hi > hi ? other_hi : hi;
    lo = other_lo > 0.0f && other_lo < lo ? other_lo : lo;
    magnitude = other_magnitude > magnitude ? other_magnitude : magnitude;
}

// A row of the map a block, its threads striding over its causal cells; then the block's figures
// merged into `out` (metrics_cuda.h's MapExtentBits).
__global__ void __launch_bounds__(kThreads) MapExtentKernel(const float* map, int64_t rows, int64_t width, int64_t first, unsigned* out) {
    __shared__ float partial[3][kWarps];
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    float hi = 0.0f, lo = 1.0f, magnitude = 0.0f;
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float* row = map + r * width;
        const int64_t end = first + r + 1 < width ? first + r + 1 : width;
        for (int64_t j = tid; j < end; j += kThreads) {
            const float v = row[j];
            if (!isfinite(v)) continue;
            Extend(hi, lo, magnitude, v, v > 0.0f ? v : 1.0f, fabsf(v));
        }
    }
    for (int offset = 16; offset > 0; offset >>= 1)
        Extend(hi, lo, magnitude, __shfl_down_sync(0xffffffffu, hi, offset), __shfl_down_sync(0xffffffffu, lo, offset),
               __shfl_down_sync(0xffffffffu, magnitude, offset));
    if (lane == 0) partial[0][warp] = hi, partial[1][warp] = lo, partial[2][warp] = magnitude;
    __syncthreads();
    if (tid == 0) {
        for (int w = 1; w < kWarps; ++w) Extend(hi, lo, magnitude, partial[0][w], partial[1][w], partial[2][w]);
        atomicMax(out, __float_as_uint(hi));
        atomicMin(out + 1, __float_as_uint(lo));
        atomicMax(out + 2, __float_as_uint(magnitude));
    }
}

}  // namespace
}  // namespace model::cuda
