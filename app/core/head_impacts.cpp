#include "app/core/head_impacts.h"

namespace app {

model::Status MeasureHeadImpacts(model::Engine& engine, const model::Tokenization& tokens, const model::AnalyzeOptions& options,
                                 HeadImpacts* impacts, const std::function<bool(const HeadImpacts&)>& each) {
    const model::ModelConfig& c = engine.Info().config;
    *impacts = HeadImpacts{};
    impacts->on_top = engine.interventions();
    impacts->total = c.n_layer * c.n_head;
    auto baseline = engine.Analyze(tokens, options);  // usually the shown analysis, reused whole
    if (!baseline) return model::Fail(baseline.error());
    if (baseline->loss.empty()) return model::Fail("a text of one token has no loss to rank the heads by");
    impacts->baseline = model::MeanLoss(baseline->loss);
    bool go_on = true;
    for (int l = 0; l < c.n_layer && go_on; ++l) {
        for (int h = 0; h < c.n_head && go_on; ++h) {
            std::vector<model::Intervention> with = impacts->on_top;
            with.push_back({model::Intervention::Kind::Ablate, l, h, 0.0f});
            if (!engine.SetInterventions(with)) continue;  // cannot happen: l and h are the model's
            auto a = engine.Analyze(tokens, options);
            if (!a) break;  // cancelled
            const float loss = model::MeanLoss(a->loss);
            impacts->heads.push_back({l, h, loss, loss - impacts->baseline});
            go_on = !each || each(*impacts);
        }
    }
    (void)engine.SetInterventions(impacts->on_top);  // the next analysis is the caller's again
    impacts->done = static_cast<int>(impacts->heads.size()) == impacts->total;
    impacts->cancelled = !impacts->done;
    return model::Ok{};
}

}  // namespace app
