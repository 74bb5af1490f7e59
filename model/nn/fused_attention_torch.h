// A block's attention rows without writing them (issue 37's item 2): each side's scores, softmax,
// row statistics, thumbnail cells along the keys and outputs in one pass over the keys, where the
// unfused way (LayerPass::AttendAll) writes every side's [H, R, T] rows and reads them again for
// each. On a CUDA device of compute capability 8.0 or more, metrics_cuda.h's FlashRows kernel;
// on the CPU the same figures by the unfused way's own ops, so that the tests check what the
// layer pass does with them (or, for tests, the kernel itself run on the CPU: SetFusedKernelOnCpu).
// Off unless SSAVIZ_FUSED_ATTENTION=1 (or SetFusedAttention), until a device has checked and timed
// it (bench/gpu.sh).
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/ATen.h>

#include "model/nn/attention_maps_torch.h"

namespace model {

bool FusedAttention();
void SetFusedAttention(bool on);

namespace cuda {
struct FlashArgs;
}
// For tests: on the CPU, FusedAttentionRows hands the kernel's arguments, made from the sides as on
// a device, to `launch` (tests/model/nn/flash_on_cpu.h: the kernel run on the CPU) instead of
// taking the unfused way's ops; nullptr goes back to those. Returns an error, or nullptr.
using FlashLaunch = const char* (*)(const cuda::FlashArgs&);
void SetFusedKernelOnCpu(FlashLaunch launch);

// One side: q [H, R, D], scaled (1 / sqrt(D) and tau_q in it: ScaledQueries); k [G, K, D] and v
// [Gv, K, D], keys 0..K-1 with K >= the block's keys (head h reads group h / (H / G)). The kernel
// reads keys up to a multiple of kFusedKeyStep: with fewer, they are copied padded with zeros.
struct FusedSide {
    at::Tensor q, k, v;
};
constexpr int64_t kFusedKeyStep = 32;

struct FusedRows {
    at::Tensor measures;         // CompareMapsStacked's [RowMeasureCount(sides), H, R]
    KeyPooled cells[2];          // PoolKeys of side 0 against side 1, and against side 2 with three
    std::vector<at::Tensor> y;   // each side's outputs, [H, R, D]
};

// Rows first..first + R - 1 of 2 or 3 sides over keys 0..keys - 1, each row i seeing keys
// max(0, i - window + 1)..i (window 0: 0..i); `pool` the thumbnails' keys a cell. False, with
// nothing done, where there is no fused way for them: other than float32, sides of other shapes,
// a CUDA device without TF32 tensor cores or the kernel, a head size it is not built for.
bool FusedAttentionRows(const std::vector<FusedSide>& sides, int64_t first, int64_t keys, int64_t window, int pool, FusedRows* out);
// Whether FusedAttentionRows has a fused way for sides whose queries are like `q` ([H, R, D]): what
// it asks of the device, the dtype and the head size, before the sides' shapes (which an analysis's
// layer pass always gives right). The layer pass sizes its blocks by it.
bool FusedAttentionTakes(const at::Tensor& q);

}  // namespace model
