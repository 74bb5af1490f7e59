// What the views share on the UI thread: the current model and analysis (immutable, from the
// inference worker), the user's selections and view settings, and requests the views make of
// the app (open a model, re-run). Only the UI thread touches it.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/nn/analysis.h"
#include "viz/colormap.h"

namespace app {

enum class MapMode { Ssa, Compare, Difference };                      // SSA, comparison (vanilla / twin), SSA - comparison
enum class TokenColor { TauQ, TauV, Entropy, Spikiness, SinkMass };
enum class TokenScope { Head, LayerMean, ModelMean };

struct HeadRef {
    int layer = 0;
    int head = 0;
    bool operator==(const HeadRef& o) const { return layer == o.layer && head == o.head; }
    bool operator!=(const HeadRef& o) const { return !(*this == o); }
};

// The attention map's zoom (1 = the whole map fits) and top-left visible cell (fractional).
struct MapView {
    float zoom = 1.0f;
    float pan_x = 0, pan_y = 0;
};

struct ViewSettings {
    viz::Colormap colormap = viz::Colormap::Viridis;
    bool log_scale = false;
    MapMode map_mode = MapMode::Ssa;
    TokenColor token_color = TokenColor::TauQ;
    TokenScope token_scope = TokenScope::Head;
    float sink_epsilon = 0.3f;
    std::string grid_metric = "entropy";
    MapView map_view;  // the heads grid badge: a MapMetrics row name, or "js_divergence", "tau_q"
};

// Screen rectangles of views, in framebuffer pixels, for screenshots and tests.
struct Rect {
    float x = 0, y = 0, w = 0, h = 0;
};

struct AppState {
    // The model, as the worker last reported it.
    std::optional<model::ModelInfo> model;
    std::optional<model::ModelInfo> twin;
    std::vector<std::string> recent_models;

    // The text being edited, and the newest finished analysis of it (may lag the text while the
    // worker runs; never null once the first run finished).
    std::string text;
    std::shared_ptr<const model::Analysis> analysis;
    bool truncate = false;  // run the first n_positions tokens of a longer text
    bool busy = false;      // the worker is running
    float progress = 0.0f;  // of the running analysis, 0..1
    std::string error;      // the last failure, shown in the window until the next success

    // Selection.
    HeadRef selected;
    std::vector<HeadRef> pinned;  // heads shown side by side
    int query = -1;               // selected query token, -1 for none

    ViewSettings settings;

    // Requests from views, handled by the app at the end of the frame.
    bool text_changed = false;
    std::optional<std::string> open_model_request;
    model::ConfigHints hints;  // for checkpoints without config.json: from flags, or asked for (CheckpointDialog)
    std::optional<std::string> open_twin_request;
    bool close_twin_request = false;
    bool show_open_dialog = false;
    bool open_dialog_for_twin = false;
    bool show_help = false;
    bool show_demo = false;
    bool show_graph = false;  // the graph experiment window (paper Figure 3)
    bool want_frame = false;  // a view has more to do (e.g. baking in slices): draw again soon

    // Status.
    double last_latency_ms = 0;  // request to result
    float frame_ms = 0;
    std::map<std::string, Rect> regions;  // "heatmap", "tokens", "heads", ...

    // Convenience over the analysis.
    int Layers() const { return analysis ? analysis->n_layer : 0; }
    int Heads() const { return analysis ? analysis->n_head : 0; }
    int Tokens() const { return analysis ? analysis->n_tokens : 0; }
    bool IsPinned(HeadRef h) const;
    void TogglePin(HeadRef h);
    void ClampSelection();  // keeps selected / query / pinned inside the current analysis
};

// A token as one line of readable text: control characters escaped (\n, \t, \x01), bytes that
// are only part of a UTF-8 character (byte-level BPE splits them) as \xE4, and a piece of spaces
// as middle dots so that it is not an empty label.
std::string TokenLabel(const std::string& piece);

// Names used by the command line, session files and exports ("ssa", "tau_q", "layer", ...).
const char* ToString(MapMode mode);
const char* ToString(TokenColor color);
const char* ToString(TokenScope scope);
std::optional<MapMode> ParseMapMode(const std::string& name);        // ssa | vanilla (or compare) | diff
std::optional<TokenColor> ParseTokenColor(const std::string& name);  // tau_q | tau_v | entropy | spikiness | sink_mass
std::optional<TokenScope> ParseTokenScope(const std::string& name);  // head | layer | model
std::optional<viz::Colormap> ParseColormap(const std::string& name); // viridis | magma | diverging

// The [L, H, T] array behind a token colouring; null when the analysis lacks it or its shape is off.
const std::vector<float>* TokenQuantity(const model::Analysis& a, TokenColor color);
// Row metrics (entropy, ...) are trivial on row 1 (one key); temperatures are not.
bool IsRowMetric(TokenColor color);
// Token i's value of an [L, H, T] array in a scope: one head, the mean over the head's layer, or
// the mean over every head. NaNs are left out of means.
float ScopedTokenValue(const model::Analysis& a, const std::vector<float>& rows, TokenScope scope, HeadRef head, int i);

}  // namespace app
