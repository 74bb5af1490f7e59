// What the views share on the UI thread: the current model and analysis (immutable, from the
// inference worker), the user's selections and view settings, and requests the views make of
// the app (open a model, re-run). Only the UI thread touches it. What only the window keeps (its
// open windows, screen rectangles, focus) is app/gui/window_state.h.
#pragma once

#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/core/head_impacts.h"
#include "app/core/model_scale.h"
#include "app/core/quantities.h"
#include "app/core/run.h"
#include "model/nn/analysis.h"
#include "viz/colormap.h"
#include "viz/heatmap.h"

namespace app {

// MapMode (SSA, the comparison, their difference) and TokenColor are the catalogue's: quantities.h.
enum class TokenScope { Head, LayerMean, ModelMean };
// What the What-ifs tab shows of the heads ranking: its table, or where on the text, a grid of each
// head's temperatures' part of each token's loss, or beside a base the drift's along its path
// (Drift) or each part's alone (DriftParts: each head, layer and the embeddings).
enum class RankingView { Table, Tokens, Drift, DriftParts };
// Whose logit the Lens tab's attribution splits at a position: the text's next token, SSA's top
// prediction there, or the next token's logit minus that of SSA's most likely other token (the
// logit difference: which parts make the model prefer the one over the other).
enum class LensTarget { Next, Top, NextAgainstOther };
// What the Lens tab's grid shows: a side's logit lens, or one side's loss of the next token minus
// another's: SSA's minus the comparison's (Difference) or the base's (BaseDifference), and beside a
// base the other weights' drift, tau = 1's minus the base's. Its names are MapMode's, and "drift".
enum class LensGrid { Ssa, Compare, Difference, Base, BaseDifference, Drift };

struct HeadRef {
    int layer = 0;
    int head = 0;
    bool operator==(const HeadRef& o) const { return layer == o.layer && head == o.head; }
    bool operator!=(const HeadRef& o) const { return !(*this == o); }
};

// A head shown side by side with others, with the map it shows (SSA, comparison or difference):
// each pin keeps its own mode.
struct Pin {
    int layer = 0, head = 0;
    MapMode mode = MapMode::Ssa;
    HeadRef Ref() const { return {layer, head}; }
};
// The most heads pinned at once (each is a map of its own in the window); a session may hold no more.
constexpr size_t kMaxPins = 64;

// The window's panes, as the user sized them: the three columns' shares of the width, and the
// text editor's share of the left column's height (0 when it is folded away).
struct PaneLayout {
    float left = 0.28f, center = 0.42f, right = 0.30f;
    float editor = 0.22f;
    bool editor_open = true;
};

// The attention map's zoom (1 = the whole map fits) and top-left visible cell (fractional).
struct MapView {
    float zoom = 1.0f;
    float pan_x = 0, pan_y = 0;
};

struct ViewSettings {
    viz::Colormap colormap = viz::Colormap::Viridis;
    bool log_scale = true;  // attention is mostly small weights: a linear scale shows a dark map
    MapMode map_mode = MapMode::Ssa;
    bool split = false;  // the selected head as SSA | comparison | difference side by side
    bool three_way = false;  // ... as SSA | tau = 1 | base instead (an analysis with a base)
    MapMode grid_mode = MapMode::Ssa;  // what the heads grid's thumbnails show
    TokenColor token_color = TokenColor::TauQ;
    TokenScope token_scope = TokenScope::Head;
    float sink_epsilon = 0.3f;
    std::string grid_metric = "entropy";  // the heads grid's badge: a HeadValue key (quantities.h)
    MapView map_view;
    // Temperature colours: a diverging scale centred at tau = 1 (vanilla), symmetric, over every
    // head of the model (so one colour is one tau everywhere) unless per_head_scale.
    bool per_head_scale = false;
    std::string matrix_metric = "entropy";  // the layer x head matrix: a HeadValue key
    std::string run_curve = "entropy";      // the Run tab's curve: a RunCurveKeys() key (app/export/run_curves.h)
    // The Lens tab's grid: a side's logit lens (SSA, comparison, base), or how SSA's loss of the next
    // token differs from another side's (diff, base_diff: what fine-tuning changed, layer by layer;
    // drift: what the other weights' drift changed).
    LensGrid lens_map = LensGrid::Ssa;
    RankingView ranking = RankingView::Table;
    LensTarget lens_target = LensTarget::Next;
    float grid_cell = 0;                     // heads grid thumbnail side in pixels, 0: fit the pane
    PaneLayout layout;
    std::string right_tab = "Heads";  // the right pane's open tab: Heads, Matrix, Temperatures, Table, Sparsity
};

// Continue (Ctrl+G): how the window appends tokens to the text, as `ssaviz generate` does
// (app/core/run.h), with the window's defaults.
struct GenerateSettings : GenerationSpec {
    GenerateSettings() {
        tokens = 20;
        top_k = 40;
    }
};

struct AppState {
    // The model, as the worker last reported it.
    std::optional<model::ModelInfo> model;
    std::optional<model::ModelInfo> twin;
    std::shared_ptr<const std::vector<std::string>> vocab;  // [V] each token id's bytes (the next-token view's labels)
    std::vector<std::string> recent_models;

