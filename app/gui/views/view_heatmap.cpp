// The attention map view (view_heatmap.h): one head's map or three side by side, zoomed and panned
// together, baked into textures by level of detail; the toolbar; the temperature strips; the row
// chart under the map.
//
// Index of this file:
// [SECTION] Constants and small helpers
// [SECTION] Zoom, pan and the selected head's data (maps, ranges, labels, pooled levels)
// [SECTION] Textures: what part of which level is baked
// [SECTION] Toolbar and go-to
// [SECTION] The map: cells, token labels, selection, hover read-out
// [SECTION] Temperature strips beside the map
// [SECTION] Row chart: the query's row, SSA against the comparison (and the base)
// [SECTION] Draw: the view's layout

#include "app/gui/views/view_heatmap.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <numeric>

#include <imgui.h>
#include <imgui_internal.h>  // SetItemUsingMouseWheel

#include "app/core/examples.h"
#include "app/core/names.h"
#include "app/gui/views/view_common.h"
#include "model/text/tokenizer.h"
#include "viz/heatmap.h"
#include "viz/imgui/widgets.h"
#include "viz/palette.h"

namespace app {
namespace {

//-------------------------------------------------------------------------------------------------
// [SECTION] Constants and small helpers
//-------------------------------------------------------------------------------------------------

constexpr float kMaxCellPixels = 64.0f;  // the deepest zoom: one cell this many pixels wide
constexpr int kWholeMapMaxSide = 1024;   // up to this many tokens, one texel per cell for the whole map (one bake of <= 1M cells)
const ImU32 kSsaColor = viz::ToImU32(viz::kSsaColor);
const ImU32 kCompareColor = viz::ToImU32(viz::kCompareColor);
const ImU32 kBaseColor = viz::ToImU32(viz::kBaseColor);
const ImU32 kQueryColor = IM_COL32(255, 220, 90, 255);

// A weight as text: 3 decimals, or scientific below 0.001 so small weights do not read as zero.
std::string FormatWeight(float v, bool sign = false) {
    char buf[32];
    if (!std::isfinite(v)) return "nan";
    if (v == 0.0f || std::abs(v) >= 1e-3f) std::snprintf(buf, sizeof buf, sign ? "%+.3f" : "%.3f", v);
    else std::snprintf(buf, sizeof buf, sign ? "%+.2e" : "%.2e", v);
    return buf;
}

float RadioWidth(const char* label) {
    return ImGui::GetFrameHeight() + ImGui::GetStyle().ItemInnerSpacing.x + ImGui::CalcTextSize(label).x;
}

void CenteredText(const char* text) {
    const ImVec2 avail = ImGui::GetContentRegionAvail(), size = ImGui::CalcTextSize(text);
    const ImVec2 cursor = ImGui::GetCursorPos();
    ImGui::SetCursorPos(ImVec2(cursor.x + std::max(0.0f, (avail.x - size.x) * 0.5f), cursor.y + std::max(0.0f, (avail.y - size.y) * 0.5f)));
    ImGui::TextDisabled("%s", text);
}

bool HasCompare(const model::Analysis& a) { return a.maps && !a.compare_label.empty(); }

}  // namespace

//-------------------------------------------------------------------------------------------------
// [SECTION] Zoom, pan and the selected head's data (maps, ranges, labels, pooled levels)
//-------------------------------------------------------------------------------------------------

void HeatmapView::ResetView() {
    m_view->zoom = 1.0f;
    m_view->pan_x = m_view->pan_y = 0.0f;
}

void HeatmapView::ClampView(float max_zoom) {
    m_view->zoom = std::clamp(m_view->zoom, 1.0f, std::max(1.0f, max_zoom));
    const float limit = std::max(0.0f, m_tokens - m_tokens / m_view->zoom);
    m_view->pan_x = std::clamp(m_view->pan_x, 0.0f, limit);
    m_view->pan_y = std::clamp(m_view->pan_y, 0.0f, limit);
}

const model::MapCells& HeatmapView::MapValues(const Layer& layer) const {
    switch (layer.mode) {
        case MapMode::Compare: return *m_compare;
        case MapMode::Difference: return *m_diff;
        case MapMode::Base: return *m_base;
        case MapMode::BaseDifference: return *m_base_diff;
        case MapMode::Ssa: break;
    }
    return *m_ssa;
}

void HeatmapView::PrepareData(const AppState& state) {
    const model::Analysis& a = *state.analysis;
    const bool has_compare = HasCompare(a);
    // A mode whose side the analysis lacks (a session's base mode, a comparison turned off) shows SSA.
    const MapMode asked = state.settings.map_mode;
    const MapMode mode = (IsBaseMode(asked) ? a.HasBase() : has_compare) ? asked : MapMode::Ssa;
    const bool three_way = a.HasBase() && state.settings.three_way;
    const bool split = has_compare && (state.settings.split || three_way);
    const viz::Colormap colormap = state.settings.colormap;
    const bool log_scale = state.settings.log_scale, per_head = state.settings.per_head_scale;
    const HeadRef head = state.selected;
    if (state.analysis.get() == m_baked_for && head == m_baked_head && mode == m_baked_mode && split == m_baked_split &&
        three_way == m_baked_three_way &&
        colormap == m_baked_colormap && log_scale == m_baked_log && per_head == m_baked_per_head)
        return;

    // The temperature strips' range: the head's, or the whole analysis's (the same for every head).
    const bool new_range = per_head || state.analysis.get() != m_baked_for || per_head != m_baked_per_head;
    if (state.analysis.get() != m_baked_for) {
        m_analysis = state.analysis;
        m_baked_for = state.analysis.get();
        m_tokens = a.n_tokens;
        m_labels = TokenLabels(a.tokens);
        m_labels.resize(a.n_tokens, "?");
        m_short_labels.clear();
        m_short_width = 0;
    }
    m_baked_head = head;
    m_baked_mode = m_mode = mode;
    m_baked_split = m_split = split;
    m_baked_three_way = m_three_way = three_way;
    m_baked_colormap = colormap;
    m_baked_log = log_scale;
    m_baked_per_head = per_head;
    if (new_range) {
        const std::optional<HeadRef> scope = per_head ? std::optional<HeadRef>(head) : std::nullopt;
        m_tau_q_range = TemperatureRange(a, a.tau_q, scope).range;
        m_tau_v_range = TemperatureRange(a, a.tau_v, scope).range;
    }

    // Rebuilt from the layer's q and k when not cached (a few ms at 1,000 tokens; see
    // model::AttentionMaps), and kept where the engine runs: a GPU's map stays there.
    m_ssa = a.Cells(model::MapSide::Ssa, head.layer, head.head);
    m_compare = has_compare ? a.Cells(model::MapSide::Compare, head.layer, head.head) : nullptr;
    // With a base, its map in every mode: the row chart's third series, the hover's two parts and
    // one colour range, so switching between SSA, tau = 1 and the base (1 / 2 / 6) keeps the colours.
    m_base = a.HasBase() ? a.Cells(model::MapSide::Base, head.layer, head.head) : nullptr;
    m_row_query = -1;
    // One range for SSA and comparison (and the base), so switching between them (1 / 2) keeps the
    // colours comparable.
    const model::MapExtent ssa = m_ssa->Extent();
    const model::MapExtent cmp = m_compare ? m_compare->Extent() : model::MapExtent{}, base = m_base ? m_base->Extent() : model::MapExtent{};
    const viz::Range shared = SharedMapRange({&ssa, m_compare ? &cmp : nullptr, m_base ? &base : nullptr}, log_scale);
    for (MapMode m : kAllMapModes) {
        Layer& layer = m_layers[static_cast<int>(m)];
        layer = Layer{};  // textures freed; baked again when drawn
        layer.mode = m;
        layer.colormap = IsDifference(m) ? viz::Colormap::Diverging : colormap;
        layer.log = !IsDifference(m) && log_scale;
        layer.range = shared;
    }
    // A difference map, on a scale symmetric around 0 (identical maps: zero in the middle, white).
    auto difference = [&](const model::MapCellsPtr& other, MapMode m) -> model::MapCellsPtr {
        model::MapCellsPtr d = m_ssa->Minus(*other);
        const float max_abs = d ? d->Extent().max_abs : 0.0f;
        m_layers[static_cast<int>(m)].range = max_abs > 0.0f ? viz::Range{-max_abs, max_abs} : viz::Range{-1e-3f, 1e-3f};
        return d;
    };
    m_diff = (mode == MapMode::Difference && !split) || (split && !three_way) ? difference(m_compare, MapMode::Difference) : nullptr;
    m_base_diff = mode == MapMode::BaseDifference && !split ? difference(m_base, MapMode::BaseDifference) : nullptr;
}

//-------------------------------------------------------------------------------------------------
// [SECTION] Textures: what part of which level is baked
//-------------------------------------------------------------------------------------------------

void HeatmapView::EnsureTexture(Layer& layer, float side) {
    const int T = m_tokens;
    const float scale = std::max(1.0f, ImGui::GetIO().DisplayFramebufferScale.x);
    const float visible = T / m_view->zoom;  // cells across the view
    const float cells_per_pixel = visible / (side * scale);
    // Level of detail: the map max-pooled by 2^level, the smallest pool with no more texels than
    // pixels (so no texel, and no sharp weight, is skipped when the GPU draws it).
    int level = 0;
    while ((1 << level) < cells_per_pixel - 1e-3f) ++level;
    const int pool = 1 << level, n = (T + pool - 1) / pool;  // the level's cells a side

    if (layer.dirty) {
        layer.whole.clear();
        layer.region = {};
        layer.dirty = false;
    }
    viz::HeatmapStyle style;
    style.colormap = layer.colormap;
    style.log_scale = layer.log;
    style.range = layer.range;
    if (n <= kWholeMapMaxSide) {
        // The whole level, baked once and kept: zooming back and forth through the levels and
        // panning within one need no bake.
        if (static_cast<int>(layer.whole.size()) <= level) layer.whole.resize(level + 1);
        if (!layer.whole[level].Valid()) layer.whole[level].Upload(BakeMapWindow(MapValues(layer), style, layer.range, level, 0, 0, n, n));
        layer.drawn = &layer.whole[level];
        layer.drawn_region = {0, 0, n * pool, n * pool, pool};
        return;
    }
    // Zoomed in on a map with more tokens than that: only the visible window of the level (plus
    // a margin, so small pans reuse it).
    layer.drawn = &layer.window;
    const int r_first = static_cast<int>(std::floor(m_view->pan_y)), c_first = static_cast<int>(std::floor(m_view->pan_x));
    const int r_last = std::min(T, static_cast<int>(std::ceil(m_view->pan_y + visible)));
    const int c_last = std::min(T, static_cast<int>(std::ceil(m_view->pan_x + visible)));
    const BakedRegion& r = layer.region;
    if (r.pool == pool && r.row0 <= r_first && r.col0 <= c_first && r.row0 + r.rows >= r_last && r.col0 + r.cols >= c_last) {
        layer.drawn_region = layer.region;
        return;
    }
    const float span = visible / pool, margin = span * 0.25f;
    auto window = [&](float pan, int* begin, int* count) {  // in level cells
        const int b = std::max(0, static_cast<int>(std::floor(pan / pool - margin)));
        const int e = std::min(n, static_cast<int>(std::ceil(pan / pool + span + margin)));
        *begin = b;
        *count = std::max(1, e - b);
    };
    int row0 = 0, rows = 0, col0 = 0, cols = 0;
    window(m_view->pan_y, &row0, &rows);
    window(m_view->pan_x, &col0, &cols);
    // Only the window of the level crosses to the host (from a GPU, as texels coloured there).
    const viz::Image image = BakeMapWindow(MapValues(layer), style, layer.range, level, row0, col0, rows, cols);
    if (image.width != cols || image.height != rows) return;
    layer.window.Upload(image);
    layer.drawn_region = layer.region = {row0 * pool, col0 * pool, rows * pool, cols * pool, pool};
}

//-------------------------------------------------------------------------------------------------
// [SECTION] Toolbar and go-to
//-------------------------------------------------------------------------------------------------

void HeatmapView::ShowToken(AppState& state, int i) {
    state.query = i;
    // Zoomed in: centre the token's row (and its diagonal cell) in the view.
    const float visible = m_tokens / m_view->zoom;
    m_view->pan_y = i + 0.5f - visible * 0.5f;
    m_view->pan_x = i + 0.5f - visible * 0.5f;
    ClampView(m_view->zoom);
}

void HeatmapView::DrawToolbar(WindowState& state) {
    const model::Analysis& a = *state.analysis;
    const int L = a.n_layer, H = a.n_head;
    const float font = ImGui::GetFontSize();
    ViewSettings& s = state.settings;
    const bool has_compare = HasCompare(a);

    int layer = state.selected.layer;
    ImGui::SetNextItemWidth(font * 6.5f);
    if (ImGui::SliderInt("##layer", &layer, 0, L - 1, "layer %d", ImGuiSliderFlags_AlwaysClamp))
        state.selected.layer = std::clamp(layer, 0, L - 1);
    viz::ItemTooltip("Layer of the shown head (0-based).\nUp / Down arrows: previous / next layer. Ctrl+click to type a number.");
    ImGui::SameLine();
    int head = state.selected.head;
    ImGui::SetNextItemWidth(font * 6.0f);
    if (ImGui::SliderInt("##head", &head, 0, H - 1, "head %d", ImGuiSliderFlags_AlwaysClamp))
        state.selected.head = std::clamp(head, 0, H - 1);
    viz::ItemTooltip("Head within the layer (0-based).\nLeft / Right arrows: previous / next head. Ctrl+click to type a number.");

    const std::string compare_label = CompareName(a);
    const char* compare_name = compare_label.c_str();

    // The comparison chooser: the tau = 1 counterfactual or a twin (one beside the model offered).
    const std::string beside = state.model && !state.twin ? state.twin_beside : "";
    // What lies beside a fine-tune is its base: the three-way item below offers it, not as a twin.
    const bool beside_is_base = !beside.empty() && beside == state.base_beside;
    const bool star = !beside.empty() && !(beside_is_base && state.compare_base);  // a better comparison not yet chosen
    const std::string current = "vs " + ComparedWith(a) + (star ? " *" : "");
    // Wide enough for its label ("vs tau = 1 + base *"), within reason: a twin's long name is cut.
    const float compare_w = std::clamp(ImGui::CalcTextSize(current.c_str()).x + ImGui::GetStyle().FramePadding.x * 2 + ImGui::GetFrameHeight(),
                                       font * 7.5f, font * 12.0f);
    SameLineIfFits(compare_w);
    ImGui::SetNextItemWidth(compare_w);
    if (ImGui::BeginCombo("##compare", current.c_str())) {
        const bool local = a.comparison == model::Comparison::LayerLocal, unedited = a.comparison == model::Comparison::Unedited;
        if (ImGui::Selectable("tau = 1 (counterfactual)", !state.twin && !local && !unedited && !a.HasBase())) state.RequestGlobalPass(true);
        viz::ItemTooltip("The same weights with tau_q = tau_v = 1 everywhere. A whole second forward pass: from layer 1 on, "
                         "its heads read a different residual stream, so a later layer's difference is not its temperatures alone.");
        if (ImGui::Selectable("tau = 1 local (layer by layer)", !state.twin && local)) state.RequestGlobalPass(false);
        viz::ItemTooltip("At each layer, the SSA model's own q and k with tau = 1: what that layer's temperatures do, with "
                         "nothing below it changed (`ssaviz export --compare local`).");
        // Without what-ifs the unedited model is the SSA model itself: nothing to compare.
        const bool has_what_ifs = !a.interventions.empty();
        ImGui::BeginDisabled(!has_what_ifs && !unedited);
        if (ImGui::Selectable("the unedited model (what-ifs off)", !state.twin && unedited)) state.unedited_request = true;
        ImGui::EndDisabled();
        viz::ItemTooltip(has_what_ifs || unedited
                             ? "The SSA model as trained, without the what-ifs of the What-ifs tab: the difference map shows their "
                               "effect alone (`ssaviz export --ablate SPEC --compare unedited`)."
                             : "Needs what-ifs: with none (What-ifs tab), the unedited model is the SSA model itself, so there is "
                               "nothing to compare.");
        if (!state.BaseShown().empty()) {
            if (ImGui::Selectable("its base model (three-way)", !state.twin && state.compare_base)) state.base_request = true;
            viz::ItemTooltip("A fine-tune against the model it started from: three sides, SSA, its own weights at tau = 1 and the "
                             "base. The map compares SSA with tau = 1 (what the temperatures did); the Matrix and Table tabs' "
                             "'JS to base' and 'JS drift' give each head's whole change and the other weights' drift "
                             "(`ssaviz export --compare base`).");
        }
        if (state.twin) {
            ImGui::Selectable(("twin: " + state.twin->dir).c_str(), true);
        } else if (!beside.empty() && !beside_is_base) {
            if (ImGui::Selectable(("vs " + TwinBesideLabel(beside)).c_str())) state.open_twin_request = beside;
            viz::ItemTooltip("This model ships with a separately trained vanilla twin: compare against it.");
        }
        if (ImGui::Selectable("Open a twin model...")) state.ShowOpenDialog(OpenPurpose::Twin);
        if (ImGui::Selectable("Open a base model...")) state.ShowOpenDialog(OpenPurpose::Base);
        viz::ItemTooltip("The model this fine-tune started from, wherever it lies: the three-way comparison.");
        ImGui::EndCombo();
    }
    viz::ItemTooltip((CompareExplanation(a) + (!star              ? ""
                                               : beside_is_base ? "\n* The base this fine-tune started from is beside it: choose 'its base model "
                                                                  "(three-way)' here."
                                                                : "\n* A trained twin ships beside this model: choose it here."))
                         .c_str());

    SameLineIfFits(RadioWidth("SSA"));
    const bool three_way = a.HasBase() && s.three_way;
    if (ImGui::RadioButton("SSA", s.map_mode == MapMode::Ssa && !s.split && !three_way)) s.map_mode = MapMode::Ssa, s.split = s.three_way = false;
    viz::ItemTooltip("The SSA model's attention weights for this head: row = query token, column = key token. Shortcut: 1");
    ImGui::BeginDisabled(!has_compare);
    SameLineIfFits(RadioWidth(compare_name));
    if (ImGui::RadioButton(compare_name, s.map_mode == MapMode::Compare && !s.split && !three_way))
        s.map_mode = MapMode::Compare, s.split = s.three_way = false;
    viz::ItemTooltip((CompareExplanation(a) + "\nSame colour scale as SSA. Shortcut: 2").c_str());
    SameLineIfFits(RadioWidth("difference"));
    if (ImGui::RadioButton("difference", s.map_mode == MapMode::Difference && !s.split && !three_way))
        s.map_mode = MapMode::Difference, s.split = s.three_way = false;
    viz::ItemTooltip((std::string("SSA minus ") + compare_name +
                      ", blue-white-red around 0: red where SSA attends more, blue where it attends less. Shortcut: 3")
                         .c_str());
    SameLineIfFits(RadioWidth("all three"));
    if (ImGui::RadioButton("all three", s.split && !three_way)) s.split = true, s.three_way = false;
    viz::ItemTooltip((std::string("SSA | ") + compare_name + " | difference side by side for this head, zoomed and panned together. Shortcut: 4")
                         .c_str());
    ImGui::EndDisabled();
    if (a.HasBase()) {
        SameLineIfFits(RadioWidth("three-way"));
        if (ImGui::RadioButton("three-way", three_way)) s.three_way = true;
        viz::ItemTooltip("SSA | its own weights at tau = 1 | the base model, side by side on one colour scale: SSA against tau = 1 "
                         "is what the temperatures did, tau = 1 against the base what fine-tuning did to the other weights. "
                         "The Fine-tune tab ranks the heads by each part. Shortcut: 5");
        SameLineIfFits(RadioWidth("base"));
        if (ImGui::RadioButton("base", s.map_mode == MapMode::Base && !s.split && !three_way))
            s.map_mode = MapMode::Base, s.split = s.three_way = false;
        viz::ItemTooltip("The base model's attention weights for this head (the model the fine-tune started from), on SSA's "
                         "colour scale. Shortcut: 6");
        SameLineIfFits(RadioWidth("SSA - base"));
        if (ImGui::RadioButton("SSA - base", s.map_mode == MapMode::BaseDifference && !s.split && !three_way))
            s.map_mode = MapMode::BaseDifference, s.split = s.three_way = false;
        viz::ItemTooltip("SSA minus the base, blue-white-red around 0: all that fine-tuning changed in this head's attention, "
                         "red where the fine-tune attends more. Hover a cell for its two parts (temperatures, drift). Shortcut: 7");
    }

    const bool difference = IsDifference(m_mode) && !m_split;
    const float combo_w = font * 6.0f;
    SameLineIfFits(combo_w);
    ImGui::BeginDisabled(difference);
    ImGui::SetNextItemWidth(combo_w);
    if (ImGui::BeginCombo("##colormap", difference ? "diverging" : viz::ColormapName(s.colormap))) {
        for (viz::Colormap map : {viz::Colormap::Viridis, viz::Colormap::Magma})
            if (ImGui::Selectable(viz::ColormapName(map), s.colormap == map)) s.colormap = map;
        ImGui::EndCombo();
    }
    viz::ItemTooltip(difference ? "The difference map always uses the blue-white-red diverging colour map, symmetric around 0."
                                : "Colour map of the SSA and comparison maps (perceptually uniform; magma shows the "
                                  "smallest weights darker).");
    SameLineIfFits(RadioWidth("log scale"));
    bool log_scale = s.log_scale && !difference;  // a difference is drawn linear: the box says so (the setting is kept)
    if (ImGui::Checkbox("log scale", &log_scale)) s.log_scale = log_scale;
    viz::ItemTooltip(difference ? "Not available for the difference map (its values are signed). Shortcut: L"
                                : "Colour by log10 of the weight (the default: most weights are small, and a linear scale "
                                  "shows them all as dark). Shortcut: L");
    ImGui::EndDisabled();

    SameLineIfFits(ImGui::CalcTextSize("Reset view").x + ImGui::GetStyle().FramePadding.x * 2);
    if (ImGui::Button("Reset view")) ResetView();
    viz::ItemTooltip("Zoom out to the whole map. Also: double-click the map.");
    SameLineIfFits(ImGui::CalcTextSize("zoom 99.9x (?)").x);
    if (m_view->zoom > 1.001f) ImGui::TextDisabled("zoom %.1fx", m_view->zoom);
    else ImGui::TextDisabled("zoom 1x");
    ImGui::SameLine();
    viz::HelpMarker(
        "Mouse wheel: zoom around the cursor. Drag: pan. Double-click: reset the view.\n"
        "Click a cell: select its row as the query (its weights are shown as bars below). Esc: clear the query.\n"
        "Arrows: previous / next head (left, right) and layer (up, down). 1 / 2 / 3: SSA / comparison / difference, "
        "4: all three side by side; with a base 5: SSA | tau = 1 | base, 6: the base, 7: SSA - base. L: log scale. "
        "Ctrl+F: go to a position or find a token.\n"
        "The strip left of the rows is each query's tau_q, the strip above the columns each key's tau_v, on the "
        "temperature scale (blue below 1, white at 1 = vanilla, red above 1 = sharper).\n"
        "When the map has more cells than pixels, each pixel shows the largest value of the cells it "
        "covers (for the difference, the largest magnitude), so no sharp weight disappears.");
    DrawGoTo(state);
}

// A position ("120") or text to find (" cat"): selects the token as the query and pans the map
// (and the row chart, the token strip) to it; Enter again finds the next match.
void HeatmapView::DrawGoTo(WindowState& state) {
    const float font = ImGui::GetFontSize();
    SameLineIfFits(font * 9.0f);
    ImGui::SetNextItemWidth(font * 9.0f);
    if (state.focus_goto) {
        ImGui::SetKeyboardFocusHere();
        state.focus_goto = false;
    }
    char buf[128];
    std::snprintf(buf, sizeof buf, "%s", m_goto.c_str());
    const bool enter = ImGui::InputTextWithHint("##goto", "go to # / find", buf, sizeof buf, ImGuiInputTextFlags_EnterReturnsTrue);
    if (m_goto != buf) m_find_from = -1;
    m_goto = buf;
    viz::ItemTooltip("Ctrl+F. A number goes to that position; text finds the next token containing it, or the "
                     "token where it starts across tokens (case-sensitive; Enter again for the next match). The token becomes the query, and the zoomed map pans to it.");
    if (enter && !m_goto.empty()) {
        const int T = m_tokens;
        char* end = nullptr;
        const long n = std::strtol(m_goto.c_str(), &end, 10);
        // A position is digits alone (" 12" is a piece to find, as " cat" is; strtol skipped its space).
        if (std::isdigit(static_cast<unsigned char>(m_goto[0])) && end && *end == '\0') {
            if (n >= 0 && n < T) {
                ShowToken(state, static_cast<int>(n));
                m_goto_message.clear();
            } else {
                m_goto_message = "positions are 0.." + std::to_string(T - 1);
            }
        } else {
            const std::vector<std::string>& pieces = m_analysis->tokens.pieces;
            const int found = FindToken(pieces, m_labels, T, m_goto, m_find_from);
            if (found >= 0) {
                m_find_from = found;
                ShowToken(state, found);
                m_goto_message.clear();
            } else {
                m_goto_message = "no token or text contains '" + TokenLabel(m_goto) + "'";
            }
        }
        state.focus_goto = true;  // keep typing / pressing Enter
    }
    if (!m_goto_message.empty()) {  // on the next line where the pane has no room (it ran off the pane's edge, unseen)
        SameLineIfFits(ImGui::CalcTextSize(m_goto_message.c_str()).x);
        ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.0f, 0.75f, 0.3f, 1.0f));
        ImGui::TextWrapped("%s", m_goto_message.c_str());
        ImGui::PopStyleColor();
    }
}

