#include "app/gui/views/view_head_table.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <numeric>

#include <imgui.h>

#include "app/core/names.h"
#include "app/gui/views/view_common.h"
#include "viz/imgui/widgets.h"

namespace app {
namespace {

// A column: the head's layer or index, a head value on one side, or the sink-head rule on one side
// (beside the value it reads). Every head value of the catalogue has a column; those it does not
// mark `shown` start hidden (right-click the header to show them).
struct Column {
    enum Kind { Layer, Head, Value, Sink } kind;
    const HeadValue* value = nullptr;
    Side side = Side::Ssa;
};

const std::vector<Column>& Columns() {
    static const std::vector<Column> columns = [] {
        std::vector<Column> out = {{Column::Layer}, {Column::Head}};
        for (const HeadValue& v : HeadValues())
            for (Side side : kAllSides) {
                if (!Has(v.quantity->sides, side)) continue;
                out.push_back({Column::Value, &v, side});
                if (v.quantity->sink) out.push_back({Column::Sink, &v, side});
            }
        return out;
    }();
    // ImGui 1.86 tables hold at most 64 columns: past that, this tab needs a column chooser.
    assert(columns.size() <= 64);
    return columns;
}

float Value(const HeadSummary& s, const Column& c, float eps) {
    switch (c.kind) {
        case Column::Layer: return static_cast<float>(s.ref.layer);
        case Column::Head: return static_cast<float>(s.ref.head);
        case Column::Value: return s.Get(*c.value, c.side);
        case Column::Sink: return IsSinkHead(s, c.side, eps) ? 1.0f : 0.0f;
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
    Caption(std::to_string(summary.size()) + " heads; means over query rows 2..T; click a row to select, Ctrl+click to pin");

    // Headers and help: "entropy" (SSA), "entropy vanilla" (the comparison), "sink" (the rule).
    const std::vector<Column>& columns = Columns();
    const int count = static_cast<int>(columns.size());
    std::vector<std::string> names(count), helps(count);
    std::vector<ImGuiTableColumnFlags> column_flags(count, 0);
    const std::string base_name = "base";
    for (int c = 0; c < count; ++c) {
        const Column& col = columns[c];
        const bool other = col.side != Side::Ssa;  // a column of the comparison or the base
        const std::string& other_name = col.side == Side::Base ? base_name : cmp;
        if (col.kind == Column::Layer) {
            names[c] = "layer", helps[c] = "Layer index (0 = first)", column_flags[c] = ImGuiTableColumnFlags_DefaultSort | ImGuiTableColumnFlags_NoHide;
            continue;
        }
        if (col.kind == Column::Head) {
            names[c] = "head", helps[c] = "Head index within the layer", column_flags[c] = ImGuiTableColumnFlags_NoHide;
            continue;
        }
        const Quantity& q = *col.value->quantity;
        const std::string side = other ? (col.side == Side::Base ? "the base model" : cmp) : "SSA";
        if (col.kind == Column::Sink) {
            char help[128];
            std::snprintf(help, sizeof help, "Sink head: mean first-token mass > eps = %.2f (slider in Sparsity), %s", eps, side.c_str());
            names[c] = other ? "sink " + other_name : "sink", helps[c] = help;
        } else {
            names[c] = other ? col.value->short_label + " " + other_name : col.value->short_label;
            helps[c] = side + ": " + col.value->help + (q.unit.empty() ? "" : ", " + q.unit);
        }
        if (q.larger_first) column_flags[c] |= ImGuiTableColumnFlags_PreferSortDescending;
        if (!Has(q.shown, col.side) || !col.value->Primary()) column_flags[c] |= ImGuiTableColumnFlags_DefaultHide;
        if (!HasSide(a, col.side)) column_flags[c] |= ImGuiTableColumnFlags_Disabled;  // the base's, without a base
    }

    const ImGuiTableFlags flags = ImGuiTableFlags_Sortable | ImGuiTableFlags_ScrollY | ImGuiTableFlags_ScrollX | ImGuiTableFlags_RowBg |
                                  ImGuiTableFlags_Borders | ImGuiTableFlags_Resizable | ImGuiTableFlags_SizingFixedFit |
                                  ImGuiTableFlags_Hideable | ImGuiTableFlags_Reorderable;
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    const ImVec2 size(ImGui::GetContentRegionAvail().x, std::max(ImGui::GetContentRegionAvail().y, 120.0f));
    if (!ImGui::BeginTable("##heads_table", count, flags, size)) return;
    ImGui::TableSetupScrollFreeze(2, 1);
    for (int c = 0; c < count; ++c) ImGui::TableSetupColumn(names[c].c_str(), column_flags[c]);
    ImGui::TableNextRow(ImGuiTableRowFlags_Headers);
    for (int c = 0; c < count; ++c) {
        if (!ImGui::TableSetColumnIndex(c)) continue;
        ImGui::TableHeader(names[c].c_str());
        if (ImGui::IsItemHovered()) viz::Tooltip("%s", helps[c].c_str());
    }

    // Sort when the user asks, the data changes, or eps moves (the sink column depends on it).
    if (ImGuiTableSortSpecs* specs = ImGui::TableGetSortSpecs()) {
        if (specs->SpecsDirty || m_sort_dirty || eps != m_sorted_eps) {
            const ImGuiTableColumnSortSpecs spec = specs->SpecsCount > 0 ? specs->Specs[0] : ImGuiTableColumnSortSpecs{};
            const bool descending = specs->SpecsCount > 0 && spec.SortDirection == ImGuiSortDirection_Descending;
            const Column& column = columns[specs->SpecsCount > 0 ? static_cast<int>(spec.ColumnIndex) : 0];
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
            ImGui::TableSetColumnIndex(0);
            char label[32];
            std::snprintf(label, sizeof label, "%d##row%d", s.ref.layer, m_order[r]);
            const bool selected = s.ref == state.selected;
            if (ImGui::Selectable(label, selected, ImGuiSelectableFlags_SpanAllColumns | ImGuiSelectableFlags_AllowItemOverlap)) {
                if (ImGui::GetIO().KeyCtrl) state.TogglePin(s.ref);
                else state.selected = m_last_selected = s.ref;
            }
            if (ImGui::IsItemHovered()) viz::Tooltip("%s: click to select, Ctrl+click to %s", HeadName(s.ref).c_str(), state.IsPinned(s.ref) ? "unpin" : "pin");
            if (r == scroll_to) ImGui::SetScrollHereY(0.5f);
            if (ImGui::TableSetColumnIndex(1)) {
                ImGui::Text("%d", s.ref.head);
                if (state.IsPinned(s.ref)) {
                    ImGui::SameLine(0, 4);
                    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(pinned_color), "pin");
                }
            }
            for (int c = 2; c < count; ++c) {
                if (!ImGui::TableSetColumnIndex(c)) continue;
                const Column& col = columns[c];
                if (col.kind == Column::Sink) {
                    if (!std::isfinite(s.Get(*col.value, col.side))) RightAligned("n/a", ImGui::GetColorU32(ImGuiCol_TextDisabled));
                    else if (IsSinkHead(s, col.side, eps)) RightAligned("yes", sink_color);
                    else RightAligned("no", ImGui::GetColorU32(ImGuiCol_TextDisabled));
                } else {
                    Number(Value(s, col, eps), col.value->quantity->format);
                }
            }
        }
    }
    ImGui::EndTable();
    state.regions["table"] = Rect{origin.x, origin.y, size.x, size.y};
}

}  // namespace app
