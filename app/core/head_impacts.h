// Each head's part of the loss by its temperatures: the text analysed again with one head at
// tau = 1 at a time (the window's What-ifs > Rank heads, `export --rank-heads`, Python's
// Analysis.rank_heads). One at a time, so the parts need not add up to the whole.
#pragma once

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "model/io/result.h"
#include "model/nn/analysis.h"

namespace app {

struct HeadImpact {
    int layer = 0, head = 0;
    float mean_loss = NAN;
    float delta = NAN;  // mean_loss - baseline (the what-if's change): above 0, the head's temperatures help the model
    // Measured with `split`: the loss with tau_q alone at 1 (=q) and with tau_v alone at 1 (=v).
    float mean_loss_tau_q = NAN, mean_loss_tau_v = NAN;
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
// `split`: each head's tau_q and tau_v one at a time too (three analyses a head, not one).
model::Status MeasureHeadImpacts(model::Engine& engine, const model::Tokenization& tokens, const model::AnalyzeOptions& options,
                                 HeadImpacts* impacts, const std::function<bool(const HeadImpacts&)>& each = {}, bool split = false);

// Each head's temperatures' part of the loss, [L * H] layer-major: the baseline minus the loss with
// that head at tau = 1, so below 0 where its temperatures lowered the loss, as the fine-tune's split
// of the loss reads ("temperatures -0.03"); NaN where not measured, or already at tau = 1 by the
// what-ifs it was measured on top of.
// `which`: the part of both temperatures (the default), of tau_q alone or of tau_v alone (NaN where
// not measured with `split`).
enum class TemperaturePart { Both, TauQ, TauV };
std::vector<float> TemperatureParts(const HeadImpacts& impacts, int n_layer, int n_head, TemperaturePart which = TemperaturePart::Both);
// The heads whose parts lowered the loss most and raised it most, n of each: "lowered it most
// L1 H2 -0.147, L1 H3 -0.111; raised it most L0 H2 +0.0872" ("none" for a side without any).
std::string PartsHeadline(const std::vector<float>& parts, int n_head, int n);

}  // namespace app
