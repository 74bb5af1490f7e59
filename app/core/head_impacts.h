// Each head's part of the loss by its temperatures: the text analysed again with one head at
// tau = 1 at a time (the window's What-ifs > Rank heads, `export --rank-heads`, Python's
// Analysis.rank_heads). One at a time, so the parts need not add up to the whole.
#pragma once

#include <cmath>
#include <functional>
#include <vector>

#include "model/io/result.h"
#include "model/nn/analysis.h"

namespace app {

struct HeadImpact {
    int layer = 0, head = 0;
    float mean_loss = NAN;
    float delta = NAN;  // mean_loss - baseline: above 0, the head's temperatures help the model
};
struct HeadImpacts {
    float baseline = NAN;                     // mean loss with the active interventions alone
    std::vector<model::Intervention> on_top;  // the interventions it was measured with
    std::vector<HeadImpact> heads;            // the heads done so far, layer by layer
    int total = 0;                            // heads to do
    bool done = false, cancelled = false;
};

// Measures every head, layer by layer: the text's mean loss with that head at tau = 1
// (Intervention::Kind::Ablate) on top of the engine's what-ifs, against the loss with those alone
// (`baseline`). `each` is told after every head (progress); false from it stops the measuring
// (`cancelled`), as does `options.cancel`. The engine's what-ifs are as they were afterwards. Fails
// only where the baseline's analysis does (a text the model refuses); a text of one token has no loss.
model::Status MeasureHeadImpacts(model::Engine& engine, const model::Tokenization& tokens, const model::AnalyzeOptions& options,
                                 HeadImpacts* impacts, const std::function<bool(const HeadImpacts&)>& each = {});

}  // namespace app