//-------------------------------------------------------------------------------------------------
// [SECTION] The map: cells, token labels, selection, hover read-out
//-------------------------------------------------------------------------------------------------

void HeatmapView::DrawMap(WindowState& state, Layer& layer, ImVec2 map_pos, float side, float label_size, bool row_labels) {
    const int T = m_tokens;
    ImGuiIO& io = ImGui::GetIO();
    ImDrawList* draw = ImGui::GetWindowDrawList();
    const float line_h = ImGui::GetTextLineHeight();
    const float max_zoom = std::max(1.0f, kMaxCellPixels * T / side);
    ClampView(max_zoom);

    ImGui::SetCursorScreenPos(map_pos);
    ImGui::PushID(static_cast<int>(layer.mode));
    ImGui::InvisibleButton("##map", ImVec2(side, side));
    ImGui::PopID();
    ImGui::SetItemUsingMouseWheel();
    const bool hovered = ImGui::IsItemHovered(), active = ImGui::IsItemActive();
    float cell = side * m_view->zoom / T;

    if (hovered && io.MouseWheel != 0.0f) {
        const float cx = (io.MousePos.x - map_pos.x) / cell + m_view->pan_x, cy = (io.MousePos.y - map_pos.y) / cell + m_view->pan_y;
        m_view->zoom *= std::pow(1.25f, io.MouseWheel);
        ClampView(max_zoom);
        cell = side * m_view->zoom / T;
        m_view->pan_x = cx - (io.MousePos.x - map_pos.x) / cell;
        m_view->pan_y = cy - (io.MousePos.y - map_pos.y) / cell;
        ClampView(max_zoom);
    }
    if (ImGui::IsItemActivated()) m_dragged = m_double_clicked = false;
    if (active && ImGui::IsMouseDragging(ImGuiMouseButton_Left)) {
        const ImVec2 delta = ImGui::GetMouseDragDelta(ImGuiMouseButton_Left);
        ImGui::ResetMouseDragDelta(ImGuiMouseButton_Left);
        m_view->pan_x -= delta.x / cell;
        m_view->pan_y -= delta.y / cell;
        ClampView(max_zoom);
        m_dragged = true;
    }
    if (hovered && ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left)) {
        ResetView();
        state.query = m_query_before_click;  // the double-click's first click selected a row: undo that
        m_double_clicked = true;
    }
    if (hovered) {
        const int j = static_cast<int>(std::floor((io.MousePos.x - map_pos.x) / cell + m_view->pan_x));
        const int i = static_cast<int>(std::floor((io.MousePos.y - map_pos.y) / cell + m_view->pan_y));
        if (i >= 0 && i < T && j >= 0 && j < T) {
            m_hover_row = i;
            m_hover_col = j;
            m_hover_mode = layer.mode;
        }
    }
    if (ImGui::IsItemDeactivated() && !m_dragged && !m_double_clicked && m_hover_row >= 0 && hovered) {
        m_query_before_click = state.query;
        state.query = m_hover_row;
    }

    EnsureTexture(layer, side);
    const ImVec2 map_max(map_pos.x + side, map_pos.y + side);
    auto cell_x = [&](float j) { return map_pos.x + (j - m_view->pan_x) * cell; };
    auto cell_y = [&](float i) { return map_pos.y + (i - m_view->pan_y) * cell; };

    draw->PushClipRect(map_pos, map_max, true);
    if (layer.drawn && layer.drawn->Valid()) {
        const BakedRegion& r = layer.drawn_region;
        const ImVec2 p0(cell_x(static_cast<float>(r.col0)), cell_y(static_cast<float>(r.row0)));
        const ImVec2 p1(cell_x(static_cast<float>(r.col0 + r.cols)), cell_y(static_cast<float>(r.row0 + r.rows)));
        draw->AddImage(layer.drawn->Id(), p0, p1);
    }
    // Overlays: the selected query row, the key hovered in the row chart, the hovered cell.
    const int query = state.query;
    if (query >= 0 && query < T) {  // dark under light, visible on every colour of every map
        const ImVec2 p0(cell_x(0) - 1, cell_y(static_cast<float>(query)) - 1);
        const ImVec2 p1(cell_x(static_cast<float>(query + 1)) + 1, cell_y(static_cast<float>(query + 1)) + 1);
        draw->AddRect(p0, p1, IM_COL32(0, 0, 0, 220), 0.0f, 0, 3.5f);
        draw->AddRect(p0, p1, kQueryColor, 0.0f, 0, 1.5f);
    }
    const int chart_query = query >= 0 && query < T ? query : T - 1;
    if (m_hover_key >= 0 && m_hover_key < T) {
        const float pad = cell < 6.0f ? 2.0f : 0.0f;
        const ImVec2 p0(cell_x(static_cast<float>(m_hover_key)) - pad, cell_y(static_cast<float>(chart_query)) - pad);
        const ImVec2 p1(cell_x(static_cast<float>(m_hover_key + 1)) + pad, cell_y(static_cast<float>(chart_query + 1)) + pad);
        draw->AddRect(p0, p1, IM_COL32(0, 0, 0, 220), 0.0f, 0, 4.0f);
        draw->AddRect(p0, p1, IM_COL32(255, 255, 255, 255), 0.0f, 0, 2.0f);
    }
    if (m_hover_row >= 0 && cell >= 6.0f && (hovered || m_split)) {
        draw->AddRect(ImVec2(cell_x(static_cast<float>(m_hover_col)), cell_y(static_cast<float>(m_hover_row))),
                      ImVec2(cell_x(static_cast<float>(m_hover_col + 1)), cell_y(static_cast<float>(m_hover_row + 1))),
                      IM_COL32(255, 255, 255, 200));
    }
    draw->PopClipRect();
    draw->AddRect(ImVec2(map_pos.x - 1, map_pos.y - 1), ImVec2(map_max.x + 1, map_max.y + 1), ImGui::GetColorU32(ImGuiCol_Border));

    // Token labels, thinned to every k-th token (k = 1, 2, 3, 4, 5, 10, 20, 50, ...) when cells
    // are smaller than a line; the index is shown then, so that the thinned labels can be placed.
    const float raw_stride = line_h * 1.05f / cell;
    const int stride = raw_stride <= 5.0f ? static_cast<int>(std::ceil(raw_stride - 1e-3f)) : NiceStride(raw_stride);
    const float strip = label_size - 10.0f;  // text width: the strip less the gap and tick at the map edge
    if (m_short_width != strip) {
        m_short_labels.clear();
        for (const std::string& l : m_labels) m_short_labels.push_back(viz::EllipsizeText(l, strip));
        m_short_width = strip;
    }
    auto first_visible = [&](float pan) { return std::max(0, static_cast<int>(std::floor(pan))); };
    auto last_visible = [&](float pan) { return std::min(T - 1, static_cast<int>(std::ceil(pan + T / m_view->zoom))); };
    const ImU32 text_col = ImGui::GetColorU32(ImGuiCol_Text), dim_col = ImGui::GetColorU32(ImGuiCol_TextDisabled);
    auto label_text = [&](int i, float width) {
        if (stride == 1) return m_short_labels[i];
        char index[16];
        std::snprintf(index, sizeof index, "%d ", i);
        return std::string(index) + viz::EllipsizeText(m_labels[i], width - ImGui::CalcTextSize(index).x);
    };
    struct Emphasis {
        int index;
        ImU32 color;
    };
    std::vector<Emphasis> rows_emph, cols_emph;
    if (query >= 0 && query < T) rows_emph.push_back({query, kQueryColor});
    if (m_hover_row >= 0 && m_hover_row != query) rows_emph.push_back({m_hover_row, IM_COL32(255, 255, 255, 255)});
    if (m_hover_col >= 0) cols_emph.push_back({m_hover_col, IM_COL32(255, 255, 255, 255)});
    if (m_hover_key >= 0 && m_hover_key < T) cols_emph.push_back({m_hover_key, IM_COL32(255, 255, 255, 255)});
    // One axis's labels: every stride-th in view that does not collide with an emphasised one,
    // then the emphasised ones on plates.
    auto draw_labels = [&](float pan, const std::vector<Emphasis>& emphasised, auto&& draw_label) {
        const int first = first_visible(pan);
        for (int i = first - first % stride; i <= last_visible(pan); i += stride) {
            bool collides = false;
            for (const Emphasis& e : emphasised) collides |= std::abs(e.index - i) * cell < line_h;
            if (!collides) draw_label(i, stride == 1 ? text_col : dim_col, false);
        }
        for (const Emphasis& e : emphasised) draw_label(e.index, e.color, true);
    };

    // Rows: query tokens, right-aligned against the map.
    if (row_labels) {
        // Half a line of slack above, so that the first row's label is not cut in half.
        const ImVec2 clip_min(map_pos.x - m_edge - label_size - 2, map_pos.y - line_h * 0.5f), clip_max(map_pos.x - m_edge - 2, map_max.y + 2);
        draw->PushClipRect(clip_min, clip_max, true);
        const float right = map_pos.x - m_edge - 4.0f;
        auto draw_row = [&](int i, ImU32 color, bool plate) {
            const float y = cell_y(i + 0.5f);
            const std::string text = plate ? viz::EllipsizeText(m_labels[i], strip) : label_text(i, strip);
            const ImVec2 size = ImGui::CalcTextSize(text.c_str());
            const ImVec2 pos(std::round(right - size.x - 2), std::round(y - line_h * 0.5f));
            if (plate) AddLabel(draw, pos, color, text.c_str());
            else draw->AddText(pos, stride == 1 ? text_col : dim_col, text.c_str());
            if (stride > 1 || plate) draw->AddLine(ImVec2(right - 1, y), ImVec2(right + 3, y), color);
        };
        draw_labels(m_view->pan_y, rows_emph, draw_row);
        draw->PopClipRect();
    }
    // Columns: key tokens, reading upwards from the map's top edge.
    {
        const ImVec2 clip_min(map_pos.x - line_h * 0.5f, map_pos.y - m_edge - label_size - 2),
            clip_max(map_max.x + line_h * 0.5f, map_pos.y - m_edge - 2);
        draw->PushClipRect(clip_min, clip_max, true);
        const float bottom = map_pos.y - m_edge - 4.0f;
        auto draw_col = [&](int j, ImU32 color, bool plate) {
            const float x = cell_x(j + 0.5f);
            const std::string text = plate ? viz::EllipsizeText(m_labels[j], strip) : label_text(j, strip);
            const float width = ImGui::CalcTextSize(text.c_str()).x;
            const ImVec2 pos(std::round(x - line_h * 0.5f), bottom - 2);
            if (plate)
                draw->AddRectFilled(ImVec2(pos.x, pos.y - width - 2), ImVec2(pos.x + line_h, pos.y + 2), kLabelPlate, 2.0f);
            viz::AddTextVertical(draw, pos, plate ? color : (stride == 1 ? text_col : dim_col), text.c_str());
            if (stride > 1 || plate) draw->AddLine(ImVec2(x, bottom - 1), ImVec2(x, bottom + 3), color);
        };
        draw_labels(m_view->pan_x, cols_emph, draw_col);
        draw->PopClipRect();
    }
    if (m_hover_row >= 0 && hovered) {
        ImGui::BeginTooltip();
        ImGui::TextUnformatted(CellText(m_hover_row, m_hover_col, true).c_str());
        ImGui::EndTooltip();
    }
    if (!state.regions.count("heatmap")) state.regions["heatmap"] = {map_pos.x, map_pos.y, side, side};
    state.regions[std::string("heatmap_") + ToString(layer.mode)] = {map_pos.x, map_pos.y, side, side};
}

