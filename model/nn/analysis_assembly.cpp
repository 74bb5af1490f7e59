// The assembly of an analysis (analysis_assembly_torch.h).
#include "model/nn/analysis_assembly_torch.h"

#include <algorithm>
#include <cassert>
#include <iterator>

#include <ATen/Parallel.h>

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

}  // namespace

void HostRows::Update(int64_t p, int64_t T, const std::vector<std::vector<at::Tensor>>& fields) {
    // With no new rows (p == T) the fields hold no tensors, and the layers and heads are the kept ones.
    const int64_t F = static_cast<int64_t>(fields.size()), L = p < T && F > 0 ? static_cast<int64_t>(fields[0].size()) : m_layers;
    const int64_t H = p < T && L > 0 ? fields[0][0].size(0) : m_heads;
    assert(p == 0 || (F == m_fields && L == m_layers && H == m_heads && p <= m_T));
    const int64_t rows = F * L * H, capacity = (T + kRoom - 1) / kRoom * kRoom;
    if (p == 0 ? capacity != m_capacity || rows != m_fields * m_layers * m_heads : T > m_capacity) {
        std::vector<float> grown(static_cast<size_t>(rows * capacity));
        for (int64_t r = 0; r < rows && p > 0; ++r) std::copy_n(m_rows.data() + r * m_capacity, p, grown.data() + r * capacity);
        m_rows = std::move(grown);
        m_capacity = capacity;
    }
    m_fields = F, m_layers = L, m_heads = H, m_T = T;
    const int64_t n = T - p;
    if (n == 0) return;
    std::vector<at::Tensor> parts;
    for (const std::vector<at::Tensor>& field : fields) parts.insert(parts.end(), field.begin(), field.end());
    const std::vector<at::Tensor> host = ToHostAtOnce(parts, at::kFloat);
    at::parallel_for(0, F * L, 1, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
            assert(host[i].size(0) == H && host[i].size(1) == n);
            const float* in = host[i].data_ptr<float>();
            float* out = m_rows.data() + i * H * m_capacity + p;
            for (int64_t h = 0; h < H; ++h) std::copy_n(in + h * n, n, out + h * m_capacity);
        }
    });
}

std::vector<float> HostRows::Array(size_t f) const {
    const int64_t rows = m_layers * m_heads;
    std::vector<float> out;
    out.reserve(static_cast<size_t>(rows * m_T));  // filled by appending: no zeros written first
    const float* in = m_rows.data() + static_cast<int64_t>(f) * rows * m_capacity;
    for (int64_t r = 0; r < rows; ++r) out.insert(out.end(), in + r * m_capacity, in + r * m_capacity + m_T);
    return out;
}

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
                        const MeasuredRows& measures, const QkSpectrum& spectrum, HostRows* rows) {
    Analysis a;
    const ModelConfig& c = plan.Model(Side::Ssa).config;
    a.n_layer = c.n_layer;
    a.n_head = c.n_head;
    a.n_tokens = static_cast<int>(plan.T);
    a.tokens = tokens;

    // Every [L, H, T] array: where it goes, and its new rows p..T-1 a layer.
    std::vector<std::vector<float>*> arrays;
    std::vector<std::vector<at::Tensor>> fields;
    const int64_t p = plan.p, n = plan.T - plan.p;
    auto add = [&](std::vector<float>* array, const auto& new_rows_of_layer) {
        arrays.push_back(array);
        std::vector<at::Tensor>& field = fields.emplace_back();
        for (size_t l = 0; l < layers.size() && n > 0; ++l) field.push_back(new_rows_of_layer(l));
    };
    for (const SideFields& f : kSideFields) {
        if (!Computes(plan, f.side)) continue;
        std::vector<NamedArray>& metrics = (a.*f.metrics).rows;
        for (const RowMetricField& field : kRowMetricFields) metrics.push_back({field.name, {}});
        for (size_t i = 0; i < std::size(kRowMetricFields); ++i)
            add(&metrics[i].values, [&](size_t l) { return measures.layers[l].metrics[f.side].*kRowMetricFields[i].tensor; });
        add(&(a.*f.tau_q), [&](size_t l) { return layers[l].side[f.side].tau_q.narrow(1, p, n); });
        add(&(a.*f.tau_v), [&](size_t l) { return layers[l].side[f.side].new_tau_v; });
    }
    for (int k = 0; k < plan.pairs; ++k) {
        add(&(a.*kPairFields[k].js), [&](size_t l) { return measures.layers[l].pairs[k].js; });
        add(&(a.*kPairFields[k].l1), [&](size_t l) { return measures.layers[l].pairs[k].l1; });
    }
    add(&a.tau_q_position, [&](size_t l) { return layers[l].new_tau_q_position; });
    add(&a.tau_q_token, [&](size_t l) { return layers[l].new_tau_q_token; });
    rows->Update(p, plan.T, fields);
    at::parallel_for(0, static_cast<int64_t>(arrays.size()), 1, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) *arrays[i] = rows->Array(static_cast<size_t>(i));
    });

    a.thumbnails = measures.thumbnails;
    const std::vector<at::Tensor> qk = ToHostAtOnce({spectrum.opnorm, spectrum.eig_mean, spectrum.eig_var}, at::kFloat);
    std::vector<float>* qk_arrays[] = {&a.qk_opnorm, &a.qk_eig_mean, &a.qk_eig_var};
    for (size_t i = 0; i < qk.size(); ++i) qk_arrays[i]->assign(qk[i].data_ptr<float>(), qk[i].data_ptr<float>() + qk[i].numel());
    a.effective_qk_norm.resize(a.tau_q.size());
    const size_t T = static_cast<size_t>(plan.T);
    for (size_t row = 0; row < a.qk_opnorm.size(); ++row)  // [L, H] rows of T
        for (size_t t = row * T; t < (row + 1) * T && t < a.tau_q.size(); ++t) a.effective_qk_norm[t] = a.tau_q[t] * a.qk_opnorm[row];
    return a;
}

void AssemblePredictions(const AnalysisPlan& plan, const PerSide<SidePredictions>& predictions, const at::Tensor& next_logits, Analysis* a) {
    // Every side's floats in one transfer from a device, and its integers in another.
    std::vector<std::vector<float>*> float_arrays;
    std::vector<std::vector<int32_t>*> int_arrays;
    std::vector<at::Tensor> floats, ints;
    for (const SideFields& f : kSideFields) {
        const SidePredictions& p = predictions[f.side];
        if (!Computes(plan, f.side) || !p.hidden.defined()) continue;
        float_arrays.insert(float_arrays.end(), {&(a->*f.loss), &(a->*f.top_probs)});
        floats.insert(floats.end(), {p.loss, p.top_probs});
        int_arrays.insert(int_arrays.end(), {&(a->*f.rank), &(a->*f.top_ids)});
        ints.insert(ints.end(), {p.rank, p.top_ids});
    }
    if (next_logits.defined()) {
        float_arrays.push_back(&a->next_logits);
        floats.push_back(next_logits);
    }
    const std::vector<at::Tensor> host_floats = ToHostAtOnce(floats, at::kFloat), host_ints = ToHostAtOnce(ints, at::kInt);
    for (size_t i = 0; i < floats.size(); ++i)
        float_arrays[i]->assign(host_floats[i].data_ptr<float>(), host_floats[i].data_ptr<float>() + host_floats[i].numel());
    for (size_t i = 0; i < ints.size(); ++i)
        int_arrays[i]->assign(host_ints[i].data_ptr<int32_t>(), host_ints[i].data_ptr<int32_t>() + host_ints[i].numel());
}

}  // namespace model