    // The text being edited, and the newest finished analysis of it (may lag the text while the
    // worker runs; never null once the first run finished).
    std::string text;
    std::shared_ptr<const model::Analysis> analysis;
    bool truncate = false;  // run the first n_positions tokens of a longer text
    bool busy = false;      // the worker is running
    double busy_ms = 0;     // for this long (0 while idle)
    float progress = 0.0f;  // of the running analysis, 0..1
    std::string error;      // the last failure, shown in the window until the next success

    // Selection.
    HeadRef selected;
    std::vector<Pin> pinned;      // heads shown side by side
    int query = -1;               // selected query token, -1 for none

    ViewSettings settings;

    // Requests from views, handled by the app at the end of the frame.
    bool text_changed = false;
    std::optional<std::string> open_model_request;
    model::ConfigHints hints;  // for checkpoints without config.json: from flags, or asked for (CheckpointDialog)
    std::optional<std::string> open_twin_request;
    bool close_twin_request = false;
    std::optional<bool> layer_local_request;  // without a twin: true the layer-local tau = 1 comparison, false the counterfactual
    bool layer_local = false;                 // the tau = 1 comparison chosen (used whenever no twin is open)
    // Big models (app/core/model_scale.h) open with the layer-local comparison; the global pass
    // runs on request (Ctrl+T). global_pass_running: asked for, its analysis not shown yet.
    int64_t big_model_parameters = kBigModelParameters;
    bool global_pass_running = false;

    // What-ifs on the SSA side (issue 17), as the worker last applied them; a view asks for a new
    // list through interventions_request. With compare_unedited the comparison is the model without
    // them, so the difference views and the loss change show their effect alone.
    std::vector<model::Intervention> interventions;
    std::optional<std::vector<model::Intervention>> interventions_request;
    bool compare_unedited = false;
    std::optional<bool> unedited_request;
    // A fine-tune against its base (three sides: SSA, tau = 1 and the base beside the model).
    bool compare_base = false;
    std::optional<bool> base_request;
    std::string notice;  // a one-line note in the status bar: what-ifs dropped, Continue stopped at the context
    std::shared_ptr<const HeadImpacts> head_impacts;  // the last "which heads matter" run (partial while it runs)
    bool rank_heads_request = false;
    bool cancel_job_request = false;  // stops the heads ranking, a generation or the lens (a timeline it held back goes on after)
    std::string tab_request;          // a view asks the right pane to open this tab ("What-ifs")
    bool ranking_heads = false;

    // Continue: tokens appended to the text one at a time, each analysed as it arrives.
    GenerateSettings generate;
    bool continue_request = false;
    bool generating = false;
    // Bytes [generated_begin, generated_prefix.size()) of the text were generated; generated_prefix
    // is the text as generation left it. An edit before its end forgets them (ForgetGeneratedIfEdited).
    size_t generated_begin = 0;
    std::string generated_prefix;
    bool IsGenerated(const model::Tokenization& tokens, int i) const;
    void ForgetGeneratedIfEdited();

