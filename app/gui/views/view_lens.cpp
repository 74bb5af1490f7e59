#include "app/gui/views/view_lens.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include <imgui.h>

#include "app/core/names.h"
#include "app/gui/views/view_common.h"
#include "viz/imgui/widgets.h"
#include "viz/palette.h"

namespace app {
namespace {

const ImU32 kQueryColor = IM_COL32(255, 220, 90, 255);

std::string Piece(const AppState& state, int32_t id) {
    if (!state.vocab || id < 0 || static_cast<size_t>(id) >= state.vocab->size()) return "?";
    return TokenLabel((*state.vocab)[id]);
}

// "after L3" for row l + 1 of the lens; "embeddings" for row 0.
std::string RowName(int row) { return row == 0 ? "embeddings" : "after L" + std::to_string(row - 1); }

// A signed bar from `zero` (x) to the value's place, in a row of height h.
void Bar(ImDrawList* draw, float zero, float scale, float y, float h, float v, ImU32 color) {
    if (!std::isfinite(v)) return;
    const float x = zero + v * scale;
    draw->AddRectFilled(ImVec2(std::min(x, zero), y), ImVec2(std::max(x, zero) + 1.0f, y + h), color);
}

}  // namespace

void LensView::Draw(WindowState& state) {
    if (DrawNoAnalysisNote(state)) return;
    const model::Analysis& a = *state.analysis;
    // Stale once the text, the model or the comparison changed since it ran.
    const bool current = state.lens && state.lens->ids == a.tokens.ids && state.model && state.lens->model_dir == state.model->dir &&
                         state.lens->compare_label == a.compare_label;
    ImGui::BeginDisabled(state.lens_running || a.n_tokens < 2);
    if (ImGui::Button(state.lens && !current ? "Run the lens again" : "Run the lens")) state.lens_request = true;
    ImGui::EndDisabled();
    viz::ItemTooltip("The logit lens and direct logit attribution of the shown text: a forward pass of SSA and one of its "
                     "comparison that keep the residual stream (`ssaviz export --lens` writes the same numbers).");
    ImGui::SameLine();
    if (state.lens_running) ImGui::TextDisabled("running... %.0f%%", 100.0f * state.progress);
    else if (!state.lens) ImGui::TextDisabled("what each layer and head writes: not run yet");
    else if (!current) ImGui::TextDisabled("the text, model or comparison changed since it ran");
    ImGui::SameLine();
    viz::HelpMarker("Logit lens: the residual stream after each layer, read through the final norm and the output head, as if the "
                    "model stopped there. Each cell shows the token it would predict next, coloured by the probability it gives "
                    "the actual next token (bright: that layer already predicts it).\n"
                    "Attribution: how much each head (its attention-weighted values, tau_v applied, through its slice of the "
                    "output projection) and each MLP add to the next token's logit, the final norm's scale held at the final "
                    "residual's; the parts, with the embeddings and biases, sum to the logit.\n"
                    "Click a column to select that query.");
    if (!state.lens || !current) return;
    const LensPair& lens = *state.lens;
    if (m_for != state.lens) {
        m_for = state.lens;
        m_pieces.clear();
        const model::Lens& s = lens.ssa;
        for (size_t k = 0; k < s.top_ids.size(); k += s.top_k) m_pieces.push_back(Piece(state, s.top_ids[k]));
    }
    DrawGrid(state, lens);
    ImGui::Separator();
    const int T = lens.ssa.n_tokens;
    const int position = state.query >= 0 && state.query < T - 1 ? state.query : T - 2;
    DrawAttribution(state, lens, position);
}

void LensView::DrawGrid(WindowState& state, const LensPair& lens) {
    const model::Lens& s = lens.ssa;
    const int rows = s.n_layer + 1, T = s.n_tokens, n = T - 1;
    const float line = ImGui::GetTextLineHeight();
    const float label_w = ImGui::CalcTextSize("embeddings").x + 8.0f;
    const float avail = ImGui::GetContentRegionAvail().x;
    const float cell_w = std::max(6.0f, std::min(line * 4.0f, std::floor((avail - label_w) / std::max(n, 1))));
    const float cell_h = std::clamp(std::floor((ImGui::GetContentRegionAvail().y * 0.45f - line) / rows), 4.0f, line + 4.0f);
    const float grid_h = rows * cell_h + line + 4.0f + ImGui::GetStyle().ScrollbarSize;
    ImGui::TextDisabled("colour: p(the next token) after each layer, log scale 1e-4 (dark) to 1; text: the token it predicts");
    const ImVec2 child_pos = ImGui::GetCursorScreenPos();
    ImGui::BeginChild("##lens_grid", ImVec2(avail, grid_h), false, ImGuiWindowFlags_HorizontalScrollbar);
    const ImVec2 o = ImGui::GetCursorScreenPos();
    ImDrawList* draw = ImGui::GetWindowDrawList();
    int hovered_row = -1, hovered_t = -1;
    for (int t = 0; t < n; ++t) {
        const float x = o.x + label_w + t * cell_w;
        if (!ImGui::IsRectVisible(ImVec2(x, o.y), ImVec2(x + cell_w, o.y + rows * cell_h))) continue;
        for (int r = 0; r < rows; ++r) {
            const ImVec2 p0(x, o.y + r * cell_h), p1(x + cell_w - (cell_w > 8 ? 1.0f : 0.0f), o.y + (r + 1) * cell_h - 1.0f);
            const float p = std::exp(-s.loss[static_cast<size_t>(r) * n + t]);
            const float shade = std::isfinite(p) && p > 0 ? std::clamp((std::log10(p) + 4.0f) / 4.0f, 0.0f, 1.0f) : 0.0f;
            const viz::Rgba8 c = viz::SampleColormap(viz::Colormap::Viridis, shade);
            draw->AddRectFilled(p0, p1, viz::ToImU32(c));
            const std::string& piece = m_pieces[static_cast<size_t>(r) * T + t];
            if (cell_w >= line * 1.5f && cell_h >= line) {
                const std::string shown = viz::EllipsizeText(piece, cell_w - 4.0f);
                draw->AddText(ImVec2(p0.x + 2.0f, p0.y + (cell_h - line) * 0.5f - 0.5f), shade > 0.6f ? IM_COL32(0, 0, 0, 255) : IM_COL32(255, 255, 255, 230),
                              shown.c_str());
            }
            if (ImGui::IsMouseHoveringRect(p0, ImVec2(p1.x + 1, p1.y + 1)) && ImGui::IsWindowHovered()) hovered_row = r, hovered_t = t;
        }
        if (t == state.query) draw->AddRect(ImVec2(x - 1, o.y - 1), ImVec2(x + cell_w, o.y + rows * cell_h), kQueryColor, 0, 0, 2.0f);
    }
    for (int r = 0; r < rows; ++r)
        draw->AddText(ImVec2(ImGui::GetWindowPos().x + 2.0f, o.y + r * cell_h + (cell_h - line) * 0.5f), ImGui::GetColorU32(ImGuiCol_Text),
                      r == 0 ? "embeddings" : ("L" + std::to_string(r - 1)).c_str());
    ImGui::SetCursorScreenPos(ImVec2(o.x, o.y + rows * cell_h + 2.0f));
    ImGui::Dummy(ImVec2(label_w + n * cell_w, line));
    if (hovered_t >= 0) {
        if (ImGui::IsMouseClicked(ImGuiMouseButton_Left)) state.query = hovered_t;
        const model::Analysis& a = *state.analysis;
        std::string top;
        for (int k = 0; k < s.top_k; ++k) {
            const size_t at = (static_cast<size_t>(hovered_row) * T + hovered_t) * s.top_k + k;
            char buf[96];
            std::snprintf(buf, sizeof buf, "\n  %.3f  '%s'", s.top_probs[at], Piece(state, s.top_ids[at]).c_str());
            top += buf;
        }
        const float loss = s.loss[static_cast<size_t>(hovered_row) * n + hovered_t];
        ImGui::SetTooltip("%s, position %d '%s'\nnext token '%s': p = %.4f (loss %.3f)\nmost likely:%s", RowName(hovered_row).c_str(),
                          hovered_t, TokenLabel(a.tokens.pieces[hovered_t]).c_str(), TokenLabel(a.tokens.pieces[hovered_t + 1]).c_str(),
                          std::exp(-loss), loss, top.c_str());
    }
    ImGui::EndChild();
    state.regions["lens_grid"] = Rect{child_pos.x, child_pos.y, std::min(avail, label_w + n * cell_w), rows * cell_h};
}

void LensView::DrawAttribution(WindowState& state, const LensPair& lens, int t) {
    const model::Lens& s = lens.ssa;
    const model::Lens* c = lens.compare ? &*lens.compare : nullptr;
    const int L = s.n_layer, H = s.n_head, n = s.n_tokens - 1;
    const model::Analysis& a = *state.analysis;
    const std::string cmp = CompareName(a);
    ImGui::Text("Position %d '%s' -> '%s': logit %.3f (SSA)", t, TokenLabel(a.tokens.pieces[t]).c_str(),
                TokenLabel(a.tokens.pieces[t + 1]).c_str(), s.logit[t]);
    if (c) {
        ImGui::SameLine();
        ImGui::TextDisabled("%.3f (%s)", c->logit[t], cmp.c_str());
    }
    auto at = [&](const model::Lens& x, int l, int h) { return x.dla[(static_cast<size_t>(l) * H + h) * n + t]; };
    // Heads by the size of their SSA part; the comparison's beside each.
    std::vector<int> order(static_cast<size_t>(L) * H);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return std::abs(at(s, x / H, x % H)) > std::abs(at(s, y / H, y % H)); });
    const int shown = std::min<int>(static_cast<int>(order.size()), 12);
    // Two scales: the heads' (both sides), and the layers' totals with the embeddings and biases.
    float most = 1e-6f, most_layer = 1e-6f;
    for (int k = 0; k < shown; ++k) {
        most = std::max(most, std::abs(at(s, order[k] / H, order[k] % H)));
        if (c) most = std::max(most, std::abs(at(*c, order[k] / H, order[k] % H)));
    }
    for (int l = 0; l < L; ++l) {
        float attention = 0;
        for (int h = 0; h < H; ++h) attention += at(s, l, h);
        most_layer = std::max({most_layer, std::abs(attention), std::abs(s.dla_mlp[static_cast<size_t>(l) * n + t])});
    }
    most_layer = std::max({most_layer, std::abs(s.dla_embed[t]), std::abs(s.dla_const[t])});
    float* scale_of = &most;
    const float line = ImGui::GetTextLineHeight();
    const float label_w = ImGui::CalcTextSize("L00 H00 ").x, number_w = ImGui::CalcTextSize("-00.000  ").x;
    const float width = std::max(60.0f, ImGui::GetContentRegionAvail().x - label_w - 2 * number_w);
    const ImU32 ssa_color = viz::ToImU32(viz::kSsaColor), cmp_color = viz::ToImU32(viz::kCompareColor);
    ImDrawList* draw = ImGui::GetWindowDrawList();
    auto row = [&](const std::string& label, float v, float w, bool has_w, HeadRef* head) {
        const ImVec2 p = ImGui::GetCursorScreenPos();
        const float zero = p.x + label_w + width * 0.5f, scale = width * 0.5f / *scale_of;
        ImGui::TextUnformatted(label.c_str());
        const float h = has_w ? line * 0.5f : line;
        Bar(draw, zero, scale, p.y, h, v, ssa_color);
        if (has_w) Bar(draw, zero, scale, p.y + h, h, w, cmp_color);
        draw->AddLine(ImVec2(zero, p.y), ImVec2(zero, p.y + line), IM_COL32(200, 200, 200, 90));
        char buf[64];
        std::snprintf(buf, sizeof buf, has_w ? "%+.3f  %+.3f" : "%+.3f", v, w);
        draw->AddText(ImVec2(p.x + label_w + width + 6.0f, p.y), ImGui::GetColorU32(ImGuiCol_Text), buf);
        ImGui::SetCursorScreenPos(ImVec2(p.x, p.y));
        ImGui::InvisibleButton(label.c_str(), ImVec2(label_w + width, line));
        if (head) HandleHeadClick(state, *head);
    };
    ImGui::TextDisabled("heads by their part of the logit (orange SSA, blue %s); click selects the head", cmp.c_str());
    const ImVec2 start = ImGui::GetCursorScreenPos();
    for (int k = 0; k < shown; ++k) {
        HeadRef head{order[k] / H, order[k] % H};
        row("L" + std::to_string(head.layer) + " H" + std::to_string(head.head), at(s, head.layer, head.head),
            c ? at(*c, head.layer, head.head) : 0.0f, c != nullptr, &head);
    }
    ImGui::Spacing();
    ImGui::TextDisabled("each layer: attention (its heads together) and MLP, SSA (a scale of its own)");
    scale_of = &most_layer;
    for (int l = 0; l < L; ++l) {
        float attention = 0;
        for (int h = 0; h < H; ++h) attention += at(s, l, h);
        row("L" + std::to_string(l) + " attn", attention, 0.0f, false, nullptr);
        row("L" + std::to_string(l) + " MLP", s.dla_mlp[static_cast<size_t>(l) * n + t], 0.0f, false, nullptr);
    }
    row("embed", s.dla_embed[t], 0.0f, false, nullptr);
    row("biases", s.dla_const[t], 0.0f, false, nullptr);
    state.regions["lens_attribution"] = Rect{start.x, start.y, label_w + width, ImGui::GetCursorScreenPos().y - start.y};
}

}  // namespace app
