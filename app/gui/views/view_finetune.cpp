#include "app/gui/views/view_finetune.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <imgui.h>

#include "app/core/names.h"
#include "app/export/export_figures.h"
#include "app/gui/views/view_common.h"
#include "viz/imgui/widgets.h"
#include "viz/palette.h"
#include "viz/ticks.h"

namespace app {
namespace {

const ImU32 kSelectedColor = IM_COL32(255, 230, 90, 255);
const ImU32 kNoValueColor = IM_COL32(60, 60, 66, 255);

std::string Nats(float v, bool sign = false) {
    if (std::isnan(v)) return "NaN";  // the C library's "-nan" read as a sign
    char buf[32];
    std::snprintf(buf, sizeof buf, sign ? "%+.4f" : "%.4f", v);
    return viz::SignlessZero(buf);  // "-0.0000" read as a loss lowered
}

// The drift along the layers as bars, a row a part (the embeddings, each layer's attention and MLP):
// its part taken back from the base from the embeddings up (the upper bar) and from the top down
// (the lower), around 0, on one scale; its numbers at the right, both on hover. Where the two bars
// differ the parts act together. (It was a line of some twenty numbers.)
void DrawDriftPath(const DriftParts& d) {
    const int n = static_cast<int>(std::min(d.path.size(), d.path_down.size()));
    float most = 0;
    for (int k = 0; k < n; ++k)
        for (float v : {d.path[k], d.path_down[k]})
            if (std::isfinite(v)) most = std::max(most, std::abs(v));
    if (n == 0 || !(most > 0)) return;
    const float line = ImGui::GetTextLineHeight(), avail = ImGui::GetContentRegionAvail().x;
    const float label_w = ImGui::CalcTextSize("L00 attention ").x, numbers_w = ImGui::CalcTextSize(" +0.000 / +0.000").x;
    const float width = std::max(40.0f, avail - label_w - numbers_w - ImGui::GetStyle().ScrollbarSize);
    const viz::Rgba8 c = viz::kDriftPartColor;
    const ImU32 up = IM_COL32(c.r, c.g, c.b, 255), down = IM_COL32(c.r, c.g, c.b, 130);
    ImDrawList* draw = ImGui::GetWindowDrawList();
    auto number = [](float v) {
        char buf[24] = "n/a";
        if (std::isfinite(v)) std::snprintf(buf, sizeof buf, "%+.3f", v);
        return viz::SignlessZero(buf);
    };
    for (int k = 0; k < n; ++k) {
        const ImVec2 p = ImGui::GetCursorScreenPos();
        const float zero = p.x + label_w + width * 0.5f, scale = width * 0.5f / most;
        ImGui::TextUnformatted(PathPartName(k).c_str());
        const float values[2] = {d.path[k], d.path_down[k]};
        for (int w = 0; w < 2; ++w) {
            if (!std::isfinite(values[w])) continue;
            const float x = zero + values[w] * scale, y = p.y + line * 0.5f * static_cast<float>(w);
            draw->AddRectFilled(ImVec2(std::min(x, zero), y), ImVec2(std::max(x, zero) + 1.0f, y + line * 0.5f - 1.0f), w == 0 ? up : down);
        }
        draw->AddLine(ImVec2(zero, p.y), ImVec2(zero, p.y + line), IM_COL32(200, 200, 200, 90));
        const std::string both = number(values[0]) + " / " + number(values[1]);
        draw->AddText(ImVec2(p.x + label_w + width + 6.0f, p.y), ImGui::GetColorU32(ImGuiCol_Text), both.c_str());
        ImGui::SetCursorScreenPos(p);
        ImGui::InvisibleButton(("##path" + std::to_string(k)).c_str(), ImVec2(label_w + width + numbers_w, line));
        if (ImGui::IsItemHovered())
            viz::Tooltip("%s taken back from the base, nats: %s from the embeddings up (the upper bar), %s from the top down "
                         "(the lower); below 0 the fine-tune's change there lowered the loss",
                         PathPartName(k).c_str(), number(values[0]).c_str(), number(values[1]).c_str());
    }
}

}  // namespace

void FineTuneView::Draw(WindowState& state) {
    if (DrawNoAnalysisNote(state)) return;
    const model::Analysis& a = *state.analysis;
    if (!a.HasBase()) {
        ImGui::PushTextWrapPos(0.0f);
        ImGui::TextUnformatted("What fine-tuning changed, split into what the temperatures did and what the other weights' drift did, "
                               "needs the model the fine-tune started from.");
        if (!state.BaseShown().empty()) {
            if (ImGui::Button("Compare with its base")) state.base_request = true;
            viz::ItemTooltip(("Three sides: SSA, its own weights at tau = 1, and the base model " + state.BaseShown() + ".").c_str());
            ImGui::SameLine();
            ImGui::TextDisabled("%s", state.BaseShown().c_str());
        } else {
            ImGui::TextDisabled("No base beside this model (a folder base/ inside or beside it, or lit_model.pth beside a fine-tuned checkpoint).");
        }
        if (ImGui::Button("Open a base model...")) state.ShowOpenDialog(OpenPurpose::Base);
        viz::ItemTooltip("A base in a folder of its own (File > Compare with a base model...; ssaviz --base DIR, "
                         "`ssaviz export --base DIR`): same architecture as the fine-tune.");
        ImGui::PopTextWrapPos();
        return;
    }
    if (!SameAnalysis(m_for, state.analysis)) {
        m_for = state.analysis;
        m_parts = model::Decompose(a);
        m_labels = TokenLabels(a.tokens);
        m_labels.resize(std::max(a.n_tokens, 0), "?");
        m_where_for.reset();
    }
    if (m_parts.empty()) {
        ImGui::TextDisabled("no heads to compare");
        return;
    }
    const model::Decomposition& d = m_parts;
    if (!state.not_finite.empty()) {  // a base that overflows: its numbers are NaN, said why (as export refuses it)
        ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.0f, 0.45f, 0.4f, 1.0f));
        ImGui::TextWrapped("%s; an export refuses it.", state.not_finite.c_str());
        ImGui::PopStyleColor();
    }
    // Each piece on the line before while it fits: a narrow pane breaks the lines between them.
    auto piece = [](const std::string& text, const ImVec4* colour = nullptr) {
        SameLineIfFits(ImGui::CalcTextSize(text.c_str()).x);
        if (colour) ImGui::TextColored(*colour, "%s", text.c_str());
        else ImGui::TextUnformatted(text.c_str());
    };
    ImGui::BeginGroup();
    ImGui::TextUnformatted("Mean loss, nats:");
    const ImVec4 orange(0.94f, 0.57f, 0.16f, 1.0f);
    // "name: value": "tau = 1 3.0542" read as one expression.
    piece(SsaSideName(a) + ": " + Nats(d.loss_mean), &orange);
    piece("tau = 1: " + Nats(d.loss_mean_tau1));
    piece("base: " + Nats(d.loss_mean_base));
    ImGui::EndGroup();
    viz::ItemTooltip("The mean loss of the next token over the text (token 1 on), for the fine-tune (SSA), its own weights with "
                     "the temperatures off (tau = 1), and the base model.");
    ImGui::BeginGroup();
    ImGui::TextUnformatted(("change " + Nats(d.loss_mean - d.loss_mean_base, true)).c_str());
    piece(std::string(a.interventions.empty() ? "= temperatures " : "= temperatures and what-ifs ") + Nats(d.loss_mean - d.loss_mean_tau1, true));
    piece("+ drift " + Nats(d.loss_mean_tau1 - d.loss_mean_base, true));
    ImGui::EndGroup();
    viz::ItemTooltip("SSA - base splits exactly into (SSA - tau = 1), what the temperatures did with the fine-tuned weights, and "
                     "(tau = 1 - base), what fine-tuning did to every other weight. Negative: that part lowered the loss.\n"
                     "What-ifs act on the SSA side only: while any is on, their effect is in the first part.");
    if (const std::string base_own = BaseTemperatures(a); !base_own.empty()) {
        ImGui::TextColored(ImVec4(1.0f, 0.75f, 0.3f, 1.0f), "the base has its own %s (?)", base_own.c_str());
        viz::ItemTooltip((BaseTemperaturesNote(a) + ". Its loss with every head at tau = 1 is not shown here: open the base alone "
                          "with every head ablated (What-ifs) for it.").c_str());
    }
    if (!a.base_difference.empty()) {
        ImGui::TextColored(ImVec4(1.0f, 0.75f, 0.3f, 1.0f), "the base differs in what is no weight (?)");
        viz::ItemTooltip((BaseDifferenceNote(a) + ".").c_str());
    }
    ImGui::Separator();
    if (!state.not_finite.empty()) {  // NaN rows measure as 0: the matrices and rankings read "no change" ("drift most: none")
        ImGui::TextDisabled("the heads' changes are not shown: the rows they compare are not finite");
        return;
    }
    // The rest scrolls where the pane is short: the matrices keep a line a layer, the ranking's
    // parts their words, the token bars their height.
    ImGui::BeginChild("##finetune_parts");
    DrawMatrices(state);
    ImGui::Separator();
    DrawRankedParts(state);
    ImGui::Separator();
    DrawLossParts(state);
    ImGui::EndChild();
}

