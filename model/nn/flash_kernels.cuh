// The attention rows of a block in one pass that never writes them (metrics_cuda.h's FlashRows;
// issue 37's item 2), device code only: flash_launch.cuh launches it on a GPU, and
// tests/model/nn/test_flash_kernel.cpp runs it on the CPU (cuda_on_cpu.h, with wmma_on_cpu.h for
// the tensor cores' fragments), so every session checks it, with a device or without.
//
// A warp takes kFlashRows query rows of one head, every side at once, and goes over the keys
// kFlashKeys at a time, twice, with the block's other warps: each step's keys and values are staged
// once in shared memory for the four, a side at a time, split into their TF32 parts as they are
// staged. Each step's scores, q k^T for each side, are made on the tensor cores (TF32 in three
// parts: hi x lo + lo x hi + hi x hi, tf32.h) and stored to the warp's shared memory transposed, a
// key's rows side by side. Lanes r and r + kFlashRows both own row r: the first takes the step's
// even keys, the second its odd ones, so that the 32 lanes read 32 adjacent scores, no two on one
// bank, and every lane works. The first pass keeps each lane's running maximum and sum of its keys
// (Add, as the softmax kernel does), merged with the other lane's at its end; the second makes each
// weight, adds it to the lane's sums (AddKey) and, through the shared memory again, to the outputs
// weights @ v on the tensor cores in three parts. The cells along the keys need every key in order:
// the two lanes swap each pair of weights and keep half of a cell's maxima each (the lower lane p
// and p - q, the upper q and q - p). At the end the upper lane's sums and five largest join the
// lower's, which writes the row. No [H, R, T] tensor is written: per row, its statistics, its cells
// and its outputs.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>

#include "model/nn/metrics_cuda.h"
#include "model/nn/row_sums.cuh"
#include "model/nn/tf32.h"

