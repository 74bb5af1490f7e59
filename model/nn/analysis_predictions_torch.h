// The predictions of Engine::Analyze (the stages: analysis_plan_torch.h): the last layer's rows
// times the output head, a run's sides in one product, and what each position predicts (its next
// token's loss and rank, the top kTopK). The one place that multiplies rows by the head. Per side
// it keeps the last layer's output and the predictions of every position (SidePredictions), so
// the next analysis computes rows from p - 1 on (row p - 1 predicts token p).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <ATen/ATen.h>

#include "model/nn/analysis_plan_torch.h"
#include "model/nn/row_buffers.h"

namespace model {

// One side's predictions, every position so far; undefined for a side without a forward pass of
// its own (the layer-local comparison).
struct SidePredictions {
    at::Tensor hidden;              // [1, T, E]: the last layer's output
    at::Tensor loss, rank;          // [T - 1] float32, int64
    at::Tensor top_ids, top_probs;  // [T, K] int64, float32
};

// What a block of logits rows [n, V] says: each row's log-sum-exp and top kTopK (ids, logits:
// descending, of equal logits the earlier first, -inf and NaN left out); for the first m rows,
// whose next token is targets[r], that token's logit and how many logits exceed it (its 0-based
// rank). On the CPU one scan a row beside ATen's vectorised logsumexp (log_softmax, topk and a
// comparison tensor took 2.5x as long); on CUDA the same scan as a kernel with
// SSAVIZ_CUDA_PREDICTIONS=1 (until a device has checked it), else torch ops.
struct RowPredictions {
    at::Tensor log_sum_exp;          // [n]
    at::Tensor top_ids, top_logits;  // [n, K] int64, float32
    at::Tensor actual, rank;         // [m] float32, int64
};
RowPredictions PredictRows(const at::Tensor& logits, const at::Tensor& targets);

// `streams`: the last layer's new rows a run (LayerPass::Streams); `old`: the last analysis's,
// whose rows this one keeps. Each side's `hidden` is a view of `buffers` (StreamSlot), which the
// new rows are written into. Sets `next_logits` to the SSA side's logits after the last token,
// [V] float32, and reports the fraction done to `progress` (may be empty) as it goes.
PerSide<SidePredictions> Predict(const AnalysisPlan& plan, const std::vector<int32_t>& ids, const std::vector<at::Tensor>& streams,
                                 const PerSide<SidePredictions>& old, RowBuffers& buffers, at::Tensor* next_logits,
                                 const std::function<void(float)>& progress);

}  // namespace model
