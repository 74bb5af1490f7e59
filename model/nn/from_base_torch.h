// The weights of from_base.h and the loss they make, in LibTorch.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "model/io/result.h"
#include "model/nn/forward.h"
#include "model/nn/from_base.h"

namespace model {

// `ssa`'s weights with `parts` from `base` (a model of its shape: the engine's OpenBase checks it).
// Tensors of other parts are shared with `ssa`; a layer a part touches gets copies of the matrices
// it changes, in float32 where the two models hold them in other dtypes. Fails, naming the tensor,
// where the two differ in shape or one lacks a tensor the other has.
Result<SsaGpt> WithBaseWeights(const SsaGpt& ssa, const SsaGpt& base, const std::vector<BasePart>& parts);
// Whether `mixed` (WithBaseWeights of `ssa`) holds the same weights as `ssa`, value for value: the
// parts taken were not changed by the fine-tune, and their loss is the baseline's.
bool SameWeights(const SsaGpt& ssa, const SsaGpt& mixed);

// The loss of tokens 1..T-1 of `ids` (checked by CheckIds) through `model`, `edits` (a layer each;
// empty: none) on its temperatures, as the analysis computes it: logsumexp of the logits in float32
// minus the token's, a block of positions at a time. Entry t - 1: token t's (as Analysis::loss).
Result<std::vector<float>> LossOfIds(const SsaGpt& model, const std::vector<int32_t>& ids, const std::vector<TemperatureEdit>& edits,
                            const std::atomic<bool>* cancel = nullptr);

}  // namespace model