// Two layer x head matrices on one scale: the temperatures' part and the drift, JS in nats.
void FineTuneView::DrawMatrices(WindowState& state) {
    const model::Decomposition& d = m_parts;
    const int L = d.n_layer, H = d.n_head;
    const viz::Range range = FineTuneRange(d, m_log_scale);
    state.scales["finetune_matrix"] = range;
    const viz::Colormap colormap = state.settings.colormap;

    TitleWithHelp("Each head's change: JS divergence of its rows, nats",
                  "Left: SSA against its own weights at tau = 1, what the temperatures changed in each head's attention.\n"
                  "A whole second pass at tau = 1: a head's cell holds every earlier layer's temperatures too, which change its\n"
                  "input (its own layer's alone: the comparison 'tau = 1 local (layer by layer)', without the base; its part of the loss:\n"
                  "What-ifs > Which heads matter).\n"
                  "Right: tau = 1 against the base, what fine-tuning the other weights changed.\n"
                  "One colour scale for both (the Matrix's JS too), from 0 to the largest of the three JS, the whole change's too:\n"
                  "linear as finetune.png draws it, or logarithmic (at most four decades) with\n"
                  "'log scale' (export --log); the whole change (SSA against base) is on hover.\n"
                  "Click a head to show it (View > SSA | tau = 1 | base shows its three maps, key 5); Ctrl+click pins it.");
    ImGui::Checkbox("log scale##finetune", &m_log_scale);
    viz::ItemTooltip("Both matrices on a log10 scale from the smallest value, at most four decades below the largest, to the "
                     "largest (below: the darkest colour), so a small part beside a large one still shows; off: linear from 0.");
    Caption(TemperaturePartName(*state.analysis) + " most: " + TopHeads(d.js_temperature, H, 4, kJsRoundingFloor), ", ");  // broken between heads only
    Caption("drift most: " + TopHeads(d.js_drift, H, 4, kJsRoundingFloor), ", ");
    // What the drift's weights did beside how far they moved: a head whose attention drifted most
    // need not be the one whose weights moved most (its input changed below it).
    const model::Analysis& a = *state.analysis;
    if (a.weights_q.size() == static_cast<size_t>(L) * H) {
        std::vector<float> moved(a.weights_q.size());
        for (size_t k = 0; k < moved.size(); ++k)
            moved[k] = std::fmax(std::fmax(a.weights_q[k], a.weights_k[k]), std::fmax(a.weights_v[k], a.weights_o[k]));  // NaN: a slice the base had at 0
        auto by_layer = [](const std::vector<float>& v) {
            std::string s;
            for (size_t l = 0; l < v.size(); ++l) s += (l ? " " : "") + FormatNumber(v[l]);
            return s;
        };
        Caption("weights moved most (||W - W_base|| / ||W_base||, the largest of W_q, W_k, W_v, W_o): " + TopHeads(moved, H, 4, 0.0f) +
                    "; MLPs by layer: " + by_layer(a.weights_mlp) + "; the norms before the attention by layer: " +
                    by_layer(a.weights_norm_attention) + "; the final norm " + FormatNumber(a.weights_norm_final) + "; embeddings " +
                    FormatNumber(a.weights_embeddings) +
                    (std::isfinite(a.weights_head) ? "; output head " + FormatNumber(a.weights_head) : "") +
                    (a.weights_rounded_to.empty() ? "" : " (of weights rounded to " + a.weights_rounded_to + ": below its rounding, noise)"),
                ", ");
    }
    const float line = ImGui::GetTextLineHeight();
    const float gap = ImGui::GetStyle().ItemSpacing.x * 2.0f;
    const float label_w = ImGui::CalcTextSize("L00").x + 4.0f;
    const float bar_w = viz::ColorBarWidth();
    const float avail = ImGui::GetContentRegionAvail().x - bar_w - gap;
    // Side by side where every head's label fits over its cell (DrawGridLabels' width), else one under
    // the other (at 12 heads in a narrow pane every third head was labelled).
    const float head_label_w = ImGui::CalcTextSize("H00").x + 4.0f;
    const bool side_by_side = (avail / 2 - label_w) / H >= head_label_w || (avail - label_w) / H < 4.0f;
    const float matrix_w = side_by_side ? (avail - gap) / 2 : avail;
    const float cell_w = std::clamp(std::floor((matrix_w - label_w) / H), 2.0f, line * 3.0f);
    // Square cells where the height allows: the matrices take at most 40% of it, the token bars below the rest.
    // Never thinner than most of a line a layer: the tab scrolls instead.
    const float rows_h = std::max((side_by_side ? 0.4f : 0.25f) * ImGui::GetContentRegionAvail().y / L, line * 0.8f);
    const float cell_h = std::clamp(std::floor(std::min(cell_w, rows_h)), 2.0f, line * 1.2f);
    const float header = line + 2.0f, height = header + L * cell_h;
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    ImDrawList* draw = ImGui::GetWindowDrawList();
    int hovered = -1;
    const std::string temperatures = TemperaturePartName(*state.analysis);
    const struct {
        const std::vector<float>* values;
        const char* title;
    } parts[] = {{&d.js_temperature, temperatures.c_str()}, {&d.js_drift, "drift"}};
    for (int m = 0; m < 2; ++m) {
        const ImVec2 o = side_by_side ? ImVec2(origin.x + m * (label_w + H * cell_w + gap), origin.y)
                                      : ImVec2(origin.x, origin.y + m * (height + line + 4.0f));
        draw->AddText(ImVec2(o.x + label_w, o.y), ImGui::GetColorU32(ImGuiCol_Text),
                      viz::EllipsizeText(parts[m].title, H * cell_w + (side_by_side ? gap : avail)).c_str());
        const ImVec2 grid(o.x, o.y + line + 2.0f);
        for (int l = 0; l < L; ++l) {
            for (int h = 0; h < H; ++h) {
                const int k = l * H + h;
                const ImVec2 p0(grid.x + label_w + h * cell_w, grid.y + header + l * cell_h);
                const ImVec2 p1(p0.x + cell_w - (cell_w > 4 ? 1.0f : 0.0f), p0.y + cell_h - (cell_h > 4 ? 1.0f : 0.0f));
                ImGui::SetCursorScreenPos(p0);
                ImGui::PushID(m * L * H + k);
                ImGui::InvisibleButton("##part", ImVec2(cell_w, cell_h));
                ImGui::PopID();
                if (ImGui::IsItemHovered()) hovered = k;
                HandleHeadClick(state, {l, h});
                const float v = (*parts[m].values)[k];
                const viz::Rgba8 c = viz::SampleColormap(colormap, viz::Normalize(v, range, m_log_scale));
                draw->AddRectFilled(p0, p1, std::isfinite(v) ? viz::ToImU32(c) : kNoValueColor);
                if (HeadRef{l, h} == state.selected) draw->AddRect(ImVec2(p0.x - 1, p0.y - 1), ImVec2(p1.x + 1, p1.y + 1), kSelectedColor, 0, 0, 2);
            }
        }
        DrawGridLabels(draw, {grid, label_w, header, ImVec2(cell_w, cell_h), ImVec2(cell_w - 1.0f, cell_h - 1.0f)}, L, H, state.selected);
        state.regions[std::string("finetune_") + parts[m].title + "_labels"] = Rect{grid.x + label_w, grid.y, H * cell_w, header};  // for tests
    }
    const float block_h = side_by_side ? line + 2.0f + height : 2 * (line + 2.0f + height) + line + 4.0f;
    const float block_w = side_by_side ? 2 * (label_w + H * cell_w) + gap : label_w + H * cell_w;
    const float bar_top = line + 2.0f + header, bar_h = std::max(line * 4.0f, block_h - bar_top);
    ImGui::SetCursorScreenPos(ImVec2(origin.x + block_w + gap * 0.5f, origin.y + bar_top));
    viz::ColorBar("##parts_colorbar", "JS divergence (nats)", colormap, range, m_log_scale, ImVec2(bar_w, bar_h));
    // Below the taller of the matrices and the bar (a few layers' matrices are shorter than the
    // bar; its last label reaches half a line under it).
    ImGui::SetCursorScreenPos(ImVec2(origin.x, origin.y + std::max(block_h, bar_top + bar_h + line * 0.5f) + 4.0f));
    ImGui::Dummy(ImVec2(block_w, 0.0f));
    state.regions["finetune_matrix"] = Rect{origin.x, origin.y, block_w, block_h};
    if (hovered >= 0) {
        const int l = hovered / H, h = hovered % H;
        const float total = d.js_total[hovered], temperature = d.js_temperature[hovered], drift = d.js_drift[hovered];
        auto at = [&](const std::vector<float>& v, size_t k) { return FormatNumber(k < v.size() ? v[k] : NAN); };
        viz::Tooltip("L%d H%d, JS divergence of the rows, nats:\n  whole change (SSA vs base)     %s\n  temperatures (SSA vs tau = 1)  %s\n"
                     "  drift (tau = 1 vs base)        %s\nL1 distance: whole %s, temperatures %s, drift %s\n"
                     "Its weights moved from the base's (||W - W_base|| / ||W_base||): W_q %s, W_k %s, W_v %s, W_o %s; layer %d's MLP %s,\n"
                     "  its norm before the attention %s (its scale multiplies q.k as W_q and W_k do)",
                     l, h, Nats(total).c_str(), Nats(temperature).c_str(), Nats(drift).c_str(), FormatNumber(d.l1_total[hovered]).c_str(),
                     FormatNumber(d.l1_temperature[hovered]).c_str(), FormatNumber(d.l1_drift[hovered]).c_str(), at(a.weights_q, hovered).c_str(),
                     at(a.weights_k, hovered).c_str(), at(a.weights_v, hovered).c_str(), at(a.weights_o, hovered).c_str(), l,
                     at(a.weights_mlp, static_cast<size_t>(l)).c_str(), at(a.weights_norm_attention, static_cast<size_t>(l)).c_str());
    }
}

