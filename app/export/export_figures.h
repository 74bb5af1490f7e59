// The figures ssaviz exports, built from an analysis: a head's attention map, the grid of all
// heads, the text highlighted by a token quantity, and the sparsity plots. The GUI's export
// preview and `ssaviz export` call these same functions, so they write the same files.
#pragma once

#include <string>
#include <vector>

#include "app/core/head_impacts.h"
#include "app/core/state.h"
#include "model/nn/analysis.h"
#include "model/nn/lens.h"
#include "viz/figure.h"

namespace app {

// The largest heatmap side an export draws (--size): one such figure takes about 0.7 GB while it
// is rasterised and encoded, which keeps an export within its memory budget (kExportMemoryBudget).
constexpr int kMaxMapSize = 8192;

struct FigureSettings {
    viz::Colormap colormap = viz::Colormap::Viridis;  // difference maps always use Diverging
    bool log_scale = false;
    int map_size = 0;  // side of a heatmap's map area in pixels; 0: from the token count
    int png_scale = 1;  // a PNG's pixels per figure pixel (1 to viz::kMaxPngScale); SVGs are the same at any
    TokenColor highlight = TokenColor::TauQ;  // what colours the tokens of the highlight
    TokenScope highlight_scope = TokenScope::ModelMean;
    HeadRef highlight_head;  // the head (or its layer) for the Head and LayerMean scopes
    // --temperature-scale head: a temperature highlight on the highlighted head's own scale (a
    // mean's, on its values'), as the window's View > Temperature scale per head; else the model's.
    bool temperature_per_head = false;
    // --no-titles, --text-scale: every figure's title drawn or not and its text's size (a paper's
    // caption says what a title would; a figure set in one column needs larger text).
    viz::FigureText text;
};

// --highlight-scope's layer and head against the model's shape; the error names the flag.
model::Status CheckHighlightScope(const FigureSettings& settings, int n_layer, int n_head);

// The model's folder and the one above it ("licenses/ssa": FolderAndParent), for titles.
std::string ModelName(const model::ModelInfo& info);

// One head's map. SSA and comparison share one colour range (the larger of the two), so their
// figures can be set side by side; the difference is SSA - comparison on a symmetric scale.
viz::Figure MapFigure(const model::Analysis& a, const std::string& model_name, HeadRef head, MapMode mode,
                      const FigureSettings& settings);

// One head's maps side by side for a paper: SSA | comparison | difference, the first two on one
// scale; or, with `three_way` (an analysis with a base), SSA | tau = 1 | base, all on one scale.
// Each map is at most kSideBySideMapSize pixels a side, so three fit a figure. Empty without the
// maps it needs.
constexpr int kSideBySideMapSize = 4096;
viz::Figure SideBySideFigure(const model::Analysis& a, const std::string& model_name, HeadRef head, bool three_way,
                             const FigureSettings& settings);

// Every head's map of one kind as a grid (layers are rows), on one shared scale.
viz::Figure HeadsGrid(const model::Analysis& a, const std::string& model_name, MapMode mode, const FigureSettings& settings);

// The logit lens as a layer x token heatmap (export's lens.png): each token's p read after each
// layer, log scale from 1e-4; `side_name` names whose lens it is in the title. `token_labels`:
// the text's tokens; column t - 1 (token t's p, read at position t - 1) is labelled with token t, the
// token predicted, as the other figures of the text's losses label theirs.
viz::Figure LensFigure(const model::Lens& lens, const std::string& model_name, const std::string& side_name,
                       const std::vector<std::string>& token_labels, const viz::FigureText& text);
// SSA's loss of the next token minus `other`'s at each cell of the lens (-log p: negative, blue,
// where SSA predicts it better, as the token strip's and the Fine-tune tab's loss changes read),
// and a difference's symmetric scale: the 99th percentile of the cells' magnitudes (nearest rank,
// at least 1e-3), so that a few cells fine-tuning changed most (or an embeddings row against a
// separately trained model) do not wash out the rest; cells beyond it take the scale's end colour,
// and the labels say so. Empty if the lenses' shapes differ.
// A diverging scale symmetric about 0 for changes of a loss, its end the 99th percentile of the
// values' finite magnitudes: a few outliers do not wash out the rest (they take the end colours).
struct DivergingScale {
    float most = 1e-3f;    // the scale's end, +-
    float largest = 0.0f;  // the largest finite magnitude
    bool Clips() const { return largest > most; }
};
constexpr double kLensScalePercentile = 0.99;
DivergingScale DivergingScaleOf(const std::vector<float>& values);
// What a scale leaves out, for a title: "; scale +-X, the 99th percentile of |difference|, largest Y";
// empty when every value is within the scale.
std::string ScaleNote(const DivergingScale& scale, const std::string& of = "difference");
struct LensDifference : DivergingScale {
    std::vector<float> delta;  // [L + 1, T - 1]
};
LensDifference LensDifferenceOf(const model::Lens& ssa, const model::Lens& other);
// What a difference's scale leaves out, for its labels: "; scale +-X, the 99th percentile ..."; empty
// when every cell is within the scale.
std::string LensScaleNote(const LensDifference& d);
// One scale for a fine-tune's three lens differences, SSA - tau = 1 (the temperatures), SSA - base
// (the whole change) and tau = 1 - base (the drift): the 99th percentile of their cells together, so
// that a colour is one loss change in all three (each on its own: +-1.25 beside +-2.75 nats).
DivergingScale FineTuneLensScale(const model::Lens& ssa, const model::Lens& tau1, const model::Lens& base);
// SSA's loss of the next token minus `other`'s after each layer (lens_diff.png, lens_diff_base.png;
// tau = 1's minus the base's, lens_diff_drift.png), on a symmetric diverging scale (blue: the first
// side predicts it better), the sides by their names ("SSA" or "vanilla": SsaSideName); `shared`:
// FineTuneLensScale's, said in the title (else the difference's own). Empty if the shapes differ.
viz::Figure LensDiffFigure(const model::Lens& ssa, const model::Lens& other, const std::string& model_name, const std::string& ssa_name,
                           const std::string& other_name, const std::vector<std::string>& token_labels, const viz::FigureText& text,
                           const DivergingScale* shared = nullptr);

// The text with each token coloured by settings.highlight (the paper's Figure 1).
viz::Figure Highlight(const model::Analysis& a, const std::string& model_name, const FigureSettings& settings);
// Whether the highlight of a text of these token pieces fits a figure's bounds as PNG (at its
// --png-scale) and SVG, before the model runs: its size is the text's (a long text at --text-scale 3
// was refused after the whole analysis).
model::Status CheckHighlightFits(const std::vector<std::string>& tokens, const FigureSettings& settings, bool png, bool svg);
std::string HighlightHtmlPage(const model::Analysis& a, const std::string& model_name, const FigureSettings& settings);

// What fine-tuning changed, as the Fine-tune tab shows it (an analysis with a base; empty
// without one). finetune: each head's JS divergence of its rows (nats), the temperatures' part
// (SSA against tau = 1) beside the drift's (tau = 1 against the base) on one scale, under the mean
// loss of each side and the change split in the two. finetune_loss: each token's loss change from
// the base in the same two parts (bars up to kFineTuneLossBars tokens; above, every token faint
// under each part's mean over a window of about n / 64 tokens).
constexpr int kFineTuneLossBars = 96;
// How many tokens finetune_loss's mean lines average over (odd, about n / 64, at least 9): 0 for
// n up to kFineTuneLossBars, which are bars. The Fine-tune tab draws the same lines.
int FineTuneLossWindow(size_t n);
// Each value's mean over the `window` values centred on it (fewer at the ends), non-finite ones
// left out (NaN where all are).
std::vector<float> CentredMean(const std::vector<float>& y, int window);
// The one scale of a fine-tune's JS matrices (both parts', and the window's Matrix draws all three JS
// on it): linear from 0 to the largest value of the three, the whole change's too; on a log scale from the
// smallest value above float32 rounding (kJsRoundingFloor), at most four decades below the largest,
// to it (a small part beside a large one still shows, and parts within a decade of each other are
// not one colour).
viz::Range FineTuneRange(const model::Decomposition& d, bool log_scale);
// `log_scale`: both matrices on FineTuneRange's log scale, as the Fine-tune tab draws them by
// default; else linear from 0.
viz::Figure FineTuneFigure(const model::Analysis& a, const std::string& model_name, bool log_scale, const viz::FigureText& text);
// --rank-heads's figure: each head's temperatures' part of the loss (the loss with that head at
// tau = 1, minus the loss), a layer x head map on a diverging scale symmetric about 0, values written
// in the cells where they fit; heads not measured (a ranking stopped) have no colour.
viz::Figure HeadImpactsFigure(const HeadImpacts& impacts, int n_layer, int n_head, const std::string& model_name, const viz::FigureText& text);
// The same parts token by token (the columns: each token's loss given the tokens before it,
// `token_labels` the text's [T]), on a diverging scale symmetric about 0 whose end is the 99th
// percentile of the parts' magnitudes (the title gives the largest). HeadImpactsTokensFigure: a row
// a head, its temperatures' part (head_impacts_tokens.png); HeadImpactsDriftTokensFigure, beside a
// base: the drift taken back from the base part by part from the embeddings up, a row a part, and
// last every weight's, which the rows above add up to (head_impacts_drift_tokens.png). Empty where
// not measured.
viz::Figure HeadImpactsTokensFigure(const HeadImpacts& impacts, int n_layer, int n_head, const std::string& model_name,
                                    const std::vector<std::string>& token_labels, const viz::FigureText& text);
viz::Figure HeadImpactsDriftTokensFigure(const HeadImpacts& impacts, int n_layer, int n_head, const std::string& model_name,
                                         const std::vector<std::string>& token_labels, const viz::FigureText& text);
viz::Figure FineTuneLossFigure(const model::Analysis& a, const std::string& model_name, const viz::FigureText& text);

// The Sparsity tab's plots (app/export/plots.h) over the whole model, by key: "dilution"
// (normalised entropy by position, mean over heads), "tau_q_histogram", "qk_spectrum" (eigenvalue
// variance vs entropy per head), "sink_mass" (first-token mass per head with the eps line).
const std::vector<std::string>& SparsityFigureNames();
viz::Figure SparsityFigure(const model::Analysis& a, const std::string& model_name, const std::string& name, float sink_epsilon,
                           const viz::FigureText& text);

}  // namespace app
