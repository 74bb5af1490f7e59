// The assembly of an analysis (analysis_assembly_torch.h).
#include "model/nn/analysis_assembly_torch.h"

#include <algorithm>

#include "model/nn/runtime_torch.h"

namespace model {

namespace {

// Where each side's values go in an Analysis.
struct SideFields {
    Side side;
    std::vector<float> Analysis::*tau_q;
    std::vector<float> Analysis::*tau_v;
    MapMetrics Analysis::*metrics;
    std::vector<float> Analysis::*loss;
    std::vector<int32_t> Analysis::*rank;
    std::vector<int32_t> Analysis::*top_ids;
    std::vector<float> Analysis::*top_probs;
};
const SideFields kSideFields[] = {
    {Side::Ssa, &Analysis::tau_q, &Analysis::tau_v, &Analysis::metrics, &Analysis::loss, &Analysis::rank, &Analysis::top_ids,
     &Analysis::top_probs},
    {Side::Compare, &Analysis::tau_q_compare, &Analysis::tau_v_compare, &Analysis::metrics_compare, &Analysis::loss_compare,
     &Analysis::rank_compare, &Analysis::top_ids_compare, &Analysis::top_probs_compare},
    {Side::Base, &Analysis::tau_q_base, &Analysis::tau_v_base, &Analysis::metrics_base, &Analysis::loss_base, &Analysis::rank_base,
     &Analysis::top_ids_base, &Analysis::top_probs_base},
};

// Where each SidePair's divergences go, in its order.
struct PairFields {
    std::vector<float> Analysis::*js;
    std::vector<float> Analysis::*l1;
};
const PairFields kPairFields[kSidePairCount] = {
    {&Analysis::js, &Analysis::l1}, {&Analysis::js_total, &Analysis::l1_total}, {&Analysis::js_drift, &Analysis::l1_drift}};

bool Computes(const AnalysisPlan& plan, Side s) { return std::find(plan.sides.begin(), plan.sides.end(), s) != plan.sides.end(); }

// One tensor a layer, [H, T] each, as one host array [L, H, T] in float32. On the CPU each layer
// is copied straight into the array (stacking first would copy everything twice); elsewhere the
// layers are stacked on the device and copied over once.
std::vector<float> LayersToHost(const std::vector<at::Tensor>& layers) {
    if (layers.empty() || !layers[0].is_cpu()) return layers.empty() ? std::vector<float>() : ToHost(at::stack(layers));
    size_t total = 0;
    for (const at::Tensor& t : layers) total += static_cast<size_t>(t.numel());
    std::vector<float> out(total);
    float* to = out.data();
    for (const at::Tensor& t : layers) {
        at::from_blob(to, t.sizes(), at::kFloat).copy_(t);
        to += t.numel();
    }
    return out;
}

// The same for one field of each layer's rows (LayerRows or LayerMeasures): `field(layer)`.
template <class Layer, class Field>
std::vector<float> LayersToHost(const std::vector<Layer>& layers, const Field& field) {
    std::vector<at::Tensor> parts;
    for (const Layer& l : layers) parts.push_back(field(l));
    return LayersToHost(parts);
}

MapMetrics MetricsToHost(const std::vector<LayerMeasures>& layers, Side side) {
    MapMetrics m;
    for (const RowMetricField& field : kRowMetricFields)
        m.rows.push_back({field.name, LayersToHost(layers, [&](const LayerMeasures& l) { return l.metrics[side].*field.tensor; })});
    return m;
}

std::vector<int32_t> IntsToHost(const at::Tensor& t) {
    const at::Tensor c = t.to(at::kCPU, at::kInt).contiguous();
    return std::vector<int32_t>(c.data_ptr<int32_t>(), c.data_ptr<int32_t>() + c.numel());
}

}  // namespace

std::shared_ptr<RecomputedMaps> AssembleMaps(const AnalysisPlan& plan, const std::vector<LayerRows>& layers, const RecomputedMaps* old) {
    auto maps = std::make_shared<RecomputedMaps>();
    for (Side s : plan.sides) {
        const bool local = plan.source[s].layer_local;
        for (size_t l = 0; l < layers.size(); ++l) {
            const SideRows& rows = layers[l].side[s];
            maps->Add(s, {rows.q, rows.k, local ? at::Tensor() : rows.tau_q, plan.Model(s).layers[l].window});
        }
    }
    if (old && plan.p > 0) maps->Reuse(*old, plan.p);
    return maps;
}

Analysis AssembleLayers(const AnalysisPlan& plan, const Tokenization& tokens, const std::vector<LayerRows>& layers,
                        const MeasuredRows& measures, const QkSpectrum& spectrum) {
    Analysis a;
    const ModelConfig& c = plan.Model(Side::Ssa).config;
    a.n_layer = c.n_layer;
    a.n_head = c.n_head;
    a.n_tokens = static_cast<int>(plan.T);
    a.tokens = tokens;
    for (const SideFields& f : kSideFields) {
        if (!Computes(plan, f.side)) continue;
        a.*f.metrics = MetricsToHost(measures.layers, f.side);
        a.*f.tau_q = LayersToHost(layers, [&](const LayerRows& l) { return l.side[f.side].tau_q; });
        a.*f.tau_v = LayersToHost(layers, [&](const LayerRows& l) { return l.side[f.side].tau_v; });
    }
    for (int k = 0; k < plan.pairs; ++k) {
        a.*kPairFields[k].js = LayersToHost(measures.layers, [&](const LayerMeasures& l) { return l.pairs[k].js; });
        a.*kPairFields[k].l1 = LayersToHost(measures.layers, [&](const LayerMeasures& l) { return l.pairs[k].l1; });
    }
    a.tau_q_position = LayersToHost(layers, [](const LayerRows& l) { return l.tau_q_position; });
    a.tau_q_token = LayersToHost(layers, [](const LayerRows& l) { return l.tau_q_token; });
    a.thumbnails = measures.thumbnails;
    a.qk_opnorm = ToHost(spectrum.opnorm);
    a.qk_eig_mean = ToHost(spectrum.eig_mean);
    a.qk_eig_var = ToHost(spectrum.eig_var);
    a.effective_qk_norm.resize(a.tau_q.size());
    const size_t T = static_cast<size_t>(plan.T);
    for (size_t row = 0; row < a.qk_opnorm.size(); ++row)  // [L, H] rows of T
        for (size_t t = row * T; t < (row + 1) * T && t < a.tau_q.size(); ++t) a.effective_qk_norm[t] = a.tau_q[t] * a.qk_opnorm[row];
    return a;
}

void AssemblePredictions(const AnalysisPlan& plan, const PerSide<SidePredictions>& predictions, const at::Tensor& next_logits, Analysis* a) {
    for (const SideFields& f : kSideFields) {
        const SidePredictions& p = predictions[f.side];
        if (!Computes(plan, f.side) || !p.hidden.defined()) continue;
        a->*f.loss = ToHost(p.loss);
        a->*f.rank = IntsToHost(p.rank);
        a->*f.top_ids = IntsToHost(p.top_ids);
        a->*f.top_probs = ToHost(p.top_probs);
    }
    if (next_logits.defined()) a->next_logits = ToHost(next_logits);
}

}  // namespace model