std::string HeatmapView::CellText(int i, int j, bool multiline) const {
    const model::Analysis& a = *m_analysis;
    const int T = m_tokens;
    std::string text = "query '" + m_labels[i] + "' (" + std::to_string(i) + ") -> key '" + m_labels[j] + "' (" + std::to_string(j) + ")";
    const char* sep = multiline ? "\n" : ": ";
    if (j > i) return text + sep + "the key is in the future (masked)";
    const float ssa = m_ssa->At(i, j);
    std::string values;
    if ((m_hover_mode == MapMode::Ssa && !m_split) || !m_compare) {
        values = "p = " + FormatWeight(ssa);
    } else if (m_base) {  // the base's maps: each side, the change and its two parts
        const float tau1 = m_compare->At(i, j), base = m_base->At(i, j);
        values = multiline ? "SSA p = " + FormatWeight(ssa) + "\ntau = 1 p = " + FormatWeight(tau1) + "\nbase p = " + FormatWeight(base) +
                                 "\nSSA - base = " + FormatWeight(ssa - base, true) + ": temperatures " + FormatWeight(ssa - tau1, true) +
                                 ", drift " + FormatWeight(tau1 - base, true)
                           : "SSA p = " + FormatWeight(ssa) + ", tau = 1 " + FormatWeight(tau1) + ", base " + FormatWeight(base) + ", SSA - base " +
                                 FormatWeight(ssa - base, true);
    } else {
        const float cmp = m_compare->At(i, j);
        const std::string name = CompareName(a);
        values = multiline ? "SSA p = " + FormatWeight(ssa) + "\n" + name + " p = " + FormatWeight(cmp) + "\nSSA - " + name + " = " +
                                 FormatWeight(ssa - cmp, true)
                           : "SSA p = " + FormatWeight(ssa) + ", " + name + " " + FormatWeight(cmp) + ", diff " + FormatWeight(ssa - cmp, true);
    }
    const size_t row = a.RowIndex(m_baked_head.layer, m_baked_head.head);
    std::string temps;
    if (a.tau_q.size() >= row + T && a.tau_v.size() >= row + T) {
        char buf[96];
        std::snprintf(buf, sizeof buf, "tau_q(query) %.3f, tau_v(key) %.3f", a.tau_q[row + i], a.tau_v[row + j]);
        temps = buf;
    }
    if (multiline) return text + "\n" + values + (temps.empty() ? "" : "\n" + temps);
    return text + sep + values + (temps.empty() ? "" : "; " + temps);
}