// What each part did to the loss, part by part: the What-ifs' ranking of the heads, when it is of
// this text, read as the parts of the loss the headline splits; else a button that ranks them.
void FineTuneView::DrawRankedParts(WindowState& state) {
    const model::Decomposition& d = m_parts;
    const int L = d.n_layer, H = d.n_head;
    if (!ImGui::CollapsingHeader("Each part of the loss, head by head", ImGuiTreeNodeFlags_DefaultOpen)) return;
    viz::ItemTooltip("What the temperatures and the drift did to the loss, one head (or layer, or the embeddings) at a time, from "
                     "What-ifs > Which heads matter (ssaviz export --rank-heads): nats, below 0 where that part lowered the loss, as "
                     "the headline's 'temperatures' and 'drift' read. The JS matrices above say how far rows moved, not this.");
    const HeadImpacts* impacts = state.head_impacts.get();
    if (impacts && impacts->done && std::abs(impacts->baseline - d.loss_mean) <= 1e-6f * std::max(1.0f, std::abs(d.loss_mean))) {
        if (m_where_for.lock() != state.head_impacts) {
            m_where_for = state.head_impacts;
            m_where = impacts->ids == state.analysis->tokens.ids ? WhereLine(*impacts, m_labels, L, H, 2) : "";
            m_path = PathHeadline(*impacts, L, H, 6);
        }
        Caption("each head's temperatures' part of the loss: " + PartsHeadline(TemperatureParts(*impacts, L, H), H, 3), ", ");
        viz::ItemTooltip("What-ifs > Which heads matter, read as parts of the loss: the loss minus the loss with that head at tau = 1 "
                         "(tau_q and tau_v), one head at a time, nats; below 0 its temperatures lowered the loss, as 'temperatures' above "
                         "reads. One at a time, so the parts need not add up to the whole. The JS above compares attention rows, which "
                         "tau_v never changes: a head whose rows moved most need not be one whose temperatures matter most for the loss.");
        if (impacts->drift) {
            char split[96];  // another measure than every weight's: no temperatures on either side
            std::snprintf(split, sizeof split, " (the headline's drift, tau = 1 against the base: %+.3g)", d.loss_mean_tau1 - d.loss_mean_base);
            Caption("the drift's parts of the loss: " + DriftHeadline(*impacts, L, H, 3) + split, ", ");
            viz::ItemTooltip("The loss minus the loss with one head's weights (q, k, v, o; never its temperatures), or one layer's MLP, "
                             "taken back from the base, one at a time, nats; below 0 the fine-tune's change there lowered the loss, as "
                             "'drift' above reads. Then the embeddings and output head from the base, and every weight (the drift whole, "
                             "with SSA's temperatures: not the headline's drift, tau = 1 against the base, which has no temperatures "
                             "on either side). What-ifs > Which heads matter lists each head's.");
            Caption("the drift along the layers, nats (upper bar: from the embeddings up; lower: from the top down):", " ");
            viz::ItemTooltip(("The same parts one after another, each taken back from the base on top of those before it, the loss before "
                              "it minus the loss after, so they add up to every weight's: first from the embeddings up, then (after the /) "
                              "from the last MLP down. Where the two orders split the whole differently, the parts act together; the "
                              "parts one at a time above are the third view.\n" + m_path).c_str());
            DrawDriftPath(MeasuredDriftParts(*impacts, L, H));
        }
        // The grids of where on the text every part acted, a click away.
        bool first = true;
        auto show_grid = [&](const char* label, RankingView view, const char* help) {  // side by side while they fit
            if (!std::exchange(first, false)) SameLineIfFits(ImGui::CalcTextSize(label).x + 2.0f * ImGui::GetStyle().FramePadding.x);
            if (ImGui::SmallButton(label)) state.settings.ranking = view, state.tab_request = "What-ifs";
            viz::ItemTooltip(help);
        };
        show_grid("Each head's, token by token", RankingView::Tokens,
                  "What-ifs > Which heads matter as a grid: a row a head, a column a token, each cell the head's temperatures' part of "
                  "that token's loss (head_impacts_tokens.png).");
        if (impacts->drift) {
            show_grid("The drift's parts, token by token", RankingView::DriftParts,
                      "The drift's parts above token by token: each head's weights, each layer's attention and MLP, and the embeddings "
                      "taken back from the base one at a time, and every weight's (head_impacts_drift_tokens.npy's rows).");
            show_grid("Along the layers", RankingView::Drift,
                      "The drift along its path from the embeddings up, token by token, and every weight's, which those add up to "
                      "(head_impacts_drift_tokens.png).");
        }
        if (!m_where.empty()) {
            Caption("where on the text: " + m_where, " ");
            viz::ItemTooltip("The parts that lowered the loss most, token by token: the tokens whose loss they lowered most and raised "
                             "most (nats). What-ifs > Which heads matter shows any head's on hover; the export's head_impacts_tokens.npy "
                             "holds every part's.");
        }
    } else if (state.ranking_heads) {  // as the What-ifs tab: how far, and a way out
        const int done = impacts ? static_cast<int>(impacts->heads.size()) : 0, total = impacts ? impacts->total : 0;
        ImGui::TextDisabled("ranking the heads by their loss: %d / %d heads (%.0f%%)", done, total, 100.0f * std::clamp(state.progress, 0.0f, 1.0f));
        ImGui::SameLine();
        if (ImGui::SmallButton("Stop")) state.cancel_job_request = true;
        viz::ItemTooltip("Esc. Stops the ranking; the heads measured so far stay in What-ifs > Which heads matter.");
    } else {
        ImGui::BeginDisabled(state.generating);
        if (ImGui::SmallButton("Rank the heads by their loss")) state.rank_heads_request = true;
        ImGui::EndDisabled();
        viz::ItemTooltip("The JS above says how far each head's rows moved, not what that did to the loss. This runs the text once a head "
                         "with that head at tau = 1 (What-ifs > Which heads matter; ssaviz export --rank-heads) and names the heads "
                         "whose temperatures lowered the loss most; then with each head's weights, and each layer's MLP, from the base: "
                         "where the drift lowered it.");
    }

}