namespace model::cuda {
namespace {

constexpr int kFlashWarps = 4;

// TF32 fragments exist from compute capability 8.0; for older devices the kernel is empty and
// never launched (FlashRows asks the device first).
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#define SSAVIZ_FLASH_KERNEL 1
namespace wmma = nvcuda::wmma;
using QueryPart = wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major>;   // q: rows x dims
using KeyPart = wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major>;     // k^T: dims x keys
using WeightPart = wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::col_major>;  // weights: rows x keys, stored by key
using ValuePart = wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major>;   // v: keys x dims
using Sums = wmma::fragment<wmma::accumulator, 16, 16, 8, float>;

// A loaded fragment `hi` split in place into hi + lo, both exact in TF32 (tf32.h). Element by
// element, whatever lane holds which: what fragments allow.
template <class F>
__device__ __forceinline__ void SplitParts(F& hi, F& lo) {
#pragma unroll
    for (int e = 0; e < hi.num_elements; ++e) {
        const tf32::Parts p = tf32::Split(hi.x[e]);
        hi.x[e] = p.hi;
        lo.x[e] = p.lo;
    }
}

// c += a b in three TF32 products, the small terms first.
template <class A, class B>
__device__ __forceinline__ void MultiplyAdd3(Sums& c, const A& a_hi, const A& a_lo, const B& b_hi, const B& b_lo) {
    wmma::mma_sync(c, a_hi, b_lo, c);
    wmma::mma_sync(c, a_lo, b_hi, c);
    wmma::mma_sync(c, a_hi, b_hi, c);
}

// Adds to one side's scores `c` of the warp's kFlashRows rows against kFlashKeys keys the terms of
// COLS dimensions: q's (their first, D floats a row) times the keys' TF32 parts as staged (`k`:
// kFlashKeys rows of LD floats, the high parts, then as many of the low ones).
template <int D, int COLS, int LD>
__device__ __forceinline__ void ScoreChunk(const float* q, const float* k, Sums (&c)[kFlashKeys / 16]) {
#pragma unroll
    for (int d = 0; d < COLS; d += 8) {
        QueryPart a_hi, a_lo;
        wmma::load_matrix_sync(a_hi, q + d, D);
        SplitParts(a_hi, a_lo);
#pragma unroll
        for (int n = 0; n < kFlashKeys / 16; ++n) {
            KeyPart b_hi, b_lo;
            wmma::load_matrix_sync(b_hi, k + n * 16 * LD + d, LD);
            wmma::load_matrix_sync(b_lo, k + kFlashKeys * LD + n * 16 * LD + d, LD);
            MultiplyAdd3(c[n], a_hi, a_lo, b_hi, b_lo);
        }
    }
}

// One side's outputs y += weights (`tile` [key][row]) @ v's DY dimensions, their TF32 parts as
// staged (`v`: kFlashKeys rows of LD floats, the high parts, then as many of the low ones).
template <int LD, int DY>
__device__ __forceinline__ void OutputStep(const float* tile, const float* v, Sums (&y)[DY / 16]) {
#pragma unroll
    for (int k = 0; k < kFlashKeys; k += 8) {
        WeightPart a_hi, a_lo;
        wmma::load_matrix_sync(a_hi, tile + k * kFlashRows, kFlashRows);
        SplitParts(a_hi, a_lo);
#pragma unroll
        for (int n = 0; n < DY / 16; ++n) {
            ValuePart b_hi, b_lo;
            wmma::load_matrix_sync(b_hi, v + k * LD + n * 16, LD);
            wmma::load_matrix_sync(b_lo, v + kFlashKeys * LD + k * LD + n * 16, LD);
            MultiplyAdd3(y[n], a_hi, a_lo, b_hi, b_lo);
        }
    }
}

// One step's keys (or values) of one side into the block's shared memory, for all its warps, split
// into TF32 parts once for the four: kFlashKeys rows of COLS floats from `from` (D floats a row) to
// `to` (LD a row), the high parts, then as many rows of the low ones. Every thread of the block
// takes part, consecutive threads on consecutive floats.
template <int D, int COLS, int LD>
__device__ __forceinline__ void Stage(const float* from, float* to) {
    for (int e = threadIdx.x; e < kFlashKeys * COLS; e += kFlashWarps * 32) {
        const int key = e / COLS, c = e % COLS;
        const tf32::Parts p = tf32::Split(from[key * D + c]);
        to[key * LD + c] = p.hi;
        to[(kFlashKeys + key) * LD + c] = p.lo;
    }
}

// The steps of keys rows r_first..r_last (of a.rows, in order) go over: from the step holding the
// first row's window's first key (a step before it is hidden from all of them) to the one holding
// the last row's query. Key positions are int: the launch takes fewer than 2^31 - kFlashKeys -
// pool keys.
struct StepRange {
    int start = 0, end = 0;
};
__device__ __forceinline__ StepRange Steps(const FlashArgs& a, int64_t r_first, int64_t r_last) {
    const int64_t lo = a.window > 0 && a.first + r_first - a.window + 1 > 0 ? a.first + r_first - a.window + 1 : 0;
    return {static_cast<int>(lo / kFlashKeys * kFlashKeys), static_cast<int>(((a.first + r_last) / kFlashKeys + 1) * kFlashKeys)};
}

// Half of a row's largest p, q, p - q and q - p over one cell's keys, for each pair of sides
// (0, k + 1): the lower lane's p and p - q (kinds 0 and 2), the upper lane's q and q - p (1 and 3).
template <int N>
struct CellMaxima {
    int upper;  // 0 or 1: which half
    float x[N - 1][2];
    __device__ __forceinline__ void Reset() {
#pragma unroll
        for (int k = 0; k < N - 1; ++k) x[k][0] = x[k][1] = -INFINITY;
    }
    __device__ __forceinline__ void Add(const float (&w)[N]) {
#pragma unroll
        for (int k = 0; k < N - 1; ++k) {
            const float mine = upper ? w[k + 1] : w[0], other = upper ? w[0] : w[k + 1];
            x[k][0] = Max(x[k][0], mine);
            x[k][1] = Max(x[k][1], mine - other);
        }
    }
    // Into cell `c` of row `row` (h * rows + r) of a.pooled.
    __device__ __forceinline__ void Write(const FlashArgs& a, int64_t row, int64_t c) const {
        const int64_t kind = a.heads * a.rows * a.cells, at = row * a.cells + c;
#pragma unroll
        for (int k = 0; k < N - 1; ++k) {
            a.pooled[k][upper * kind + at] = x[k][0];
            a.pooled[k][(upper + 2) * kind + at] = x[k][1];
        }
    }
};

#endif

// The outputs' dimensions one launch holds in registers: a head of D > 64 takes D / 64 launches,
// each making the weights again for its 64 (the first also measuring the rows).
template <int D>
constexpr int kFlashOutputs = D < 64 ? D : 64;

constexpr unsigned kWholeWarp = 0xffffffffu;

// The launch's grid for `a` into `grid`, or why there is none: a block for each head (x) and each
// kFlashWarps * kFlashRows rows (y), numbered from the last rows. A causal row's keys grow with it,
// and so does its block's work; a device starts blocks in the order of their index, x first, so
// the longest (every head's last rows) start first and the short ones fill the launch's end.
inline const char* FlashGrid(const FlashArgs& a, dim3* grid) {
    const int64_t row_blocks = (a.rows + kFlashWarps * kFlashRows - 1) / (kFlashWarps * kFlashRows);
    if (row_blocks > 65535 || a.heads > 0x7fffffff) return "too many rows or heads for one launch";
    if (a.keys + kFlashKeys + a.pool > 0x7fffffff) return "too many keys for one launch";  // the kernel's key positions are int
    *grid = dim3{static_cast<unsigned>(a.heads), static_cast<unsigned>(row_blocks)};
    return nullptr;
}

// Two lanes' running maxima and sums merged in one order in both, so both get the same bits.
__device__ __forceinline__ WideRunning MergeHalves(WideRunning mine, int upper) {
    WideRunning other;
    other.m = __shfl_xor_sync(kWholeWarp, mine.m, kFlashRows);
    other.sum = __shfl_xor_sync(kWholeWarp, mine.sum, kFlashRows);
    return upper ? Merge(other, mine) : Merge(mine, other);
}

// The blocks an SM holds at once, which bounds a thread's registers (65,536 an SM): three for two
// sides of heads up to 64 (at most 170 registers: nvcc 13 needs 168 at 64, no spills), else two
// (bound to three, a head of 128 spilled some 290 bytes).
template <int N, int D>
constexpr int kFlashBlocksPerSm = N == 2 && D <= 64 ? 3 : 2;

template <int N, int D>
__global__ void __launch_bounds__(kFlashWarps * 32, kFlashBlocksPerSm<N, D>) FlashKernel(FlashArgs a, int y_first, bool measure) {
#ifdef SSAVIZ_FLASH_KERNEL
    // A step's keys are staged KEY_COLS dimensions at a time in rows of KEY_COLS + 4 floats and its
    // values in rows of DY + 8, so that the fragments' loads from them fall on different banks;
    // each as two parts (under 48 KB of shared memory a block with the tiles).
    constexpr int DY = kFlashOutputs<D>, KEY_COLS = D < 64 ? D : 64, KEY_LD = KEY_COLS + 4, VALUE_LD = DY + 8;
    alignas(32) __shared__ float tiles[kFlashWarps][N][kFlashKeys * kFlashRows];
    alignas(32) __shared__ float stage[2 * kFlashKeys * (KEY_LD > VALUE_LD ? KEY_LD : VALUE_LD)];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, row = lane % kFlashRows, upper = lane / kFlashRows;
    const int64_t h = blockIdx.x, b0 = static_cast<int64_t>(gridDim.y - 1 - blockIdx.y) * kFlashWarps * kFlashRows;  // FlashGrid's
    const int64_t r0 = b0 + warp * kFlashRows;
    const int64_t r = r0 + row;
    const int keys = static_cast<int>(a.keys), i = static_cast<int>(a.first + r), hi = i + 1;
    const int lo = a.window > 0 && i - a.window + 1 > 0 ? static_cast<int>(i - a.window + 1) : 0;
    const bool measured = measure && r < a.rows;  // the same for both lanes of a row
    // The block's warps go over the keys together, each step's keys and values staged once for all
    // four; a warp works on the steps its rows see (before its first row's window they are skipped:
    // their cells and key 0's weight are the hidden value's) and waits out the others. A warp past
    // the block's rows only stages.
    const StepRange block = Steps(a, b0, (b0 + kFlashWarps * kFlashRows < a.rows ? b0 + kFlashWarps * kFlashRows : a.rows) - 1);
    const StepRange steps = r0 < a.rows ? Steps(a, r0, (r0 + kFlashRows < a.rows ? r0 + kFlashRows : a.rows) - 1) : StepRange{};
    const int start = steps.start, processed = steps.end;
    float* tile[N];
    const float *q[N], *k[N], *v[N];
#pragma unroll
    for (int m = 0; m < N; ++m) {
        tile[m] = tiles[warp][m];
        q[m] = a.q[m] + (h * a.padded_rows + r0) * D;
        k[m] = a.k[m] + h / a.heads_per_k[m] * a.k_stride[m];
        v[m] = a.v[m] + h / a.heads_per_v[m] * a.v_stride[m];
    }
    auto scores = [&](int j0, bool work) {
#pragma unroll
        for (int m = 0; m < N; ++m) {
            Sums c[kFlashKeys / 16];
#pragma unroll
            for (int n = 0; n < kFlashKeys / 16; ++n) wmma::fill_fragment(c[n], 0.0f);
#pragma unroll
            for (int d0 = 0; d0 < D; d0 += KEY_COLS) {
                __syncthreads();  // the stage is free
                Stage<D, KEY_COLS, KEY_LD>(k[m] + static_cast<int64_t>(j0) * D + d0, stage);
                __syncthreads();
                if (work) ScoreChunk<D, KEY_COLS, KEY_LD>(q[m] + d0, stage, c);
            }
            if (work)
#pragma unroll
                for (int n = 0; n < kFlashKeys / 16; ++n)
                    wmma::store_matrix_sync(tile[m] + n * 16 * kFlashRows, c[n], kFlashRows, wmma::mem_col_major);
        }
        __syncwarp();
    };

    // First pass: each row's maximum and sum over its visible keys, a lane's keys of a step in
    // float, merged into the lane's (WideRunning), then both lanes'.
    WideRunning row_run[N];
    for (int j0 = block.start; j0 < block.end; j0 += kFlashKeys) {
        const bool work = j0 >= start && j0 < processed;
        scores(j0, work);
        if (work) {
            Running step[N];
            for (int j = upper; j < kFlashKeys; j += 2) {
                const int key = j0 + j;
                if (key < lo || key >= hi) continue;
#pragma unroll
                for (int m = 0; m < N; ++m) Add(step[m], tile[m][j * kFlashRows + row]);
            }
#pragma unroll
            for (int m = 0; m < N; ++m) row_run[m] = Merge(row_run[m], Widen(step[m]));
        }
        __syncwarp();  // the tiles are the next step's
    }
    Running run[N];  // each row's maximum and sum, as the weights use them
#pragma unroll
    for (int m = 0; m < N; ++m) {
        const WideRunning both = MergeHalves(row_run[m], upper);
        run[m] = {both.m, static_cast<float>(both.sum)};
    }

    // Second pass: the weights, into the lane's sums, the row's cells and the outputs.
    float hidden[N], sink[N];  // a key outside the row's window: 0, or NaN where the row's sum is
    float log_sum[N];          // a weight's log is its score less the row's maximum, less this
#pragma unroll
    for (int m = 0; m < N; ++m) sink[m] = hidden[m] = 0.0f * (1.0f / run[m].sum), log_sum[m] = logf(run[m].sum);
    RowSums<N> sums;
    CellMaxima<N> cell;
    cell.upper = upper;
    int at_cell = start / a.pool, cell_end = (at_cell + 1) * a.pool;
    if (measured)
        for (int c = 0; c < at_cell; ++c) {  // wholly before the first step
            cell.Reset();
            cell.Add(hidden);
            cell.Write(a, h * a.rows + r, c);
        }
    cell.Reset();
    if (at_cell * a.pool < start) cell.Add(hidden);  // its keys before the first step
    // Key `key` (with weights w) into the row's cells, the keys in order.
    auto into_cells = [&](int key, const float (&w)[N]) {
        if (key >= keys) return;
        if (key >= cell_end) {  // keys come one by one: the next cell
            cell.Write(a, h * a.rows + r, at_cell);
            cell.Reset();
            ++at_cell;
            cell_end += a.pool;
        }
        cell.Add(w);
    };
    Sums y[N][DY / 16];
#pragma unroll
    for (int m = 0; m < N; ++m)
#pragma unroll
        for (int n = 0; n < DY / 16; ++n) wmma::fill_fragment(y[m][n], 0.0f);
    for (int j0 = block.start; j0 < block.end; j0 += kFlashKeys) {
        const bool work = j0 >= start && j0 < processed;  // the same for the whole warp
        scores(j0, work);
        for (int pair = 0; pair < kFlashKeys && work; pair += 2) {
            const int j = pair + upper;
            const int key = j0 + j;
            // Each weight, and its entropy term -w ln w with ln w = (s - max) - ln(sum): no logf a
            // key and side; 0 for a weight of 0 (a hidden key, or one whose exp underflowed), NaN
            // for NaN.
            float w[N], other[N], entropy[N];
#pragma unroll
            for (int m = 0; m < N; ++m) {
                float& at = tile[m][j * kFlashRows + row];
                w[m] = Weight(at, key, lo, hi, run[m].m, run[m].sum, hidden[m]);
                entropy[m] = w[m] != 0.0f ? -w[m] * ((at - run[m].m) - log_sum[m]) : 0.0f;
                at = w[m];  // for the outputs: a key past `keys` weighs 0 (or NaN in a NaN row)
                other[m] = __shfl_xor_sync(kWholeWarp, w[m], kFlashRows);
            }
            if (!measured) continue;
            if (key < hi && key < keys) AddKey(sums, w, entropy);  // SoftmaxAndCompareRows's keys 0..i
            if (key == 0)  // the lower lane's
#pragma unroll
                for (int m = 0; m < N; ++m) sink[m] = w[m];
            float first[N], second[N];  // the pair's keys in order
#pragma unroll
            for (int m = 0; m < N; ++m) first[m] = upper ? other[m] : w[m], second[m] = upper ? w[m] : other[m];
            into_cells(j0 + pair, first);
            into_cells(j0 + pair + 1, second);
        }
        __syncwarp();
#pragma unroll
        for (int m = 0; m < N; ++m) {
            __syncthreads();  // the stage is free
            Stage<D, DY, VALUE_LD>(v[m] + static_cast<int64_t>(j0) * D + y_first, stage);
            __syncthreads();
            if (work) OutputStep<VALUE_LD, DY>(tile[m], stage, y[m]);
        }
        __syncwarp();
    }
    if (r0 >= a.rows) return;  // a whole warp, past the block's rows

#pragma unroll
    for (int m = 0; m < N; ++m)
#pragma unroll
        for (int n = 0; n < DY / 16; ++n)
            wmma::store_matrix_sync(a.y[m] + (h * a.padded_rows + r0) * D + y_first + n * 16, y[m][n], D, wmma::mem_row_major);
    // The upper lane's sums and five largest, to the lower lane.
    double total[RowSums<N>::Q];
#pragma unroll
    for (int q2 = 0; q2 < RowSums<N>::Q; ++q2) total[q2] = sums.sum[q2] + __shfl_xor_sync(kWholeWarp, sums.sum[q2], kFlashRows);
    float theirs[N][kTop];
#pragma unroll
    for (int m = 0; m < N; ++m)
#pragma unroll
        for (int t = 0; t < kTop; ++t) theirs[m][t] = __shfl_xor_sync(kWholeWarp, sums.best[m][t], kFlashRows);
    if (!measured) return;
    // The row's last cells: past the keys gone through, every key is hidden.
    const int row_end = cell_end < keys ? cell_end : keys;
    if (row_end > processed) cell.Add(hidden);
    cell.Write(a, h * a.rows + r, at_cell);
    for (int c = at_cell + 1; c < a.cells; ++c) {
        cell.Reset();
        cell.Add(hidden);
        cell.Write(a, h * a.rows + r, c);
    }
    if (upper) return;
    const float* top[N];
#pragma unroll
    for (int m = 0; m < N; ++m) {
#pragma unroll
        for (int t = 0; t < kTop; ++t) Insert(sums.best[m], theirs[m][t]);
        top[m] = sums.best[m];
    }
    Outputs<N> o;
#pragma unroll
    for (int m = 0; m < N; ++m) o.out[m] = a.out[m];
#pragma unroll
    for (int p = 0; p < kPairs<N>; ++p) o.js[p] = a.js[p], o.l1[p] = a.l1[p];
    WriteRow<N>(total, top, sink, o, h * a.rows + r, hi);
#endif
}

}  // namespace
}  // namespace model::cuda
