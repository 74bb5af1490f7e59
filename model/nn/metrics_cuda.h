// The fused row statistics of metrics.h on a CUDA device: one thread block a row reads each map's
// keys 0..i once and writes every row metric of each map and the JS divergence and L1 distance of
// each pair; the thumbnails' pooling; the attention rows' masked softmax; a map's extent; and the
// device's memory, for reports. Compiled only where the LibTorch has CUDA (SSAVIZ_CUDA_KERNELS);
// free of LibTorch and CUDA types, so metrics.cpp includes it as plain C++.
#pragma once

#include <cstdint>

#include "model/nn/cuda_stream.h"

namespace model::cuda {

// One map's row metrics, device pointers to [rows] float32 (metrics.h's RowMetricTensors).
struct RowOutputs {
    float *entropy, *normalized_entropy, *spikiness, *max_weight, *top5_mass, *effective_support, *sink_mass;
};

// `maps` (2 or 3) point to device float32 [rows, T] maps, row r being query first + r % R (so
// keys 0..first + r % R, zero above). Pairs in the order (0, 1), then with three (0, 2), (1, 2).
// Each function here launches on `stream` (the device's current one, cuda_stream.h) and returns
// null, or CUDA's message for a failed launch.
const char* CompareRows(Stream stream, int maps, const float* const* in, int64_t rows, int64_t R, int64_t T, int64_t first, const RowOutputs* out,
                        float* const* js, float* const* l1);

// Thumbnail pooling (attention_maps_torch.h's PoolThumbnails) of maps p and q, device float32
// [maps, R, T] (rows from a multiple of `pool`), into [maps, ceil(R / pool), ceil(T / pool)]: each
// block's max of p and of q, and its p - q of largest magnitude (the positive one unless the
// negative's magnitude exceeds it by more than the factor 1 / keep). One thread a block of cells.
const char* PoolMaps(Stream stream, const float* p, const float* q, int64_t maps, int64_t R, int64_t T, int pool, float keep, float* out_p, float* out_q,
                     float* out_difference);

// The attention rows' causal softmax in place (forward.h's AttentionRows): `scores` is device float32
// [rows, T], row r the query first + r % R, whose visible keys are max(0, i - window + 1)..i (window 0:
// 0..i). One thread block a row reads the visible scores once for their maximum and sum (online),
// then writes the row: exp(s - max) / sum on the visible keys, 0 elsewhere (NaN where the row's sum
// is, as torch's softmax of a row with a NaN or +inf score gives).
const char* MaskedSoftmaxRows(Stream stream, float* scores, int64_t rows, int64_t R, int64_t T, int64_t first, int64_t window);

// MaskedSoftmaxRows and CompareRows in one pass (issue 37): `scores` point to `maps` (2 or 3) device
// float32 [rows, T] score maps of one shape and one mask, each softmaxed in place as
// MaskedSoftmaxRows does it, and the rows it writes measured as CompareRows measures them, both
// bit for bit, while they are in registers: no map is read again.
const char* SoftmaxAndCompareRows(Stream stream, int maps, float* const* scores, int64_t rows, int64_t R, int64_t T, int64_t first, int64_t window,
                                  const RowOutputs* out, float* const* js, float* const* l1);

// A block's attention rows in one pass that never writes them (issue 37's item 2, FlashAttention's
// way): for each of `maps` (2 or 3) sides, rows first..first + rows - 1 of every head, their
// scores q k^T on TF32 tensor cores in three parts (tf32.h: within float32's rounding), each row's
// softmax over its visible keys (max(0, i - window + 1)..i; window 0: 0..i) found in a first pass
// over the keys and applied in a second, whose weights go straight into the row statistics
// (SoftmaxAndCompareRows's figures), the thumbnails' cells along the keys (PoolKeys's) and the
// outputs weights @ v (three TF32 parts again). Needs a device of compute capability 8.0 or more.
constexpr int kFlashRows = 16, kFlashKeys = 32;  // a warp's rows; keys a step
struct FlashArgs {
    int maps = 2;
    int64_t heads = 0, rows = 0, keys = 0, first = 0, window = 0, head_size = 0;
    int64_t padded_rows = 0;  // q's and y's rows a head: rows rounded up to kFlashRows
    int pool = 1;
    int64_t cells = 0;  // ceil(keys / pool)
    // Side m: q [heads, padded_rows, D] (scaled: 1 / sqrt(D) and tau_q in it), k and v [groups,
    // at least keys rounded up to kFlashKeys, D]; head h reads group h / heads_per_k[m] of k and
    // h / heads_per_v[m] of v. Rows 32-byte aligned (D a multiple of 8).
    const float *q[3] = {}, *k[3] = {}, *v[3] = {};
    int64_t k_stride[3] = {}, v_stride[3] = {};  // floats from one group to the next
    int heads_per_k[3] = {1, 1, 1}, heads_per_v[3] = {1, 1, 1};
    float* y[3] = {};  // [heads, padded_rows, D]: the outputs, rows past `rows` unspecified
    // The row statistics of row h * rows + r (as SoftmaxAndCompareRows's), and the cells: pair k
    // (sides 0 and k + 1) [4, heads, rows, cells], the largest p, q, p - q and q - p of each.
    RowOutputs out[3] = {};
    float *js[3] = {}, *l1[3] = {};
    float* pooled[2] = {};
    Stream stream = nullptr;  // its launches' (cuda_stream.h)
};
// The head sizes (D) the kernel is built for; others take the unfused way. A head of 128 takes two
// launches, each holding 64 of the outputs' dimensions (and making the weights again).
constexpr bool FlashHeadSize(int64_t d) { return d == 16 || d == 32 || d == 64 || d == 128; }
const char* FlashRows(const FlashArgs& args);

// The predictions' scan of rows of logits (analysis_predictions.cpp's on the CPU), bit for bit: for
// each row of `logits` (device float32 [rows, V]) its K (at most kTopLogits, at most V) largest
// logits and their ids into `top` and `top_ids` ([rows, K]), in the CPU's order (descending, of
// equal logits the earlier first; -inf and NaN left out, their places (-inf, 0)); and for the first
// m rows, whose next token is targets[r] (device int64 [m]), that token's logit into `actual` and
// how many logits exceed it into `rank` ([m]). One thread block a row reads it once.
constexpr int kTopLogits = 10;
const char* TopLogits(Stream stream, const float* logits, int64_t rows, int64_t V, int K, const int64_t* targets, int64_t m, float* top, int64_t* top_ids,
                      float* actual, int64_t* rank);

// The extent of rows first..first + rows - 1 of a map, device float32 [rows, width], over their
// causal cells (j <= first + r) with finite values (attention_maps.h's MapExtent): `out`, device
// uint32 [3] set beforehand to the bits of 0, 1 and 0, becomes the bits of the largest value (0
// when none is above it), the smallest positive value (1 when none is below it) and the largest
// magnitude. All three are non-negative, so their bits order as their values do and the thread
// blocks merge them with atomicMax and atomicMin.
const char* MapExtentBits(Stream stream, const float* map, int64_t rows, int64_t width, int64_t first, unsigned* out);

// Device `device`'s memory in bytes: all of it, and what is in use (by this process's caching
// allocator and every other), both 0 when CUDA cannot say. The calling thread's current device is
// left as it was.
struct MemoryBytes {
    int64_t total = 0, used = 0;
};
MemoryBytes DeviceMemory(int device);

}  // namespace model::cuda
