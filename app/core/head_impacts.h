// Each head's part of the loss by its temperatures: the text analysed again with one head at
// tau = 1 at a time (the window's What-ifs > Rank heads, `export --rank-heads`, Python's
// Analysis.rank_heads). One at a time, so the parts need not add up to the whole. Beside a base,
// the same for the fine-tune's drift: the loss with one head's weights, or one layer's MLP, taken
// back from the base (model/nn/from_base.h), its temperatures kept.
#pragma once

#include <atomic>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/io/result.h"
#include "model/nn/analysis.h"

namespace app {

// A loss token by token (entry t - 1: token t's given the tokens before it, as Analysis::loss),
// shared by the copies the window's progress makes; null: not measured.
using LossByToken = std::shared_ptr<const std::vector<float>>;

struct HeadImpact {
    int layer = 0, head = 0;
    float mean_loss = NAN;
    float delta = NAN;  // mean_loss - baseline (the what-if's change): above 0, the head's temperatures help the model
    // Measured with `split`: the loss with tau_q alone at 1 (=q) and with tau_v alone at 1 (=v).
    float mean_loss_tau_q = NAN, mean_loss_tau_v = NAN;
    // Measured with `drift`: the loss with the head's weights (q, k, v, o; not its temperatures) from the base.
    float mean_loss_from_base = NAN;
    // Each of the four token by token: where on the text the head's temperatures and weights acted.
    LossByToken tokens, tokens_tau_q, tokens_tau_v, tokens_from_base;
};
struct HeadImpacts {
    float baseline = NAN;                     // mean loss with the active interventions alone
    std::vector<int32_t> ids;                 // the text's, which the losses token by token are of
    std::vector<model::Intervention> on_top;  // the interventions it was measured with
    // The model's temperatures: one it lacks is at tau = 1 throughout, its part not measured (null)
    // (the official checkpoints: tau_q alone).
    bool has_tau_q = true, has_tau_v = true;
    std::vector<HeadImpact> heads;            // the heads done so far, layer by layer
    int total = 0;                            // heads to do
    bool done = false, cancelled = false;
    // With `drift` beside a base, from the engine's own loss pass (Engine::MeanLossFromBase): its loss
    // with no weight from the base (the baseline again, to float rounding, which the parts leave out),
    // with each layer's whole attention [L] and MLP [L] from the base, the embeddings and head, and
    // every weight (SSA's temperatures kept: not the split's tau = 1 against the base).
    bool drift = false;
    float drift_baseline = NAN;
    std::vector<float> attention_from_base, mlp_from_base;
    // The base's own temperatures (BaseTemperatures: "tau_v", ...; empty for a vanilla base): its
    // weights were trained under them, and a part from it runs under SSA's instead.
    std::string base_temperatures;
    // Parts that could not be taken from the base, each with why ("embeddings: wte is [V, E] in the
    // model and [V', E] in the base"); and what differs that is no weight (SettingsDifference).
    std::vector<std::string> not_measured;
    std::string settings_difference;
    float embeddings_from_base = NAN, all_from_base = NAN;
    // Along the layers: the loss with the embeddings and then each layer's attention and MLP taken
    // back on top of those before ([2 L]: L0 attention, L0 MLP, L1 attention, ...; the embeddings'
    // alone is embeddings_from_base): the parts one after another, which add up to every weight's.
    std::vector<float> path_from_base;
    std::vector<LossByToken> path_from_base_tokens;
    // The other way, from the top down ([2 L]): the loss with the last MLP taken back, then the last
    // attention on top of it, ..., then L0's attention; the embeddings then make every weight's.
    // Where the two orders split the whole differently, the parts act together.
    std::vector<float> path_down_from_base;
    std::vector<LossByToken> path_down_from_base_tokens;
    // The losses above token by token ([L] each for attention and MLP).
    LossByToken baseline_tokens, drift_baseline_tokens, embeddings_from_base_tokens, all_from_base_tokens;
    std::vector<LossByToken> attention_from_base_tokens, mlp_from_base_tokens;
};

// What MeasureHeadImpacts measures beside each head at tau = 1: `split`, its tau_q and tau_v one
// at a time too (three loss passes a head, not one); `drift`, beside a base, its weights from the
// base (a pass a head, six a layer, two more). Every pass is the engine's loss pass (SSA's side
// alone: no map, measure or prediction). A head the what-ifs already set to tau = 1 is not run
// again: its losses are the baseline. A model of one temperature (tau_q alone, as the official
// checkpoints) splits nothing: that one's part is the whole, the other's not measured (NaN).
struct RankOptions {
    bool split = false, drift = false;
    // Passes done / passes (RankPasses), after each: a head is three passes and beside a base
    // some more, so "0 / 144 heads" sat for seconds where this moves.
    std::atomic<float>* progress = nullptr;
};
// The passes MeasureHeadImpacts runs: the baseline, each head's (three with `split` where the model
// has both temperatures, one more beside a base), and beside a base two first and six a layer.
int RankPasses(int n_layer, int n_head, const RankOptions& what, bool has_base, bool both_temperatures = true);

// Measures every head, layer by layer: the text's mean loss with that head at tau = 1
// (Intervention::Kind::Ablate) on top of the engine's what-ifs, against the loss with those alone
// (`baseline`). `each` is told after every head (progress); false from it stops the measuring
// (`cancelled`), as does `options.cancel`. The engine's what-ifs are as they were afterwards. Fails
// only where the baseline's analysis or loss pass does (a text the model refuses); a text of one
// token has no loss. Each loss is Engine::LossFromBase's with no part (the what-ifs applied), the
// baseline's too, so a part is two sums made alike (within float32's rounding of the analysis's).
// `what.drift` without a base measures no drift (impacts->drift false).
model::Status MeasureHeadImpacts(model::Engine& engine, const model::Tokenization& tokens, const model::AnalyzeOptions& options,
                                 HeadImpacts* impacts, const std::function<bool(const HeadImpacts&)>& each = {}, RankOptions what = {});

// Each head's temperatures' part of the loss, [L * H] layer-major: the baseline minus the loss with
// that head at tau = 1, so below 0 where its temperatures lowered the loss, as the fine-tune's split
// of the loss reads ("temperatures -0.03"); NaN where not measured, or already at tau = 1 by the
// what-ifs it was measured on top of.
// `which`: the part of both temperatures (the default), of tau_q alone or of tau_v alone (NaN where
// not measured with `split`).
enum class TemperaturePart { Both, TauQ, TauV };
std::vector<float> TemperatureParts(const HeadImpacts& impacts, int n_layer, int n_head, TemperaturePart which = TemperaturePart::Both);
// The same token by token, [L * H * (T - 1)] (layer, head, token - 1): where on the text each head's
// temperatures lowered the loss. Empty without a measured baseline.
std::vector<float> TemperaturePartsByToken(const HeadImpacts& impacts, int n_layer, int n_head, TemperaturePart which = TemperaturePart::Both);
// The drift's parts, as the temperatures' (below 0 where the fine-tune's change there lowered the
// loss): the drift baseline minus the loss with that part from the base; NaN where not measured.
struct DriftParts {
    std::vector<float> heads;      // [L * H] layer-major
    std::vector<float> attention;  // [L]: the layer's whole attention (its heads, norm and output bias)
    std::vector<float> mlp;        // [L]
    float embeddings = NAN, all = NAN;
    // [1 + 2 L], PathPartName's order: each part taken back on top of those before it, from the
    // embeddings up (the loss before it minus the loss after); they add up to `all`.
    std::vector<float> path;
    // The same parts, in the same order, each taken back on top of those above it (from the last
    // MLP down): they add up to `all` too.
    std::vector<float> path_down;
};
// The path's k-th part: "embeddings", "L0 attention", "L0 MLP", "L1 attention", ...
std::string PathPartName(int k);
DriftParts MeasuredDriftParts(const HeadImpacts& impacts, int n_layer, int n_head);
// The same token by token: each vector the one above with a token axis last, of `tokens` (T - 1)
// entries ([L * H * (T - 1)], [L * (T - 1)], embeddings and all [T - 1]); empty without drift.
struct DriftTokenParts {
    int tokens = 0;
    std::vector<float> heads, attention, mlp, embeddings, all, path, path_down;  // path, path_down: [(1 + 2 L) * (T - 1)]
};
DriftTokenParts MeasuredDriftPartsByToken(const HeadImpacts& impacts, int n_layer, int n_head);

// Parts token by token as a grid of named rows, as head_impacts_tokens.png and the window's What-ifs
// tab draw them: `tokens` values a row (column t: token t + 1's loss), NaN where not measured.
struct TokenPartsGrid {
    std::vector<std::string> rows;
    std::vector<float> values;  // [rows * tokens]
    int tokens = 0;
    bool Empty() const { return rows.empty() || tokens <= 0; }
};
// Each head's temperatures' part of each token's loss (rows "L0 H0", "L0 H1", ...); empty where no
// head's is measured (none yet, or every head at tau = 1 by the what-ifs).
TokenPartsGrid HeadTemperatureGrid(const HeadImpacts& impacts, int n_layer, int n_head);
// The drift token by token along its path from the embeddings up (PathPartName's rows), then every
// weight's, which those add up to; empty without drift or before the path is measured.
TokenPartsGrid DriftPathGrid(const HeadImpacts& impacts, int n_layer, int n_head);
// The drift token by token one part at a time, head_impacts_drift_tokens.npy's rows of each part
// alone: each head's weights ("L0 H0", ...), each layer's attention and MLP ("L0 attention", "L0
// MLP", ...), the embeddings, then every weight's; empty without drift. The parts need not add up.
TokenPartsGrid DriftPartsGrid(const HeadImpacts& impacts, int n_layer, int n_head);

// Where on the text a part acted most, from its part token by token (a row of the above): the n
// tokens where it lowered the loss most and raised it most, "lowered it most at 'License' -3.1,
// ' the' (token 7) -0.8; raised it most at 'of' +0.41" (token t is labels[t]: TokenLabels; a piece
// the text holds more than once with its place).
std::string WhereHeadline(const std::vector<std::string>& labels, const float* part_by_token, int tokens, int n);
// Where the parts that lowered the loss most acted: the head whose temperatures did, and beside a
// base the drift's head or MLP that did and every weight's drift, n tokens a side each: "L1 H2's
// temperatures (-0.147): lowered it most at 'License' -3.1; raised it most at 'of' +0.41. ..."
// (empty where none lowered it).
std::string WhereLine(const HeadImpacts& impacts, const std::vector<std::string>& labels, int n_layer, int n_head, int n);

// The heads whose parts lowered the loss most and raised it most, n of each: "lowered it most
// L1 H2 -0.147, L1 H3 -0.111; raised it most L0 H2 +0.0872" ("none" for a side without any).
std::string PartsHeadline(const std::vector<float>& parts, int n_head, int n);
// The same of any named parts (names[k] for values[k]): the drift's heads and MLPs together.
std::string PartsHeadline(const std::vector<std::string>& names, const std::vector<float>& values, int n);
// The drift's heads and MLPs ranked together, n a side, then the layers' attention blocks, the
// embeddings and every weight: "lowered it most L1 MLP -0.412, L0 H1 -0.0731; raised it most L1 H0
// +0.021; attention blocks L0 -0.1, L1 +0.05; embeddings -0.2, every weight -1.91"
// (empty without drift).
std::string DriftHeadline(const HeadImpacts& impacts, int n_layer, int n_head, int n);
// The path's parts both ways, from the embeddings up / from the top down, "embeddings -1.22 / -1.1,
// L0 attention +0.02 / +0.05, ... (each way they add up to every weight's -2.01; the ways differ
// most at L0 MLP, by 0.17: the parts act together)": every one up to 13 parts, else the `n` largest
// in size, in path order.
std::string PathHeadline(const HeadImpacts& impacts, int n_layer, int n_head, int n);

}  // namespace app