//-------------------------------------------------------------------------------------------------
// [SECTION] Temperature strips beside the map
//-------------------------------------------------------------------------------------------------

// The query temperatures as a column left of the rows, the key temperatures as a row above the
// columns, on the diverging scale around 1 that the token chips use. Where a pixel covers several
// tokens it shows the one furthest from 1.
void HeatmapView::DrawTemperatureStrips(AppState& state, ImVec2 map_pos, float side, float strip, bool rows, bool cols) {
    const model::Analysis& a = *m_analysis;
    const int T = m_tokens;
    const int64_t row = static_cast<int64_t>(m_baked_head.layer) * a.n_head + m_baked_head.head;
    if (a.tau_q.tokens() != T || a.tau_v.tokens() != T || row >= a.tau_q.rows() || row >= a.tau_v.rows()) return;
    ImDrawList* draw = ImGui::GetWindowDrawList();
    const float cell = side * m_view->zoom / T;
    const float gap = 2.0f;
    auto color_of = [](float v, viz::Range range) {
        return viz::ToImU32(viz::SampleColormap(viz::Colormap::Diverging, viz::Normalize(v, range, false)));
    };
    const int first = std::max(0, static_cast<int>(std::floor(m_view->pan_x))), first_row = std::max(0, static_cast<int>(std::floor(m_view->pan_y)));
    const int per = std::max(1, static_cast<int>(std::ceil(1.0f / std::max(cell, 1e-6f))));  // tokens per drawn block
    auto draw_strip = [&](const float* tau, viz::Range range, int begin, float pan, bool vertical, ImVec2 p0, const char* id,
                          const char* what) {
        const ImVec2 size = vertical ? ImVec2(strip, side) : ImVec2(side, strip);
        draw->PushClipRect(p0, ImVec2(p0.x + size.x, p0.y + size.y), true);
        for (int i = begin - begin % per; i < T; i += per) {
            const float pos = (i - pan) * cell;
            if (pos > side) break;
            float v = tau[i];
            for (int k = i + 1; k < std::min(T, i + per); ++k)
                if (std::abs(tau[k] - 1.0f) > std::abs(v - 1.0f)) v = tau[k];
            const float len = std::max(1.0f, per * cell);
            const ImVec2 q0 = vertical ? ImVec2(p0.x, p0.y + pos) : ImVec2(p0.x + pos, p0.y);
            const ImVec2 q1 = vertical ? ImVec2(p0.x + strip, q0.y + len) : ImVec2(q0.x + len, p0.y + strip);
            draw->AddRectFilled(q0, q1, color_of(v, range));
        }
        draw->PopClipRect();
        ImGui::SetCursorScreenPos(p0);
        ImGui::InvisibleButton(id, size);
        if (ImGui::IsItemHovered()) {
            const ImVec2 m = ImGui::GetIO().MousePos;
            const int i = static_cast<int>(std::floor(((vertical ? m.y - p0.y : m.x - p0.x)) / cell + pan));
            if (i >= 0 && i < T)
                viz::Tooltip("%s of '%s' (%d): %.3f\n%s", what, m_labels[i].c_str(), i, tau[i],
                                  "Temperature scale: blue below 1 (flatter than vanilla), white at 1, red above 1 (sharper).");
        }
        if (ImGui::IsItemClicked(ImGuiMouseButton_Left)) {
            const ImVec2 m = ImGui::GetIO().MousePos;
            const int i = static_cast<int>(std::floor(((vertical ? m.y - p0.y : m.x - p0.x)) / cell + pan));
            if (i >= 0 && i < T) state.query = i;
        }
    };
    if (rows) draw_strip(a.tau_q.Row(row).data(), m_tau_q_range, first_row, m_view->pan_y, true, ImVec2(map_pos.x - strip - gap, map_pos.y),
                         "##tau_q_strip", "tau_q (query)");
    if (cols) draw_strip(a.tau_v.Row(row).data(), m_tau_v_range, first, m_view->pan_x, false, ImVec2(map_pos.x, map_pos.y - strip - gap),
                         "##tau_v_strip", "tau_v (key)");
}

