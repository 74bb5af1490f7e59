#include "app/gui/views/view_heads.h"

#include <algorithm>
#include <chrono>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <optional>
#include <utility>

#include <imgui.h>

#include "app/core/names.h"
#include "app/gui/views/view_common.h"
#include "viz/heatmap.h"
#include "viz/imgui/widgets.h"

namespace app {
namespace {

const ImU32 kSelectedColor = IM_COL32(255, 230, 90, 255);
const ImU32 kPinnedColor = IM_COL32(80, 215, 255, 255);
constexpr double kBakeBudgetMs = 6.0;  // per frame, so a long text never stalls the UI
constexpr int kThumbnailSide = 96;     // baked pixels per thumbnail side (max-pooled)
constexpr int kPinnedSide = 256;


// One colour scale for every head, so thumbnails compare at a glance and one colour bar reads
// them all: 0..the largest weight of SSA, its comparison and the base (log: from 1e-4), or
// symmetric around 0 for a difference.
viz::Range SharedRange(const model::Analysis& a, MapMode mode, bool log_scale) {
    float top = 0.0f;
    if (IsDifference(mode)) {  // pooled to the largest magnitude, so the thumbnails hold the largest difference
        top = a.thumbnails.MaxAbs(ThumbnailKindOf(mode));
        if (top <= 0.0f) top = 1.0f;
        return {-top, top};
    }
    // The largest weight is the largest row maximum: [L, H, T] instead of [L, H, T, T].
    for (const model::MapMetrics* m : {&a.metrics, &a.metrics_compare, &a.metrics_base})
        if (const model::RowArray* max = m->Find("max_weight"))
            for (float v : *max) top = std::max(top, v);
    if (top <= 0.0f) top = 1.0f;
    return {log_scale ? 1e-4f : 0.0f, top};
}

// The map a thumbnail shows for a head and mode; a difference on a symmetric diverging scale.
// An empty image when the analysis lacks the maps.

// From the thumbnails (max-pooled above model::kThumbnailCells tokens), which hold more cells than
// a grid cell has pixels.
viz::Image BakeHead(const model::Analysis& a, MapMode mode, const HeadsView::Colours& colours, int l, int h, int max_side) {
    const model::Thumbnails& t = a.thumbnails;
    const std::vector<float> cells = t.Head(ThumbnailKindOf(mode), l, h);
    if (t.side == 0 || cells.empty()) return {};
    return viz::BakeHeatmap(cells.data(), t.side, t.side, colours.style, colours.scale, max_side);
}

// A small dark plate with the value at the bottom-left corner of a thumbnail of side `cell`:
// the full number when it fits, else a compact one, else a compact one in a smaller font, else none.
void Badge(ImDrawList* draw, ImVec2 p0, float cell, float value) {
    ImFont* font = ImGui::GetFont();
    const float full = ImGui::GetFontSize();
    struct Try { std::string text; float size; };
    const Try tries[] = {{FormatNumber(value), full}, {FormatCompact(value), full}, {FormatCompact(value), std::round(full * 0.8f)}};
    for (const Try& t : tries) {
        const ImVec2 ts = font->CalcTextSizeA(t.size, FLT_MAX, 0.0f, t.text.c_str());
        if (ts.x + 6.0f > cell - 2.0f || ts.y + 4.0f > cell * 0.5f) continue;
        const ImVec2 at(p0.x + 1.0f, p0.y + cell - ts.y - 3.0f);
        draw->AddRectFilled(at, ImVec2(at.x + ts.x + 5.0f, at.y + ts.y + 2.0f), IM_COL32(0, 0, 0, 190), 3.0f);
        draw->AddText(font, t.size, ImVec2(at.x + 2.5f, at.y + 1.0f), IM_COL32(255, 255, 255, 255), t.text.c_str());
        return;
    }
}

// What a mode shows of this analysis: a base's mode without a base shows SSA (a session may have
// saved one).
MapMode Shown(const model::Analysis& a, MapMode mode) { return IsBaseMode(mode) && !a.HasBase() ? MapMode::Ssa : mode; }

}  // namespace

float HeadsView::BadgeValue(const AppState& state, int index) const {
    const HeadValue* v = FindHeadValue(state.settings.grid_metric);
    return m_summaries.Get()[index].Get(v ? *v : HeadValues().front(), Shown(*state.analysis, state.settings.grid_mode));
}

void HeadsView::Rebake(WindowState& state) {
    const model::Analysis& a = *state.analysis;
    const ViewSettings& s = state.settings;
    const size_t count = static_cast<size_t>(a.n_layer) * a.n_head;
    const MapMode mode = Shown(a, s.grid_mode);
    if (!SameAnalysis(m_baked_for, state.analysis) || mode != m_baked_mode || s.colormap != m_baked_colormap || s.log_scale != m_baked_log) {
        m_summaries.Update(state);
        m_baked_for = state.analysis;
        m_baked_mode = mode;
        m_baked_colormap = s.colormap;
        m_baked_log = s.log_scale;
        m_next_bake = 0;
        m_stale.assign(count, 1);
        m_stale_count = count;
        m_colours.clear();
        for (MapMode m : kAllMapModes) {
            viz::HeatmapStyle style;  // a difference: diverging around 0, linear
            style.colormap = IsDifference(m) ? viz::Colormap::Diverging : s.colormap;
            style.log_scale = !IsDifference(m) && s.log_scale;
            style.range = SharedRange(a, m, s.log_scale);
            m_colours.push_back({style, viz::ColourScale(style.colormap, *style.range, style.log_scale, SIZE_MAX)});  // for every head
        }
        m_range = *m_colours[static_cast<int>(mode)].style.range;
        m_pinned_textures.clear();
        if (m_thumbnails.size() != count) m_thumbnails = std::vector<viz::Texture>(count);
    }
    // A few thumbnails per frame within a time budget; the rest keep their old pixels meanwhile.
    // Those the grid showed last frame first (a 22 x 32 model's pane shows a tenth of its heads);
    // the others only while the model is idle, in order, so that scrolling finds them done. While
    // it runs (typing), their frames would take the cores its next analysis wants: they wait, and
    // one scrolled into view is baked first. The app sleeps between events, so ask for the next
    // frame while work remains.
    const bool visible_stale = std::any_of(m_visible.begin(), m_visible.end(), [&](size_t i) { return i < count && m_stale[i]; });
    if ((visible_stale && !state.Quiet()) || (m_stale_count > 0 && !state.busy)) state.want_frame = true;
    const auto start = std::chrono::steady_clock::now();
    const int side = std::min(a.n_tokens, kThumbnailSide);
    auto bake = [&](size_t index) {
        const int l = static_cast<int>(index / a.n_head), h = static_cast<int>(index % a.n_head);
        m_thumbnails[index].Upload(BakeHead(a, m_baked_mode, m_colours[static_cast<int>(m_baked_mode)], l, h, side));
        m_stale[index] = 0;
        --m_stale_count;
        return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() <= kBakeBudgetMs;
    };
    for (size_t index : m_visible)
        if (index < count && m_stale[index] && !bake(index)) return;
    while (m_stale_count > 0 && !state.busy) {
        while (!m_stale[m_next_bake]) ++m_next_bake;
        if (!bake(m_next_bake)) return;
    }
}

void HeadsView::Draw(WindowState& state) {
    if (DrawNoAnalysisNote(state)) return;
    const model::Analysis& a = *state.analysis;
    if (a.n_layer == 0 || a.n_head == 0 || a.n_tokens == 0) {
        ImGui::TextDisabled("no heads in this analysis");
        return;
    }
    Rebake(state);
    ViewSettings& settings = state.settings;
    const std::string cmp = CompareName(a);

    // Controls: the badge metric and which maps the thumbnails show.
    const HeadValue* found = FindHeadValue(settings.grid_metric);
    const HeadValue& metric = found ? *found : HeadValues().front();
    ImGui::AlignTextToFramePadding();
    ImGui::TextUnformatted("Badge");
    ImGui::SameLine();
    ImGui::SetNextItemWidth(std::min(230.0f, ImGui::GetContentRegionAvail().x - ImGui::GetFontSize() * 6.5f));
    if (ImGui::BeginCombo("##badge", metric.label.c_str())) {
        for (const HeadValue& v : HeadValues()) {
            if (ImGui::Selectable(v.label.c_str(), &metric == &v)) settings.grid_metric = v.key;
            if (ImGui::IsItemHovered()) viz::Tooltip("%s", v.help.c_str());
        }
        ImGui::EndCombo();
    }
    if (ImGui::IsItemHovered())  // what the number is, not only how it is taken
        viz::Tooltip("The number on each thumbnail, %s: %s.\nA row metric is the head's mean over query rows 2..T (row 1 has one key).",
                     metric.label.c_str(), metric.help.c_str());
    // Thumbnail size: fit the pane, or larger with a scrollbar (Ctrl+wheel over the grid), beside the badge's
    // metric so that the row of maps has room for a base's two.
    ImGui::SameLine();
    ImGui::SetNextItemWidth(ImGui::GetFontSize() * 5.5f);
    float cell = settings.grid_cell;
    if (ImGui::SliderFloat("##grid_cell", &cell, 0.0f, 256.0f, cell < 8.0f ? "fit" : "%.0f px")) settings.grid_cell = cell < 8.0f ? 0.0f : cell;
    if (ImGui::IsItemHovered())
        viz::Tooltip("Thumbnail size: 'fit' fills the pane (down to 32 px a head; below that 40 px and the grid scrolls).\n"
                          "Ctrl+wheel over the grid zooms it. For many heads the Matrix tab shows any metric as numbers.");
    ImGui::AlignTextToFramePadding();
    ImGui::TextUnformatted("Map  ");
    ImGui::SameLine();
    if (ImGui::RadioButton("SSA", settings.grid_mode == MapMode::Ssa)) settings.grid_mode = MapMode::Ssa;
    ImGui::SameLine();
    if (ImGui::RadioButton(cmp.c_str(), settings.grid_mode == MapMode::Compare)) settings.grid_mode = MapMode::Compare;
    if (ImGui::IsItemHovered()) viz::Tooltip("%s", CompareExplanation(a).c_str());
    ImGui::SameLine();
    if (ImGui::RadioButton("difference", settings.grid_mode == MapMode::Difference)) settings.grid_mode = MapMode::Difference;
    if (ImGui::IsItemHovered()) viz::Tooltip("SSA minus %s: red where SSA attends more, blue where less", cmp.c_str());
    if (a.HasBase()) {  // a fine-tune's base: its maps, and all that fine-tuning changed
        const float radio = ImGui::GetFrameHeight() + ImGui::GetStyle().ItemInnerSpacing.x;
        SameLineIfFits(radio + ImGui::CalcTextSize("base").x);
        if (ImGui::RadioButton("base", settings.grid_mode == MapMode::Base)) settings.grid_mode = MapMode::Base;
        if (ImGui::IsItemHovered()) viz::Tooltip("The base model's maps: what the fine-tune started from");
        SameLineIfFits(radio + ImGui::CalcTextSize("SSA - base").x);
        if (ImGui::RadioButton("SSA - base", settings.grid_mode == MapMode::BaseDifference)) settings.grid_mode = MapMode::BaseDifference;
        if (ImGui::IsItemHovered())
            viz::Tooltip("SSA minus the base: all that fine-tuning changed (its temperatures and the other weights' drift);\n"
                              "red where the fine-tune attends more, blue where less. The Fine-tune tab splits it per head.");
    }
    const bool one_sided = !metric.quantity->TwoSided(), unit = !metric.quantity->unit.empty();
    // A difference's badge is SSA's value minus the other side's ("entropy of SSA - base" read as the
    // entropy of the difference map).
    const std::string whose = one_sided                      ? ""
                              : !IsDifference(m_baked_mode) ? std::string(" of ") + MapModeLabel(m_baked_mode)
                                                            : std::string(", SSA's minus ") + (IsBaseMode(m_baked_mode) ? "the base's" : "the comparison's");
    ImGui::TextDisabled("badge: %s%s%s%s", metric.label.c_str(), whose.c_str(), unit ? ", " : "", metric.quantity->unit.c_str());
    if (m_stale_count > 0) {
        ImGui::SameLine();
        ImGui::TextDisabled("(drawing %zu/%zu)", m_thumbnails.size() - m_stale_count, m_thumbnails.size());
    }
    ImGui::Spacing();

    DrawGrid(state);
    ImGui::Spacing();
    DrawPinned(state);
}

void HeadsView::DrawGrid(WindowState& state) {
    const model::Analysis& a = *state.analysis;
    const int L = a.n_layer, H = a.n_head;
    const float label_w = ImGui::CalcTextSize("L00").x + 8.0f;
    const float line = ImGui::GetTextLineHeight();
    const float bar_w = viz::ColorBarWidth();
    const float avail = ImGui::GetContentRegionAvail().x - bar_w - 8.0f;  // room for the shared colour bar
    float gap = 4.0f;
    float cell = std::floor((avail - label_w - gap * H) / H);
    if (cell < 24.0f) gap = 2.0f, cell = std::floor((avail - label_w - gap * H) / H);  // many heads: tighter
    // Never so small that the badges vanish: past that the grid scrolls (or the user zooms it).
    // "fit": the pane's width down to 32 px a head; a grid that needs less scrolls at 40 px (a floor of
    // 40 left a 4-head grid 2 px too wide for the pane at 1000 px: "fit" scrolled).
    if (cell < 32.0f) cell = 40.0f;
    cell = state.settings.grid_cell > 0 ? state.settings.grid_cell : std::min(cell, 160.0f);
    const float grid_w = label_w + H * (cell + gap), grid_h = line + 4.0f + L * (cell + gap);
    const ImGuiStyle& style = ImGui::GetStyle();
    const bool scroll_x = grid_w > avail;
    const float max_h = std::max(ImGui::GetContentRegionAvail().y * 0.62f, 8.0f * line);
    const float child_h = std::min(grid_h + (scroll_x ? style.ScrollbarSize : 0.0f) + 2.0f, max_h);
    const ImVec2 child_pos = ImGui::GetCursorScreenPos();
    ImGui::BeginChild("##grid", ImVec2(avail, child_h), false, ImGuiWindowFlags_HorizontalScrollbar);
    const ImGuiIO& io = ImGui::GetIO();
    if (ImGui::IsWindowHovered() && io.KeyCtrl && io.MouseWheel != 0.0f)  // Ctrl+wheel: zoom the grid
        state.settings.grid_cell = std::clamp(std::round(cell * std::pow(1.2f, io.MouseWheel)), 16.0f, 512.0f);
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    ImDrawList* draw = ImGui::GetWindowDrawList();

    const float top = origin.y + line + 4.0f;
    m_visible.clear();
    int hovered = -1;
    for (int l = 0; l < L; ++l) {
        for (int h = 0; h < H; ++h) {
            const int index = l * H + h;
            const HeadRef ref{l, h};
            const ImVec2 p0(origin.x + label_w + h * (cell + gap), top + l * (cell + gap));
            const ImVec2 p1(p0.x + cell, p0.y + cell);
            // 704 heads (22 x 32) are many more than the pane shows: only what is in view is drawn.
            if (!ImGui::IsRectVisible(p0, p1)) continue;
            m_visible.push_back(static_cast<size_t>(index));
            ImGui::SetCursorScreenPos(p0);
            ImGui::PushID(index);
            ImGui::InvisibleButton("##head", ImVec2(cell, cell));
            ImGui::PopID();
            if (ImGui::IsItemHovered()) hovered = index;
            HandleHeadClick(state, ref);

            const viz::Texture& tex = m_thumbnails[index];
            if (tex.Valid()) draw->AddImage(tex.Id(), p0, p1);
            else draw->AddRectFilled(p0, p1, IM_COL32(40, 40, 46, 255));

            Badge(draw, p0, cell, BadgeValue(state, index));

            if (state.IsPinned(ref)) {
                const float s = std::max(8.0f, cell * 0.16f);
                draw->AddTriangleFilled(ImVec2(p1.x - s, p0.y), ImVec2(p1.x, p0.y), ImVec2(p1.x, p0.y + s), kPinnedColor);
                draw->AddRect(p0, p1, kPinnedColor, 0.0f, 0, 1.0f);
            }
            if (ref == state.selected) draw->AddRect(ImVec2(p0.x - 2.0f, p0.y - 2.0f), ImVec2(p1.x + 2.0f, p1.y + 2.0f), kSelectedColor, 0.0f, 0, 2.5f);
            else if (index == hovered) draw->AddRect(p0, p1, IM_COL32(255, 255, 255, 160), 0.0f, 0, 1.0f);
        }
    }
    DrawGridLabels(draw, {origin, label_w, line + 4.0f, ImVec2(cell + gap, cell + gap), ImVec2(cell, cell)}, L, H, state.selected);
    if (hovered >= 0) HeadTooltip(state, m_summaries.Get()[hovered]);
    ImGui::SetCursorScreenPos(ImVec2(origin.x, origin.y + grid_h));
    ImGui::Dummy(ImVec2(grid_w, 0.0f));
    ImGui::EndChild();
    const bool difference = IsDifference(m_baked_mode);
    const float bar_top = child_pos.y + line + 4.0f;
    ImGui::SetCursorScreenPos(ImVec2(child_pos.x + std::min(grid_w, avail) + 6.0f, bar_top));
    viz::ColorBar("##heads_colorbar", BarQuantity(m_baked_mode), difference ? viz::Colormap::Diverging : m_baked_colormap, m_range, m_baked_log && !difference,
                  ImVec2(bar_w, std::min(L * (cell + gap) - gap, child_pos.y + child_h - bar_top)));
    ImGui::SetCursorScreenPos(ImVec2(child_pos.x, child_pos.y + child_h));
    ImGui::Dummy(ImVec2(std::min(grid_w, avail), 0.0f));
    state.regions["heads"] = Rect{child_pos.x, child_pos.y, std::min(grid_w, avail), child_h};
    state.regions["heads_cell"] = Rect{0, 0, cell, cell};  // for tests: a thumbnail's size
}

void HeadsView::DrawPinned(WindowState& state) {
    const model::Analysis& a = *state.analysis;
    const std::string cmp = CompareName(a);
    ImGui::Separator();
    if (state.pinned.empty()) {
        Caption("Ctrl+click a head (or press P) to pin it for side-by-side comparison");
        return;
    }
    ImGui::Text("Pinned heads (%zu)", state.pinned.size());
    if (ImGui::IsItemHovered())
        viz::Tooltip("Each pin shows its own map: SSA, %s or the difference (the buttons above it).\nNumbers: SSA (%s).", cmp.c_str(),
                          cmp.c_str());
    ImGui::SameLine();
    if (ImGui::SmallButton("unpin all")) {
        state.pinned.clear();
        return;
    }

    for (auto it = m_pinned_textures.begin(); it != m_pinned_textures.end();) {  // drop heads unpinned elsewhere, or shown in another mode
        const auto& key = it->first;  // (layer, head, mode)
        const bool kept = std::any_of(state.pinned.begin(), state.pinned.end(), [&](const Pin& p) {
            return p.layer == std::get<0>(key) && p.head == std::get<1>(key) && p.mode == std::get<2>(key);
        });
        it = kept ? std::next(it) : m_pinned_textures.erase(it);
    }

    // As many per row as fit at 140 px or more; the width leaves room for the pane's scrollbar so
    // the last one is never cut off.
    const ImGuiStyle& style = ImGui::GetStyle();
    const float spacing = style.ItemSpacing.x;
    const float avail = ImGui::GetContentRegionAvail().x - style.ScrollbarSize;
    // A panel is at least as wide as the head's name, its x and the widest map button; the buttons
    // go on as many lines as the panel needs (with a base, six do not fit beside 140 px).
    const float button_pad = style.FramePadding.x * 2 + 2.0f;
    const bool base = a.HasBase();
    const std::string compare_name = CompareName(a);
    const float header_w = ImGui::CalcTextSize("L00 H00").x + spacing + ImGui::CalcTextSize("x").x + button_pad + 2.0f +
                           std::max(ImGui::CalcTextSize(cmp.c_str()).x, ImGui::CalcTextSize("SSA-base").x) + button_pad;
    const float min_panel = std::max(140.0f, header_w);
    const int per_row = std::clamp(static_cast<int>((avail + spacing) / (min_panel + spacing)), 1, 4);
    const float panel = std::floor((avail - spacing * (per_row - 1)) / per_row);
    bool baked_one = false;
    std::optional<HeadRef> unpin;
    const float row_x = ImGui::GetCursorPosX();  // each panel at its column's place, whatever the one before it holds
    for (size_t k = 0; k < state.pinned.size(); ++k) {
        Pin& pin = state.pinned[k];
        const HeadRef ref = pin.Ref();
        const HeadSummary& sum = m_summaries.Get()[static_cast<size_t>(ref.layer) * a.n_head + ref.head];
        const MapMode mode = Shown(a, pin.mode);
        viz::Texture& tex = m_pinned_textures[{ref.layer, ref.head, mode}];
        if (!tex.Valid() && !baked_one && m_stale_count == 0) {  // one per frame, after the grid
            tex.Upload(BakeHead(a, mode, m_colours[static_cast<int>(mode)], ref.layer, ref.head, std::min(a.n_tokens, kPinnedSide)));
            baked_one = true;
        }
        if (!tex.Valid()) state.want_frame = true;

        if (k % per_row != 0) ImGui::SameLine(row_x + static_cast<float>(k % per_row) * (panel + spacing));
        ImGui::PushID(static_cast<int>(k));
        ImGui::BeginGroup();
        const float panel_right = ImGui::GetCursorScreenPos().x + panel;
        ImGui::PushTextWrapPos(ImGui::GetCursorPosX() + panel);  // the figures under the map wrap within it
        ImGui::AlignTextToFramePadding();
        ImGui::TextColored(ref == state.selected ? ImVec4(1.0f, 0.9f, 0.35f, 1.0f) : ImVec4(0.31f, 0.84f, 1.0f, 1.0f), "%s", HeadName(ref).c_str());
        ImGui::SameLine();
        if (ImGui::SmallButton("x")) unpin = ref;
        if (ImGui::IsItemHovered()) viz::Tooltip("Unpin (or Ctrl+click the map)");
        // This pin's map: SSA, the comparison or the difference (with a base: the base, SSA - base),
        // whatever the others show.
        const std::string names[] = {"SSA", cmp, "diff", "base", "SSA-base"};
        for (MapMode m : kAllMapModes) {
            if (IsBaseMode(m) && !base) continue;
            const std::string& name = names[static_cast<int>(m)];
            if (ImGui::GetItemRectMax().x + 2.0f + ImGui::CalcTextSize(name.c_str()).x + button_pad <= panel_right) ImGui::SameLine(0, 2.0f);
            const bool on = mode == m;
            if (on) ImGui::PushStyleColor(ImGuiCol_Button, ImGui::GetStyleColorVec4(ImGuiCol_ButtonActive));
            if (ImGui::SmallButton(name.c_str())) pin.mode = m;
            if (on) ImGui::PopStyleColor();
            if (m == MapMode::BaseDifference && ImGui::IsItemHovered()) viz::Tooltip("SSA - base: all that fine-tuning changed");
        }
        const ImVec2 p0 = ImGui::GetCursorScreenPos();
        ImGui::InvisibleButton("##map", ImVec2(panel, panel));
        const bool hovered = ImGui::IsItemHovered();
        if (ImGui::IsItemClicked(ImGuiMouseButton_Left)) {
            if (ImGui::GetIO().KeyCtrl) unpin = ref;
            else state.selected = ref;
        }
        ImDrawList* draw = ImGui::GetWindowDrawList();
        const ImVec2 p1(p0.x + panel, p0.y + panel);
        if (tex.Valid()) draw->AddImage(tex.Id(), p0, p1);
        else draw->AddRectFilled(p0, p1, IM_COL32(40, 40, 46, 255));
        if (ref == state.selected) draw->AddRect(ImVec2(p0.x - 1.0f, p0.y - 1.0f), ImVec2(p1.x + 1.0f, p1.y + 1.0f), kSelectedColor, 0.0f, 0, 2.5f);
        else draw->AddRect(p0, p1, kPinnedColor, 0.0f, 0, 1.0f);
        const char* shows = MapModeLabel(mode);
        if (hovered) HeadTooltip(state, sum);
        ImGui::TextDisabled("map: %s", shows);
        // SSA's (the comparison's; the base's), each side named
        for (const auto& [key, label] : {std::pair<const char*, const char*>{"entropy", "entropy"}, {"sink_mass", "sink"}})
            ImGui::Text("%s %s (%s %s%s%s)", label, FormatNumber(sum.Get(key)).c_str(), compare_name.c_str(),
                        FormatNumber(sum.Get(key, Side::Compare)).c_str(), base ? "; base " : "",
                        base ? FormatNumber(sum.Get(key, Side::Base)).c_str() : "");
        ImGui::Text("JS to %s %s  tau_q %s", compare_name.c_str(), FormatNumber(sum.Get("js_divergence")).c_str(),
                    FormatNumber(sum.Get("tau_q_mean")).c_str());
        ImGui::PopTextWrapPos();
        ImGui::EndGroup();
        ImGui::PopID();
    }
    if (unpin) state.TogglePin(*unpin);
}

}  // namespace app