// Each token's loss change from the base as two bars: the temperatures' part and the drift's.
void FineTuneView::DrawLossParts(WindowState& state) {
    const model::Analysis& a = *state.analysis;
    const int n = a.n_tokens - 1;
    if (n < 1 || a.loss.size() != static_cast<size_t>(n) || a.loss_compare.size() != a.loss.size() || a.loss_base.size() != a.loss.size()) {
        ImGui::TextDisabled("no per-token loss (one token)");
        return;
    }
    TitleWithHelp("Each token's loss change from the base, nats",
                  "Two bars a token: the temperatures' part (SSA - tau = 1, orange) and the drift's (tau = 1 - base, green). "
                  "Below the line: that part lowered the token's loss (the model predicts it better).\n"
                  "Past 96 tokens a line over each part's bars is its mean over the tokens around each (as finetune_loss.png draws it).\n"
                  "Hover a token for its three losses; click it to select it as the query.");
    float most = 1e-6f;
    for (int t = 0; t < n; ++t)
        for (float v : {a.loss[t] - a.loss_compare[t], a.loss_compare[t] - a.loss_base[t]})
            if (std::isfinite(v)) most = std::max(most, std::abs(v));

    // A signed y axis left of the bars (it stays while they scroll), the tokens' indices and labels
    // under them at round steps, as the map's row chart has them.
    const float line = ImGui::GetTextLineHeight();
    const std::vector<float> y_ticks = viz::NiceTicks({-most, most}, false, 5);
    float axis_w = 0.0f;
    for (float v : y_ticks) axis_w = std::max(axis_w, ImGui::CalcTextSize(viz::FormatTick(v).c_str()).x);
    axis_w += 8.0f;
    const ImVec2 axis_o = ImGui::GetCursorScreenPos();
    ImGui::Dummy(ImVec2(axis_w, 1.0f));
    ImGui::SameLine(0.0f, 0.0f);
    const float avail_w = ImGui::GetContentRegionAvail().x;
    const float chart_h = std::max(line * 7.0f, ImGui::GetContentRegionAvail().y - line * 2.0f);
    const float slot = std::max(4.0f, std::floor(avail_w / n));
    const float plot_h = chart_h - ImGui::GetStyle().ScrollbarSize - line - 6.0f;  // a line of token labels under the bars
    const float zero_y = axis_o.y + plot_h * 0.5f, scale = (plot_h * 0.5f - 2.0f) / most;
    {
        ImDrawList* parent = ImGui::GetWindowDrawList();
        const ImU32 dim = ImGui::GetColorU32(ImGuiCol_TextDisabled);
        for (float v : y_ticks) {
            const float y = std::round(zero_y - v * scale);
            const std::string label = viz::FormatTick(v);
            parent->AddText(ImVec2(axis_o.x + axis_w - 6.0f - ImGui::CalcTextSize(label.c_str()).x, y - line * 0.5f), dim, label.c_str());
            parent->AddLine(ImVec2(axis_o.x + axis_w - 3.0f, y), ImVec2(axis_o.x + axis_w, y), dim);
        }
    }
    ImGui::BeginChild("##loss_parts", ImVec2(avail_w, chart_h), false, ImGuiWindowFlags_HorizontalScrollbar);
    const ImVec2 o = ImGui::GetCursorScreenPos();
    ImDrawList* draw = ImGui::GetWindowDrawList();
    for (float v : y_ticks)  // the grid behind the bars
        if (v != 0.0f) draw->AddLine(ImVec2(o.x, std::round(zero_y - v * scale)), ImVec2(o.x + n * slot, std::round(zero_y - v * scale)), IM_COL32(255, 255, 255, 24));
    const ImU32 colors[2] = {viz::ToImU32(viz::kTemperaturePartColor), viz::ToImU32(viz::kDriftPartColor)};
    int hovered = -1;
    for (int t = 0; t < n; ++t) {
        const float x = o.x + t * slot;
        if (!ImGui::IsRectVisible(ImVec2(x, o.y), ImVec2(x + slot, o.y + plot_h))) continue;
        ImGui::SetCursorScreenPos(ImVec2(x, o.y));
        ImGui::PushID(t);
        ImGui::InvisibleButton("##token", ImVec2(slot, plot_h));
        ImGui::PopID();
        if (ImGui::IsItemHovered()) hovered = t;
        if (ImGui::IsItemClicked()) state.query = t + 1;
        if (state.query == t + 1) draw->AddRectFilled(ImVec2(x, o.y), ImVec2(x + slot, o.y + plot_h), IM_COL32(255, 230, 90, 40));
        const float parts[2] = {a.loss[t] - a.loss_compare[t], a.loss_compare[t] - a.loss_base[t]};
        const float bar = std::max(1.0f, std::floor((slot - 1.0f) / 2));
        for (int p = 0; p < 2; ++p) {
            if (!std::isfinite(parts[p])) continue;
            const float y = zero_y - parts[p] * scale;
            const float x0 = x + p * bar;
            draw->AddRectFilled(ImVec2(x0, std::min(y, zero_y)), ImVec2(x0 + bar, std::max(y, zero_y) + 0.5f), colors[p]);
        }
    }
    draw->AddLine(ImVec2(o.x, zero_y), ImVec2(o.x + n * slot, zero_y), IM_COL32(200, 200, 200, 120));
    // Past the exported figure's bars, its lines too: each part's mean over the tokens around each
    // (the same window), over the bars in view.
    const int window = FineTuneLossWindow(n);
    if (window > 0) {
        std::vector<float> parts[2];
        for (int t = 0; t < n; ++t) {
            parts[0].push_back(a.loss[t] - a.loss_compare[t]);
            parts[1].push_back(a.loss_compare[t] - a.loss_base[t]);
        }
        const float view_x0 = ImGui::GetWindowPos().x, view_x1 = view_x0 + ImGui::GetWindowSize().x;
        const int t0 = std::clamp(static_cast<int>((view_x0 - o.x) / slot) - 1, 0, n - 1);
        const int t1 = std::clamp(static_cast<int>((view_x1 - o.x) / slot) + 2, t0 + 1, n);
        for (int p = 0; p < 2; ++p) {
            const std::vector<float> mean = CentredMean(parts[p], window);
            std::vector<ImVec2> points;
            for (int t = t0; t < t1; ++t)
                if (std::isfinite(mean[t])) points.emplace_back(o.x + (t + 0.5f) * slot, zero_y - mean[t] * scale);
            if (points.size() < 2) continue;
            draw->AddPolyline(points.data(), static_cast<int>(points.size()), IM_COL32(0, 0, 0, 200), ImDrawFlags_None, 4.0f);
            draw->AddPolyline(points.data(), static_cast<int>(points.size()), colors[p], ImDrawFlags_None, 2.0f);
        }
    }
    {  // bar t is the loss of token t + 1: its index and label
        const ImU32 dim = ImGui::GetColorU32(ImGuiCol_TextDisabled);
        const float per_label = ImGui::CalcTextSize("000 www").x + 10.0f;  // a label every few bars, each with room for a short piece
        const int step = NiceStride(per_label / slot);
        for (int t = step - 1; t < n; t += step) {
            const float x = o.x + (t + 0.5f) * slot;
            if (!ImGui::IsRectVisible(ImVec2(x - per_label, o.y), ImVec2(x + per_label, o.y + plot_h + line + 4.0f))) continue;
            const std::string label =
                std::to_string(t + 1) + " " + viz::EllipsizeText(m_labels[t + 1], std::max(ImGui::CalcTextSize("www").x, step * slot - 10.0f - ImGui::CalcTextSize("000 ").x));
            draw->AddLine(ImVec2(x, o.y + plot_h), ImVec2(x, o.y + plot_h + 3.0f), dim);
            // The index centred on its tick, the token after it (centring the whole put the tick between them).
            draw->AddText(ImVec2(std::round(x - ImGui::CalcTextSize(std::to_string(t + 1).c_str()).x * 0.5f), o.y + plot_h + 3.0f), dim, label.c_str());
        }
    }
    ImGui::SetCursorScreenPos(ImVec2(o.x, o.y + plot_h + line + 4.0f));
    ImGui::Dummy(ImVec2(n * slot, 0.0f));
    ImGui::EndChild();
    // A narrow pane wraps the caption between words rather than cutting it (or breaking a number).
    Caption("axis \xC2\xB1" + FormatNumber(most) + " nats; orange: " + TemperaturePartName(a) + ", green: drift" +
            (window > 0 ? "; lines: means over " + std::to_string(window) + " tokens" : ""));
    if (hovered >= 0) {
        const int t = hovered;
        viz::Tooltip("token %d '%s'\nloss: SSA %s, tau = 1 %s, base %s\ntemperatures %s, drift %s, change %s", t + 1, m_labels[t + 1].c_str(),
                          Nats(a.loss[t]).c_str(), Nats(a.loss_compare[t]).c_str(), Nats(a.loss_base[t]).c_str(),
                          Nats(a.loss[t] - a.loss_compare[t], true).c_str(), Nats(a.loss_compare[t] - a.loss_base[t], true).c_str(),
                          Nats(a.loss[t] - a.loss_base[t], true).c_str());
    }
}

}  // namespace app
