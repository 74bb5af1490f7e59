#include "app/gui/views/view_sparsity.h"

#include <algorithm>

#include <imgui.h>

#include "app/core/names.h"
#include "app/export/export_figures.h"
#include "app/export/plots.h"
#include "app/gui/views/view_common.h"
#include "viz/imgui/plot.h"
#include "viz/imgui/widgets.h"

namespace app {
namespace {

// A collapsing section with a "(?)" at its right end where the title leaves room (a narrow pane
// drops it rather than draw it over the title); hovering either shows the help line.
bool Section(const char* title, const char* help) {
    const bool open = ImGui::CollapsingHeader(title, ImGuiTreeNodeFlags_DefaultOpen | ImGuiTreeNodeFlags_AllowItemOverlap);
    bool hovered = ImGui::IsItemHovered();
    const ImGuiStyle& style = ImGui::GetStyle();
    const float w = ImGui::CalcTextSize("(?)").x + style.FramePadding.x * 2.0f;
    const float title_end = ImGui::GetItemRectMin().x + style.FramePadding.x * 3.0f + ImGui::GetFontSize() + ImGui::CalcTextSize(title).x;
    if (title_end + w <= ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x) {
        ImGui::SameLine(ImGui::GetWindowContentRegionMax().x - w);
        ImGui::TextDisabled("(?)");
        hovered = hovered || ImGui::IsItemHovered();
    }
    if (hovered) {
        ImGui::BeginTooltip();
        ImGui::PushTextWrapPos(ImGui::GetFontSize() * 32.0f);
        ImGui::TextUnformatted(help);
        ImGui::PopTextWrapPos();
        ImGui::EndTooltip();
    }
    return open;
}

}  // namespace

void SparsityView::Refresh(const WindowState& state) {
    const bool new_analysis = m_heads.Update(state);
    const float eps = state.settings.sink_epsilon;
    if (!new_analysis && SameAnalysis(m_shown.analysis, state.analysis) && m_shown.whole_model == m_whole_model &&
        m_shown.selected == state.selected && m_shown.query == state.query && m_shown.sink_epsilon == eps)
        return;
    m_shown = {state.analysis, m_whole_model, state.selected, state.query, eps};
    PlotInput input(*state.analysis, m_heads.Get(), state.model ? ModelName(*state.model) : "", eps);
    input.selected = state.selected;
    input.head_scope = !m_whole_model;
    input.query = state.query;
    m_plots.clear();
    m_notes.clear();
    for (const AnalysisPlot& p : SparsityPlots()) {
        m_plots.push_back(p.build(input));
        m_notes.push_back(p.note ? p.note(input, m_plots.back()) : "");
    }
}

void SparsityView::Draw(WindowState& state) {
    if (DrawNoAnalysisNote(state)) return;
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    const float width = ImGui::GetContentRegionAvail().x;
    // Four plots share the column's height (headers, captions and the eps slider take ~11 lines);
    // below 150 px each the view scrolls instead.
    const float overhead = 11.0f * ImGui::GetFrameHeightWithSpacing();
    const float plot_h = std::clamp((ImGui::GetContentRegionAvail().y - overhead) / 4.0f, 150.0f, std::max(150.0f, width * 0.6f));

    // Scope of the per-position plots.
    const std::string head_label = "selected head (" + HeadName(state.selected) + ")";
    if (ImGui::RadioButton(head_label.c_str(), !m_whole_model)) m_whole_model = false;
    ImGui::SameLine();
    if (ImGui::RadioButton("whole model", m_whole_model)) m_whole_model = true;
    if (ImGui::IsItemHovered()) viz::Tooltip("Dilution: mean over all heads per position; tau_q: all heads' values together");
    Refresh(state);

    const std::vector<AnalysisPlot>& plots = SparsityPlots();
    for (size_t k = 0; k < plots.size(); ++k) {
        const AnalysisPlot& p = plots[k];
        if (!Section(p.header, p.help)) continue;
        if (p.sink_threshold) {
            ImGui::SetNextItemWidth(std::min(220.0f, width * 0.5f));
            if (ImGui::SliderFloat("sink threshold eps", &state.settings.sink_epsilon, 0.05f, 0.95f, "%.2f")) Refresh(state);
            WrappedLine(m_notes[k], ", ");  // three sides beside a base: wider than the pane; "tau = 1: 0.802" kept whole
        }
        const std::string id = std::string("##") + p.key;
        const viz::PlotHit hit = viz::DrawPlot(id.c_str(), ImVec2(0, plot_h), m_plots[k]);
        if (!p.sink_threshold && !m_notes[k].empty()) Caption(m_notes[k], ", ");  // "tau = 1: 0.802" kept whole
        if (!hit.clicked || hit.index < 0) continue;
        if (p.pick == PlotPick::Query) state.query = hit.index;
        if (p.pick == PlotPick::Head && hit.index < static_cast<int>(m_heads.Get().size())) state.selected = m_heads.Get()[hit.index].ref;
    }

    const float bottom = ImGui::GetCursorScreenPos().y;
    state.regions["sparsity"] = Rect{origin.x, origin.y, width, bottom - origin.y};
}

}  // namespace app
