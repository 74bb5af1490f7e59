#include "app/gui/views/view_sparsity.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <imgui.h>

#include "app/core/names.h"
#include "app/gui/views/view_common.h"
#include "viz/imgui/plot.h"

namespace app {
namespace {

// As in the heatmap view: SSA orange, its comparison blue.
const ImU32 kSsaColor = IM_COL32(240, 145, 40, 255);
const ImU32 kCompareColor = IM_COL32(95, 160, 225, 255);

// One head's row of a [L, H, T] array, or NaNs when the analysis lacks it.
std::vector<float> HeadRow(const std::vector<float>* rows, const model::Analysis& a, HeadRef h) {
    const size_t at = a.RowIndex(h.layer, h.head);
    if (!rows || rows->size() < at + a.n_tokens) return std::vector<float>(a.n_tokens, NAN);
    return std::vector<float>(rows->begin() + static_cast<std::ptrdiff_t>(at), rows->begin() + static_cast<std::ptrdiff_t>(at + a.n_tokens));
}

// A collapsing section with a "(?)" at its right end; hovering either shows the help line.
bool Section(const char* title, const char* help) {
    const bool open = ImGui::CollapsingHeader(title, ImGuiTreeNodeFlags_DefaultOpen | ImGuiTreeNodeFlags_AllowItemOverlap);
    const bool header_hovered = ImGui::IsItemHovered();
    const float w = ImGui::CalcTextSize("(?)").x + ImGui::GetStyle().FramePadding.x * 2.0f;
    ImGui::SameLine(ImGui::GetWindowContentRegionMax().x - w);
    ImGui::TextDisabled("(?)");
    if (header_hovered || ImGui::IsItemHovered()) {
        ImGui::BeginTooltip();
        ImGui::PushTextWrapPos(ImGui::GetFontSize() * 32.0f);
        ImGui::TextUnformatted(help);
        ImGui::PopTextWrapPos();
        ImGui::EndTooltip();
    }
    return open;
}

float Mean(const std::vector<float>& v, size_t begin = 0) {
    double sum = 0;
    int n = 0;
    for (size_t i = begin; i < v.size(); ++i)
        if (std::isfinite(v[i])) sum += v[i], ++n;
    return n ? static_cast<float>(sum / n) : NAN;
}

}  // namespace

void SparsityView::Prepare(const model::Analysis& a) {
    const int T = a.n_tokens;
    m_summary = SummarizeHeads(a);
    m_positions.resize(T);
    for (int i = 0; i < T; ++i) m_positions[i] = static_cast<float>(i + 1);
    m_norm_mean = RowMeanOverHeads(a.metrics.Find("normalized_entropy"), a);
    m_norm_mean_compare = RowMeanOverHeads(a.metrics_compare.Find("normalized_entropy"), a);
    m_eig_var.clear();
    m_entropy.clear();
    m_sink.clear();
    m_sink_compare.clear();
    m_head_labels.clear();
    for (const HeadSummary& s : m_summary) {
        m_eig_var.push_back(s.Get("qk_eig_var"));
        m_entropy.push_back(s.Get("entropy"));
        m_sink.push_back(s.Get("sink_mass"));
        m_sink_compare.push_back(s.Get("sink_mass", Side::Compare));
        m_head_labels.push_back(HeadName(s.ref));
    }
    m_layer_labels.clear();
    for (int l = 0; l < a.n_layer; ++l) m_layer_labels.push_back("L" + std::to_string(l));
}

void SparsityView::Draw(WindowState& state) {
    if (DrawNoAnalysisNote(state)) return;
    const model::Analysis& a = *state.analysis;
    if (!SameAnalysis(m_for, state.analysis)) {
        m_for = state.analysis;
        Prepare(a);
    }
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    const float width = ImGui::GetContentRegionAvail().x;
    // Four plots share the column's height (headers, captions and the eps slider take ~11 lines);
    // below 150 px each the view scrolls instead.
    const float overhead = 11.0f * ImGui::GetFrameHeightWithSpacing();
    const float plot_h = std::clamp((ImGui::GetContentRegionAvail().y - overhead) / 4.0f, 150.0f, std::max(150.0f, width * 0.6f));
    const std::string cmp = CompareName(a);
    const bool twin = HasTwin(a);
    const HeadRef sel = state.selected;
    const int sel_index = sel.layer * a.n_head + sel.head;
    const int T = a.n_tokens;
    viz::PlotHit hit;

    // Scope of the two per-position plots.
    const std::string head_label = "selected head (" + HeadName(sel) + ")";
    if (ImGui::RadioButton(head_label.c_str(), !m_whole_model)) m_whole_model = false;
    ImGui::SameLine();
    if (ImGui::RadioButton("whole model", m_whole_model)) m_whole_model = true;
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("Dilution: mean over all heads per position; tau_q: all heads' values together");

    // (a) Attention dilution.
    if (Section("Attention dilution: normalised entropy by position",
                "Normalised entropy H_i / ln i of each query row i (1 = uniform over the i visible keys). Vanilla attention "
                "dilutes: its curve rises towards 1 as the context grows. SSA's temperatures should keep it flat and low. Click to select that query token.")) {
        std::vector<float> ssa, other;
        if (m_whole_model) {
            ssa = m_norm_mean;
            other = m_norm_mean_compare;
        } else {
            ssa = HeadRow(a.metrics.Find("normalized_entropy"), a, sel);
            other = HeadRow(a.metrics_compare.Find("normalized_entropy"), a, sel);
            if (T > 0) ssa[0] = other[0] = NAN;
        }
        const viz::PlotSeries series[] = {{"SSA", ssa.data(), T, m_positions.data(), kSsaColor},
                                          {cmp.c_str(), other.data(), T, m_positions.data(), kCompareColor}};
        viz::PlotAxes axes;
        axes.x_label = "query position i";
        axes.y_label = m_whole_model ? "H_i / ln i, mean over heads" : "H_i / ln i";
        axes.y_range = viz::Range{0.0f, 1.05f};
        if (state.query >= 0) axes.x_line = static_cast<float>(state.query + 1);
        hit = viz::LinePlot("##dilution", ImVec2(0, plot_h), series, 2, axes);
        if (hit.clicked && hit.index >= 0) state.query = hit.index;
        ImGui::TextDisabled("mean over rows 2..T: SSA %.3f, %s %.3f", Mean(ssa, 1), cmp.c_str(), Mean(other, 1));
    }

    // (b) Temperatures.
    if (Section("Query temperature tau_q", "Distribution of the query temperatures tau_q(i). tau_q > 1 sharpens a row's "
                                           "attention, < 1 flattens it; vanilla attention is tau = 1 (the vertical line).")) {
        std::vector<float> values, values_compare;
        if (m_whole_model) {
            values = a.tau_q;
            if (twin) values_compare = a.tau_q_compare;
        } else {
            values = HeadRow(&a.tau_q, a, sel);
            if (twin) values_compare = HeadRow(&a.tau_q_compare, a, sel);
        }
        std::vector<viz::PlotSeries> series = {{"SSA", values.data(), static_cast<int>(values.size()), nullptr, kSsaColor}};
        if (twin) series.push_back({cmp.c_str(), values_compare.data(), static_cast<int>(values_compare.size()), nullptr, kCompareColor});
        viz::PlotAxes axes;
        axes.x_label = "tau_q";
        axes.y_label = m_whole_model ? "tokens x heads" : "tokens";
        axes.x_line = 1.0f;
        viz::Histogram("##tau_q", ImVec2(0, plot_h), series.data(), static_cast<int>(series.size()), 0, axes);
        float lo = INFINITY, hi = -INFINITY;
        for (float v : values)
            if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
        if (lo <= hi) ImGui::TextDisabled("SSA mean %.3f, min %.3f, max %.3f over %zu values", Mean(values), lo, hi, values.size());
    }

    // (c) QK spectrum against entropy.
    if (Section("QK eigenvalue variance vs entropy (all heads)",
                "Each point is a head: the variance of the real parts of the eigenvalues of W_k^T W_q / sqrt(d_h) against "
                "its mean attention entropy. Bao et al. link small variance to localized (low-entropy) attention. Click a "
                "point to select the head.")) {
        viz::PlotAxes axes;
        axes.x_label = "QK eigenvalue variance";
        axes.y_label = "mean entropy (nats)";
        hit = viz::ScatterPlot("##qk", ImVec2(0, plot_h), m_eig_var.data(), m_entropy.data(), static_cast<int>(m_entropy.size()),
                               m_head_labels.data(), sel_index, axes);
        if (hit.clicked && hit.index >= 0) state.selected = m_summary[hit.index].ref;
    }

    // (d) Attention sinks.
    if (Section("Attention sinks: first-token mass per head",
                "Mean weight each head puts on the first token (rows 2..T). Heads above eps are sink heads (Gu et al.); "
                "the sink ratio is their share. Dim bars are below eps. Click a bar to select the head.")) {
        float& eps = state.settings.sink_epsilon;
        ImGui::SetNextItemWidth(std::min(220.0f, width * 0.5f));
        ImGui::SliderFloat("sink threshold eps", &eps, 0.05f, 0.95f, "%.2f");
        const int heads = static_cast<int>(m_summary.size());
        int sinks = 0, sinks_compare = 0;
        for (const HeadSummary& s : m_summary) {
            sinks += IsSinkHead(s, Side::Ssa, eps) ? 1 : 0;
            sinks_compare += IsSinkHead(s, Side::Compare, eps) ? 1 : 0;
        }
        const float ratio = heads ? static_cast<float>(sinks) / heads : 0.0f, ratio_compare = heads ? static_cast<float>(sinks_compare) / heads : 0.0f;
        ImGui::Text("sink ratio: SSA %.2f (%d of %d heads), %s %.2f (%d of %d)", ratio, sinks, heads, cmp.c_str(), ratio_compare,
                    sinks_compare, heads);
        const viz::PlotSeries series[] = {{"SSA", m_sink.data(), heads, nullptr, kSsaColor},
                                          {cmp.c_str(), m_sink_compare.data(), heads, nullptr, kCompareColor}};
        char line_label[32];
        std::snprintf(line_label, sizeof line_label, "eps %.2f", eps);
        viz::PlotAxes axes;
        axes.y_label = "first-token mass";
        axes.y_line = eps;  // the range follows the bars and eps, so small masses stay visible
        axes.y_line_label = line_label;
        hit = viz::BarChart("##sinks", ImVec2(0, plot_h), series, 2, m_head_labels.data(), sel_index, axes,
                            viz::BarGroups{a.n_head, m_layer_labels.data()});
        if (hit.clicked && hit.index >= 0) state.selected = m_summary[hit.index].ref;
    }

    const float bottom = ImGui::GetCursorScreenPos().y;
    state.regions["sparsity"] = Rect{origin.x, origin.y, width, bottom - origin.y};
}

}  // namespace app
