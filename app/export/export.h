// Writes an analysis to files for scripts and papers (SPEC section 4): tokens.json, metrics.json,
// .npy tensors, per-head CSV, and figures as PNG / SVG / HTML. The same plan serves `ssaviz export`
// and the GUI's export dialog, so the same options write the same bytes.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "app/core/attribution.h"
#include "app/export/export_figures.h"
#include "model/nn/analysis.h"
#include "viz/figure.h"

namespace app {

struct ExportOptions {
    std::string out_dir;
    std::vector<int> layers;  // which heads get per-head files (CSV, heatmaps)
    std::vector<int> heads;
    bool json = true, npy = true, csv = false;
    bool png = false, svg = false;  // heatmaps/, heads grid, highlight, plots/
    bool html = false;              // highlight.html
    std::vector<MapMode> maps = {MapMode::Ssa, MapMode::Compare};  // which maps get heatmaps and grids
    FigureSettings figures;
    float sink_epsilon = 0.3f;
    int threads = 0;  // files written at once; 0: one per core (the output is the same either way)
    bool lens = false;  // --lens: the logit lens and attribution too (the caller runs them: LensFiles)
    // --dla-position: the position whose prediction dla_bars and dla_layers split, 0 .. T - 2 as
    // dla.npy's last axis counts (0 .. T - 1 with dla_target Top), or negative from the end; none:
    // the last (DlaQuery).
    std::optional<int64_t> dla_position;
    // --dla-target: whose logit they split there (the next token, SSA's top prediction, the next
    // token's against SSA's other), written to dla_at.json too; none: the next token's, from dla.npy.
    std::optional<LensTarget> dla_target;
    bool rank_heads = false;  // --rank-heads: each head's temperatures' part of the loss (the caller measures: HeadImpactFiles)
};

// One file an export writes: its path below out_dir and how to make it.
struct ExportFile {
    std::string path;  // relative, '/'-separated: "heatmaps/L0_H1.png"
    std::function<model::Status(const std::string& full_path)> write;
    std::function<viz::Figure()> figure = nullptr;  // PNG and SVG files: the figure they hold (for previews)
    size_t memory = 0;  // bytes its writer may hold at once (an estimate, on the high side), for kExportMemoryBudget
};

// What an export's writer threads may hold at once: files are started while their estimates fit,
// so --size and the core count do not multiply (a file larger than this is written alone).
constexpr size_t kExportMemoryBudget = size_t{1} << 30;

// One side's lens as its files name it: `suffix` "" (SSA), "_compare" / "_tau1" (the comparison),
// "_base"; `name` the figures' title ("SSA", "tau = 1", "base").
struct LensSideFiles {
    std::shared_ptr<const model::Lens> lens;
    std::string suffix, name;
    std::string title;  // a figure of this side alone's (LensSideTitle: the base by its folder); empty: `name`
};
// The logit lens and direct logit attribution's files (SPEC section 10) of each side, named with
// its suffix: lens_loss.npy [L + 1, T - 1], lens_top.json (each layer's and position's top
// pieces: id, piece, probability), dla.npy [L, H, T - 1], dla_mlp.npy [L, T - 1], dla_embed.npy
// and dla_const.npy [T - 1], dla_logit.npy [T - 1] (what they sum to), dla_divisor.npy and
// dla_const_free.npy [T - 1] (the final norm's divisor they were read through, the biases outside
// it). `piece` names an id as the views do. With PNG or SVG among
// `options`' formats, figures too: lens.png (the lens as a layer x position heatmap of p(next
// token), log scale) and dla_heads.png (each head's part of the next token's logit, averaged over
// the positions, on a diverging scale); with SSA first among `sides`, lens_diff.png (SSA's loss
// of the next token minus the comparison's, after each layer, diverging) and lens_diff_base.png (minus
// the base's), beside a base lens_diff_drift.png (tau = 1's minus the base's), the three on one scale,
// and dla_heads_change.png (DlaHeadsChangeFigure); dla_bars.png and dla_layers.png, the last token's
// logit split by head and by layer (attention, MLP, embeddings, biases), every side's bars through
// SSA's divisor. WriteExport writes them with the rest (`extra`).
// `attributed`: the attribution dla_bars and dla_layers draw where options.dla_target asks for one
// (AttributeForExport), written to dla_at.json too.
std::vector<ExportFile> LensFiles(const std::vector<LensSideFiles>& sides, const std::function<std::string(int32_t)>& piece,
                                  const ExportOptions& options, const std::vector<std::string>& token_labels, const std::string& model_name,
                                  const SidesAttribution* attributed = nullptr);

// --lens's run: the lens of `a`'s ids on the SSA side and, unless `a` is against the unedited model
// or has no comparison, on its comparison (tau = 1, the twin, or with a base its weights at tau =
// 1) and with a base on the base, each a forward pass of its own (the model as loaded: the caller
// refuses what-ifs): [SSA, comparison, base], as many as there are; `side_done(sides done,
// sides)` after each; `cancel` (may be null) stops it between layers, as a failure. Each side runs whole
// (LensOptions::whole): the same bytes whatever lens the engine ran before.
// The engine's comparison made `a`'s where the lens's comparison side depends on it (tau = 1 and
// layer-local are the same model's: a later analysis may have switched between them), or a
// one-line error where `a` compared with another model than the engine now does.
model::Status MatchLensComparison(model::Engine& engine, const model::Analysis& a);
model::Result<std::vector<std::shared_ptr<const model::Lens>>> RunLensSides(model::Engine& engine, const model::Analysis& a,
                                                                     const std::function<void(size_t, size_t)>& side_done = {},
                                                                     const std::atomic<bool>* cancel = nullptr);
// The name of RunLensSides' k-th side for `a` (progress bars, figure titles): "SSA", the
// comparison's, "base".
std::string LensSideName(const model::Analysis& a, size_t k);
// The same in a title of that side's figure alone: the base by its folder, "base (english/vanilla)".
std::string LensSideTitle(const model::Analysis& a, size_t k);
// One of --lens's figures for a notebook, as the export draws it: with `mode` ssa, compare or base
// that side's lens (lens.png, lens_compare.png, lens_base.png: `other` is that side's lens for the
// latter two), with diff or base_diff SSA's minus `other`'s (lens_diff.png, lens_diff_base.png);
// `shared`: a fine-tune's one scale for its differences (FineTuneLensScale), as the export draws them.
viz::Figure LensModeFigure(const model::Analysis& a, const model::ModelInfo& info, MapMode mode, const model::Lens* ssa,
                           const model::Lens* other, const viz::FigureText& text, const DivergingScale* shared = nullptr);
// The attribution's figures for papers (LensFiles writes them), of the sides given (SSA first, then
// the comparison, then the base, named as LensFiles names them). DlaHeadsFigure: a side's heads'
// mean part of the next token's logit, a layer x head map on a diverging scale; with `ssa` (SSA's
// lens, for another side) each position's parts read through SSA's final-norm divisor
// (model::PartsThroughDivisor), so that a head that wrote the same reads the same on every side.
// `most`: the colour scale's end (DlaHeadsMost of every side drawn, sides[0] SSA, so their colours
// compare; 0: the side's own).
viz::Figure DlaHeadsFigure(const LensSideFiles& side, const std::string& model_name, float most, const viz::FigureText& text,
                           const model::Lens* ssa = nullptr);
float DlaHeadsMost(const std::vector<LensSideFiles>& sides);
// Beside a fine-tune's base (`sides` SSA, tau = 1, the base): how far each head's part of the next
// token's logit moved, the mean over positions of |SSA - tau = 1| (the temperatures) and of
// |tau = 1 - base| (the drift), every side through SSA's final-norm divisor; two layer x head maps on
// one scale (dla_heads_change.png: a head's signed mean can stay while its part moves token by
// token). Empty without the three sides.
viz::Figure DlaHeadsChangeFigure(const std::vector<LensSideFiles>& sides, const std::string& model_name, const viz::FigureText& text);

// One side's parts of one logit at one position, as dla_bars and dla_layers draw them.
struct DlaColumn {
    std::string name;          // the side's, as LensSideName
    std::vector<float> heads;  // [L H], layer-major
    std::vector<float> mlp;    // [L]
    float embed = 0, biases = 0, logit = 0;  // the parts sum to `logit`
    float divisor = 0, free = 0;  // the final norm's divisor the parts were read through, and the biases' share outside it
    float norm = 0;  // ThroughSsaDivisor's: what the side's own divisor adds (its logit less the parts' sum); 0 as read
};
// Every side's column, and whose logit they split in words for the figures' titles ("the last
// token '.'", "SSA's top prediction '\n' after the text", "token 5 'x' against SSA's other 'y'").
struct DlaShown {
    int64_t n_layer = 0, n_head = 0;
    std::vector<DlaColumn> sides;
    std::string whose;
    bool difference = false;  // a logit difference (NextAgainstOther)
};
// The next token's parts at `position` (0 .. T - 2, dla.npy's last axis) from each side's whole
// lens; empty outside that range.
DlaShown DlaOfLens(const std::vector<LensSideFiles>& sides, const std::vector<std::string>& token_labels, int64_t position);
// AttributeAt's parts (`names` its sides'), the attributed tokens named by `piece`.
DlaShown DlaOfAttribution(const SidesAttribution& attributed, const std::vector<std::string>& names, int64_t n_layer, int64_t n_head,
                          const std::vector<std::string>& token_labels, const std::function<std::string(int32_t)>& piece);
// Every side's parts read through SSA's final-norm divisor (sides[0]'s; model::PartsThroughDivisor),
// each with its `norm` part, so that they still sum to its logit: a part that wrote the same vector
// on two sides reads the same (through its own divisor, each side's parts are scaled by 1 / its
// divisor: an unchanged embedding read 2.20 / 2.31 / 2.40 on SSA / tau = 1 / base).
DlaShown ThroughSsaDivisor(const DlaShown& shown);
// DlaBarsFigure: the logit split by head, the 16 heads with the largest parts on any side, each
// side's bars. DlaLayersFigure: the same logit by layer, as the window's Lens tab totals it: each
// layer's attention (its heads together) and MLP, the embeddings and the biases, and with more than
// one side each side's "final norm" part (both ThroughSsaDivisor's); beside a base, a
// layer whose tau = 1 bar differs from SSA's owes that to the temperatures (its own or the layers'
// before it), one whose base bar differs from tau = 1's to the other weights' drift. Empty figures
// for an empty DlaShown.
viz::Figure DlaBarsFigure(const DlaShown& shown, const std::string& model_name, const viz::FigureText& text);
viz::Figure DlaLayersFigure(const DlaShown& shown, const std::string& model_name, const viz::FigureText& text);
// The position whose prediction --lens's dla_bars and dla_layers split in a text of `tokens` tokens
// (0 .. tokens - 2, as dla.npy's last axis; 0 .. tokens - 1 for SSA's top prediction, which the
// last token has too: options.dla_position resolved, the last without it), or a one-line error
// naming the flag where the text has no such position. CheckDlaPosition: that check before an
// export runs the lens (a text of one token has no attribution figures: refused only where a
// position or a target is asked).
model::Result<int64_t> DlaQuery(const ExportOptions& options, int64_t tokens);
model::Status CheckDlaPosition(const ExportOptions& options, int64_t tokens);
// The attribution options.dla_target asks for at DlaQuery's position, on every side RunLensSides
// ran for `a` (none without dla_target, or for a text with no such position).
model::Result<std::optional<SidesAttribution>> AttributeForExport(model::Engine& engine, const model::Analysis& a, size_t n_sides,
                                                                  const ExportOptions& options);
// LensFiles of those sides, pieces named by the engine's tokenizer, with AttributeForExport's
// attribution (which may fail as the engine's lens).
model::Result<std::vector<ExportFile>> LensExportFiles(model::Engine& engine, const model::ModelInfo& info, const model::Analysis& a,
                                                       const std::vector<std::shared_ptr<const model::Lens>>& sides, const ExportOptions& options);
// The same with each predicted id's piece from `piece` (the window's vocabulary table, made by the
// same model::PredictedPieces), as shown.
std::vector<ExportFile> LensExportFiles(const std::function<std::string(int32_t)>& piece, const model::ModelInfo& info,
                                        const model::Analysis& a, const std::vector<std::shared_ptr<const model::Lens>>& sides,
                                        const ExportOptions& options, const SidesAttribution* attributed = nullptr);
// --rank-heads's files: head_impacts.json (the baseline loss, the what-ifs it was measured on top
// of, and each head's mean_loss and delta as [layer][head] lists), head_impacts.csv (a row a head)
// and, with png / svg, head_impacts.png / .svg (HeadImpactsFigure), head_impacts_tokens (each head's
// part token by token) and beside a base head_impacts_drift_tokens (the drift's path token by
// token), their columns named by `token_labels` (TokenLabels of the text measured).
std::vector<ExportFile> HeadImpactFiles(const HeadImpacts& impacts, const model::ModelInfo& info, const ExportOptions& options,
                                        const std::vector<std::string>& token_labels);
// A batch summary's per-layer lens loss: entry l is the mean over positions of the loss read after
// layer l (0: the embeddings, L: the model's own).
nlohmann::json LensLossByLayer(const model::Lens& lens);
// The same as numbers (the window's Run tab's lens curve).
std::vector<double> LensLossMeans(const model::Lens& lens);

// A figure as `path`.png or .svg (`extension` "png" / "svg"), made by `make` when the file is
// written, so a plan costs nothing to list. `memory`: what drawing it takes at scale 1; a PNG at
// `png_scale` takes that times its square.
ExportFile FigureFile(std::string path, const char* extension, std::function<viz::Figure()> make, size_t memory, int png_scale);
// The figures' extensions an export asks for: "png" and "svg" where options.png / svg are on.
std::vector<const char*> FigureExtensions(const ExportOptions& options);

// Everything an export will write, in order. The analysis must outlive the plan.
std::vector<ExportFile> PlanExport(std::string_view text, const model::Analysis& analysis, const model::ModelInfo& info,
                                   const ExportOptions& options);

// Called after each file with (files done, files in all, the file's path); return false to stop.
using ExportProgress = std::function<bool(size_t done, size_t total, const std::string& path)>;

nlohmann::json TokensToJson(std::string_view text, const model::Tokenization& tokens);
nlohmann::json MetricsToJson(const model::Analysis& analysis, const model::ModelInfo& info, float sink_epsilon);
nlohmann::json InfoToJson(const model::ModelInfo& info);
// tau_q's position term per layer (ModelInfo::query_slopes): beta, s and tau_q at SlopeContexts'
// positions (256, 1,024, 4,096 and the model's context); null when tau_q has no position term.
nlohmann::json SlopesToJson(const model::ModelInfo& info);
std::vector<int> SlopeContexts(const model::ModelInfo& info);
// With a base (model::Analysis::HasBase): metrics.json's "decomposition", per head the total change
// and its two parts (model::Decompose), and each side's mean loss; null without a base.
nlohmann::json DecompositionToJson(const model::Analysis& a);
// The suffix of the comparison side's files: "_compare", or "_tau1" beside a base's "_base".
std::string CompareFileSuffix(const model::Analysis& a);
// How this process computes: {"threads", "threads_why", "blas"} (`ssaviz info --json`'s "runtime",
// Python's m.info["runtime"]); not in metrics.json, whose numbers do not depend on it.
nlohmann::json RuntimeToJson();
// What `ssaviz info --json` prints and Python's m.info holds: InfoToJson, "runtime", and what lies
// beside the model: "base_beside" (app::BaseBeside: what --compare base takes) and "twin_beside"
// (a vanilla/ folder beside it: TwinBeside, unless that is the base), each a path or null.
nlohmann::json InfoCommandJson(const model::ModelInfo& info);
// The catalogue of quantities (app/core/quantities.h) as data: for Python's documentation and
// `ssaviz.quantities()`. Each: key, label, help, unit, scope, sides, python (its key in
// Analysis.metrics, or null), head_values (the per-head numbers it gives); then the token colourings.
nlohmann::json CatalogueToJson();

// Checks that an export can write to `out_dir`: a folder (or a link to one the user named), or
// missing with a writable folder above it; not a file; and not a new step of a run
// (CheckNotANewRunStep) unless what goes there is a model's weights (`weights`: init-random,
// train). The command line asks before any model runs.
model::Status CheckExportFolder(const std::string& out_dir, bool weights = false);
// Checks that one export's folder inside --out (`folder`: --out itself, a batch text's, a run
// step's) and the folders the export makes in it (csv/, heatmaps/, plots/ as its formats ask) hold
// no link and no file where a folder goes, and that no folder, FIFO or device sits where one of its
// files may go (every side's, its figures', --lens's and --rank-heads'; in csv/, heatmaps/ and
// plots/ any entry of their extensions): asked before any model runs, as the writers refuse them
// (found after the whole analysis, lens and ranking before).
model::Status CheckExportPlaces(const std::string& out_dir, const std::string& folder, const ExportOptions& options);

// "" when every temperature and loss of the analysis is finite; else the one-line refusal naming
// the first that is not (a file whose numbers overflow: exports and figures are refused, exit 3).
std::string NonFiniteAnalysis(const model::Analysis& a);
// The same of the sides another model computes, a twin's or a base's: what fails every step of a run.
std::string NonFiniteOtherModel(const model::Analysis& a);

// Whether the export's settings can be met by an analysis with or without a base: a format chosen,
// and no map or highlight only a base has (--maps base, --highlight js_total) without one. Asked
// before the model runs where the settings are the user's (export, a session's --export-to: exit 2).
model::Status CheckExportSettings(const ExportOptions& options, bool has_base);
// Whether the heatmaps (and side-by-side figures) of a text of `tokens` tokens fit a figure at
// --png-scale: at --size, or without it sized by the tokens (a pixel a token past 720). Asked once
// the text is tokenised, before the model runs (they were refused as drawn, exit 1 after it ran);
// checked again as drawn. `tokens` 0: --size alone (CheckExportSettings asks so).
model::Status CheckHeatmapsFit(const ExportOptions& options, int64_t tokens);
// Whether the analysis holds what the highlight colours by: a loss colouring of the comparison
// needs a comparison with a loss of its own (the layer-local one has none: it drew an empty figure).
model::Status CheckHighlightHeld(const ExportOptions& options, const model::Analysis& a);

// Runs the plan: every file to a temporary name, then all renamed into place, so a failure leaves
// the folder as it was; never writes through a link inside `out_dir`. Stops at the first failure
// (or when progress returns false) with a one-line error.
// `extra`: files the caller adds to the plan (LensFiles), written with the rest.
model::Status WriteExport(std::string_view text, const model::Analysis& analysis, const model::ModelInfo& info,
                          const ExportOptions& options, const ExportProgress& progress = nullptr, std::vector<ExportFile> extra = {});

// Format names as flags, sessions and the command line spell them: json, npy, csv, png, svg, html.
extern const char* const kExportFormatList;  // "json, npy, csv, png, svg, html", for messages
std::vector<std::string> ExportFormats(const ExportOptions& options);  // the ones switched on, in that order
void ClearExportFormats(ExportOptions* options);
bool EnableExportFormat(ExportOptions* options, const std::string& name);  // false for an unknown name

// Resolves an export's heads against a model: empty lists mean all; an index out of range is an
// error naming it and its flag (--layers, --heads). The flags themselves, and the command line that
// repeats an export, are in app/export/flags.h.
model::Status ResolveExportHeads(ExportOptions* options, int layers, int heads);

}  // namespace app
