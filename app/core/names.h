// The short names every front end gives heads and comparisons, spelled once: the views, figure
// legends, exports and the command line all say "L2 H5", "tau = 1", "twin".
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "app/core/state.h"
#include "model/nn/analysis.h"

namespace app {

// "L2 H5".
std::string HeadName(HeadRef h);

// The comparison's one short name, the same in every view and figure legend: "tau = 1" for the
// counterfactual (the same weights with tau_q = tau_v = 1), "twin" for a separately trained model
// (the labels of app/core/run.h's comparison table).
std::string CompareName(const model::Analysis& a);
bool HasTwin(const model::Analysis& a);
// What SSA is set against, as the toolbar and the status bar say it: the comparison's name, with
// " + base" beside a fine-tune's base ("tau = 1 + base").
std::string ComparedWith(const model::Analysis& a);
// What a lens's comparison side ran with, to tell whether a lens kept is still the shown one's:
// the comparison's label and kind (a layer-local comparison's lens is another run than tau = 1's),
// and the base's folder (another base chosen under the same comparison is another lens).
std::string LensKey(const model::Analysis& a);
// What an analysis compared with, as files and JSON name it (metrics.json's comparison_kind,
// Python's comparison_kind): "tau1", "local", "twin", "unedited" or "base".
const char* ComparisonKindName(model::Comparison c);
// The twin folder's last part ("vanilla" for assets/models/english/vanilla); empty without a twin.
std::string TwinFolderName(const model::Analysis& a);
// A folder and the one above it ("licenses/ssa", "ft12/base": a model is often a folder named ssa/,
// base/ or model/), as the status bar, the figures' titles and the three-way maps name models.
std::string FolderAndParent(std::string path);
// The base's FolderAndParent; empty without a base.
std::string BaseFolderName(const model::Analysis& a);
// The heads with the n largest values of a [L * H] array, "L3 H2 0.041, L5 H0 0.033" (non-finite
// values left out), those at or above `floor` only: with none, "none above F".
std::string TopHeads(const std::vector<float>& values, int heads, int n, float floor = -INFINITY);
// A JS divergence (nats) below this is float32 rounding, not a change: the same weights on both
// sides give 1e-8 to 3e-8 (entropies of ~3 nats summed in float32), a fine-tune's parts 1e-5 and
// up. The heads a fine-tune changed most are those above it.
constexpr float kJsRoundingFloor = 1e-6f;
// The SSA side's name in a fine-tune's split and figures: "SSA", "SSA with what-ifs" where the
// analysis ran with interventions (on the SSA side only, so the temperatures' part holds their
// effect too), or "vanilla" for a model whose every temperature is 1 (a vanilla run's step).
std::string SsaSideName(const model::Analysis& a);
// The tau = 1 side's title in figures: "tau = 1 (SSA's weights)", a vanilla model's "tau = 1 (its weights)".
std::string ComparisonWeightsTitle(const model::Analysis& a);
// The split's first part by the same rule: "temperatures", or "temperatures and what-ifs".
std::string TemperaturePartName(const model::Analysis& a);
// What fine-tuning changed, in a line (export prints it): "mean loss 11.0537 (base)
// to 10.7898 (SSA), -0.2639 nats = temperatures +0.0704 + drift -0.3342"; with what-ifs, "(SSA
// with what-ifs)" and "temperatures and what-ifs".
std::string FineTuneHeadline(const model::Analysis& a, const model::Decomposition& d);
// Beside a base that has temperatures of its own (one trained with SSA: its tau_q or tau_v is not
// 1 somewhere), the base's temperatures, "tau_q", "tau_v" or "tau_q and tau_v"; empty otherwise.
// The split then reads otherwise: "temperatures" is all of SSA's (SSA against its weights at
// tau = 1), not what fine-tuning changed in them, and "drift" (tau = 1 against the base) holds the
// base's temperatures going away as well as the weights' change.
std::string BaseTemperatures(const model::Analysis& a);
// The note that says so in a line ("" where BaseTemperatures is empty).
std::string BaseTemperaturesNote(const model::Analysis& a);
// Where the base differs from the fine-tune in what is no weight (Analysis::base_difference): its
// drift holds that too. Empty where it does not.
std::string BaseDifferenceNote(const model::Analysis& a);
// Where the SSA side has no temperature other than 1 (a model without temperatures, such as a
// fine-tune's base opened alone, or every head at tau = 1 by the what-ifs) and the comparison is
// tau = 1 (the whole counterfactual or the layer-local one): the comparison is the SSA side itself,
// every difference 0; or beside a base, where the fine-tune has no temperatures (its split's
// 'temperatures' part 0). A note that says so and what to compare instead; "" otherwise.
std::string SelfComparisonNote(const model::Analysis& a);
// What the comparison is, in a sentence or two for tooltips: which model, and for the
// counterfactual that it is a whole second forward pass (its later layers see another residual
// stream, so they differ for that reason too, not only for their own temperatures).
std::string CompareExplanation(const model::Analysis& a);
// Which kv head a query head reads under grouped-query attention, and the heads that share it:
// "reads kv head 1 with H4-H7"; empty when every head has its own keys and values.
std::string KvGroupNote(const model::ModelConfig& config, int head);

}  // namespace app
