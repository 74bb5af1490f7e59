#include "app/gui/views/view_head_table.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include <imgui.h>

#include "app/core/names.h"
#include "app/gui/views/view_common.h"

namespace app {
namespace {

enum Column {
    kLayer,
    kHead,
    kEntropy,
    kEntropyCompare,
    kNormalizedEntropy,
    kSpikiness,
    kSinkMass,
    kSinkHead,
    kJs,
    kL1,
    kTauQ,
    kTauV,
    kQkOpnorm,
    kQkEigVar,
    kColumnCount
};

float Value(const HeadSummary& s, int column, float eps) {
    switch (column) {
        case kLayer: return static_cast<float>(s.ref.layer);
        case kHead: return static_cast<float>(s.ref.head);
        case kEntropy: return s.entropy;
        case kEntropyCompare: return s.entropy_compare;
        case kNormalizedEntropy: return s.normalized_entropy;
        case kSpikiness: return s.spikiness;
        case kSinkMass: return s.sink_mass;
        case kSinkHead: return IsSinkHead(s.sink_mass, eps) ? 1.0f : 0.0f;
        case kJs: return s.js;
        case kL1: return s.l1;
        case kTauQ: return s.tau_q_mean;
        case kTauV: return s.tau_v_mean;
        case kQkOpnorm: return s.qk_opnorm;
        case kQkEigVar: return s.qk_eig_var;
    }
    return NAN;
}

void RightAligned(const char* text, ImU32 color = 0) {
    const float w = ImGui::CalcTextSize(text).x, avail = ImGui::GetContentRegionAvail().x;
    if (avail > w) ImGui::SetCursorPosX(ImGui::GetCursorPosX() + avail - w);
    if (color) ImGui::PushStyleColor(ImGuiCol_Text, color);
    ImGui::TextUnformatted(text);
    if (color) ImGui::PopStyleColor();
}

void Number(float v, const char* format) {
    char buf[32];
    if (!std::isfinite(v)) {
        RightAligned("n/a", ImGui::GetColorU32(ImGuiCol_TextDisabled));
        return;
    }
    std::snprintf(buf, sizeof buf, format, v);
    RightAligned(buf);
}

}  // namespace

void HeadTableView::Draw(WindowState& state) {
    if (DrawNoAnalysisNote(state)) return;
    const model::Analysis& a = *state.analysis;
    if (m_summaries.Update(state)) {
        m_order.resize(m_summaries.Get().size());
        std::iota(m_order.begin(), m_order.end(), 0);
        m_sort_dirty = true;
    }
    const std::vector<HeadSummary>& summary = m_summaries.Get();
    const float eps = state.settings.sink_epsilon;
    const std::string cmp = CompareName(a);
    ImGui::TextDisabled("%d heads; means over query rows 2..T; click a row to select, Ctrl+click to pin", static_cast<int>(summary.size()));

    struct ColumnInfo {
        std::string name;
        std::string help;
        const char* format;
        ImGuiTableColumnFlags flags;
    };
    char eps_text[96];
    std::snprintf(eps_text, sizeof eps_text, "Sink head: mean first-token mass > eps = %.2f (slider in Sparsity), SSA", eps);
    const ColumnInfo columns[kColumnCount] = {
        {"layer", "Layer index (0 = first)", "%.0f", ImGuiTableColumnFlags_DefaultSort},
        {"head", "Head index within the layer", "%.0f", 0},
        {"entropy", "SSA attention entropy -sum p ln p, nats (lower = sharper)", "%.3f", 0},
        {"entropy " + cmp, "Attention entropy of the comparison (" + cmp + "), nats", "%.3f", 0},
        {"norm. entropy", "SSA entropy / ln i: 1 = uniform over the i visible keys, 0 = one key", "%.3f", 0},
        {"spikiness", "SSA 1 / (i sum p^2): 1 for a uniform row, 1/i for one-hot (lower = spikier)", "%.3f", 0},
        {"sink mass", "SSA weight on the first token, 0..1", "%.3f", ImGuiTableColumnFlags_PreferSortDescending},
        {"sink", eps_text, "", ImGuiTableColumnFlags_PreferSortDescending},
        {"JS", "Jensen-Shannon divergence of SSA rows from the " + cmp + " rows, nats (0 = same)", "%.4f",
         ImGuiTableColumnFlags_PreferSortDescending},
        {"L1", "L1 distance sum_j |p - p'| of SSA rows from the " + cmp + " rows, 0..2", "%.3f", ImGuiTableColumnFlags_PreferSortDescending},
        {"tau_q", "Mean query temperature tau_q over all tokens (1 = vanilla)", "%.3f", 0},
        {"tau_v", "Mean value temperature tau_v over all tokens (1 = vanilla)", "%.3f", 0},
        {"QK opnorm", "Operator norm ||W_q W_k^T / sqrt(d_h)||_2 of the head", "%.3g", 0},
        {"QK eig var", "Variance of the real parts of the eigenvalues of W_k^T W_q / sqrt(d_h); small = localized (Bao et al.)",
         "%.3g", 0},
    };

    const ImGuiTableFlags flags = ImGuiTableFlags_Sortable | ImGuiTableFlags_ScrollY | ImGuiTableFlags_ScrollX | ImGuiTableFlags_RowBg |
                                  ImGuiTableFlags_Borders | ImGuiTableFlags_Resizable | ImGuiTableFlags_SizingFixedFit |
                                  ImGuiTableFlags_Hideable | ImGuiTableFlags_Reorderable;
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    const ImVec2 size(ImGui::GetContentRegionAvail().x, std::max(ImGui::GetContentRegionAvail().y, 120.0f));
    if (!ImGui::BeginTable("##heads_table", kColumnCount, flags, size)) return;
    ImGui::TableSetupScrollFreeze(2, 1);
    for (int c = 0; c < kColumnCount; ++c) ImGui::TableSetupColumn(columns[c].name.c_str(), columns[c].flags | (c < 2 ? ImGuiTableColumnFlags_NoHide : 0));
    ImGui::TableNextRow(ImGuiTableRowFlags_Headers);
    for (int c = 0; c < kColumnCount; ++c) {
        if (!ImGui::TableSetColumnIndex(c)) continue;
        ImGui::TableHeader(columns[c].name.c_str());
        if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", columns[c].help.c_str());
    }

    // Sort when the user asks, the data changes, or eps moves (the sink column depends on it).
    if (ImGuiTableSortSpecs* specs = ImGui::TableGetSortSpecs()) {
        if (specs->SpecsDirty || m_sort_dirty || eps != m_sorted_eps) {
            const ImGuiTableColumnSortSpecs spec = specs->SpecsCount > 0 ? specs->Specs[0] : ImGuiTableColumnSortSpecs{};
            const bool descending = specs->SpecsCount > 0 && spec.SortDirection == ImGuiSortDirection_Descending;
            const int column = specs->SpecsCount > 0 ? static_cast<int>(spec.ColumnIndex) : static_cast<int>(kLayer);
            std::stable_sort(m_order.begin(), m_order.end(), [&](int x, int y) {
                const float vx = Value(summary[x], column, eps), vy = Value(summary[y], column, eps);
                const bool fx = std::isfinite(vx), fy = std::isfinite(vy);
                if (fx != fy) return fx;  // n/a last either way
                if (fx && vx != vy) return descending ? vx > vy : vx < vy;
                return x < y;
            });
            specs->SpecsDirty = false;
            m_sort_dirty = false;
            m_sorted_eps = eps;
        }
    }

    // Bring the selected row into view when the selection changed elsewhere.
    int scroll_to = -1;
    if (state.selected != m_last_selected) {
        for (size_t r = 0; r < m_order.size(); ++r)
            if (summary[m_order[r]].ref == state.selected) scroll_to = static_cast<int>(r);
        m_last_selected = state.selected;
    }
    const ImU32 pinned_color = IM_COL32(80, 215, 255, 255), sink_color = IM_COL32(255, 190, 70, 255);
    ImGuiListClipper clipper;
    clipper.Begin(static_cast<int>(m_order.size()));
    if (scroll_to >= 0) clipper.ForceDisplayRangeByIndices(scroll_to, scroll_to + 1);
    while (clipper.Step()) {
        for (int r = clipper.DisplayStart; r < clipper.DisplayEnd; ++r) {
            const HeadSummary& s = summary[m_order[r]];
            ImGui::TableNextRow();
            ImGui::TableSetColumnIndex(kLayer);
            char label[32];
            std::snprintf(label, sizeof label, "%d##row%d", s.ref.layer, m_order[r]);
            const bool selected = s.ref == state.selected;
            if (ImGui::Selectable(label, selected, ImGuiSelectableFlags_SpanAllColumns | ImGuiSelectableFlags_AllowItemOverlap)) {
                if (ImGui::GetIO().KeyCtrl) state.TogglePin(s.ref);
                else state.selected = m_last_selected = s.ref;
            }
            if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s: click to select, Ctrl+click to %s", HeadName(s.ref).c_str(), state.IsPinned(s.ref) ? "unpin" : "pin");
            if (r == scroll_to) ImGui::SetScrollHereY(0.5f);
            if (ImGui::TableSetColumnIndex(kHead)) {
                ImGui::Text("%d", s.ref.head);
                if (state.IsPinned(s.ref)) {
                    ImGui::SameLine(0, 4);
                    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(pinned_color), "pin");
                }
            }
            for (int c = kEntropy; c < kColumnCount; ++c) {
                if (!ImGui::TableSetColumnIndex(c)) continue;
                if (c == kSinkHead) {
                    if (!std::isfinite(s.sink_mass)) RightAligned("n/a", ImGui::GetColorU32(ImGuiCol_TextDisabled));
                    else if (IsSinkHead(s.sink_mass, eps)) RightAligned("yes", sink_color);
                    else RightAligned("no", ImGui::GetColorU32(ImGuiCol_TextDisabled));
                } else {
                    Number(Value(s, c, eps), columns[c].format);
                }
            }
        }
    }
    ImGui::EndTable();
    state.regions["table"] = Rect{origin.x, origin.y, size.x, size.y};
}

}  // namespace app
