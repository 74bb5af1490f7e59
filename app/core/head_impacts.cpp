#include "app/core/head_impacts.h"

#include <algorithm>
#include <cstdio>

#include "app/core/names.h"

namespace app {

model::Status MeasureHeadImpacts(model::Engine& engine, const model::Tokenization& tokens, const model::AnalyzeOptions& options,
                                 HeadImpacts* impacts, const std::function<bool(const HeadImpacts&)>& each, bool split) {
    const model::ModelConfig& c = engine.Info().config;
    *impacts = HeadImpacts{};
    impacts->on_top = engine.interventions();
    impacts->total = c.n_layer * c.n_head;
    auto baseline = engine.Analyze(tokens, options);  // usually the shown analysis, reused whole
    if (!baseline) return model::Fail(baseline.error());
    if (baseline->loss.empty()) return model::Fail("a text of one token has no loss to rank the heads by");
    impacts->baseline = model::MeanLoss(baseline->loss);
    bool go_on = true;
    // The mean loss with one more what-if on top (NaN where cancelled).
    auto loss_with = [&](model::Intervention x) {
        std::vector<model::Intervention> with = impacts->on_top;
        with.push_back(x);
        if (!engine.SetInterventions(with)) return NAN;  // cannot happen: the layer and head are the model's
        auto a = engine.Analyze(tokens, options);
        return a ? model::MeanLoss(a->loss) : NAN;
    };
    using Kind = model::Intervention::Kind;
    for (int l = 0; l < c.n_layer && go_on; ++l) {
        for (int h = 0; h < c.n_head && go_on; ++h) {
            HeadImpact impact{l, h, loss_with({Kind::Ablate, l, h, 0.0f})};
            if (split) impact.mean_loss_tau_q = loss_with({Kind::QueryOff, l, h, 0.0f}), impact.mean_loss_tau_v = loss_with({Kind::ValueOff, l, h, 0.0f});
            if (options.cancel && *options.cancel) {  // an analysis stopped part-way: not a measure
                go_on = false;
                break;
            }
            impact.delta = impact.mean_loss - impacts->baseline;
            impacts->heads.push_back(impact);
            go_on = !each || each(*impacts);
        }
    }
    (void)engine.SetInterventions(impacts->on_top);  // the next analysis is the caller's again
    impacts->done = static_cast<int>(impacts->heads.size()) == impacts->total;
    impacts->cancelled = !impacts->done;
    return model::Ok{};
}

std::vector<float> TemperatureParts(const HeadImpacts& impacts, int n_layer, int n_head, TemperaturePart which) {
    std::vector<float> parts(static_cast<size_t>(std::max(0, n_layer * n_head)), NAN);
    for (const HeadImpact& h : impacts.heads) {
        const float loss = which == TemperaturePart::TauQ ? h.mean_loss_tau_q : which == TemperaturePart::TauV ? h.mean_loss_tau_v : h.mean_loss;
        if (h.layer >= 0 && h.layer < n_layer && h.head >= 0 && h.head < n_head) parts[static_cast<size_t>(h.layer) * n_head + h.head] = impacts.baseline - loss;
    }
    // A head the what-ifs already set to tau = 1 has no temperatures to measure: no part (it read +0).
    for (const model::Intervention& x : impacts.on_top)
        if (x.kind == model::Intervention::Kind::Ablate && x.layer >= 0 && x.layer < n_layer)
            for (int h = 0; h < n_head; ++h)
                if (x.head < 0 || x.head == h) parts[static_cast<size_t>(x.layer) * n_head + h] = NAN;
    return parts;
}

std::string PartsHeadline(const std::vector<float>& parts, int n_head, int n) {
    std::vector<int> order;
    for (size_t k = 0; k < parts.size(); ++k)
        if (std::isfinite(parts[k]) && parts[k] != 0) order.push_back(static_cast<int>(k));
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return parts[a] < parts[b]; });
    auto list = [&](bool lowered) {
        std::string text;
        int listed = 0;
        for (size_t i = 0; i < order.size() && listed < n; ++i) {
            const int k = lowered ? order[i] : order[order.size() - 1 - i];
            if ((parts[k] < 0) != lowered) break;
            char value[32];
            std::snprintf(value, sizeof value, "%+.3g", parts[k]);
            text += (listed++ ? ", " : "") + HeadName({k / std::max(n_head, 1), k % std::max(n_head, 1)}) + " " + value;
        }
        return text.empty() ? std::string("none") : text;
    };
    return "lowered it most " + list(true) + "; raised it most " + list(false);
}

}  // namespace app
