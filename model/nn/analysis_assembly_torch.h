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

// The [L, H, T] row arrays of the last analysis on the host: each side's row metrics and
// temperatures, the pairs' divergences and tau_q's two terms, "fields" in the order the assembly
// lists them. An analysis copies only its new rows from the device, every field's in one transfer,
// and keeps the bands of rows below p (RowArray): typing at the end builds one band a field.
class HostRows {
public:
    // A field's rows p..T-1 in one layer: rows first_row..first_row + H - 1 of `rows` [*, T - p]
    // (a tensor of its own, or its part of one that holds several fields, as LayerMeasures does).
    struct Part {
        Part(at::Tensor t, int64_t first = 0) : rows(std::move(t)), first_row(first) {}
        at::Tensor rows;
        int64_t first_row = 0;
    };
    // `fields[f][l]`: field f's rows p..T-1 of layer l, H heads, on any device (none when p == T);
    // the rows below p are the last Update's, which had the same fields, layers and heads. Each
    // tensor the parts name is copied once.
    void Update(int64_t p, int64_t T, int64_t heads, const std::vector<std::vector<Part>>& fields);
    const RowArray& Array(size_t f) const { return m_arrays[f]; }  // field f as [L, H, T]
    // Field f with each head's row times its factor (`factor`, [L * H], the same for every Update
    // that keeps rows: the model's), kept as the fields are: made from the last Update's p on.
    const RowArray& Scaled(size_t f, const std::vector<float>& factor);

private:
    int64_t m_layers = 0, m_heads = 0, m_T = 0, m_p = 0;
    std::vector<RowArray> m_arrays;  // by field
    RowArray m_scaled;               // Scaled's last, of field m_scaled_field
    size_t m_scaled_field = 0;
    bool m_scaled_current = false;    // made since the last Update
};

// The maps of every side and layer, from the layers' q, k and tau_q as the forward pass used them
// (ones multiply exactly, so the vanilla maps rebuild bit for bit too); `old` (null: none)
// answered for the last analysis, whose ids agree with these up to p.
std::shared_ptr<RecomputedMaps> AssembleMaps(const AnalysisPlan& plan, const std::vector<LayerRows>& layers, const RecomputedMaps* old);

// The temperatures, row metrics, divergences, thumbnails and the spectrum's [L, H] figures of an
// analysis of `tokens`, with its shape; the caller fills in the rest (maps, timings, what it
// compared). `rows` holds the last analysis's arrays (rows below p), and then this one's.
Analysis AssembleLayers(const AnalysisPlan& plan, const Tokenization& tokens, const std::vector<LayerRows>& layers,
                        const MeasuredRows& measures, const QkSpectrum& spectrum, HostRows* rows);

// Each side's predictions, and the SSA side's logits after the last token (`next_logits`, [V]).
void AssemblePredictions(const AnalysisPlan& plan, const PerSide<SidePredictions>& predictions, const at::Tensor& next_logits, Analysis* a);

}  // namespace model
