#include "app/export/head_summary.h"

#include <algorithm>
#include <cmath>

namespace app {
namespace {

constexpr float kNaN = NAN;

float PerHead(const std::vector<float>& v, size_t index) { return index < v.size() ? v[index] : kNaN; }

}  // namespace

float HeadMean(const std::vector<float>* rows, const model::Analysis& a, int l, int h) {
    if (!rows || rows->size() < a.RowIndex(l, h) + a.n_tokens) return kNaN;
    return model::HeadRowMean(*rows, a, l, h);
}

std::vector<float> RowMeanOverHeads(const std::vector<float>* rows, const model::Analysis& a) {
    const int T = a.n_tokens, heads = a.n_layer * a.n_head;
    std::vector<float> out(T, kNaN);
    if (!rows || rows->size() < static_cast<size_t>(heads) * T) return out;
    for (int i = 1; i < T; ++i) {
        double sum = 0;
        int n = 0;
        for (int k = 0; k < heads; ++k) {
            const float v = (*rows)[static_cast<size_t>(k) * T + i];
            if (std::isfinite(v)) sum += v, ++n;
        }
        if (n) out[i] = static_cast<float>(sum / n);
    }
    return out;
}

std::vector<HeadSummary> SummarizeHeads(const model::Analysis& a) {
    std::vector<HeadSummary> out;
    out.reserve(static_cast<size_t>(a.n_layer) * a.n_head);
    const auto *entropy = a.metrics.Find("entropy"), *entropy_c = a.metrics_compare.Find("entropy");
    const auto *norm = a.metrics.Find("normalized_entropy"), *norm_c = a.metrics_compare.Find("normalized_entropy");
    const auto *spiky = a.metrics.Find("spikiness"), *spiky_c = a.metrics_compare.Find("spikiness");
    const auto *sink = a.metrics.Find("sink_mass"), *sink_c = a.metrics_compare.Find("sink_mass");
    const auto* max_weight = a.metrics.Find("max_weight");
    for (int l = 0; l < a.n_layer; ++l) {
        for (int h = 0; h < a.n_head; ++h) {
            HeadSummary s;
            s.ref = {l, h};
            s.entropy = HeadMean(entropy, a, l, h);
            s.entropy_compare = HeadMean(entropy_c, a, l, h);
            s.normalized_entropy = HeadMean(norm, a, l, h);
            s.normalized_entropy_compare = HeadMean(norm_c, a, l, h);
            s.spikiness = HeadMean(spiky, a, l, h);
            s.spikiness_compare = HeadMean(spiky_c, a, l, h);
            s.sink_mass = HeadMean(sink, a, l, h);
            s.sink_mass_compare = HeadMean(sink_c, a, l, h);
            s.max_weight = HeadMean(max_weight, a, l, h);
            s.js = HeadMean(&a.js, a, l, h);
            s.l1 = HeadMean(&a.l1, a, l, h);
            const model::HeadStats tq = model::HeadTokenStats(a.tau_q, a, l, h), tv = model::HeadTokenStats(a.tau_v, a, l, h),
                                   tqc = model::HeadTokenStats(a.tau_q_compare, a, l, h);
            s.tau_q_mean = tq.mean;
            s.tau_q_min = tq.min;
            s.tau_q_max = tq.max;
            s.tau_v_mean = tv.mean;
            s.tau_q_compare_mean = tqc.mean;
            const size_t at = static_cast<size_t>(l) * a.n_head + h;
            s.qk_opnorm = PerHead(a.qk_opnorm, at);
            s.qk_eig_mean = PerHead(a.qk_eig_mean, at);
            s.qk_eig_var = PerHead(a.qk_eig_var, at);
            out.push_back(s);
        }
    }
    return out;
}

bool IsSinkHead(float sink_mass, float epsilon) { return std::isfinite(sink_mass) && sink_mass > epsilon; }

}  // namespace app