//-------------------------------------------------------------------------------------------------
// [SECTION] Row chart: the query's row, SSA against the comparison
//-------------------------------------------------------------------------------------------------

void HeatmapView::DrawRowChart(WindowState& state, ImVec2 pos, ImVec2 size) {
    const model::Analysis& a = *m_analysis;
    const int T = m_tokens;
    const int query = state.query >= 0 && state.query < T ? state.query : T - 1;
    // Zoomed in, the chart follows the map: only the keys of the visible columns (up to the query).
    const bool zoomed = m_view->zoom > 1.001f;
    const int key_first = zoomed ? std::clamp(static_cast<int>(std::floor(m_view->pan_x)), 0, query) : 0;
    const int key_end = zoomed ? std::clamp(static_cast<int>(std::ceil(m_view->pan_x + T / m_view->zoom)), key_first + 1, query + 1) : query + 1;
    const int n = key_end - key_first;
    const model::MapCells* maps[3] = {m_ssa.get(), m_compare.get(), m_base.get()};
    if (m_row_query != query) {  // the query's rows, copied once from where the maps are
        for (int k = 0; k < 3; ++k) m_rows[k] = maps[k] ? maps[k]->Row(query) : std::vector<float>();
        m_row_query = query;
    }
    // The series: SSA, then the comparison and, with a base, the base. Each names its
    // tallest bars (SSA five, the others three).
    struct Series {
        const float* values;
        ImU32 colour;
        std::string name;
        int peaks;
    };
    std::vector<Series> series;
    const std::string compare_name = CompareName(a);
    const std::string names[3] = {"SSA", compare_name, "base"};
    const ImU32 colours[3] = {kSsaColor, kCompareColor, kBaseColor};
    if (static_cast<int>(m_rows[0].size()) < key_end) return;  // no SSA row: nothing to chart
    for (int k = 0; k < 3; ++k)
        if (static_cast<int>(m_rows[k].size()) >= key_end) series.push_back({m_rows[k].data() + key_first, colours[k], names[k], k == 0 ? 5 : 3});
    const int count = static_cast<int>(series.size());
    const float* ssa = series[0].values;
    const bool with_base = count == 3;

    ImDrawList* draw = ImGui::GetWindowDrawList();
    const ImGuiStyle& style = ImGui::GetStyle();
    const float line_h = ImGui::GetTextLineHeight();
    const ImU32 text_col = ImGui::GetColorU32(ImGuiCol_Text), dim_col = ImGui::GetColorU32(ImGuiCol_TextDisabled);
    m_hover_key = -1;
    state.regions["row_chart"] = {pos.x, pos.y, size.x, size.y};

    // Title and legend.
    ImGui::SetCursorScreenPos(pos);
    std::string tau;
    const size_t row = a.RowIndex(m_baked_head.layer, m_baked_head.head);
    if (a.tau_q.size() >= row + T) {
        char buf[48];
        std::snprintf(buf, sizeof buf, ", tau_q %.2f", a.tau_q[row + query]);
        tau = buf;
    }
    float legend_w = 0.0f;
    for (const Series& s : series) legend_w += line_h * 0.6f + style.ItemInnerSpacing.x + ImGui::CalcTextSize(s.name.c_str()).x + style.ItemSpacing.x;
    // The title's tail goes first when the line is short ("the last token" is on its hover).
    const std::string head = "query '" + viz::EllipsizeText(m_labels[query], ImGui::GetFontSize() * 10) + "' (" + std::to_string(query) + ")" + tau;
    const std::string last = state.query == query ? "" : ", the last token";
    const std::string keys = ": weights over keys " + std::to_string(key_first) + ".." + std::to_string(key_first + n - 1);
    const float title_w = size.x - legend_w - style.ItemSpacing.x;
    const std::string full = head + last + keys;
    std::string title = full;
    if (ImGui::CalcTextSize(title.c_str()).x > title_w) title = head + last;
    if (ImGui::CalcTextSize(title.c_str()).x > title_w) title = head;
    ImGui::PushClipRect(pos, ImVec2(pos.x + size.x - legend_w - style.ItemSpacing.x, pos.y + line_h), true);
    ImGui::TextUnformatted(title.c_str());
    ImGui::PopClipRect();
    if ((state.query != query || title != full) && ImGui::IsItemHovered())
        viz::Tooltip("%s%s", full.c_str(), state.query != query ? "\nClick a row of the map to choose the query; Esc clears it." : "");
    {
        float x = pos.x + size.x - legend_w;
        for (const Series& s : series) {
            draw->AddRectFilled(ImVec2(x, pos.y + line_h * 0.2f), ImVec2(x + line_h * 0.6f, pos.y + line_h * 0.8f), s.colour);
            x += line_h * 0.6f + style.ItemInnerSpacing.x;
            draw->AddText(ImVec2(x, pos.y), text_col, s.name.c_str());
            x += ImGui::CalcTextSize(s.name.c_str()).x + style.ItemSpacing.x;
        }
    }

    // Plot area.
    float vmax = 0.0f;
    for (const Series& s : series)
        for (int j = 0; j < n; ++j)
            if (std::isfinite(s.values[j])) vmax = std::max(vmax, s.values[j]);
    if (!(vmax > 0.0f)) vmax = 1.0f;
    const std::vector<float> y_ticks = viz::NiceTicks({0.0f, vmax}, false, 4);
    float axis_w = 0.0f;
    for (float v : y_ticks) axis_w = std::max(axis_w, ImGui::CalcTextSize(viz::FormatTick(v).c_str()).x);
    axis_w += 10.0f;
    const ImVec2 plot_min(std::round(pos.x + axis_w), std::round(pos.y + line_h + style.ItemSpacing.y));
    const ImVec2 plot_max(std::round(pos.x + size.x - 4.0f), std::round(pos.y + size.y - line_h - 4.0f));
    const float plot_w = plot_max.x - plot_min.x, plot_h = plot_max.y - plot_min.y;
    if (plot_w < 16 || plot_h < line_h * 3) return;
    ImGui::SetCursorScreenPos(plot_min);
    ImGui::InvisibleButton("##row_chart", ImVec2(plot_w, plot_h));
    const bool hovered = ImGui::IsItemHovered();

    const float bars_top = plot_min.y + line_h + 4.0f;  // headroom for the labels of the tallest bars
    auto y_of = [&](float v) { return plot_max.y - std::clamp(v / vmax, 0.0f, 1.0f) * (plot_max.y - bars_top); };

    // Grid and y axis.
    draw->AddRectFilled(plot_min, plot_max, IM_COL32(255, 255, 255, 8));
    for (float v : y_ticks) {
        const float y = std::round(y_of(v));
        draw->AddLine(ImVec2(plot_min.x, y), ImVec2(plot_max.x, y), IM_COL32(255, 255, 255, 28));
        const std::string label = viz::FormatTick(v);
        draw->AddText(ImVec2(plot_min.x - 6 - ImGui::CalcTextSize(label.c_str()).x, y - line_h * 0.5f), dim_col, label.c_str());
    }

    // Keys into bins at least 3 px wide; a bin shows each series' largest weight (max-pooled), the
    // series' bars side by side.
    const int bins = std::max(1, std::min(n, static_cast<int>(plot_w / 3.0f)));
    const float slot = plot_w / bins;
    auto bin_begin = [&](int b) { return static_cast<int>(static_cast<int64_t>(b) * n / bins); };
    auto bin_of = [&](int j) {
        int b = std::min(bins - 1, static_cast<int>(static_cast<int64_t>(j) * bins / n));
        while (b + 1 < bins && bin_begin(b + 1) <= j) ++b;
        while (b > 0 && bin_begin(b) > j) --b;
        return b;
    };
    const float gap = slot >= 8.0f ? std::max(1.0f, std::floor(slot * 0.2f)) : (slot >= 4.0f ? 1.0f : 0.0f);
    const float bar_w = std::min(std::max(1.0f, std::floor((slot - gap) / count)), line_h * 2.0f);
    const float group_w = bar_w * count;
    // A series' bar centre relative to its bin's: the group of bars is centred in the slot.
    auto bar_offset = [&](int k) { return (k - (count - 1) * 0.5f) * bar_w; };
    int hovered_bin = -1;
    if (hovered) hovered_bin = std::clamp(static_cast<int>((ImGui::GetIO().MousePos.x - plot_min.x) / slot), 0, bins - 1);
    const bool dense = count > 1 && (slot - gap) / count < 2.0f;  // a pixel or less a bar
    std::vector<std::vector<ImVec2>> lines(count);
    for (int b = 0; b < bins; ++b) {
        const int j0 = bin_begin(b), j1 = bin_begin(b + 1);
        if (b == hovered_bin)
            draw->AddRectFilled(ImVec2(plot_min.x + b * slot, plot_min.y), ImVec2(plot_min.x + (b + 1) * slot, plot_max.y),
                                IM_COL32(255, 255, 255, 40));
        const float x = std::round(plot_min.x + b * slot + (slot - group_w) * 0.5f);
        for (int k = 0; k < count; ++k) {
            float top = 0.0f;
            for (int j = j0; j < j1; ++j) top = std::max(top, series[k].values[j]);
            if (dense && k > 0) {  // bars of a pixel would hide a side: SSA as bars over the whole slot, the others as lines
                lines[k].push_back(ImVec2(plot_min.x + (b + 0.5f) * slot, y_of(top)));
            } else if (dense) {
                draw->AddRectFilled(ImVec2(std::round(plot_min.x + b * slot), std::round(y_of(top))),
                                    ImVec2(std::round(plot_min.x + (b + 1) * slot), plot_max.y), series[k].colour);
            } else {
                draw->AddRectFilled(ImVec2(x + k * bar_w, std::round(y_of(top))), ImVec2(x + (k + 1) * bar_w, plot_max.y), series[k].colour);
            }
        }
    }
    for (int k = 1; k < count; ++k)
        if (lines[k].size() > 1) draw->AddPolyline(lines[k].data(), static_cast<int>(lines[k].size()), series[k].colour, 0, 1.5f);
    draw->AddLine(ImVec2(plot_min.x, plot_max.y), ImVec2(plot_max.x, plot_max.y), ImGui::GetColorU32(ImGuiCol_Border));

    // X axis: each labelled key's index and token at round steps, as many as fit.
    {
        const float per_label = ImGui::CalcTextSize("0000 wwwww").x + 12.0f;
        const int step = NiceStride(n * per_label / plot_w);
        for (int j = 0; j < n; j += step) {
            const float x = plot_min.x + (bin_of(j) + 0.5f) * slot;
            const std::string label = std::to_string(key_first + j) + " " +
                                      viz::EllipsizeText(m_labels[key_first + j], std::max(ImGui::CalcTextSize("wwwww").x, step * plot_w / n - 12.0f -
                                                                                          ImGui::CalcTextSize("0000 ").x));
            draw->AddLine(ImVec2(x, plot_max.y), ImVec2(x, plot_max.y + 3), dim_col);
            const float w = ImGui::CalcTextSize(label.c_str()).x;
            // The index centred on its tick, the token after it; the last label stays inside.
            const float x_text = std::min(std::round(x - ImGui::CalcTextSize(std::to_string(key_first + j).c_str()).x * 0.5f), pos.x + size.x - w);
            draw->AddText(ImVec2(x_text, plot_max.y + 3), dim_col, label.c_str());
        }
    }

    // The top keys by SSA weight, then each other series' (its tallest bars named too), labelled
    // above their bars, SSA's in the text colour and the others' in theirs; labels that would
    // collide stack up or are left out (the tooltip still has them).
    {
        struct Peak {
            int j;
            int series;
        };
        std::vector<Peak> peaks;
        for (int k = 0; k < count; ++k) {
            const float* values = series[k].values;
            std::vector<int> order(n);
            std::iota(order.begin(), order.end(), 0);
            const int top = std::min(series[k].peaks, n);
            std::partial_sort(order.begin(), order.begin() + top, order.end(), [&](int x, int y) { return values[x] > values[y]; });
            for (int r = 0; r < top; ++r) {
                const bool seen = std::any_of(peaks.begin(), peaks.end(), [&](const Peak& p) { return bin_of(p.j) == bin_of(order[r]); });
                if (!seen) peaks.push_back({order[r], k});
            }
        }
        std::vector<ImVec4> placed;  // x0, y0, x1, y1
        for (const Peak& peak : peaks) {
            const int j = peak.j;
            const int b = bin_of(j);
            const float value = series[peak.series].values[j];
            const std::string text = viz::EllipsizeText(m_labels[key_first + j], ImGui::GetFontSize() * 6.0f);
            const ImVec2 ts = ImGui::CalcTextSize(text.c_str());
            const float cx = plot_min.x + (b + 0.5f) * slot + (dense ? 0.0f : bar_offset(peak.series));
            const float x0 = std::clamp(std::round(cx - ts.x * 0.5f), plot_min.x + 2, plot_max.x - ts.x - 2);
            float y0 = std::round(y_of(value) - ts.y - 2);
            bool ok = false;
            for (int attempt = 0; attempt < 4 && !ok; ++attempt) {
                ok = y0 >= plot_min.y;
                for (const ImVec4& p : placed)
                    if (x0 - 3 < p.z && x0 + ts.x + 3 > p.x && y0 < p.w && y0 + ts.y > p.y) ok = false;
                if (!ok) y0 = std::min(y0, y0 - ts.y - 1);
            }
            if (!ok) {  // try above everything placed so far, still inside the plot
                y0 = plot_min.y;
                ok = true;
                for (const ImVec4& p : placed)
                    if (x0 - 3 < p.z && x0 + ts.x + 3 > p.x && y0 < p.w && y0 + ts.y > p.y) ok = false;
            }
            if (!ok) continue;
            const float bar_top = y_of(value);
            const ImU32 colour = series[peak.series].colour;
            if (y0 + ts.y + 2 < bar_top - 1) draw->AddLine(ImVec2(cx, y0 + ts.y), ImVec2(cx, bar_top - 1), (colour & 0x00FFFFFF) | 0xA0000000);
            AddLabel(draw, ImVec2(x0, y0), peak.series == 0 ? text_col : colour, text.c_str());
            placed.push_back(ImVec4(x0 - 2, y0, x0 + ts.x + 2, y0 + ts.y));
        }
    }

    if (hovered_bin >= 0) {
        const int j0 = bin_begin(hovered_bin), j1 = bin_begin(hovered_bin + 1);
        int best = j0;
        for (int j = j0; j < j1; ++j)
            if (ssa[j] > ssa[best]) best = j;
        m_hover_key = key_first + best;
        ImGui::BeginTooltip();
        if (j1 - j0 > 1)
            ImGui::TextDisabled("keys %d..%d (one bar per %d keys; the largest SSA weight):", key_first + j0, key_first + j1 - 1, j1 - j0);
        ImGui::Text("key '%s' (%d)", m_labels[key_first + best].c_str(), key_first + best);
        for (const Series& s : series) ImGui::Text("%s p = %s", s.name.c_str(), FormatWeight(s.values[best]).c_str());
        if (with_base) {  // the change in its two parts, as the map's hover and the Fine-tune tab split it
            const float tau1 = series[1].values[best], base = series[2].values[best];
            ImGui::Text("temperatures (SSA - tau = 1) %s, drift (tau = 1 - base) %s", FormatWeight(ssa[best] - tau1, true).c_str(),
                        FormatWeight(tau1 - base, true).c_str());
        } else if (count == 2) {
            ImGui::Text("SSA - %s = %s", series[1].name.c_str(), FormatWeight(ssa[best] - series[1].values[best], true).c_str());
        }
        ImGui::EndTooltip();
    }
}

