#include "app/gui/views/view_predictions.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <imgui.h>

#include "app/core/names.h"
#include "app/gui/views/view_common.h"
#include "viz/imgui/widgets.h"
#include "viz/palette.h"

namespace app {
namespace {

const ImVec4 kActual(1.0f, 0.85f, 0.4f, 1.0f);  // the text's actual next token

// Token id's label from the vocabulary the worker sent (control characters escaped).
std::string IdLabel(const AppState& state, int32_t id) {
    if (state.vocab && id >= 0 && static_cast<size_t>(id) < state.vocab->size()) return "'" + TokenLabel((*state.vocab)[id]) + "'";
    return "#" + std::to_string(id);
}

// One side's top-k cell: a bar of the probability behind the token's label, the value at the right.
// A side's colour (viz/palette.h: SSA orange, its comparison blue, a base violet, as every view
// draws them) under the text of a cell.
ImU32 Translucent(viz::Rgba8 c) { return IM_COL32(c.r, c.g, c.b, 100); }

void PredictionCell(const AppState& state, const std::string& side, int rank, int32_t id, float p, bool actual, ImU32 bar) {
    const float w = ImGui::GetContentRegionAvail().x, h = ImGui::GetTextLineHeight();
    const ImVec2 at = ImGui::GetCursorScreenPos();
    ImDrawList* draw = ImGui::GetWindowDrawList();
    const std::string value = FormatNumber(p);  // "0.000" for every token of a model that has not learnt: "2.1e-05"
    const float value_w = ImGui::CalcTextSize(value.c_str()).x;
    // The bar spans the piece's part of the cell, never under the number.
    const float bar_w = std::max(0.0f, w - value_w - 4.0f);
    draw->AddRectFilled(at, ImVec2(at.x + bar_w * std::clamp(p, 0.0f, 1.0f), at.y + h), bar);
    draw->AddText(ImVec2(at.x + w - value_w, at.y), ImGui::GetColorU32(ImGuiCol_TextDisabled), value.c_str());
    const std::string label = IdLabel(state, id);
    ImGui::PushClipRect(at, ImVec2(at.x + std::max(0.0f, w - value_w - 4.0f), at.y + h), true);
    if (actual) ImGui::TextColored(kActual, "%s", label.c_str());
    else ImGui::TextUnformatted(label.c_str());
    ImGui::PopClipRect();
    if (actual) draw->AddRect(at, ImVec2(at.x + w, at.y + h), ImGui::GetColorU32(kActual));
    // A narrow pane cuts the piece to a few characters (three sides at 1000 px wide): whole on hover.
    if (ImGui::IsMouseHoveringRect(at, ImVec2(at.x + w, at.y + h)) && ImGui::IsWindowHovered())
        viz::Tooltip("%s's %d%s most likely: %s (id %d), p %.6g%s", side.c_str(), rank, rank == 1 ? "st" : rank == 2 ? "nd" : rank == 3 ? "rd" : "th",
                          label.c_str(), id, p, actual ? "; the text's next token" : "");
}

}  // namespace

void PredictionView::Draw(WindowState& state) {
    DrawContinue(state);
    ImGui::Separator();
    if (DrawNoAnalysisNote(state)) return;
    ImGui::BeginGroup();
    DrawNextTokens(state);
    ImGui::EndGroup();
    const ImVec2 r_min = ImGui::GetItemRectMin(), r_max = ImGui::GetItemRectMax();
    state.regions["next_tokens"] = {r_min.x, r_min.y, r_max.x - r_min.x, r_max.y - r_min.y};
}

void PredictionView::DrawContinue(AppState& state) {
    GenerateSettings& g = state.generate;
    const float fs = ImGui::GetFontSize();
    if (state.generating) {
        if (ImGui::Button("Stop")) state.cancel_job_request = true;
        viz::ItemTooltip("Stop generating (so does any edit of the text, or Esc).");
    } else {
        ImGui::BeginDisabled(!state.analysis || state.ranking_heads);
        if (ImGui::Button("Continue")) state.continue_request = true;
        ImGui::EndDisabled();
        viz::ItemTooltip("Ctrl+G: append generated tokens to the text, one at a time; each is analysed as it arrives\n"
                         "(only its row is computed), so its attention shows at once. Generated tokens are underlined\n"
                         "in the token strip. Any edit of the text stops it.");
    }
    ImGui::SameLine();
    ImGui::SetNextItemWidth(fs * 6.0f);
    ImGui::DragInt("##gen_tokens", &g.tokens, 0.2f, 1, 1000, "%d tokens", ImGuiSliderFlags_AlwaysClamp);
    viz::ItemTooltip("How many tokens Continue appends.");
    ImGui::SameLine();
    ImGui::SetNextItemWidth(fs * 7.0f);
    ImGui::SliderFloat("##gen_temperature", &g.temperature, 0.0f, 2.0f, g.temperature > 0 ? "temperature %.2f" : "greedy",
                       ImGuiSliderFlags_AlwaysClamp);
    viz::ItemTooltip("0: greedy, the most likely token each time. Above 0: a draw from softmax(logits / temperature).");
    if (g.temperature > 0) {
        ImGui::SameLine();
        ImGui::SetNextItemWidth(fs * 5.0f);
        ImGui::DragInt("##gen_top_k", &g.top_k, 0.5f, 0, 100000, g.top_k > 0 ? "top-%d" : "all tokens", ImGuiSliderFlags_AlwaysClamp);
        viz::ItemTooltip("Draw from the k most likely tokens only (0: from all).");
        ImGui::SameLine();
        ImGui::SetNextItemWidth(fs * 5.0f);
        int seed = static_cast<int>(std::min<uint64_t>(g.seed, 0x7fffffff));
        if (ImGui::DragInt("##gen_seed", &seed, 1.0f, 0, 0x7fffffff, "seed %d", ImGuiSliderFlags_AlwaysClamp)) g.seed = static_cast<uint64_t>(seed);
        viz::ItemTooltip("The same seed draws the same tokens (as `ssaviz generate --seed`).");
    }
}

void PredictionView::DrawNextTokens(const AppState& state) {
    const model::Analysis& a = *state.analysis;
    const int K = a.TopK();
    const int T = a.n_tokens;
    const int p = state.query >= 0 && state.query < T ? state.query : T - 1;
    const size_t need = static_cast<size_t>(p + 1) * K;
    // The sides that predicted: SSA, the comparison (unless layer-local) and, beside a fine-tune,
    // its base; each with its top k, and its rank and loss of the actual next token.
    struct Column {
        std::string name;
        const std::vector<int32_t>* ids;
        const std::vector<float>* probs;
        const std::vector<int32_t>* rank;
        const std::vector<float>* loss;
        ImU32 bar;
    };
    if (a.top_ids.size() < need || a.top_probs.size() < need) {
        ImGui::TextDisabled("This analysis has no predictions.");
        return;
    }
    std::vector<Column> sides;
    auto add = [&](std::string name, const std::vector<int32_t>& ids, const std::vector<float>& probs, const std::vector<int32_t>& rank,
                   const std::vector<float>& loss, ImU32 bar) {
        if (ids.size() >= need && probs.size() >= need) sides.push_back({std::move(name), &ids, &probs, &rank, &loss, bar});
    };
    add(a.interventions.empty() ? "SSA" : "SSA (with what-ifs)", a.top_ids, a.top_probs, a.rank, a.loss, Translucent(viz::kSsaColor));
    if (a.HasComparePredictions())
        add(CompareName(a), a.top_ids_compare, a.top_probs_compare, a.rank_compare, a.loss_compare, Translucent(viz::kCompareColor));
    if (a.HasBase()) add("base", a.top_ids_base, a.top_probs_base, a.rank_base, a.loss_base, Translucent(viz::kBaseColor));
    const std::string piece = p < static_cast<int>(a.tokens.pieces.size()) ? TokenLabel(a.tokens.pieces[p]) : "";
    ImGui::TextWrapped("After token %d '%s'%s", p, piece.c_str(), state.query < 0 ? " (the last; click a token to choose another)" : "");
    const bool has_next = p + 1 < T && p < static_cast<int>(a.loss.size());
    const int32_t next = has_next ? a.tokens.ids[p + 1] : -1;
    if (has_next) {
        ImGui::TextColored(kActual, "actual next %s:", IdLabel(state, next).c_str());
        for (size_t k = 0; k < sides.size(); ++k) {
            const Column& s = sides[k];
            if (p >= static_cast<int>(s.loss->size()) || p >= static_cast<int>(s.rank->size())) continue;
            const int rank = (*s.rank)[p] + 1;
            const float loss = (*s.loss)[p];
            if (k == 0) {  // beside "actual next" where it fits (a narrow pane cut it at "loss 1.2")
                char line[160];
                std::snprintf(line, sizeof line, "%s rank %d, p %s, loss %.3f", s.name.c_str(), rank, FormatNumber(std::exp(-loss)).c_str(), loss);
                SameLineIfFits(ImGui::CalcTextSize(line).x);
                ImGui::TextUnformatted(line);
            } else {
                ImGui::TextDisabled("%s rank %d, p %s, loss %.3f", s.name.c_str(), rank, FormatNumber(std::exp(-loss)).c_str(), loss);
            }
        }
    } else {
        Caption("The last token: what the model would write next (Continue, Ctrl+G, appends it).");
    }

    const int columns = 1 + static_cast<int>(sides.size());
    if (!ImGui::BeginTable("##next_tokens", columns, ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_SizingStretchSame))
        return;
    ImGui::TableSetupColumn("#", ImGuiTableColumnFlags_WidthFixed, ImGui::GetFontSize() * 1.5f);
    for (const Column& s : sides) ImGui::TableSetupColumn(s.name.c_str());
    ImGui::TableHeadersRow();
    for (int k = 0; k < K; ++k) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::TextDisabled("%d", k + 1);
        const size_t at = static_cast<size_t>(p) * K + k;
        for (const Column& s : sides) {
            ImGui::TableNextColumn();
            PredictionCell(state, s.name, k + 1, (*s.ids)[at], (*s.probs)[at], (*s.ids)[at] == next, s.bar);
        }
    }
    ImGui::EndTable();
    if (!a.HasComparePredictions() && a.comparison == model::Comparison::LayerLocal)
        Caption("The layer-local comparison runs no forward pass of its own: it has no predictions.");
}

}  // namespace app
