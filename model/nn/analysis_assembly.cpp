// The assembly of an analysis (analysis_assembly_torch.h).
#include "model/nn/analysis_assembly_torch.h"

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <iterator>

#include <ATen/Parallel.h>

#include "model/nn/runtime_torch.h"

namespace model {

namespace {

// Where each side's values go in an Analysis.
struct SideFields {
    Side side;
    RowArray Analysis::*tau_q;
    RowArray Analysis::*tau_v;
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
    RowArray Analysis::*js;
    RowArray Analysis::*l1;
};
const PairFields kPairFields[kSidePairCount] = {
    {&Analysis::js, &Analysis::l1}, {&Analysis::js_total, &Analysis::l1_total}, {&Analysis::js_drift, &Analysis::l1_drift}};

bool Computes(const AnalysisPlan& plan, Side s) { return std::find(plan.sides.begin(), plan.sides.end(), s) != plan.sides.end(); }

// An array's bands for tokens 0..T-1 of `rows` rows, where `old` holds tokens below p: old's bands
// entirely below p, shared, then new ones (`fresh`, from band `first_fresh`) with old's tokens
// below p copied in, for the caller to write tokens p..T-1 into and then Seal.
struct Rebuilt {
    std::vector<std::shared_ptr<const RowArray::Band>> bands;
    std::vector<RowArray::Band*> fresh;
    int64_t first_fresh = 0, T = 0;
    float* At(int64_t row, int64_t t) const {
        constexpr int64_t B = RowArray::kBand;
        return fresh[static_cast<size_t>(t / B - first_fresh)]->values.data() + row * B + t % B;
    }
    // Each fresh band's running figures, in order (each continues the one before).
    void Seal() const {
        constexpr int64_t B = RowArray::kBand;
        for (size_t i = 0; i < fresh.size(); ++i) {
            const int64_t b = first_fresh + static_cast<int64_t>(i);
            RowArray::Seal(fresh[i], std::min(B, T - b * B), b > 0 ? bands[static_cast<size_t>(b - 1)].get() : nullptr);
        }
    }
};
Rebuilt Rebuild(const RowArray& old, int64_t p, int64_t rows, int64_t T) {
    constexpr int64_t B = RowArray::kBand;
    assert(p == 0 || (old.rows() == rows && p <= old.tokens()));
    Rebuilt r;
    r.first_fresh = p / B;
    r.T = T;
    for (int64_t b = 0; b < r.first_fresh; ++b) r.bands.push_back(old.bands()[static_cast<size_t>(b)]);
    for (int64_t b = r.first_fresh; b * B < T; ++b) {
        std::shared_ptr<RowArray::Band> band = RowArray::NewBand(rows);
        if (b == r.first_fresh && p % B != 0)
            for (int64_t row = 0; row < rows; ++row)
                std::copy_n(old.bands()[static_cast<size_t>(b)]->values.data() + row * B, p % B, band->values.data() + row * B);
        r.fresh.push_back(band.get());
        r.bands.push_back(std::move(band));
    }
    return r;
}

// `v`'s first tokens, its bands shared.
RowArray Prefix(const RowArray& v, int64_t T) {
    const auto& bands = v.bands();
    return RowArray(v.rows(), T, {bands.begin(), bands.begin() + (T + RowArray::kBand - 1) / RowArray::kBand});
}

}  // namespace

void HostRows::Update(int64_t p, int64_t T, int64_t heads, const std::vector<std::vector<Part>>& fields) {
    // With no new rows (p == T) the fields hold no tensors, and the layers and heads are the kept ones.
    const int64_t F = static_cast<int64_t>(fields.size()), L = p < T && F > 0 ? static_cast<int64_t>(fields[0].size()) : m_layers;
    const int64_t H = p < T ? heads : m_heads;
    assert(p == 0 || (F == static_cast<int64_t>(m_arrays.size()) && L == m_layers && H == m_heads && p <= m_T));
    m_layers = L, m_heads = H, m_T = T, m_p = p;
    if (p == 0 || !m_scaled_current) m_scaled = {};
    m_scaled_current = false;
    const int64_t n = T - p;
    if (n == 0) {
        m_arrays.resize(static_cast<size_t>(F));
        for (RowArray& v : m_arrays) v = p == 0 ? RowArray(std::vector<float>(), L * H, 0) : Prefix(v, T);
        return;
    }
    std::vector<Rebuilt> rebuilt;
    for (int64_t f = 0; f < F; ++f) rebuilt.push_back(Rebuild(p > 0 ? m_arrays[static_cast<size_t>(f)] : RowArray(), p, L * H, T));
    std::vector<at::Tensor> tensors;    // each tensor the parts name, once
    std::vector<size_t> tensor_of;      // of each part, field by field and layer by layer
    std::vector<const Part*> parts;
    for (const std::vector<Part>& field : fields)
        for (const Part& part : field) {
            assert(part.rows.dim() == 2 && part.rows.size(1) == n && part.first_row + H <= part.rows.size(0));
            size_t t = 0;
            while (t < tensors.size() && !tensors[t].is_same(part.rows)) ++t;
            if (t == tensors.size()) tensors.push_back(part.rows);
            tensor_of.push_back(t);
            parts.push_back(&part);
        }
    const HostTensors host = ToHostJoined(tensors, at::kFloat);
    at::parallel_for(0, F * L, 1, [&](int64_t begin, int64_t end) {
        constexpr int64_t B = RowArray::kBand;
        for (int64_t i = begin; i < end; ++i) {
            const float* in = host.Of<float>(tensor_of[static_cast<size_t>(i)]) + parts[static_cast<size_t>(i)]->first_row * n;
            const Rebuilt& out = rebuilt[static_cast<size_t>(i / L)];
            for (int64_t h = 0, row = i % L * H; h < H; ++h, ++row)
                for (int64_t t = p, k; t < T; t += k) {  // a band at a time
                    k = std::min(T, (t / B + 1) * B) - t;
                    std::copy_n(in + h * n + (t - p), k, out.At(row, t));
                }
        }
    });
    at::parallel_for(0, F, 1, [&](int64_t begin, int64_t end) {
        for (int64_t f = begin; f < end; ++f) rebuilt[static_cast<size_t>(f)].Seal();
    });
    m_arrays.clear();
    for (Rebuilt& r : rebuilt) m_arrays.emplace_back(L * H, T, std::move(r.bands));
}

const RowArray& HostRows::Scaled(size_t f, const std::vector<float>& factor) {
    const RowArray& v = m_arrays[f];
    assert(factor.size() == static_cast<size_t>(v.rows()));
    const bool keeps = f == m_scaled_field && m_scaled.rows() == v.rows();
    const int64_t p = keeps ? std::min(m_p, m_scaled.tokens()) : 0, T = v.tokens();
    if (keeps && p == T) {
        m_scaled = Prefix(m_scaled, T);
    } else {
        const Rebuilt out = Rebuild(m_scaled, p, v.rows(), T);
        for (int64_t row = 0; row < v.rows(); ++row)
            for (int64_t t = p; t < T; ++t) *out.At(row, t) = v.At(row, t) * factor[static_cast<size_t>(row)];
        out.Seal();
        m_scaled = RowArray(v.rows(), T, out.bands);
    }
    m_scaled_field = f;
    m_scaled_current = true;
    return m_scaled;
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
    std::vector<RowArray*> arrays;
    std::vector<std::vector<HostRows::Part>> fields;
    const int64_t p = plan.p, n = plan.T - plan.p;
    const int maps = static_cast<int>(plan.sides.size());  // the row measures' (CompareMapsStacked's), a side each in MapSide's order
    size_t tau_q_field = SIZE_MAX;
    auto add = [&](RowArray* array, const auto& new_rows_of_layer) {
        arrays.push_back(array);
        std::vector<HostRows::Part>& field = fields.emplace_back();
        for (size_t l = 0; l < layers.size() && n > 0; ++l) field.push_back(new_rows_of_layer(l));
    };
    auto measured = [&](size_t l, int k) { return HostRows::Part(measures.layers[l].measures, measures.layers[l].Row(k)); };
    for (const SideFields& f : kSideFields) {
        if (!Computes(plan, f.side)) continue;
        std::vector<NamedArray>& metrics = (a.*f.metrics).rows;
        for (const RowMetricField& field : kRowMetricFields) metrics.push_back({field.name, {}});
        for (int i = 0; i < kRowMetricCount; ++i)
            add(&metrics[i].values, [&](size_t l) { return measured(l, RowMeasureMetric(static_cast<int>(f.side), i)); });
        if (f.side == Side::Ssa) tau_q_field = arrays.size();
        add(&(a.*f.tau_q), [&](size_t l) { return layers[l].side[f.side].tau_q.narrow(1, p, n); });
        add(&(a.*f.tau_v), [&](size_t l) { return layers[l].side[f.side].new_tau_v; });
    }
    for (int k = 0; k < plan.pairs; ++k) {
        add(&(a.*kPairFields[k].js), [&](size_t l) { return measured(l, RowMeasureJs(maps, k)); });
        add(&(a.*kPairFields[k].l1), [&](size_t l) { return measured(l, RowMeasureL1(maps, k)); });
    }
    add(&a.tau_q_position, [&](size_t l) { return layers[l].new_tau_q_position; });
    add(&a.tau_q_token, [&](size_t l) { return layers[l].new_tau_q_token; });
    rows->Update(p, plan.T, c.n_head, fields);
    for (size_t i = 0; i < arrays.size(); ++i) *arrays[i] = rows->Array(i);

    a.thumbnails = measures.thumbnails;
    const std::vector<at::Tensor> qk = {spectrum.opnorm, spectrum.eig_mean, spectrum.eig_var};
    const HostTensors host = ToHostJoined(qk, at::kFloat);
    std::vector<float>* qk_arrays[] = {&a.qk_opnorm, &a.qk_eig_mean, &a.qk_eig_var};
    for (size_t i = 0; i < qk.size(); ++i) qk_arrays[i]->assign(host.Of<float>(i), host.Of<float>(i) + qk[i].numel());
    if (tau_q_field != SIZE_MAX && a.qk_opnorm.size() == static_cast<size_t>(a.tau_q.rows()))
        a.effective_qk_norm = rows->Scaled(tau_q_field, a.qk_opnorm);
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
    const HostTensors host_floats = ToHostJoined(floats, at::kFloat), host_ints = ToHostJoined(ints, at::kInt);
    for (size_t i = 0; i < floats.size(); ++i) float_arrays[i]->assign(host_floats.Of<float>(i), host_floats.Of<float>(i) + floats[i].numel());
    for (size_t i = 0; i < ints.size(); ++i) int_arrays[i]->assign(host_ints.Of<int32_t>(i), host_ints.Of<int32_t>(i) + ints[i].numel());
}

}  // namespace model
