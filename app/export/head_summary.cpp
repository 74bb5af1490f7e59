#include "app/export/head_summary.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace app {
namespace {

constexpr float kNaN = NAN;

const HeadValue& SinkValue() {
    static const HeadValue* sink = [] {
        for (const HeadValue& v : HeadValues())
            if (v.quantity->sink && v.Primary()) return &v;
        return static_cast<const HeadValue*>(nullptr);
    }();
    assert(sink && "the catalogue marks the sink-head rule's quantity");
    return *sink;
}

}  // namespace

float HeadSummary::Get(const HeadValue& v, MapMode mode) const {
    const MapMode shown = v.quantity->ShownMode(mode);
    const float other = Get(v, ReadSide(shown));
    return IsDifference(shown) ? Get(v, Side::Ssa) - other : other;
}

float HeadSummary::Get(std::string_view key, Side side) const {
    const HeadValue* v = FindHeadValue(key);
    assert(v && "not a head value of the catalogue");
    return v ? Get(*v, side) : kNaN;
}

float HeadMean(const model::RowArray* rows, const model::Analysis& a, int l, int h) {
    return rows ? model::HeadRowMean(*rows, a, l, h) : kNaN;
}

std::vector<float> RowMeanOverHeads(const model::RowArray* rows, const model::Analysis& a) {
    const int T = a.n_tokens;
    std::vector<float> out(T, kNaN);
    if (!rows || rows->rows() != static_cast<int64_t>(a.n_layer) * a.n_head || rows->tokens() != T) return out;
    // Each token's sum over the heads in their order, a head's row at a time.
    std::vector<double> sum(T, 0.0);
    std::vector<int> n(T, 0);
    for (int64_t k = 0; k < rows->rows(); ++k)
        rows->ForEachPart(k, [&](int64_t t, const float* v, int64_t count) {
            for (int64_t j = 0; j < count; ++j)
                if (std::isfinite(v[j])) sum[t + j] += v[j], ++n[t + j];
        });
    for (int i = 1; i < T; ++i)
        if (n[i]) out[i] = static_cast<float>(sum[i] / n[i]);
    return out;
}

std::vector<HeadSummary> SummarizeHeads(const model::Analysis& a) {
    const std::vector<HeadValue>& values = HeadValues();
    std::vector<HeadSummary> out(static_cast<size_t>(a.n_layer) * a.n_head);
    for (size_t k = 0; k < out.size(); ++k) {
        out[k].ref = {static_cast<int>(k) / a.n_head, static_cast<int>(k) % a.n_head};
        out[k].values.assign(values.size() * kSides, kNaN);
    }
    // Quantity by quantity, each side's array found once; a token statistic's three values (mean,
    // min, max: consecutive head values) from one pass over the head's tokens.
    for (const HeadValue& v : values) {
        if (v.stat != Stat::Mean) continue;
        const Quantity& q = *v.quantity;
        for (Side side : kAllSides) {
            const std::vector<float>* head_array = HeadArray(q, a, side);
            const model::RowArray* rows = RowValues(q, a, side);
            if (!head_array && !rows) continue;
            // Every head's at once (model::HeadRowMeans, HeadTokenStatsAll: the one-head calls' values).
            const bool means = !head_array && q.reading == Reading::RowMean;
            const std::vector<float> row_means = means ? model::HeadRowMeans(*rows, a) : std::vector<float>();
            const std::vector<model::HeadStats> stats = !head_array && !means ? model::HeadTokenStatsAll(*rows, a) : std::vector<model::HeadStats>();
            for (size_t k = 0; k < out.size(); ++k) {
                float* at = &out[k].values[static_cast<size_t>(v.index) * kSides + static_cast<int>(side)];
                if (head_array) {
                    *at = k < head_array->size() ? (*head_array)[k] : kNaN;
                } else if (means) {
                    *at = row_means[k];
                } else {
                    at[0] = stats[k].mean, at[kSides] = stats[k].min, at[2 * kSides] = stats[k].max;  // the next two head values
                }
            }
        }
    }
    return out;
}

bool IsSinkHead(float sink_mass, float epsilon) { return std::isfinite(sink_mass) && sink_mass > epsilon; }

bool IsSinkHead(const HeadSummary& s, Side side, float epsilon) { return IsSinkHead(s.Get(SinkValue(), side), epsilon); }

}  // namespace app
