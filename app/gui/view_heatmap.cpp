#include "app/gui/view_heatmap.h"

#include "app/export/head_summary.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include <imgui.h>
#include <imgui_internal.h>  // SetItemUsingMouseWheel

#include "model/text/tokenizer.h"
#include "viz/heatmap.h"
#include "viz/imgui/widgets.h"

namespace app {
namespace {

constexpr float kMaxCellPixels = 64.0f;  // the deepest zoom: one cell this many pixels wide
constexpr int kWholeMapMaxSide = 1024;   // up to this many tokens, one texel per cell for the whole map (one bake of <= 1M cells)
const ImU32 kSsaColor = IM_COL32(240, 145, 40, 255);
const ImU32 kCompareColor = IM_COL32(95, 160, 225, 255);
const ImU32 kQueryColor = IM_COL32(255, 220, 90, 255);

// A weight as text: 3 decimals, or scientific below 0.001 so small weights do not read as zero.
std::string FormatWeight(float v, bool sign = false) {
    char buf[32];
    if (!std::isfinite(v)) return "nan";
    if (v == 0.0f || std::abs(v) >= 1e-3f) std::snprintf(buf, sizeof buf, sign ? "%+.3f" : "%.3f", v);
    else std::snprintf(buf, sizeof buf, sign ? "%+.2e" : "%.2e", v);
    return buf;
}

// 1, 2, 5, 10, 20, 50, ... at least `raw`.
int NiceStride(float raw) {
    if (raw <= 1.0f) return 1;
    for (int magnitude = 1;; magnitude *= 10) {
        for (int f : {1, 2, 5})
            if (f * magnitude >= raw) return f * magnitude;
        if (magnitude > 100000000) return magnitude * 10;
    }
}

// Continues on the same line when an item of `width` still fits there.
void SameLineIfFits(float width) {
    const float right = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x;
    if (ImGui::GetItemRectMax().x + ImGui::GetStyle().ItemSpacing.x + width <= right) ImGui::SameLine();
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

// Text on a dark plate, readable over any colour.
void AddLabel(ImDrawList* draw, ImVec2 pos, ImU32 color, const char* text) {
    const ImVec2 size = ImGui::CalcTextSize(text);
    draw->AddRectFilled(ImVec2(pos.x - 2, pos.y), ImVec2(pos.x + size.x + 2, pos.y + size.y), IM_COL32(20, 20, 24, 215), 2.0f);
    draw->AddText(pos, color, text);
}

bool HasCompare(const model::Analysis& a) { return a.maps && !a.compare_label.empty(); }

const char* CompareKind(const model::Analysis& a) { return a.compare_label == "vanilla" ? "vanilla" : "twin"; }

}  // namespace

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

const float* HeatmapView::MapValues() const {
    switch (m_mode) {
        case MapMode::Compare: return m_compare->data();
        case MapMode::Difference: return m_diff.data();
        case MapMode::Ssa: break;
    }
    return m_ssa->data();
}

void HeatmapView::PrepareData(const AppState& state) {
    const model::Analysis& a = *state.analysis;
    const bool has_compare = HasCompare(a);
    const MapMode mode = has_compare ? state.settings.map_mode : MapMode::Ssa;
    const viz::Colormap colormap = mode == MapMode::Difference ? viz::Colormap::Diverging : state.settings.colormap;
    const bool log_scale = mode != MapMode::Difference && state.settings.log_scale;
    const HeadRef head = state.selected;
    if (state.analysis.get() == m_baked_for && head == m_baked_head && mode == m_baked_mode && colormap == m_baked_colormap &&
        log_scale == m_baked_log)
        return;

    if (state.analysis.get() != m_baked_for) {
        m_analysis = state.analysis;
        m_baked_for = state.analysis.get();
        m_tokens = a.n_tokens;
        m_labels.clear();
        for (const std::string& piece : a.tokens.pieces) m_labels.push_back(TokenLabel(piece));
        m_labels.resize(a.n_tokens, "?");
        m_short_labels.clear();
        m_short_width = 0;
    }
    m_baked_head = head;
    m_baked_mode = m_mode = mode;
    m_baked_colormap = m_colormap = colormap;
    m_baked_log = m_log = log_scale;

    const int T = a.n_tokens;
    const size_t cells = static_cast<size_t>(T) * T;
    // Rebuilt from the layer's q and k when not cached (a few ms at 1,000 tokens; see model::AttentionMaps).
    m_ssa = a.Map(model::MapSide::Ssa, head.layer, head.head);
    m_compare = has_compare ? a.Map(model::MapSide::Compare, head.layer, head.head) : nullptr;
    const float* ssa = m_ssa->data();
    const float* cmp = m_compare ? m_compare->data() : nullptr;
    if (mode == MapMode::Difference) {
        m_diff.resize(cells);
        for (size_t k = 0; k < cells; ++k) m_diff[k] = ssa[k] - cmp[k];
        viz::HeatmapStyle style;
        style.colormap = viz::Colormap::Diverging;
        m_range = viz::ResolveRange(m_diff.data(), T, T, style);
        if (!(m_range.max > 0.0f)) m_range = {-1e-3f, 1e-3f};  // identical maps: zero sits in the middle (white)
    } else {
        m_diff.clear();
        // One range for SSA and comparison, so switching between them (1 / 2) keeps the colours comparable.
        m_range = SharedMapRange(ssa, cmp, T, log_scale);
    }
    m_levels.clear();
    m_texture_dirty = true;
}

const float* HeatmapView::Level(int level) {
    while (static_cast<int>(m_levels.size()) < level) {  // each level from the one below, level 1 from the map
        const int below = static_cast<int>(m_levels.size()), n = (m_tokens + (1 << below) - 1) >> below;
        const float* values = below == 0 ? MapValues() : m_levels.back().data();
        m_levels.push_back(viz::PoolByTwo(values, n, m_colormap == viz::Colormap::Diverging));
    }
    return level == 0 ? MapValues() : m_levels[level - 1].data();
}

void HeatmapView::EnsureTexture(float side) {
    const int T = m_tokens;
    const float scale = std::max(1.0f, ImGui::GetIO().DisplayFramebufferScale.x);
    const float visible = T / m_view->zoom;  // cells across the view
    const float cells_per_pixel = visible / (side * scale);
    // Level of detail: the map max-pooled by 2^level, the smallest pool with no more texels than
    // pixels (so no texel, and no sharp weight, is skipped when the GPU draws it).
    int level = 0;
    while ((1 << level) < cells_per_pixel - 1e-3f) ++level;
    const int pool = 1 << level, n = (T + pool - 1) / pool;  // the level's cells a side

    if (m_texture_dirty) {  // new values, range or colours: every baked texture is stale
        m_whole.clear();
        m_region = {};
        m_texture_dirty = false;
    }
    viz::HeatmapStyle style;
    style.colormap = m_colormap;
    style.log_scale = m_log;
    style.range = m_range;
    if (n <= kWholeMapMaxSide) {
        // The whole level, baked once and kept: zooming back and forth through the levels and
        // panning within one need no bake.
        if (static_cast<int>(m_whole.size()) <= level) m_whole.resize(level + 1);
        if (!m_whole[level].Valid()) m_whole[level].Upload(viz::BakeHeatmap(Level(level), n, n, 0, 0, n, n, n, n, style, m_range));
        m_drawn = &m_whole[level];
        m_drawn_region = {0, 0, n * pool, n * pool, pool};
        return;
    }
    // Zoomed in on a map with more tokens than that: only the visible window of the level (plus
    // a margin, so small pans reuse it).
    m_drawn = &m_texture;
    const int r_first = static_cast<int>(std::floor(m_view->pan_y)), c_first = static_cast<int>(std::floor(m_view->pan_x));
    const int r_last = std::min(T, static_cast<int>(std::ceil(m_view->pan_y + visible)));
    const int c_last = std::min(T, static_cast<int>(std::ceil(m_view->pan_x + visible)));
    const BakedRegion& r = m_region;
    if (r.pool == pool && r.row0 <= r_first && r.col0 <= c_first && r.row0 + r.rows >= r_last && r.col0 + r.cols >= c_last) {
        m_drawn_region = m_region;
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
    m_texture.Upload(viz::BakeHeatmap(Level(level), n, n, row0, col0, rows, cols, cols, rows, style, m_range));
    m_drawn_region = m_region = {row0 * pool, col0 * pool, rows * pool, cols * pool, pool};
}

void HeatmapView::DrawToolbar(AppState& state) {
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

    const char* compare_name = CompareKind(a);
    SameLineIfFits(RadioWidth("SSA"));
    if (ImGui::RadioButton("SSA", s.map_mode == MapMode::Ssa)) s.map_mode = MapMode::Ssa;
    viz::ItemTooltip("The SSA model's attention weights for this head: row = query token, column = key token. Shortcut: 1");
    ImGui::BeginDisabled(!has_compare);
    SameLineIfFits(RadioWidth(compare_name));
    if (ImGui::RadioButton(compare_name, s.map_mode == MapMode::Compare)) s.map_mode = MapMode::Compare;
    if (a.compare_label == "vanilla")
        viz::ItemTooltip("The same head with tau = 1 (vanilla softmax attention, the counterfactual without selective "
                         "temperatures), on the same colour scale as SSA. Shortcut: 2");
    else
        viz::ItemTooltip(("The twin model's attention for this head, on the same colour scale as SSA (twin: " + a.compare_label +
                          "). Shortcut: 2")
                             .c_str());
    SameLineIfFits(RadioWidth("difference"));
    if (ImGui::RadioButton("difference", s.map_mode == MapMode::Difference)) s.map_mode = MapMode::Difference;
    viz::ItemTooltip((std::string("SSA minus ") + compare_name +
                      ", blue-white-red around 0: red where SSA attends more, blue where it attends less. Shortcut: 3")
                         .c_str());
    ImGui::EndDisabled();

    const bool difference = m_mode == MapMode::Difference;
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
    bool log_scale = s.log_scale;
    if (ImGui::Checkbox("log scale", &log_scale)) s.log_scale = log_scale;
    viz::ItemTooltip(difference ? "Not available for the difference map (its values are signed). Shortcut: L"
                                : "Colour by log10 of the weight, so that small weights are told apart. Shortcut: L");
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
        "Arrows: previous / next head (left, right) and layer (up, down). 1 / 2 / 3: SSA / comparison / difference. "
        "L: log scale.\nWhen the map has more cells than pixels, each pixel shows the largest value of the cells it "
        "covers (for the difference, the largest magnitude), so no sharp weight disappears.");
}

void HeatmapView::DrawMap(AppState& state, ImVec2 map_pos, float side, float label_size) {
    const int T = m_tokens;
    ImGuiIO& io = ImGui::GetIO();
    ImDrawList* draw = ImGui::GetWindowDrawList();
    const float line_h = ImGui::GetTextLineHeight();
    const float max_zoom = std::max(1.0f, kMaxCellPixels * T / side);
    ClampView(max_zoom);

    ImGui::SetCursorScreenPos(map_pos);
    ImGui::InvisibleButton("##map", ImVec2(side, side));
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
        }
    }
    if (ImGui::IsItemDeactivated() && !m_dragged && !m_double_clicked && m_hover_row >= 0) {
        m_query_before_click = state.query;
        state.query = m_hover_row;
    }

