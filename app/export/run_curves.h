// A training run on one text (SPEC section 11), as `ssaviz export --run` and the window's Run tab
// keep it: each analysed step's head summaries and mean loss; the curves drawn from it (a quantity
// against step: a line for each layer, the mean over its heads, and one for every head together,
// and a second run's mean on the same axes), written once as a plot description (viz/plot.h) so a
// file and the window draw the same curves; and each head's steps to sparsity.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "app/export/head_summary.h"
#include "model/io/config.h"
#include "viz/plot.h"

namespace app {

// A step's model as far as a run's steps must be one model's: a step of another family, shape,
// width, vocabulary or context would mix two models' curves.
struct RunModel {
    std::string family;
    int layers = 0, heads = 0, width = 0, vocab = 0, context = 0;
    // What else makes a step another model's: its RoPE (the dims turned, the base), sliding window
    // (and the first layer it starts at) and norm eps (a run's steps were set side by side unsaid).
    int rope_dims = 0, window = 0, window_from = 0;
    double rope_base = 0, norm_eps = 0;
};
RunModel RunModelOf(const model::ModelConfig& c);

// A run's name in legends and titles: its folder's last part, with as many parts above it as tell
// it from the other run's folder ("ssa", "vanilla"; "a/out", "b/out"), and its role: "ssa (run)",
// "vanilla (compare run)". `other`: the other run's folder, empty without one.
std::string RunLegendName(const std::string& dir, const std::string& other, const std::string& role);

struct RunTimeline {
    std::string dir;    // the run's folder
    std::string label;  // "run", "compare run": as files and messages name it
    std::string name;   // in legends (RunLegendName): "ssa (run)"; empty: the label
    int n_layer = 0, n_head = 0;
    std::vector<int64_t> steps;                   // the steps analysed, in order
    std::vector<std::string> checkpoints;         // their files' names
    std::vector<std::vector<HeadSummary>> heads;  // each analysed step's heads [L * H]
    std::vector<float> loss;                      // each analysed step's mean loss on the text
    std::vector<float> loss_compare;              // its comparison's (tau = 1 unless --compare said; NaN without one)
    std::vector<float> loss_base;                 // the base's (against a fine-tune's base; NaN without one)
    std::string compare_name;                     // the comparison as the window names it ("tau = 1", "twin"); empty: none
    int n_tokens = 0;                             // the text's tokens (the first step's)
    std::vector<std::vector<float>> tau_q;        // each analysed step's tau_q [L, H, T]
    RunModel model;                               // the first step's, or Expect()'s (family empty: not told)
    std::string model_from;                       // with Expect(): the step it is, as messages name it
    std::vector<int32_t> ids;                     // the text's tokens as the first step's tokenizer made them
    std::vector<std::vector<float>> lens_loss;    // with `export --run --lens`, each analysed step's mean loss on the text read
                                                  // after each layer [L + 1] (0: the embeddings, L: the model's own); empty: none
    std::vector<std::vector<float>> lens_loss_compare, lens_loss_base;  // the same of its comparison and base (empty where none)
    // Why a step is not one of this run's (empty: it is): another model than its first analysed
    // step's (RunModel), or the text tokenised otherwise (another tokenizer), whose curves would
    // mix two models. The first step's are kept from it, where `text_ids` is given: ask with them
    // once the step is analysed, then Add it.
    // A misfit names the step it is set against ("the run's first analysed step, 50 (checkpoint-50)").
    std::string Fits(const RunModel& step, const std::vector<int32_t>& text_ids);
    std::string Misfit(const RunModel& step, const std::vector<int32_t>& text_ids) const;  // the same, keeping nothing
    // Sets every step against `m` instead of the first analysed step's: the step a window shows
    // (which it had listed as failed, when a step before it of another shape got in first). `from`
    // names it ("the step shown, 200 (checkpoint-200)"). Before any step is added.
    void Expect(const RunModel& m, std::string from);
    // Why a compare run's step is not to be set beside this run's (empty: it is): another shape
    // (its lens rows and heads other layers'), or the text tokenised otherwise (its losses of other
    // tokens). Empty too while this run has no step.
    std::string CompareRunMisfit(int step_layers, int step_heads, const std::vector<int32_t>& text_ids) const;
    // Adds one step's analysis (its shape must be the timeline's, or the timeline's first).
    void Add(int64_t step, const std::string& checkpoint, const model::Analysis& a);
    // The same from what a step's analysis gave (app/export/run_export.h's RunStepResult).
    struct StepLosses {
        float ssa = NAN, compare = NAN, base = NAN;  // mean losses on the text
    };
    void Add(int64_t step, const std::string& checkpoint, int layer_count, int head_count, std::vector<HeadSummary> summaries, StepLosses losses,
             int tokens, std::vector<float> step_tau_q);
    // Whether its steps ran against a fine-tune's base (--base DIR): its first step has a head's js_total.
    bool HasBase() const;
    // Adds the next step's lens loss by layer, each side's (SSA, its comparison, the base; those it has),
    // before Add()ing the step.
    void AddLens(std::vector<std::vector<float>> sides);
    // Whether every step has its lens loss by layer (lens_loss), and its comparison's and base's.
    bool HasLens() const { return Every(lens_loss); }
    bool HasLensCompare() const { return HasLens() && Every(lens_loss_compare); }
    bool HasLensBase() const { return HasLens() && Every(lens_loss_base); }
    bool Every(const std::vector<std::vector<float>>& v) const {
        return !steps.empty() && v.size() == steps.size() && std::none_of(v.begin(), v.end(), [](const std::vector<float>& x) { return x.empty(); });
    }
};

// The head values a timeline follows, in the files' order; and "loss", the mean loss on the text.
// tau_v_mean beside tau_q_mean: a run whose value temperatures moved (its rows no sharper) said why.
inline constexpr const char* kRunHeadValues[] = {"entropy", "js_divergence", "sink_mass", "tau_q_mean", "tau_v_mean"};
// Against a fine-tune's base also all that fine-tuning changed by each step and the other weights'
// drift (SPEC section 9; the temperatures' part is js_divergence, SSA against tau = 1).
inline constexpr const char* kRunBaseValues[] = {"js_total", "js_drift"};
// The head values `t` follows: kRunHeadValues, then kRunBaseValues when it has a base.
std::vector<std::string> RunHeadValues(const RunTimeline& t);
// The curve of one token's tau_q in one head (TokenTauQCurve): the Run tab's selected token.
inline constexpr const char* kRunTokenCurve = "tau_q_token";
// The curve of the loss read after each layer (the logit lens, SPEC section 10): when each layer
// came to predict the text's next tokens. Only where the steps ran with --lens.
inline constexpr const char* kRunLensCurve = "lens_loss";
// The same as SSA's minus its comparison's (tau = 1: what the temperatures changed, layer by layer)
// and minus the base's (all that fine-tuning changed), where the steps have those sides' lens.
inline constexpr const char* kRunLensDiffCurve = "lens_loss_diff";
inline constexpr const char* kRunLensDiffBaseCurve = "lens_loss_diff_base";
inline bool IsRunLensCurve(const std::string& key) { return key == kRunLensCurve || key == kRunLensDiffCurve || key == kRunLensDiffBaseCurve; }
// The curves a timeline offers (the Run tab's, a session's view.run_curve): its head values, "loss"
// (the mean loss on the text), kRunTokenCurve, and the lens's where it has them (HasLens, HasLensCompare, HasLensBase).
std::vector<std::string> RunCurveKeys(const RunTimeline& t);
// Whether `key` names a curve some timeline offers (one against a base: every one). Inline: sessions
// read it where the plots are not linked (the fuzzers).
inline bool IsRunCurveKey(const std::string& key) {
    for (const char* k : kRunHeadValues)
        if (key == k) return true;
    for (const char* k : kRunBaseValues)
        if (key == k) return true;
    return key == "loss" || key == kRunTokenCurve || IsRunLensCurve(key);
}
// A curve's name in legends, combos and titles: the catalogue's label of a head value; "loss" and
// "tau_q_token" their own; with the run's comparison named ("tau = 1"), JS and the lens's difference
// say it ("JS to tau = 1", as the curve's title does).
std::string RunCurveLabel(const std::string& key, const std::string& compare_name = "");

// One run's values of one quantity over its steps.
struct RunCurve {
    std::string label;                        // the legend's
    std::vector<float> steps;                 // [S]
    std::vector<std::vector<float>> layers;   // [L][S]: the mean over each layer's heads; empty: none
    std::vector<float> all;                   // [S]: the mean over every head (or the quantity itself, a loss)
    std::vector<float> base;                  // [S]: the loss curve's base beside it (a fine-tune's; the same at every step); empty: none
    std::vector<float> compare;               // [S]: the loss curve's comparison beside it (each step's weights at tau = 1): where the
                                              // two part, the temperatures matter; empty: none
    std::string compare_name;                 // its legend's ("tau = 1")
    std::string note;                         // the loss curve's: what the run trained for, where it is not the next token
    std::vector<float> head;                  // [S]: one head's own value (a head value's curve); empty: none
    std::string head_name;                    // its legend's: "L0 H1 (selected head)", "L0 H1, moved most"
    int head_layer = 0;                       // its layer: its colour, dashed
};
// `key`: one of kRunHeadValues, "loss", or a lens curve (layers: the loss read after each layer but
// the last, layers[l] after layer l; all: the model's own loss, after its last layer; for the
// differences, SSA's minus the other side's of each). A head value's curve also follows one head
// (the layer means hid a head that moved alone): `head`, or with none the head whose value moved
// most from the first step to the last.
RunCurve CurveOf(const RunTimeline& t, const std::string& key, std::optional<HeadRef> head = std::nullopt);

// One token's tau_q in one head over the run's steps (a step where it is out of range: NaN).
RunCurve TokenTauQCurve(const RunTimeline& t, int layer, int head, int token);

// Layer `layer`'s colour among `n_layer` (the model's), by depth on viridis: one colour a layer in
// every run curve, a file's (`file`, on white) or the window's (on its dark theme).
viz::Rgba8 RunLayerColor(int layer, int n_layer, bool file);

// `key`: CurveOf's, or "tau_q_token" (TokenTauQCurve's). The first run's layers and the runs' means against step; `points` adds a dot at each step (files;
// the window draws lines only and reads values on hover).
viz::Plot RunCurvesPlot(const std::string& key, const std::vector<RunCurve>& runs, bool points = true);

// Each head's steps to sparsity [L * H]: the first step at which its mean entropy on the text is
// below half of its entropy at the run's first analysed step; -1: never (or no entropy to halve).
std::vector<int64_t> StepsToSparsity(const RunTimeline& t);
// When each layer came to predict the text [L + 1] (a run with the lens): the first step at which the
// loss read after it (0: the embeddings, L: the model's own) had fallen half of the way from the
// run's first analysed step's to its last's; -1: it did not fall (or no lens).
std::vector<int64_t> StepsToLensHalfway(const RunTimeline& t);
// The same as a head value [L * H] for the heads matrix: the run's (MapMode::Ssa), the compare
// run's (Compare: needs `compare` of the same shape), or run minus compare run (Difference);
// never reached, or no compare run: NaN.
std::vector<float> StepsToSparsityValues(const RunTimeline& run, const RunTimeline* compare, MapMode side);
// The heads matrix's key for it (a session's view.matrix_metric may hold it).
inline constexpr const char* kStepsToSparsityKey = "steps_to_sparsity";

}  // namespace app
