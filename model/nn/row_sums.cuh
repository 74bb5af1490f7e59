// What every kernel of a row of attention keeps as it goes over the row's keys, device code only
// (metrics_kernels.cuh's kernels and flash_kernels.cuh's; the tests run them on the CPU): a
// softmax's running maximum and sum (Running), a key's weight, and the row statistics' sums
// (RowSums: each weight's term in float, the row's sums in double, as the CPU's fused pass keeps
// them; the five largest weights start at 0, the weight of every key above the diagonal, so a row
// of fewer than five keys sums like a top-k of the row), and the figures written from them.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>

#include "model/nn/metrics_cuda.h"

namespace model::cuda {
namespace {

constexpr int kTop = 5;

template <int N>
constexpr int kPairs = N * (N - 1) / 2;
// The pairs (0, 1), (0, 2), (1, 2): functions, not a table, so that in unrolled loops they are
// constants and the maps' values stay in registers.
__host__ __device__ constexpr int PairFirst(int k) { return k < 2 ? 0 : 1; }
__host__ __device__ constexpr int PairSecond(int k) { return k == 0 ? 1 : 2; }

// Where a row's figures go: each map's row metrics, each pair's JS and L1 (metrics_cuda.h).
template <int N>
struct Outputs {
    RowOutputs out[N];
    float* js[kPairs<N>];
    float* l1[kPairs<N>];
};

// -x ln x with 0 ln 0 = 0; subnormal weights count as FLT_MIN (they add under 1e-36), as on the CPU.
__device__ __forceinline__ float NegXLogX(float x) { return -x * logf(fmaxf(x, FLT_MIN)); }

// Keeps the kTop largest of what it is given, descending. Unrolled with fixed indices, so a
// thread's lists stay in registers (a loop with a moving index put them in local memory).
__device__ __forceinline__ void Insert(float* best, float x) {
    if (!(x > best[kTop - 1])) return;
#pragma unroll
    for (int i = 0; i < kTop; ++i)
        if (x > best[i]) {
            const float t = best[i];
            best[i] = x;
            x = t;
        }
}

// A thread's share of a row's sums: each map's entropy and square, each pair's H(m) and L1; and
// each map's five largest weights. They start at 0, so a key of weight 0 changes none of them.
template <int N>
struct RowSums {
    static constexpr int P = kPairs<N>, Q = 2 * N + 2 * P;
    double sum[Q] = {};
    float best[N][kTop] = {};
};

// One key's weights in each map, added to a thread's sums; `entropy[m]` is the key's term -v ln v
// of map m.
template <int N>
__device__ __forceinline__ void AddKey(RowSums<N>& s, const float (&v)[N], const float (&entropy)[N]) {
    constexpr int P = kPairs<N>;
#pragma unroll
    for (int m = 0; m < N; ++m) {
        s.sum[m] += entropy[m];
        s.sum[N + m] += v[m] * v[m];
        Insert(s.best[m], v[m]);
    }
#pragma unroll
    for (int k = 0; k < P; ++k) {
        const float p = v[PairFirst(k)], q = v[PairSecond(k)];
        s.sum[2 * N + k] += NegXLogX(0.5f * (p + q));
        s.sum[2 * N + P + k] += fabsf(p - q);
    }
}

// The same, each map's term from its weight (-v ln v, NegXLogX).
template <int N>
__device__ __forceinline__ void AddKey(RowSums<N>& s, const float (&v)[N]) {
    float entropy[N];
#pragma unroll
    for (int m = 0; m < N; ++m) entropy[m] = NegXLogX(v[m]);
    AddKey(s, v, entropy);
}

// A row's figures from its sums (`total`), each map's five largest (`top[m]`) and its weight of
// key 0 (`sink[m]`), written to row `row` of `o`; `keys` the row's keys 0..i (i + 1).
template <int N>
__device__ __forceinline__ void WriteRow(const double (&total)[RowSums<N>::Q], const float* const (&top)[N], const float (&sink)[N],
                                         const Outputs<N>& o, int64_t row, int64_t keys) {
    constexpr int P = RowSums<N>::P;
    for (int m = 0; m < N; ++m) {
        const RowOutputs& out = o.out[m];
        const double entropy = total[m], square = total[N + m];
        const float* t = top[m];
        out.entropy[row] = static_cast<float>(entropy);
        out.normalized_entropy[row] = keys > 1 ? static_cast<float>(entropy / log(static_cast<double>(keys))) : 0.0f;
        out.spikiness[row] = static_cast<float>(1.0 / (static_cast<double>(keys) * square));
        out.max_weight[row] = t[0];
        out.top5_mass[row] = static_cast<float>(static_cast<double>(t[0]) + t[1] + t[2] + t[3] + t[4]);
        out.effective_support[row] = static_cast<float>(exp(entropy));
        out.sink_mass[row] = sink[m];
    }
    // 0.5 KL(p||m) + 0.5 KL(q||m) = H(m) - (H(p) + H(q)) / 2; rounding can dip below 0 for equal rows.
    for (int k = 0; k < P; ++k) {
        o.js[k][row] = static_cast<float>(fmax(0.0, total[2 * N + k] - 0.5 * (total[PairFirst(k)] + total[PairSecond(k)])));
        o.l1[k][row] = static_cast<float>(total[2 * N + P + k]);
    }
}

// The larger, NaN winning as torch's max does.
__device__ __forceinline__ float Max(float m, float v) { return (v > m || v != v) ? v : m; }

// Softmax's running state over some keys: their maximum m and the sum of exp(s - m). A key of
// -inf adds exactly 0 (as exp(-inf - m) does in torch) and a NaN makes the sum NaN.
template <class Sum>
struct RunningOf {
    float m = -INFINITY;
    Sum sum = 0;
};
using Running = RunningOf<float>;
// A long row's state, its sum in double, each step's float state merged in (the fused kernel's: a
// lane's keys in one float chain drifted 1.6e-5 from the sum at 32,768 keys; this way about 5e-8
// at any length, bench's fused_check and tests/model/nn/test_flash_kernel.cpp).
using WideRunning = RunningOf<double>;

__host__ __device__ __forceinline__ void Add(Running& r, float s) {
    if (s == INFINITY) s = NAN;  // torch: exp(inf - inf) makes the row's sum, and so the row, NaN
    if (s > r.m) {
        r.sum = r.sum * expf(r.m - s) + 1.0f;  // exp(-inf) = 0 while nothing finite was seen
        r.m = s;
    } else if (s != -INFINITY) {
        r.sum += expf(s - r.m);
    }
}

template <class Sum>
__host__ __device__ __forceinline__ RunningOf<Sum> Merge(RunningOf<Sum> a, RunningOf<Sum> b) {
    if (b.m > a.m) {
        const RunningOf<Sum> t = a;
        a = b;
        b = t;
    }
    if (b.m != -INFINITY) a.sum += b.sum * expf(b.m - a.m);
    else if (b.sum != b.sum) a.sum = b.sum;  // a NaN seen under a maximum of -inf
    return a;
}

__host__ __device__ __forceinline__ WideRunning Widen(Running r) { return {r.m, r.sum}; }

// Key j's softmax weight in a row whose visible keys lo..hi - 1 have maximum m and sum `sum`: a
// hidden key gets 0 * (1 / sum), 0 or NaN where the row's sum is NaN (a row of -inf scores only has
// sum 0 and m = -inf, and its visible keys come out NaN as in torch).
__device__ __forceinline__ float Weight(float s, int64_t j, int64_t lo, int64_t hi, float m, float sum, float hidden) {
    return j >= lo && j < hi ? expf(s - m) / sum : hidden;
}

}  // namespace
}  // namespace model::cuda
