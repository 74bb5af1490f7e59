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

viz::Range SharedMapRange(const float* ssa, const float* compare, int T, bool log_scale) {
    float hi = 0.0f, lo_positive = 1.0f;
    for (const float* map : {ssa, compare}) {
        if (!map) continue;
        for (int i = 0; i < T; ++i)
            for (int j = 0; j <= i; ++j) {
                const float v = map[static_cast<size_t>(i) * T + j];
                if (!std::isfinite(v)) continue;
                hi = std::max(hi, v);
                if (v > 0.0f) lo_positive = std::min(lo_positive, v);
            }
    }
    if (!(hi > 0.0f)) hi = 1.0f;
    return log_scale ? viz::Range{std::min(std::max(lo_positive, 1e-6f), hi * 0.1f), hi} : viz::Range{0.0f, hi};
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

std::string HeadName(HeadRef h) { return "L" + std::to_string(h.layer) + " H" + std::to_string(h.head); }

bool HasTwin(const model::Analysis& a) {
    return a.comparison == model::Comparison::Twin || (!a.compare_label.empty() && a.compare_label != "vanilla");
}

std::string CompareName(const model::Analysis& a) {
    if (a.compare_label.empty()) return "comparison";
    if (HasTwin(a)) return "twin";
    if (a.comparison == model::Comparison::Unedited) return "unedited";
    return a.comparison == model::Comparison::LayerLocal ? "tau=1 local" : "tau=1";
}

std::string TwinFolderName(const model::Analysis& a) {
    if (!HasTwin(a)) return "";
    std::string name = a.compare_label;
    while (name.size() > 1 && name.back() == '/') name.pop_back();
    const size_t slash = name.find_last_of('/');
    if (slash != std::string::npos) name = name.substr(slash + 1);
    if (name.size() > 18) name = name.substr(0, 16) + "..";
    return name;
}

std::string CompareExplanation(const model::Analysis& a) {
    if (HasTwin(a))
        return "twin: a separately trained model (" + a.compare_label +
               ") on the same tokens. Its heads learned on their own, so head h of the twin need not do what head h of SSA does.";
    if (a.comparison == model::Comparison::Unedited)
        return "unedited: the SSA model as trained, without the what-ifs (" + model::FormatInterventions(a.interventions) +
               ") applied to the SSA side, so a difference is the what-ifs' effect alone.";
    if (a.comparison == model::Comparison::LayerLocal)
        return "tau=1 local: at each layer, the SSA model's own q and k (the same input as SSA) with tau = 1. "
               "It shows what that layer's temperatures do, with nothing below it changed.";
    return "tau=1: the same weights with tau_q = tau_v = 1 everywhere (the vanilla counterfactual). It is a whole second "
           "forward pass, so from layer 1 on its heads read a different residual stream: a later layer's difference mixes its "
           "own temperatures with everything that changed below it.";
}
}  // namespace app