//-------------------------------------------------------------------------------------------------
// [SECTION] Draw: the view's layout
//-------------------------------------------------------------------------------------------------

void HeatmapView::Draw(WindowState& state) {
    m_view = &state.settings.map_view;  // zoom and pan live in the settings, so sessions keep them
    m_hover_row = m_hover_col = -1;
    if (!state.analysis) {
        m_analysis.reset();
        m_baked_for = nullptr;
        if (!state.error.empty()) {  // say it where the user looks: a text too long, a model that failed
            ImGui::PushTextWrapPos(0.0f);
            ImGui::TextColored(ImVec4(1.0f, 0.55f, 0.45f, 1.0f), "No analysis: %s", state.error.c_str());
            ImGui::PopTextWrapPos();
            return;
        }
        CenteredText("waiting for the model...");
        return;
    }
    const model::Analysis& a = *state.analysis;
    if (a.n_tokens <= 0 || a.n_layer <= 0 || a.n_head <= 0 || !a.maps) {
        CenteredText("no tokens to show");
        return;
    }
    state.selected.layer = std::clamp(state.selected.layer, 0, a.n_layer - 1);
    state.selected.head = std::clamp(state.selected.head, 0, a.n_head - 1);

    DrawToolbar(state);
    PrepareData(state);
    if (!state.error.empty()) {  // the shown analysis is older than the text: say why it did not update
        ImGui::PushTextWrapPos(0.0f);
        ImGui::TextColored(ImVec4(1.0f, 0.55f, 0.45f, 1.0f), "Showing the last analysis: %s", state.error.c_str());
        ImGui::PopTextWrapPos();
    }

    // Layout: row labels | tau_q strip | map(s) | colour bar(s), column labels and the tau_v strip
    // above; one line of read-out under the maps; the row chart takes the rest.
    const ImGuiStyle& style = ImGui::GetStyle();
    const float line_h = ImGui::GetTextLineHeight();
    const ImVec2 origin = ImGui::GetCursorScreenPos(), avail = ImGui::GetContentRegionAvail();
    const float label_size = std::round(ImGui::GetFontSize() * (m_split ? 3.5f : 5.5f));
    const float gap = style.ItemSpacing.x;
    const float strip = std::round(ImGui::GetFontSize() * 0.6f);
    m_edge = strip + 4.0f;  // the labels sit outside the temperature strips
    const float bar_w = viz::ColorBarWidth();
    const float readout_h = ImGui::GetTextLineHeightWithSpacing();
    const float title_h = m_split ? line_h + style.ItemSpacing.y : 0.0f;
    const float chart_min_h = line_h * 10.0f;
    const int maps = m_split ? 3 : 1;
    const float fixed_w = label_size + m_edge + gap + (m_split ? 2 * bar_w + 5 * gap : gap + bar_w);
    const float above = title_h + label_size + m_edge + gap;  // a map's title, column labels and strip
    const float below = readout_h + style.ItemSpacing.y;
    float side = std::min((avail.x - fixed_w) / maps, avail.y - above - below - chart_min_h);
    side = std::floor(std::max(side, 48.0f));
    // All three in a narrow pane: SSA and the comparison side by side, the difference under SSA,
    // when that gives the maps more room than one row of three; the row chart shrinks for them.
    bool grid = false;
    if (m_split) {
        const float grid_w = label_size + m_edge + gap + bar_w + 3 * gap;
        const float grid_side = std::floor(std::min((avail.x - grid_w) / 2, (avail.y - 2 * above - below - line_h * 6.0f) / 2));
        if (grid_side > side * 1.25f) side = grid_side, grid = true;
    }
    const float block_w = grid ? label_size + m_edge + 2 * side + bar_w + 4 * gap : fixed_w + maps * side;
    const float x_offset = std::floor(std::max(0.0f, (avail.x - block_w) * 0.5f));
    const ImVec2 map_pos(origin.x + x_offset + label_size + m_edge + gap, origin.y + title_h + label_size + m_edge + gap);
    float maps_bottom = map_pos.y + side;

    if (!m_split) {
        Layer& layer = m_layers[static_cast<int>(m_mode)];
        DrawMap(state, layer, map_pos, side, label_size, true);
        const bool strips = m_mode == MapMode::Ssa || m_mode == MapMode::Difference || m_mode == MapMode::BaseDifference;  // SSA's own
        DrawTemperatureStrips(state, map_pos, side, strip, strips, strips);
        ImGui::SetCursorScreenPos(ImVec2(map_pos.x + side + gap, map_pos.y));
        viz::ColorBar("##heatmap_colorbar", BarQuantity(m_mode), layer.colormap, layer.range, layer.log, ImVec2(bar_w, side));
    } else {
        // SSA | comparison | difference, or SSA | tau = 1 | base: the first two (three) share one bar.
        const std::string cmp = CompareName(a);
        struct Panel {
            MapMode mode;
            std::string title;
            bool bar_after;
            std::string narrow;  // the title where the whole one does not fit ("tau = 1 (SSA's .." told no side)
        };
        const std::vector<Panel> panels =
            m_three_way ? std::vector<Panel>{{MapMode::Ssa, "SSA", false, "SSA"}, {MapMode::Compare, "tau = 1 (SSA's weights)", false, "tau = 1"},
                                             {MapMode::Base, "base (" + BaseFolderName(a) + ")", true, "base"}}
                        : std::vector<Panel>{{MapMode::Ssa, "SSA", false, "SSA"}, {MapMode::Compare, cmp, true, cmp},
                                             {MapMode::Difference, "SSA - " + cmp, true, "SSA - " + cmp}};
        float x = map_pos.x, y = map_pos.y;
        for (size_t n = 0; n < panels.size(); ++n) {
            const Panel& panel = panels[n];
            if (grid && n == 2) x = map_pos.x, y = map_pos.y + side + above;  // under SSA
            Layer& layer = m_layers[static_cast<int>(panel.mode)];
            const ImVec2 pos(x, y);
            const bool row_labels = n == 0 || (grid && n == 2);
            // SSA's temperatures beside SSA's map and SSA - comparison only: at tau = 1 every one is 1,
            // and a twin's or a base's are not SSA's.
            const bool strips = panel.mode == MapMode::Ssa || panel.mode == MapMode::Difference;
            ImGui::PushID(static_cast<int>(panel.mode));
            DrawMap(state, layer, pos, side, label_size, row_labels);
            DrawTemperatureStrips(state, pos, side, strip, row_labels && strips, strips);
            ImGui::PopID();
            const std::string title = viz::EllipsizeText(ImGui::CalcTextSize(panel.title.c_str()).x <= side ? panel.title : panel.narrow, side);
            ImGui::GetWindowDrawList()->AddText(ImVec2(x + std::max(0.0f, (side - ImGui::CalcTextSize(title.c_str()).x) * 0.5f), y - above),
                                                ImGui::GetColorU32(ImGuiCol_Text), title.c_str());
            x += side + gap;
            maps_bottom = std::max(maps_bottom, y + side);
            if (panel.bar_after) {
                ImGui::SetCursorScreenPos(ImVec2(x, y));
                ImGui::PushID(static_cast<int>(panel.mode));
                viz::ColorBar("##split_colorbar", BarQuantity(panel.mode), layer.colormap, layer.range, layer.log, ImVec2(bar_w, side));
                ImGui::PopID();
                x += bar_w + gap;
            }
        }
    }

    // Read-out line.
    const float readout_y = maps_bottom + style.ItemSpacing.y;
    ImGui::SetCursorScreenPos(ImVec2(origin.x, readout_y));
    ImGui::PushClipRect(ImVec2(origin.x, readout_y), ImVec2(origin.x + avail.x, readout_y + readout_h), true);
    if (m_hover_row >= 0) ImGui::TextUnformatted(CellText(m_hover_row, m_hover_col, false).c_str());
    else {
        const char* hint = "hover a cell for its weight; click it to select the query row; wheel zooms, drag pans";
        if (ImGui::CalcTextSize(hint).x > avail.x) hint = "hover: weight; click: query row; wheel: zoom; drag: pan";
        ImGui::TextDisabled("%s", hint);
    }
    ImGui::PopClipRect();

    const float chart_y = readout_y + readout_h + style.ItemSpacing.y;
    const float chart_h = origin.y + avail.y - chart_y - 1.0f;
    DrawRowChart(state, ImVec2(origin.x, chart_y), ImVec2(avail.x, chart_h));
}

}  // namespace app