    EnsureTexture(side);
    const ImVec2 map_max(map_pos.x + side, map_pos.y + side);
    auto cell_x = [&](float j) { return map_pos.x + (j - m_view->pan_x) * cell; };
    auto cell_y = [&](float i) { return map_pos.y + (i - m_view->pan_y) * cell; };

    draw->PushClipRect(map_pos, map_max, true);
    if (m_drawn && m_drawn->Valid()) {
        const BakedRegion& r = m_drawn_region;
        const ImVec2 p0(cell_x(static_cast<float>(r.col0)), cell_y(static_cast<float>(r.row0)));
        const ImVec2 p1(cell_x(static_cast<float>(r.col0 + r.cols)), cell_y(static_cast<float>(r.row0 + r.rows)));
        draw->AddImage(m_drawn->Id(), p0, p1);
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
    if (m_hover_row >= 0 && cell >= 6.0f) {
        draw->AddRect(ImVec2(cell_x(static_cast<float>(m_hover_col)), cell_y(static_cast<float>(m_hover_row))),
                      ImVec2(cell_x(static_cast<float>(m_hover_col + 1)), cell_y(static_cast<float>(m_hover_row + 1))),
                      IM_COL32(255, 255, 255, 200));
    }
    draw->PopClipRect();
    draw->AddRect(ImVec2(map_pos.x - 1, map_pos.y - 1), ImVec2(map_max.x + 1, map_max.y + 1), ImGui::GetColorU32(ImGuiCol_Border));

    // Token labels, thinned to every k-th token (k = 1, 2, 5, 10, ...) when cells are smaller
    // than a line; the index is shown then, so that the thinned labels can be placed.
    const int stride = NiceStride(line_h * 1.1f / cell);
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

    // Rows: query tokens, right-aligned against the map.
    {
        // Half a line of slack above, so that the first row's label is not cut in half.
        const ImVec2 clip_min(map_pos.x - label_size - 2, map_pos.y - line_h * 0.5f), clip_max(map_pos.x - 2, map_max.y + 2);
        draw->PushClipRect(clip_min, clip_max, true);
        const float right = map_pos.x - 4.0f;
        auto draw_row = [&](int i, ImU32 color, bool plate) {
            const float y = cell_y(i + 0.5f);
            const std::string text = plate ? viz::EllipsizeText(m_labels[i], strip) : label_text(i, strip);
            const ImVec2 size = ImGui::CalcTextSize(text.c_str());
            const ImVec2 pos(std::round(right - size.x - 2), std::round(y - line_h * 0.5f));
            if (plate) AddLabel(draw, pos, color, text.c_str());
            else draw->AddText(pos, stride == 1 ? text_col : dim_col, text.c_str());
            if (stride > 1 || plate) draw->AddLine(ImVec2(right - 1, y), ImVec2(right + 3, y), color);
        };
        const int first = first_visible(m_view->pan_y);
        for (int i = first - first % stride; i <= last_visible(m_view->pan_y); i += stride) {
            bool collides = false;
            for (const Emphasis& e : rows_emph) collides |= std::abs(e.index - i) * cell < line_h;
            if (!collides) draw_row(i, stride == 1 ? text_col : dim_col, false);
        }
        for (const Emphasis& e : rows_emph) draw_row(e.index, e.color, true);
        draw->PopClipRect();
    }
    // Columns: key tokens, reading upwards from the map's top edge.
    {
        const ImVec2 clip_min(map_pos.x - line_h * 0.5f, map_pos.y - label_size - 2), clip_max(map_max.x + line_h * 0.5f, map_pos.y - 2);
        draw->PushClipRect(clip_min, clip_max, true);
        const float bottom = map_pos.y - 4.0f;
        auto draw_col = [&](int j, ImU32 color, bool plate) {
            const float x = cell_x(j + 0.5f);
            const std::string text = plate ? viz::EllipsizeText(m_labels[j], strip) : label_text(j, strip);
            const float width = ImGui::CalcTextSize(text.c_str()).x;
            const ImVec2 pos(std::round(x - line_h * 0.5f), bottom - 2);
            if (plate)
                draw->AddRectFilled(ImVec2(pos.x, pos.y - width - 2), ImVec2(pos.x + line_h, pos.y + 2), IM_COL32(20, 20, 24, 215), 2.0f);
            viz::AddTextVertical(draw, pos, plate ? color : (stride == 1 ? text_col : dim_col), text.c_str());
            if (stride > 1 || plate) draw->AddLine(ImVec2(x, bottom - 1), ImVec2(x, bottom + 3), color);
        };
        const int first = first_visible(m_view->pan_x);
        for (int j = first - first % stride; j <= last_visible(m_view->pan_x); j += stride) {
            bool collides = false;
            for (const Emphasis& e : cols_emph) collides |= std::abs(e.index - j) * cell < line_h;
            if (!collides) draw_col(j, stride == 1 ? text_col : dim_col, false);
        }
        for (const Emphasis& e : cols_emph) draw_col(e.index, e.color, true);
        draw->PopClipRect();
    }
    if (m_hover_row >= 0) {
        ImGui::BeginTooltip();
        ImGui::TextUnformatted(CellText(m_hover_row, m_hover_col, true).c_str());
        ImGui::EndTooltip();
    }
    state.regions["heatmap"] = {map_pos.x, map_pos.y, side, side};
}

std::string HeatmapView::CellText(int i, int j, bool multiline) const {
    const model::Analysis& a = *m_analysis;
    const int T = m_tokens;
    std::string text = "query '" + m_labels[i] + "' (" + std::to_string(i) + ") -> key '" + m_labels[j] + "' (" + std::to_string(j) + ")";
    if (j > i) return text + (multiline ? "\n" : ": ") + "the key is in the future (masked)";
    const size_t k = static_cast<size_t>(i) * T + j;
    const float ssa = (*m_ssa)[k];
    if (m_mode == MapMode::Ssa || !m_compare) return text + (multiline ? "\n" : ": ") + "p = " + FormatWeight(ssa);
    const float cmp = (*m_compare)[k];
    const std::string name = CompareKind(a);
    if (multiline)
        return text + "\nSSA p = " + FormatWeight(ssa) + "\n" + name + " p = " + FormatWeight(cmp) + "\nSSA - " + name + " = " +
               FormatWeight(ssa - cmp, true);
    return text + ": SSA p = " + FormatWeight(ssa) + ", " + name + " " + FormatWeight(cmp) + ", diff " + FormatWeight(ssa - cmp, true);
}

void HeatmapView::DrawRowChart(AppState& state, ImVec2 pos, ImVec2 size) {
    const model::Analysis& a = *m_analysis;
    const int T = m_tokens;
    const bool has_compare = m_compare != nullptr;
    const int query = state.query >= 0 && state.query < T ? state.query : T - 1;
    const int n = query + 1;
    const size_t base = static_cast<size_t>(query) * T;
    const float* ssa = m_ssa->data() + base;
    const float* cmp = has_compare ? m_compare->data() + base : nullptr;
    ImDrawList* draw = ImGui::GetWindowDrawList();
    const ImGuiStyle& style = ImGui::GetStyle();
    const float line_h = ImGui::GetTextLineHeight();
    const ImU32 text_col = ImGui::GetColorU32(ImGuiCol_Text), dim_col = ImGui::GetColorU32(ImGuiCol_TextDisabled);
    m_hover_key = -1;
    state.regions["row_chart"] = {pos.x, pos.y, size.x, size.y};

    // Title and legend.
    ImGui::SetCursorScreenPos(pos);
    const std::string title = "query '" + viz::EllipsizeText(m_labels[query], ImGui::GetFontSize() * 10) + "' (" + std::to_string(query) +
                              ")" + (state.query == query ? "" : ", the last token") + ": weights over keys 0.." + std::to_string(query);
    const std::string compare_name = CompareKind(a);
    const float legend_w = line_h * 2 + ImGui::CalcTextSize("SSA").x + ImGui::CalcTextSize(compare_name.c_str()).x + style.ItemSpacing.x * 3;
    ImGui::PushClipRect(pos, ImVec2(pos.x + size.x - legend_w - style.ItemSpacing.x, pos.y + line_h), true);
    ImGui::TextUnformatted(title.c_str());
    ImGui::PopClipRect();
    if (state.query != query && ImGui::IsItemHovered()) ImGui::SetTooltip("Click a row of the map to choose the query; Esc clears it.");
    {
        float x = pos.x + size.x - legend_w;
        auto legend = [&](ImU32 color, const char* text) {
            draw->AddRectFilled(ImVec2(x, pos.y + line_h * 0.2f), ImVec2(x + line_h * 0.6f, pos.y + line_h * 0.8f), color);
            x += line_h * 0.6f + style.ItemInnerSpacing.x;
            draw->AddText(ImVec2(x, pos.y), text_col, text);
            x += ImGui::CalcTextSize(text).x + style.ItemSpacing.x;
        };
        legend(kSsaColor, "SSA");
        if (cmp) legend(kCompareColor, compare_name.c_str());
    }

    // Plot area.
    float vmax = 0.0f;
    for (int j = 0; j < n; ++j) {
        if (std::isfinite(ssa[j])) vmax = std::max(vmax, ssa[j]);
        if (cmp && std::isfinite(cmp[j])) vmax = std::max(vmax, cmp[j]);
    }
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

    // Keys into bins at least 3 px wide; a bin shows each series' largest weight (max-pooled).
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
    const float bar_w = std::min(std::max(1.0f, std::floor((slot - gap) / (cmp ? 2.0f : 1.0f))), line_h * 2.0f);
    const float pair_w = bar_w * (cmp ? 2.0f : 1.0f);
    int hovered_bin = -1;
    if (hovered) hovered_bin = std::clamp(static_cast<int>((ImGui::GetIO().MousePos.x - plot_min.x) / slot), 0, bins - 1);
    for (int b = 0; b < bins; ++b) {
        const int j0 = bin_begin(b), j1 = bin_begin(b + 1);
        float s_max = 0.0f, c_max = 0.0f;
        for (int j = j0; j < j1; ++j) {
            s_max = std::max(s_max, ssa[j]);
            if (cmp) c_max = std::max(c_max, cmp[j]);
        }
        const float x = std::round(plot_min.x + b * slot + (slot - pair_w) * 0.5f);
        if (b == hovered_bin)
            draw->AddRectFilled(ImVec2(plot_min.x + b * slot, plot_min.y), ImVec2(plot_min.x + (b + 1) * slot, plot_max.y),
                                IM_COL32(255, 255, 255, 40));
        draw->AddRectFilled(ImVec2(x, std::round(y_of(s_max))), ImVec2(x + bar_w, plot_max.y), kSsaColor);
        if (cmp) draw->AddRectFilled(ImVec2(x + bar_w, std::round(y_of(c_max))), ImVec2(x + 2 * bar_w, plot_max.y), kCompareColor);
    }
    draw->AddLine(ImVec2(plot_min.x, plot_max.y), ImVec2(plot_max.x, plot_max.y), ImGui::GetColorU32(ImGuiCol_Border));

    // X axis: key indices at round steps.
    {
        const float per_label = ImGui::CalcTextSize("0000").x + 12.0f;
        const int step = NiceStride(n * per_label / plot_w);
        for (int j = 0; j < n; j += step) {
            const float x = plot_min.x + (bin_of(j) + 0.5f) * slot;
            const std::string label = std::to_string(j);
            draw->AddLine(ImVec2(x, plot_max.y), ImVec2(x, plot_max.y + 3), dim_col);
            const float w = ImGui::CalcTextSize(label.c_str()).x;
            const float x_text = std::min(std::round(x - w * 0.5f), pos.x + size.x - w);  // the last label stays inside
            draw->AddText(ImVec2(x_text, plot_max.y + 3), dim_col, label.c_str());
        }
    }

    // The top keys by SSA weight, labelled above their bars; labels that would collide stack up
    // or are left out (the tooltip still has them).
    {
        std::vector<int> order(n);
        std::iota(order.begin(), order.end(), 0);
        const int top = std::min(5, n);
        std::partial_sort(order.begin(), order.begin() + top, order.end(), [&](int x, int y) { return ssa[x] > ssa[y]; });
        std::vector<ImVec4> placed;  // x0, y0, x1, y1
        for (int r = 0; r < top; ++r) {
            const int j = order[r];
            const int b = bin_of(j);
            const std::string text = viz::EllipsizeText(m_labels[j], ImGui::GetFontSize() * 6.0f);
            const ImVec2 ts = ImGui::CalcTextSize(text.c_str());
            const float cx = plot_min.x + (b + 0.5f) * slot - (cmp ? bar_w * 0.5f : 0.0f);
            const float x0 = std::clamp(std::round(cx - ts.x * 0.5f), plot_min.x + 2, plot_max.x - ts.x - 2);
            float y0 = std::round(y_of(ssa[j]) - ts.y - 2);
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
            const float bar_top = y_of(ssa[j]);
            if (y0 + ts.y + 2 < bar_top - 1)
                draw->AddLine(ImVec2(cx, y0 + ts.y), ImVec2(cx, bar_top - 1), IM_COL32(240, 145, 40, 160));
            AddLabel(draw, ImVec2(x0, y0), text_col, text.c_str());
            placed.push_back(ImVec4(x0 - 2, y0, x0 + ts.x + 2, y0 + ts.y));
        }
    }

    if (hovered_bin >= 0) {
        const int j0 = bin_begin(hovered_bin), j1 = bin_begin(hovered_bin + 1);
        int best = j0;
        for (int j = j0; j < j1; ++j)
            if (ssa[j] > ssa[best]) best = j;
        m_hover_key = best;
        ImGui::BeginTooltip();
        if (j1 - j0 > 1) ImGui::TextDisabled("keys %d..%d (one bar per %d keys; the largest SSA weight):", j0, j1 - 1, j1 - j0);
        ImGui::Text("key '%s' (%d)", m_labels[best].c_str(), best);
        ImGui::Text("SSA p = %s", FormatWeight(ssa[best]).c_str());
        if (cmp) {
            ImGui::Text("%s p = %s", compare_name.c_str(), FormatWeight(cmp[best]).c_str());
            ImGui::Text("SSA - %s = %s", compare_name.c_str(), FormatWeight(ssa[best] - cmp[best], true).c_str());
        }
        ImGui::EndTooltip();
    }
}

void HeatmapView::Draw(AppState& state) {
    m_view = &state.settings.map_view;  // zoom and pan live in the settings, so sessions keep them
    m_hover_row = m_hover_col = -1;
    if (!state.analysis) {
        m_analysis.reset();
        m_baked_for = nullptr;
        CenteredText(state.error.empty() ? "waiting for the model..." : "no analysis (see the message above)");
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

    // Layout: row labels | map | colour bar, column labels above; one line of read-out under the
    // map; the row chart takes the rest.
    const ImGuiStyle& style = ImGui::GetStyle();
    const float line_h = ImGui::GetTextLineHeight();
    const ImVec2 origin = ImGui::GetCursorScreenPos(), avail = ImGui::GetContentRegionAvail();
    const float label_size = std::round(ImGui::GetFontSize() * 5.5f);
    const float gap = style.ItemSpacing.x;
    const float bar_w = viz::ColorBarWidth();
    const float readout_h = ImGui::GetTextLineHeightWithSpacing();
    const float chart_min_h = line_h * 10.0f;
    float side = std::min(avail.x - label_size - gap - bar_w - gap,
                          avail.y - label_size - gap - readout_h - style.ItemSpacing.y - chart_min_h);
    side = std::floor(std::max(side, 48.0f));
    const float block_w = label_size + gap + side + gap + bar_w;
    const float x_offset = std::floor(std::max(0.0f, (avail.x - block_w) * 0.5f));
    const ImVec2 map_pos(origin.x + x_offset + label_size + gap, origin.y + label_size + gap);

    DrawMap(state, map_pos, side, label_size);

    ImGui::SetCursorScreenPos(ImVec2(map_pos.x + side + gap, map_pos.y));
    viz::ColorBar("##heatmap_colorbar", m_colormap, m_range, m_log, ImVec2(bar_w, side));

    // Read-out line.
    const float readout_y = map_pos.y + side + style.ItemSpacing.y;
    ImGui::SetCursorScreenPos(ImVec2(origin.x, readout_y));
    ImGui::PushClipRect(ImVec2(origin.x, readout_y), ImVec2(origin.x + avail.x, readout_y + readout_h), true);
    if (m_hover_row >= 0) ImGui::TextUnformatted(CellText(m_hover_row, m_hover_col, false).c_str());
    else ImGui::TextDisabled("hover a cell for its weight; click it to select the query row; wheel zooms, drag pans");
    ImGui::PopClipRect();

    const float chart_y = readout_y + readout_h + style.ItemSpacing.y;
    const float chart_h = origin.y + avail.y - chart_y - 1.0f;
    DrawRowChart(state, ImVec2(origin.x, chart_y), ImVec2(avail.x, chart_h));
}

}  // namespace app
