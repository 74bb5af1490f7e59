// The assembly of Engine::Analyze (the stages: analysis_plan_torch.h): what the other stages keep
// on the device, copied to the host arrays of an Analysis, and the maps it rebuilds a head's map
// from. Which Analysis fields hold which side's values is kSideFields, in the .cpp.
#pragma once

#include <memory>
#include <vector>

#include <ATen/ATen.h>

#include "model/nn/analysis.h"
#include "model/nn/analysis_layer_pass_torch.h"
#include "model/nn/analysis_plan_torch.h"
#include "model/nn/analysis_predictions_torch.h"
#include "model/nn/analysis_row_measures_torch.h"
#include "model/nn/attention_maps_torch.h"
#include "model/nn/metrics.h"

namespace model {

// The maps of every side and layer, from the layers' q, k and tau_q as the forward pass used them
// (ones multiply exactly, so the vanilla maps rebuild bit for bit too); `old` (null: none)
// answered for the last analysis, whose ids agree with these up to p.
std::shared_ptr<RecomputedMaps> AssembleMaps(const AnalysisPlan& plan, const std::vector<LayerRows>& layers, const RecomputedMaps* old);

// The temperatures, row metrics, divergences, thumbnails and the spectrum's [L, H] figures of an
// analysis of `tokens`, with its shape; the caller fills in the rest (maps, timings, what it compared).
Analysis AssembleLayers(const AnalysisPlan& plan, const Tokenization& tokens, const std::vector<LayerRows>& layers,
                        const MeasuredRows& measures, const QkSpectrum& spectrum);

// Each side's predictions, and the SSA side's logits after the last token (`next_logits`, [V]).
void AssemblePredictions(const AnalysisPlan& plan, const PerSide<SidePredictions>& predictions, const at::Tensor& next_logits, Analysis* a);

}  // namespace model
