#include "app/gui/views/view_matrix.h"

#include <algorithm>
#include <cfloat>
#include <cmath>

#include <imgui.h>

#include "app/core/names.h"
#include "app/export/export_figures.h"
#include "app/gui/views/view_common.h"
#include "viz/imgui/widgets.h"

namespace app {
namespace {

const ImU32 kSelectedColor = IM_COL32(255, 230, 90, 255);
const ImU32 kPinnedColor = IM_COL32(80, 215, 255, 255);

// Black or white ink, whichever reads better on the cell (WCAG relative luminance).
ImU32 InkOn(viz::Rgba8 c) {
    auto lin = [](uint8_t v) {
        const float s = v / 255.0f;
        return s <= 0.04045f ? s / 12.92f : std::pow((s + 0.055f) / 1.055f, 2.4f);
    };
    const float y = 0.2126f * lin(c.r) + 0.7152f * lin(c.g) + 0.0722f * lin(c.b);
    return y > 0.179f ? IM_COL32(0, 0, 0, 255) : IM_COL32(255, 255, 255, 255);
}

// The Run tab's steps to sparsity as a matrix value, once a run's timeline has run
// (StepsToSparsityValues; never reached: a grey cell).
constexpr const char* kStepsKey = kStepsToSparsityKey;

}  // namespace

void HeadMatrixView::Draw(WindowState& state) {
    if (DrawNoAnalysisNote(state)) return;
    const model::Analysis& a = *state.analysis;
    const int L = a.n_layer, H = a.n_head;
    if (L == 0 || H == 0) return;
    m_summaries.Update(state);
    const std::vector<HeadSummary>& summary = m_summaries.Get();
    std::string& key = state.settings.matrix_metric;
    const RunTrack* run = state.timeline && state.timeline->timeline.n_layer == L && state.timeline->timeline.n_head == H &&
                                  !state.timeline->timeline.steps.empty()
                              ? state.timeline.get() : nullptr;
    const bool steps = key == kStepsKey && run;
    const HeadValue* found = FindHeadValue(key);
    const HeadValue& metric = found ? *found : HeadValues().front();
    const Quantity& quantity = *metric.quantity;
    const std::string cmp = steps ? "compare run" : CompareName(a);
    const std::string label = steps ? "steps to sparsity" : metric.label;

    // Controls: the metric, and which side (SSA, comparison, difference) when it has two.
    ImGui::AlignTextToFramePadding();
    ImGui::TextUnformatted("Metric");
    ImGui::SameLine();
    // Wide enough for the chosen metric's name ("JS drift (tau = 1 to base)" was cut), within the pane.
    const float combo_w = ImGui::CalcTextSize(label.c_str()).x + ImGui::GetFrameHeight() + 2.0f * ImGui::GetStyle().FramePadding.x;
    ImGui::SetNextItemWidth(std::min(std::max(ImGui::GetFontSize() * 11.0f, combo_w), ImGui::GetContentRegionAvail().x));
    const char* kStepsHelp = "the training run's (Run tab): the first step at which the head's mean entropy on the text is below "
                             "half of its entropy at the run's first step; grey: never";
    if (ImGui::BeginCombo("##matrix_metric", label.c_str())) {
        for (const HeadValue& v : HeadValues()) {
            if (ImGui::Selectable(v.label.c_str(), !steps && &metric == &v)) key = v.key;
            if (ImGui::IsItemHovered()) viz::Tooltip("%s", v.help.c_str());
        }
        if (run) {
            ImGui::Separator();
            if (ImGui::Selectable("steps to sparsity", steps)) key = kStepsKey;
            if (ImGui::IsItemHovered()) viz::Tooltip("%s", kStepsHelp);
        }
        ImGui::EndCombo();
    }
    // With a base also the base's values and SSA's minus them: what fine-tuning did to each head.
    const bool base = !steps && a.HasBase();
    if (IsBaseMode(m_side) && !base) m_side = MapMode::Ssa;
    // The radios show the side drawn: a one-sided quantity (JS to base) is SSA's whatever was chosen before.
    const MapMode drawn = steps ? (run->compare ? m_side : MapMode::Ssa) : quantity.ShownMode(m_side);
    ImGui::BeginDisabled(steps ? !run->compare : !quantity.TwoSided());
    for (MapMode side : kAllMapModes) {
        if (IsBaseMode(side) && !base) continue;
        const char* name = side == MapMode::Ssa          ? (steps ? "run" : "SSA")
                           : side == MapMode::Compare    ? cmp.c_str()
                           : side == MapMode::Difference ? "difference"
                                                         : MapModeLabel(side);
        SameLineIfFits(ImGui::GetFrameHeight() + ImGui::GetStyle().ItemInnerSpacing.x + ImGui::CalcTextSize(name).x);
        ImGui::PushID(static_cast<int>(side));
        if (ImGui::RadioButton(name, drawn == side)) m_side = side;
        if (side == MapMode::BaseDifference && ImGui::IsItemHovered())
            viz::Tooltip("SSA's value minus the base model's: what fine-tuning did to each head");
        ImGui::PopID();
    }
    ImGui::EndDisabled();
    const MapMode side = drawn;
    const bool difference = IsDifference(side);

    std::vector<float> values(summary.size());
    if (steps) values = StepsToSparsityValues(run->timeline, run->compare ? &*run->compare : nullptr, side);
    else
        for (size_t k = 0; k < summary.size(); ++k) values[k] = summary[k].Get(metric, side);
    float lo = INFINITY, hi = -INFINITY;
    for (float v : values)
        if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
    // Colours: around 1 for temperatures (the token strip's rule over the heads' means), around 0
    // for a difference, from 0 for a divergence, else the metric's range. With a base the three JS
    // take the Fine-tune tab's scale (finetune.png's): one value, one colour in both tabs.
    viz::Colormap colormap = state.settings.colormap;
    viz::Range range{lo, hi > lo ? hi : lo + 1e-6f};
    viz::Range shown = range;  // the part of it the colour bar shows: the part of a temperature scale the heads reach
    if (difference) {
        const float d = lo <= hi ? std::max({1e-6f, std::abs(lo), std::abs(hi)}) : 1e-6f;
        range = shown = {-d, d};
        colormap = viz::Colormap::Diverging;
    } else if (!steps && quantity.scale == Scale::AroundOne && (side == MapMode::Ssa || side == MapMode::Base)) {
        const TemperatureScale scale = TemperatureScaleOver(lo, hi);  // the token strip's rule, over the heads' values
        range = scale.range;
        shown = scale.used;
        colormap = viz::Colormap::Diverging;
    } else if (!steps && quantity.scale == Scale::FromZero && lo >= 0.0f) {
        range = shown = {0.0f, std::max(hi, 1e-6f)};
        if (a.HasBase() && (metric.key == "js_divergence" || metric.key == "js_total" || metric.key == "js_drift")) {
            if (!SameAnalysis(m_parts_for, state.analysis)) m_parts_for = state.analysis, m_parts = model::Decompose(a);
            if (!m_parts.empty()) range = shown = FineTuneRange(m_parts, /*log_scale=*/false);
        }
    }
    state.scales["matrix"] = range;
    ImGui::PushTextWrapPos(0.0f);  // what the cells hold, wrapped in a narrow pane rather than cut
    if (steps)
        ImGui::TextDisabled("%s%s, %s", side == MapMode::Difference ? "run - compare run: " : side == MapMode::Compare ? "compare run: " : "",
                            label.c_str(), kStepsHelp);
    else
        ImGui::TextDisabled("%s%s%s%s, %s", side == MapMode::Difference ? "SSA - " : side == MapMode::BaseDifference ? "SSA - base: " : "",
                            side == MapMode::Compare ? (cmp + " ").c_str() : side == MapMode::Base ? "base " : "", metric.label.c_str(),
                            quantity.unit.empty() ? "" : (", " + quantity.unit).c_str(), metric.help.c_str());
    ImGui::PopTextWrapPos();

    // Cells as wide as the pane allows. With numbers, never narrower than one: past that the matrix
    // scrolls. Without (the default when the numbered matrix would be over 2.5 times the pane's width,
    // e.g. 32 heads a layer), the whole matrix fits the pane as a heatmap, each head's number on hover.
    const float line = ImGui::GetTextLineHeight();
    const float label_w = ImGui::CalcTextSize("L00").x + 6.0f;
    const float bar_w = viz::ColorBarWidth();
    const float avail = ImGui::GetContentRegionAvail().x - bar_w - 8.0f;
    // At least as wide as every cell's compact number ("8.3e-4", "1234567" overflowed a cell sized for "-.055").
    // A grid with values below 0.001 writes every compact number in powers of ten (".0011" beside
    // "9.1e-5" read as two kinds of number).
    const bool tiny = std::any_of(values.begin(), values.end(), [](float v) { return std::isfinite(v) && v != 0.0f && std::abs(v) < 0.001f; });
    auto compact = [tiny](float v) { return tiny ? FormatPowerOfTen(v) : FormatCompact(v); };
    float min_w = ImGui::CalcTextSize("-.055").x + 6.0f;
    for (int k = 0; k < L * H; ++k) min_w = std::max(min_w, ImGui::CalcTextSize(compact(values[k]).c_str()).x + 6.0f);
    const float fit_w = std::floor((avail - label_w) / H);
    if (fit_w < min_w) {
        bool on = m_numbers.value_or(label_w + H * min_w <= 2.5f * avail);
        if (ImGui::Checkbox("numbers in the cells", &on)) m_numbers = on;
        if (ImGui::IsItemHovered())
            viz::Tooltip("Off: the whole matrix fits the pane (hover a cell for its numbers). On: cells wide enough for a number,\n"
                              "and the matrix scrolls; its labels stay at the edges.");
    }
    const bool numbers = fit_w >= min_w || m_numbers.value_or(label_w + H * min_w <= 2.5f * avail);
    const float cell_w = numbers ? std::max(min_w, std::min(line * 4.0f, fit_w)) : std::max(6.0f, fit_w);
    const float cell_h = std::max(line + 4.0f, std::min(cell_w * 0.6f, line * 2.0f));
    const float grid_w = label_w + H * cell_w, grid_h = line + 2.0f + L * cell_h;
    // One number format for every cell: FormatNumber's where each fits, else each one's compact form
    // (".00083" beside "4.1e-05" read as two kinds of number).
    bool full = numbers;
    for (int k = 0; k < L * H && full; ++k) full = cell_w >= ImGui::CalcTextSize(FormatNumber(values[k]).c_str()).x + 6.0f;
    const float child_h = std::min(grid_h + ImGui::GetStyle().ScrollbarSize + 4.0f, ImGui::GetContentRegionAvail().y);
    const ImVec2 child_pos = ImGui::GetCursorScreenPos();
    ImGui::BeginChild("##matrix", ImVec2(avail, child_h), false, ImGuiWindowFlags_HorizontalScrollbar);
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    ImDrawList* draw = ImGui::GetWindowDrawList();
    const float top = origin.y + line + 2.0f;
    int hovered = -1;
    for (int l = 0; l < L; ++l) {
        for (int h = 0; h < H; ++h) {
            const int k = l * H + h;
            const ImVec2 p0(origin.x + label_w + h * cell_w, top + l * cell_h), p1(p0.x + cell_w - 1.0f, p0.y + cell_h - 1.0f);
            if (!ImGui::IsRectVisible(p0, p1)) continue;
            ImGui::SetCursorScreenPos(p0);
            ImGui::PushID(k);
            ImGui::InvisibleButton("##cell", ImVec2(cell_w - 1.0f, cell_h - 1.0f));
            ImGui::PopID();
            if (ImGui::IsItemHovered()) hovered = k;
            HandleHeadClick(state, {l, h});
            const float v = values[k];
            const viz::Rgba8 c = std::isfinite(v) ? viz::SampleColormap(colormap, viz::Normalize(v, range, false)) : viz::Rgba8{60, 60, 66, 255};
            draw->AddRectFilled(p0, p1, IM_COL32(c.r, c.g, c.b, 255));
            if (numbers) {
                const std::string number = full ? FormatNumber(v) : compact(v);
                const ImVec2 ts = ImGui::CalcTextSize(number.c_str());
                draw->AddText(ImVec2(p0.x + (cell_w - 1.0f - ts.x) * 0.5f, p0.y + (cell_h - 1.0f - ts.y) * 0.5f), InkOn(c), number.c_str());
            }
            const HeadRef ref{l, h};
            if (state.IsPinned(ref)) draw->AddRect(p0, p1, kPinnedColor, 0.0f, 0, 1.5f);
            if (ref == state.selected) draw->AddRect(ImVec2(p0.x - 1, p0.y - 1), ImVec2(p1.x + 1, p1.y + 1), kSelectedColor, 0.0f, 0, 2.5f);
        }
    }
    DrawGridLabels(draw, {origin, label_w, line + 2.0f, ImVec2(cell_w, cell_h), ImVec2(cell_w - 1.0f, cell_h - 1.0f)}, L, H, state.selected);
    if (hovered >= 0 && steps) {
        auto shown = [](float v) { return std::isfinite(v) ? FormatNumber(v) : std::string("never"); };
        const RunTimeline* other_run = run->compare ? &*run->compare : nullptr;
        const std::vector<float> own = StepsToSparsityValues(run->timeline, other_run, MapMode::Ssa),
                                 other = StepsToSparsityValues(run->timeline, other_run, MapMode::Compare);
        viz::Tooltip("L%d H%d: steps to sparsity %s (run)%s", hovered / H, hovered % H, shown(own[hovered]).c_str(),
                          run->compare ? (", " + shown(other[hovered]) + " (compare run)").c_str() : "");
    } else if (hovered >= 0) {
        HeadTooltip(state, summary[hovered]);
    }
    ImGui::SetCursorScreenPos(ImVec2(origin.x, origin.y + grid_h));
    ImGui::Dummy(ImVec2(grid_w, 0.0f));
    ImGui::EndChild();
    const float shown_w = std::min(grid_w, avail);
    ImGui::SetCursorScreenPos(ImVec2(child_pos.x + shown_w + 6.0f, child_pos.y + line + 2.0f));
    viz::ColorBar("##matrix_colorbar", label.c_str(), colormap, range, false, ImVec2(bar_w, std::max(line * 4, std::min(L * cell_h, child_h - line - 2.0f))),
                  shown);
    ImGui::SetCursorScreenPos(ImVec2(child_pos.x, child_pos.y + child_h));
    ImGui::Dummy(ImVec2(shown_w, 0.0f));
    state.regions["matrix"] = Rect{child_pos.x, child_pos.y, shown_w, child_h};
    state.regions["matrix_cell"] = Rect{0, 0, cell_w, cell_h};  // for tests: a cell's size
    Caption("click: select   Ctrl+click: pin   hover: the head's numbers", "   ");
}

}  // namespace app