    // Convenience over the analysis.
    int Layers() const { return analysis ? analysis->n_layer : 0; }
    int Heads() const { return analysis ? analysis->n_head : 0; }
    int Tokens() const { return analysis ? analysis->n_tokens : 0; }
    bool IsPinned(HeadRef h) const;
    // Ctrl+T, the menu and the model panel's button: without a twin, the global tau = 1 pass (on)
    // or the layer-local comparison (off). The window keeps showing the last analysis meanwhile.
    void RequestGlobalPass(bool on);
    bool TogglePin(HeadRef h);  // a new pin shows the map mode in use; false when kMaxPins are pinned already
    void ClampSelection();  // keeps selected / query / pinned inside the current analysis
};

// A token as one line of readable text: control characters escaped (\n, \t, \x01), bytes that
// are only part of a UTF-8 character (byte-level BPE splits them) as \xE4, and a piece of spaces
// as middle dots so that it is not an empty label.
std::string TokenLabel(const std::string& piece);
// Every token's label. Tokens that split a UTF-8 character between them (byte-level BPE on
// Chinese, emoji) are grouped: each shows the whole character and its part, "泳 1/2", "泳 2/2",
// instead of byte escapes.
std::vector<std::string> TokenLabels(const model::Tokenization& tokens);
// The runs of tokens that split one UTF-8 character between them: for each token, the first and last
// of its run, or its own index twice where it splits none (bytes that never complete a character
// included: a cut text, invalid input).
struct CharacterRun {
    int first = 0, last = 0;
};
std::vector<CharacterRun> CharacterRuns(const std::vector<std::string>& pieces);
// A token of a run as the labels name it: the run's character and the token's part, "泳 1/2" (the
// character as `show` writes the run's bytes); empty for a token that splits no character.
std::string CharacterPart(const std::vector<std::string>& pieces, const std::vector<CharacterRun>& runs, int token,
                          const std::function<std::string(const std::string&)>& show);

// Names used by the command line, session files and exports ("layer", "magma"; the map modes' and
// token colourings' are the catalogue's, quantities.h).
const char* ToString(TokenScope scope);
std::optional<TokenScope> ParseTokenScope(const std::string& name);  // head | layer | model
const char* ToString(RankingView view);
std::optional<RankingView> ParseRankingView(const std::string& name);  // table | tokens | drift | drift-parts
const char* ToString(LensTarget target);
std::optional<LensTarget> ParseLensTarget(const std::string& name);  // next | top | next-against-other
const char* ToString(LensGrid grid);
std::optional<LensGrid> ParseLensGrid(const std::string& name);  // ssa | compare | diff | base | base_diff | drift
std::optional<viz::Colormap> ParseColormap(const std::string& name); // viridis | magma
// A session's colour map: as ParseColormap, and an older session's "diverging" (the difference
// maps' own, never an attention map's) as viridis.
std::optional<viz::Colormap> ParseSessionColormap(const std::string& name);

// Token i's value of an [L, H, T] array in a scope: one head, the mean over the head's layer, or
// the mean over every head. NaNs are left out of means.
float ScopedTokenValue(const model::Analysis& a, const model::RowArray& rows, TokenScope scope, HeadRef head, int i);

// The colour scale of a temperature ([L, H, T] tau_q or tau_v): `range` centred at tau = 1
// (vanilla attention), symmetric, [1 - d, 1 + d] with d the largest |tau - 1| over every head, or
// over `head` alone when given (at least 0.05, so a model with tau = 1 everywhere still has a
// scale). `used`: the part of it the values reach, which a legend shows: from the lowest value to
// the highest, with 1 at an end when none is on its other side ([1, hi] for an official exp-exp
// fine-tune's tau_q, all >= 1: white to red), so a legend never reads an end no token has (the
// symmetric scale's "-0.73" under tau_q from 0.12 to 2.73); all of `range` when every value is 1
// or none is finite. The colours stay the scale's, so a colour is one temperature everywhere.
struct TemperatureScale {
    viz::Range range;
    viz::Range used;
};
TemperatureScale TemperatureRange(const model::Analysis& a, const model::RowArray& tau, std::optional<HeadRef> head = std::nullopt,
                                  float offset = 0.0f);
// The same scale for values spanning lo..hi (lo > hi: none).
TemperatureScale TemperatureScaleOver(float lo, float hi);
// One colour range for a head's SSA map and its comparison (either may be null), so the two can
// be compared side by side: 0..max of the causal weights, or for log scale from the smallest
// positive weight (at most a decade below the max).
viz::Range SharedMapRange(const float* ssa, const float* compare, int T, bool log_scale);
// The same from the maps' extents (model::MapCells::Extent, computed where the maps are); any may be null.
viz::Range SharedMapRange(std::initializer_list<const model::MapExtent*> maps, bool log_scale);
// A window of a level of a head's map as a texture's pixels, one a cell (the window's heatmap): on
// a GPU coloured where the map is (MapCells::Texels, so only the texels cross), else baked from its
// cells on the host; the same colours either way. Clipped to the level; empty outside it.
viz::Image BakeMapWindow(const model::MapCells& map, const viz::HeatmapStyle& style, viz::Range range, int level, int row0, int col0,
                         int rows, int cols);

}  // namespace app
