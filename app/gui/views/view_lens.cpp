#include "app/gui/views/view_lens.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <utility>

#include <imgui.h>

#include "app/core/names.h"
#include "app/export/export_figures.h"
#include "app/gui/views/view_common.h"
#include "viz/imgui/widgets.h"
#include "viz/palette.h"
#include "viz/ticks.h"

namespace app {
namespace {


std::string Piece(const AppState& state, int32_t id) {
    if (!state.vocab || id < 0 || static_cast<size_t>(id) >= state.vocab->size()) return "?";
    return TokenLabel((*state.vocab)[id]);
}

// "after L3" for row l + 1 of the lens; "embeddings" for row 0.
// A loss as the probability it stands for, in at most 4 significant characters (tiny ones as 2.1e-05).
std::string P(float loss) { return FormatNumber(std::exp(-loss)); }

std::string RowName(int row) { return row == 0 ? "embeddings" : "after L" + std::to_string(row - 1); }

// A signed bar from `zero` (x) to the value's place, in a row of height h.
void Bar(ImDrawList* draw, float zero, float scale, float y, float h, float v, ImU32 color) {
    if (!std::isfinite(v)) return;
    const float x = zero + v * scale;
    draw->AddRectFilled(ImVec2(std::min(x, zero), y), ImVec2(std::max(x, zero) + 1.0f, y + h), color);
}

// p(the next token) as a cell's shade: log scale, 1e-4 (0) to 1 (1).
float Shade(float loss) {
    const float p = std::exp(-loss);
    return std::isfinite(p) && p > 0 ? std::clamp((std::log10(p) + 4.0f) / 4.0f, 0.0f, 1.0f) : 0.0f;
}

}  // namespace

LensView::Parts LensView::PartsOf(const model::Lens& s, int t) {
    const int L = s.n_layer, H = s.n_head, n = s.n_tokens - 1;
    Parts p;
    for (int i = 0; i < L * H; ++i) p.heads.push_back(s.dla[static_cast<size_t>(i) * n + t]);
    for (int l = 0; l < L; ++l) p.mlp.push_back(s.dla_mlp[static_cast<size_t>(l) * n + t]);
    p.embed = s.dla_embed[t];
    p.constants = s.dla_const[t];
    p.logit = s.logit[t];
    if (static_cast<size_t>(t) < s.dla_divisor.size() && static_cast<size_t>(t) < s.dla_free.size()) p.divisor = s.dla_divisor[t], p.free = s.dla_free[t];
    return p;
}

LensView::Parts LensView::PartsOf(const model::LensAt& x, int n_layer, int n_head) {
    const size_t heads = static_cast<size_t>(n_layer) * n_head;
    Parts p;
    if (x.parts.size() != heads + n_layer + 2) return p;
    p.heads.assign(x.parts.begin(), x.parts.begin() + heads);
    p.mlp.assign(x.parts.begin() + heads, x.parts.begin() + heads + n_layer);
    p.embed = x.parts[heads + n_layer];
    p.constants = x.parts[heads + n_layer + 1];
    p.logit = x.logit;
    p.divisor = x.divisor;
    p.free = x.free;
    p.target = x.target;
    return p;
}

LensView::Parts LensView::ThroughDivisor(const Parts& x, float to) {
    if (!(x.divisor > 0.0f) || !(to > 0.0f) || x.heads.empty()) return x;
    Parts p = x;
    p.norm = model::ReadThroughDivisor(&p.heads, &p.mlp, &p.embed, &p.constants, x.divisor, x.free, to, x.logit);
    p.divisor = to;
    return p;
}

void LensView::Draw(WindowState& state) {
    if (DrawNoAnalysisNote(state)) return;
    const model::Analysis& a = *state.analysis;
    const bool current = CurrentLens(state) != nullptr;  // stale once the text, the model or the comparison changed
    if (state.lens_running) {  // a long lens (a GPT-2-sized model: some 20 s on two cores) can be stopped
        if (ImGui::Button("Stop")) state.cancel_job_request = true;
        viz::ItemTooltip("Esc. Stops the lens; the grid it had stays, and Run the lens starts it again.");
    } else {
        ImGui::BeginDisabled(a.n_tokens < 2 || current);
        if (ImGui::Button(state.lens && !current ? "Run the lens again" : "Run the lens")) state.lens_request = true;
        ImGui::EndDisabled();
        viz::ItemTooltip("The logit lens and direct logit attribution of the shown text: a forward pass of SSA and one of its "
                         "comparison that keep the residual stream (`ssaviz export --lens` writes the same numbers).");
    }
    ImGui::SameLine();
    viz::HelpMarker("Logit lens: the residual stream after each layer, read through the final norm and the output head, as if the "
                    "model stopped there. Each cell shows the token it would predict next, coloured by the probability it gives "
                    "the actual next token (bright: that layer already predicts it).\n"
                    "Attribution: how much each head (its attention-weighted values, tau_v applied, through its slice of the "
                    "output projection) and each MLP add to the next token's logit, the final norm's scale held at the final "
                    "residual's; the parts, with the embeddings and biases, sum to the logit. Beside another side, every side's "
                    "parts are read through SSA's divisor, so that a part that wrote the same reads the same, and a final norm "
                    "row holds what a side's own divisor adds.\n"
                    "Click a column to select that query.\n"
                    "With a layer-local comparison each layer runs again at tau = 1 on SSA's own input: a head's two bars "
                    "differ by its own layer's temperatures alone, and the comparison's logit is its parts' sum (no single "
                    "pass computes it).\n"
                    "Beside a base, hover a head's or a layer's row: fine-tuning's change to its part splits into the "
                    "temperatures' (SSA - tau = 1) and the other weights' drift (tau = 1 - base).");
    char running[48];
    std::snprintf(running, sizeof running, "running... %.0f%%", 100.0f * state.progress);
    const char* what = state.lens_running ? running
                       : !state.lens     ? "what each layer and head writes: not run yet"
                       : !current        ? "the text, model or comparison changed since it ran"
                                         : "every position, of the text as shown";
    SameLineIfFits(ImGui::CalcTextSize(what).x);
    Caption(what);
    const int T = a.n_tokens;
    if (T < 2) return;
    // The selected query, or with none the last position that has a next token; the last token
    // has none in the text, so its attribution is of SSA's top prediction there (what comes after
    // the text), as it is at any position on asking.
    const LensTabAt tab = LensTabPosition(state);
    const int position = static_cast<int>(tab.position);
    const bool last = position == T - 1;
    const LensTarget wanted = tab.target;
    const bool one_position = wanted != LensTarget::Next;  // the worker's one position: the whole lens holds the next token's only
    const std::string cmp = CompareName(a);
    if (state.query < 0)
        Caption("no query chosen: position " + std::to_string(position) + ", which predicts the last token (click a token for another)");
    else if (last)
        Caption("the last token: what the model predicts after the text, and whose parts write SSA's top prediction there");
    const bool full = state.lens && current;
    if (full) {
        const LensPair& lens = *state.lens;
        DrawGridModes(state, lens, cmp);
        DrawGrid(state, lens, GridMode(state, lens), cmp, std::min(position, T - 2));
        ImGui::Separator();
        if (!one_position) {
            DrawTarget(state, last);
            const Parts ssa = PartsOf(lens.ssa, position);
            const Parts compare = lens.compare ? PartsOf(*lens.compare, position) : Parts{};
            const Parts base = lens.base ? PartsOf(*lens.base, position) : Parts{};
            return DrawAttribution(state, position, ssa, lens.compare ? &compare : nullptr, lens.base ? &base : nullptr, cmp);
        }
    }
    // Until the whole lens runs, and for SSA's top prediction: the selected query's column and
    // attribution alone, read from a residual stream the worker keeps (the first position of a
    // text runs the forward pass).
    const LensAtPair* at = state.lens_at.get();
    const bool this_text = at && at->ids == a.tokens.ids && state.model && at->model_dir == state.model->dir &&
                           at->compare_label == LensKey(a);
    if (!this_text || at->position != position || at->target != wanted) state.lens_at_wanted = position;  // another's stays shown meanwhile
    if (!this_text) {
        ImGui::TextDisabled("reading position %d's residual stream...", position);
        return;
    }
    if (!full) Caption("the selected query (click a token for another); Run the lens: every position");
    DrawColumn(state, *at, cmp);
    ImGui::Separator();
    DrawTarget(state, last);
    Parts ssa = PartsOf(at->ssa, a.n_layer, a.n_head);
    Parts compare = at->compare ? PartsOf(*at->compare, a.n_layer, a.n_head) : Parts{};
    Parts base = at->base ? PartsOf(*at->base, a.n_layer, a.n_head) : Parts{};
    if (ssa.heads.empty()) return;
    ssa.versus = compare.versus = base.versus = at->versus;
    DrawAttribution(state, static_cast<int>(at->position), ssa, at->compare && !compare.heads.empty() ? &compare : nullptr,
                    at->base && !base.heads.empty() ? &base : nullptr, cmp);
}

void LensView::DrawTarget(WindowState& state, bool last) {
    ImGui::AlignTextToFramePadding();
    ImGui::TextUnformatted("Attribute");
    if (last) {  // no next token in the text: the top prediction only
        ImGui::SameLine();
        ImGui::TextDisabled("SSA's top prediction (the last token has no next token)");
        return;
    }
    struct Choice {
        LensTarget target;
        const char* label;
        const char* help;
    } const choices[] = {
        {LensTarget::Next, "the next token", "Each part's share of the logit of the token the text has next (dla.npy's)."},
        {LensTarget::Top, "SSA's top prediction",
         "Each part's share of the logit of the token SSA predicts at this position (after its last layer), on every side: which "
         "heads and MLPs write the model's own guess, where it differs from the text's next token (Python: a.attribute(position, token))."},
        {LensTarget::NextAgainstOther, "next - SSA's other",
         "The logit difference: each part's share of the next token's logit minus its share of SSA's most likely other token's "
         "(its top prediction, or its second where the top is the next token), on every side: the parts above 0 push the model "
         "toward the text's token, those below toward its rival."}};
    const float radio = ImGui::GetFrameHeight() + ImGui::GetStyle().ItemInnerSpacing.x;
    for (const Choice& c : choices) {
        SameLineIfFits(radio + ImGui::CalcTextSize(c.label).x);
        if (ImGui::RadioButton(c.label, state.settings.lens_target == c.target)) state.settings.lens_target = c.target;
        viz::ItemTooltip(c.help);
    }
}

void LensView::DrawColumn(WindowState& state, const LensAtPair& at, const std::string& compare_name) {
    const model::LensAt& s = at.ssa;
    const model::Analysis& a = *state.analysis;
    const int k = s.top_k, rows = k > 0 ? static_cast<int>(s.top_ids.size()) / k : 0;
    const int t = static_cast<int>(at.position);
    if (rows == 0 || t >= a.n_tokens || s.top_probs.size() != s.top_ids.size()) return;
    // The cells name each layer's top token; their colours and numbers are p(the next token), or at
    // the last token, which has none in the text, the top token's own p.
    const bool has_next = t + 1 < a.n_tokens && s.loss.size() == static_cast<size_t>(rows);
    auto loss_at = [&](int r) { return has_next ? s.loss[r] : -std::log(s.top_probs[static_cast<size_t>(r) * k]); };
    const std::string next = has_next ? TokenLabel(a.tokens.pieces[t + 1]) : "";
    WrappedLine("Position " + std::to_string(t) + " '" + TokenLabel(a.tokens.pieces[t]) +
                    (has_next ? "' -> '" + next + "': each layer's most likely token, and p('" + next + "')"
                              : "', the last token: each layer's most likely token after the text, and its p"),
                ": ");
    const float line = ImGui::GetTextLineHeight();
    const float label_w = std::max(ImGui::CalcTextSize("embeddings").x, ImGui::CalcTextSize(RowName(rows - 1).c_str()).x) + 8.0f, cell_w = line * 6.0f;
    const float cell_h = std::clamp(std::floor((ImGui::GetContentRegionAvail().y * 0.45f) / rows), 4.0f, line + 2.0f);
    const ImVec2 o = ImGui::GetCursorScreenPos();
    ImDrawList* draw = ImGui::GetWindowDrawList();
    int hovered = -1;
    const model::LensAt* c = has_next && at.compare && at.compare->loss.size() == s.loss.size() ? &*at.compare : nullptr;
    const model::LensAt* base = has_next && at.base && at.base->loss.size() == s.loss.size() ? &*at.base : nullptr;
    // Each row's p(next), the other sides' beside it where the pane has room (else on hover).
    const float numbers_w = o.x + ImGui::GetContentRegionAvail().x - (o.x + label_w + cell_w + 8.0f);
    auto sides = [&](int r) {
        std::string text = P(loss_at(r));
        if (c) text += "  (" + compare_name + ": " + P(c->loss[r]) + (base ? ", base: " + P(base->loss[r]) : "") + ")";
        return text;
    };
    bool all_sides = true;
    for (int r = 0; r < rows; ++r) all_sides = all_sides && ImGui::CalcTextSize(sides(r).c_str()).x <= numbers_w;
    for (int r = 0; r < rows; ++r) {
        const float y = o.y + r * cell_h;
        const float shade = Shade(loss_at(r));
        const ImVec2 p0(o.x + label_w, y), p1(o.x + label_w + cell_w, y + cell_h - 1.0f);
        draw->AddRectFilled(p0, p1, viz::ToImU32(viz::SampleColormap(viz::Colormap::Viridis, shade)));
        draw->AddText(ImVec2(o.x, y + (cell_h - line) * 0.5f), ImGui::GetColorU32(ImGuiCol_Text), RowName(r).c_str());  // as lens.png's rows
        if (cell_h >= line) {
            const std::string shown = viz::EllipsizeText(Piece(state, s.top_ids[static_cast<size_t>(r) * k]), cell_w - 4.0f);
            draw->AddText(ImVec2(p0.x + 2.0f, y + (cell_h - line) * 0.5f - 0.5f), shade > 0.6f ? IM_COL32(0, 0, 0, 255) : IM_COL32(255, 255, 255, 230),
                          shown.c_str());
            const std::string numbers = all_sides ? sides(r) : P(loss_at(r));
            draw->AddText(ImVec2(p1.x + 8.0f, y + (cell_h - line) * 0.5f), ImGui::GetColorU32(ImGuiCol_TextDisabled), numbers.c_str());
        }
        if (ImGui::IsMouseHoveringRect(ImVec2(o.x, y), ImVec2(p1.x + 8.0f + line * 14.0f, y + cell_h))) hovered = r;
    }
    const float height = rows * cell_h;
    ImGui::Dummy(ImVec2(std::min(label_w + cell_w + line * (at.base ? 20.0f : 14.0f), ImGui::GetContentRegionAvail().x), height));
    state.regions["lens_column"] = Rect{o.x, o.y, label_w + cell_w, height};
    if (hovered >= 0 && ImGui::IsWindowHovered()) {
        std::string top;
        for (int j = 0; j < k; ++j) {
            const size_t i = static_cast<size_t>(hovered) * k + j;
            char buf[96];
            std::snprintf(buf, sizeof buf, "\n  %s  '%s'", FormatNumber(s.top_probs[i]).c_str(), Piece(state, s.top_ids[i]).c_str());
            top += buf;
        }
        std::string others;
        if (c) others += "\n" + compare_name + ": p = " + P(c->loss[hovered]);
        if (base) others += "\nbase: p = " + P(base->loss[hovered]);
        if (has_next)
            viz::Tooltip("%s, position %d\nnext token '%s': p = %.4g (loss %.3f)%s\nmost likely:%s", RowName(hovered).c_str(), t, next.c_str(),
                              std::exp(-s.loss[hovered]), s.loss[hovered], others.c_str(), top.c_str());
        else
            viz::Tooltip("%s, position %d, the last token (no next token in the text)\nmost likely:%s", RowName(hovered).c_str(), t, top.c_str());
    }
}

LensView::GridSides LensView::SidesOf(const WindowState& state, const LensPair& lens, LensGrid grid, const std::string& compare_name) {
    const model::Lens* compare = lens.compare ? &*lens.compare : nullptr;
    const model::Lens* base = lens.base ? &*lens.base : nullptr;
    switch (grid) {
        case LensGrid::Ssa: return {&lens.ssa, nullptr, "SSA", ""};
        case LensGrid::Compare: return {compare, nullptr, compare_name, ""};
        case LensGrid::Base: return {base, nullptr, "base", ""};
        case LensGrid::Difference: return {compare ? &lens.ssa : nullptr, compare, "SSA", compare_name};
        case LensGrid::BaseDifference: return {base ? &lens.ssa : nullptr, base, "SSA", "base"};
        case LensGrid::Drift:  // beside a base the comparison is SSA's weights at tau = 1
            return {base && state.analysis->HasBase() ? compare : nullptr, base, compare_name, "base"};
    }
    return {};
}

LensGrid LensView::GridMode(const WindowState& state, const LensPair& lens) {
    const LensGrid asked = state.settings.lens_map;
    return SidesOf(state, lens, asked, "").from ? asked : LensGrid::Ssa;  // the setting stays, for the next lens that has that side
}

void LensView::DrawGridModes(WindowState& state, const LensPair& lens, const std::string& compare_name) {
    const std::pair<LensGrid, std::string> choices[] = {{LensGrid::Ssa, "SSA"},
                                                        {LensGrid::Compare, compare_name},
                                                        {LensGrid::Difference, "SSA - " + compare_name},
                                                        {LensGrid::Base, "base"},
                                                        {LensGrid::BaseDifference, "SSA - base"},
                                                        {LensGrid::Drift, compare_name + " - base"}};
    const LensGrid mode = GridMode(state, lens);
    ImGui::AlignTextToFramePadding();
    ImGui::TextUnformatted("Grid");
    const float radio = ImGui::GetFrameHeight() + ImGui::GetStyle().ItemInnerSpacing.x;
    for (const auto& [grid, label] : choices) {
        if (!SidesOf(state, lens, grid, compare_name).from) continue;
        SameLineIfFits(radio + ImGui::CalcTextSize(label.c_str()).x);  // a narrow pane takes the rest on the next line
        if (ImGui::RadioButton((label + "##lens_grid_mode").c_str(), mode == grid)) state.settings.lens_map = grid;
        if (grid == LensGrid::Drift && ImGui::IsItemHovered())
            viz::Tooltip("The other weights' drift: %s's loss of the next token minus the base's. With the temperatures'\n"
                         "part (SSA - %s) it makes all that fine-tuning changed (SSA - base); the three on one scale.",
                         compare_name.c_str(), compare_name.c_str());
    }
    SameLineIfFits(ImGui::CalcTextSize("(?)").x);
    viz::HelpMarker("Whose logit lens the grid shows. The differences colour each cell by one side's loss of the actual next token "
                    "(-log p) minus another's, in nats, read after that layer (blue: the first predicts it better, red: worse, as "
                    "the token strip's and the Fine-tune tab's loss changes): with a base, where in depth and in the text "
                    "fine-tuning changed the prediction, and which of its parts did: the temperatures (SSA - tau = 1) or the "
                    "other weights' drift (tau = 1 - base).");
}

void LensView::DrawGrid(WindowState& state, const LensPair& lens, LensGrid mode, const std::string& compare_name, int position) {
    const GridSides sides = SidesOf(state, lens, mode, compare_name);
    if (!sides.from) return;
    const bool difference = sides.minus != nullptr;
    const model::Lens& s = *sides.from;  // a difference's first side, or the side shown
    const model::Lens& other = difference ? *sides.minus : s;
    const model::Lens& shown = s;  // whose pieces and top lists the cells name
    const int rows = s.n_layer + 1, T = s.n_tokens, n = T - 1;
    const size_t cells = static_cast<size_t>(rows) * n;
    auto whole = [&](const model::Lens& x) {
        return x.loss.size() == cells && x.top_ids.size() == static_cast<size_t>(rows) * T * x.top_k && x.top_probs.size() == x.top_ids.size();
    };
    if (!whole(s) || !whole(other)) return;  // the tooltip reads both sides' top lists
    if (m_for != state.lens || m_for_mode != mode) {
        m_for = state.lens;
        m_for_mode = mode;
        m_pieces.clear();
        for (size_t k = 0; k < shown.top_ids.size(); k += shown.top_k) m_pieces.push_back(Piece(state, shown.top_ids[k]));
        // A difference's cells, the first side's loss of the next token minus the other's, on a symmetric scale over the grid.
        m_difference = difference ? LensDifferenceOf(s, other) : LensDifference{};
        // Beside a base, the fine-tune's differences on one scale, as the exported figures (lens_diff*).
        if (difference && lens.compare && lens.base && state.analysis->HasBase() && !m_difference.delta.empty())
            m_difference.most = FineTuneLensScale(lens.ssa, *lens.compare, *lens.base).most;
    }
    if (difference && m_difference.delta.size() != cells) return;
    const float most = m_difference.most;
    auto delta = [&](size_t i) { return m_difference.delta[i]; };
    const std::string& first_name = sides.from_name;
    const std::string& other_name = difference ? sides.minus_name : sides.from_name;
    const float line = ImGui::GetTextLineHeight();
    const float label_w = std::max(ImGui::CalcTextSize("embeddings").x, ImGui::CalcTextSize(RowName(rows - 1).c_str()).x) + 8.0f;
    const float cell_h = std::clamp(std::floor((ImGui::GetContentRegionAvail().y * 0.45f - line) / rows), 4.0f, line + 4.0f);
    // The colour bar beside the grid, as the other maps have one, where it costs the cells no
    // names (each cell names the token it predicts where it has room for a piece; else hovering does).
    const float bar_w = viz::ColorBarWidth(), gap = ImGui::GetStyle().ItemSpacing.x;
    auto cell_width = [&](float avail) { return std::max(6.0f, std::min(line * 4.0f, std::floor((avail - label_w) / std::max(n, 1)))); };
    auto names_fit = [&](float w) { return w >= line * 1.5f && cell_h >= line; };
    const float pane_w = ImGui::GetContentRegionAvail().x;
    const bool bar = pane_w - bar_w - gap > label_w + 6.0f && names_fit(cell_width(pane_w - bar_w - gap)) == names_fit(cell_width(pane_w));
    const float avail = bar ? pane_w - bar_w - gap : pane_w;
    const float cell_w = cell_width(avail);
    const bool named = names_fit(cell_w);
    const char* naming = named ? "text" : "hover a cell";
    // The caption wraps in a narrow pane between words (ImGui's own wrap broke "+6.26" after its '.').
    if (difference) {
        char caption[512];
        std::snprintf(caption, sizeof caption, "colour: loss of the next token, %s - %s: -%.3g (blue: %s predicts it better) to +%.3g (red: worse) "
                      "nats%s; %s: %s's prediction",
                      first_name.c_str(), other_name.c_str(), most, first_name.c_str(), most, m_difference.Clips() ? " *" : "", naming,
                      first_name.c_str());
        Caption(caption);
        if (m_difference.Clips() && ImGui::IsItemHovered())
            viz::Tooltip("The scale ends at the 99th percentile of the cells' |difference|, %.3g nats; the largest, %.3g, and the\n"
                              "others beyond the scale are drawn in its end colours (hover a cell for its value).",
                              m_difference.most, m_difference.largest);
    }
    else
        Caption("colour: p(the next token) after each layer" + (mode == LensGrid::Ssa ? std::string() : " (" + other_name + ")") +
                ", log scale 1e-4 (dark) to 1; " + naming + ": the token it predicts; columns: the query positions, each predicting the token after it");
    // A cell's colour, and whether its piece is written on it in white.
    auto shade_of = [&](int r, int t) -> std::pair<viz::Rgba8, bool> {
        const size_t i = static_cast<size_t>(r) * n + t;
        if (difference) {
            const float d = delta(i);
            if (!std::isfinite(d)) return {viz::Rgba8{90, 90, 90, 255}, true};
            const float u = 0.5f + 0.5f * std::clamp(d / most, -1.0f, 1.0f);
            return {viz::SampleColormap(viz::Colormap::Diverging, u), std::abs(u - 0.5f) > 0.3f};
        }
        const float shade = Shade(other.loss[i]);
        return {viz::SampleColormap(viz::Colormap::Viridis, shade), shade <= 0.6f};
    };
    CellGrid grid;
    grid.id = "##lens_grid";
    // The attribution's position framed, and scrolled to when it changes (with no query chosen too:
    // the last position stayed out of view and unmarked).
    grid.rows = rows, grid.columns = n, grid.cell_w = cell_w, grid.cell_h = cell_h, grid.query = position;
    grid.width = std::min(avail, label_w + n * cell_w + ImGui::GetStyle().ScrollbarSize);
    grid.follow_query = std::exchange(m_grid_query, position) != position;
    grid.colour = [&](int r, int t) { return shade_of(r, t).first; };
    grid.row_name = [](int r) { return RowName(r); };  // as lens.png's rows
    grid.piece = [&](int t) { return TokenLabel(state.analysis->tokens.pieces[t]); };
    grid.axis = "position", grid.axis_with_pieces = "query";
    if (named)
        grid.over_cell = [&](ImDrawList* draw, ImVec2 p0, ImVec2, int r, int t) {
            const std::string text = viz::EllipsizeText(m_pieces[static_cast<size_t>(r) * T + t], cell_w - 4.0f);
            draw->AddText(ImVec2(p0.x + 2.0f, p0.y + (cell_h - line) * 0.5f - 0.5f),
                          shade_of(r, t).second ? IM_COL32(255, 255, 255, 230) : IM_COL32(0, 0, 0, 255), text.c_str());
        };
    const CellGridHit hit = DrawCellGrid(grid);
    const int hovered_row = hit.row, hovered_t = hit.column;
    if (bar) {
        ImGui::SameLine(0.0f, gap);
        const ImVec2 bar_size(bar_w, std::max(line * 3.0f, rows * cell_h));
        if (difference)
            viz::ColorBar("##lens_colorbar", ("loss of the next token, " + first_name + " - " + other_name + " (nats)").c_str(), viz::Colormap::Diverging,
                          viz::Range{-most, most}, false, bar_size);
        else
            viz::ColorBar("##lens_colorbar", "p(the next token)", viz::Colormap::Viridis, viz::Range{1e-4f, 1.0f}, true, bar_size);
    }
    if (hovered_t >= 0) {
        if (ImGui::IsMouseClicked(ImGuiMouseButton_Left)) state.query = hovered_t;
        const model::Analysis& a = *state.analysis;
        auto top_of = [&](const model::Lens& x) {
            std::string top;
            for (int k = 0; k < x.top_k; ++k) {
                const size_t at = (static_cast<size_t>(hovered_row) * T + hovered_t) * x.top_k + k;
                char buf[96];
                std::snprintf(buf, sizeof buf, "\n  %s  '%s'", FormatNumber(x.top_probs[at]).c_str(), Piece(state, x.top_ids[at]).c_str());
                top += buf;
            }
            return top;
        };
        const size_t i = static_cast<size_t>(hovered_row) * n + hovered_t;
        const std::string where = RowName(hovered_row) + ", position " + std::to_string(hovered_t) + " '" +
                                  TokenLabel(a.tokens.pieces[hovered_t]) + "'\nnext token '" + TokenLabel(a.tokens.pieces[hovered_t + 1]) + "': ";
        if (difference)
            viz::Tooltip("%sp = %.4g %s, %.4g %s (loss change %+.3f nats)\n%s's most likely:%s\n%s's most likely:%s", where.c_str(),
                              std::exp(-s.loss[i]), first_name.c_str(), std::exp(-other.loss[i]), other_name.c_str(), delta(i),
                              first_name.c_str(), top_of(s).c_str(), other_name.c_str(), top_of(other).c_str());
        else
            viz::Tooltip("%sp = %.4g (loss %.3f)\nmost likely:%s", where.c_str(), std::exp(-other.loss[i]), other.loss[i],
                              top_of(other).c_str());
    }
    state.regions["lens_grid"] = hit.cells;
}

void LensView::DrawAttribution(WindowState& state, int t, const Parts& s, const Parts* own_c, const Parts* own_b, const std::string& cmp) {
    const model::Analysis& a = *state.analysis;
    const int L = static_cast<int>(s.mlp.size()), H = L > 0 ? static_cast<int>(s.heads.size()) / L : 0;
    if (H == 0 || (own_c && own_c->heads.size() != s.heads.size())) return;
    if (own_b && own_b->heads.size() != s.heads.size()) own_b = nullptr;
    // The other sides read through SSA's final-norm divisor: through their own, a part that wrote
    // the same vector read apart by the ratio of the divisors (an unchanged embedding's part moved
    // more between SSA and its base than the layer fine-tuning changed). The "final norm" row holds
    // what a side's own divisor adds, so each side's rows still sum to its logit.
    const Parts through_c = own_c ? ThroughDivisor(*own_c, s.divisor) : Parts{}, through_b = own_b ? ThroughDivisor(*own_b, s.divisor) : Parts{};
    const Parts* c = own_c ? &through_c : nullptr;
    const Parts* b = own_b ? &through_b : nullptr;
    // Whose logit: the text's next token, or SSA's top prediction (the last token's, or asked for).
    const bool next = t + 1 < a.n_tokens && (s.target < 0 || a.tokens.ids[t + 1] == s.target);
    const std::string next_name = next ? TokenLabel(a.tokens.pieces[t + 1]) : Piece(state, s.target);
    const std::string versus = s.versus >= 0 ? Piece(state, s.versus) : "";
    // What the bars split: a token's logit, or the next token's minus SSA's other's.
    const std::string whose = versus.empty() ? " of the logit of '" + next_name + "':" : " of logit('" + next_name + "') - logit('" + versus + "'):";
    // The header and every side's logit in one wrapped line (a side's put after a wrapped header
    // stood at its first line's end).
    char buf[160];
    std::snprintf(buf, sizeof buf, ": %s %.3f (SSA)", versus.empty() ? "logit" : "logit difference", s.logit);
    std::string logit = buf;
    if (c) {
        const bool local = a.comparison == model::Comparison::LayerLocal && !HasTwin(a) && !a.HasBase();
        std::snprintf(buf, sizeof buf, local ? ", %.3f (%s: its parts' sum)" : ", %.3f (%s)", c->logit, cmp.c_str());
        logit += buf;
    }
    if (b) {
        std::snprintf(buf, sizeof buf, ", %.3f (base)", b->logit);
        logit += buf;
    }
    WrappedLine("Position " + std::to_string(t) + " '" + TokenLabel(a.tokens.pieces[t]) + (next ? "' -> '" : "', SSA's top prediction '") + next_name +
                    (versus.empty() ? "'" : "' against SSA's other '" + versus + "'") + logit,
                ": ");
    auto at = [&](const Parts& x, int l, int h) { return x.heads[static_cast<size_t>(l) * H + h]; };
    // Heads by the size of their SSA part (with a base, on request, by how much fine-tuning changed
    // it); the other sides beside each.
    const bool by_change = b && m_by_change;
    auto rank = [&](int k) { return std::abs(at(s, k / H, k % H) - (by_change ? at(*b, k / H, k % H) : 0.0f)); };
    std::vector<int> order(static_cast<size_t>(L) * H);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return rank(x) > rank(y); });
    const int shown = order.size() <= 16 ? static_cast<int>(order.size()) : 12;  // a small model's every head (it left 4 of 16 out)
    // The sides as bars, SSA first.
    struct Side {
        const Parts* parts;
        ImU32 color;
        std::string name;
    };
    std::vector<Side> sides = {{&s, viz::ToImU32(viz::kSsaColor), "SSA"}};
    if (c) sides.push_back({c, viz::ToImU32(viz::kCompareColor), cmp});
    if (b) sides.push_back({b, viz::ToImU32(viz::kBaseColor), "base"});
    // Two scales: the heads' (every side), and the layers' totals with the embeddings and biases.
    float most = 1e-6f, most_layer = 1e-6f;
    for (int k = 0; k < shown; ++k)
        for (const Side& side : sides) most = std::max(most, std::abs(at(*side.parts, order[k] / H, order[k] % H)));
    auto attention_of = [&](const Parts& x, int l) {
        float sum = 0;
        for (int h = 0; h < H; ++h) sum += at(x, l, h);
        return sum;
    };
    for (const Side& side : sides) {
        const Parts& x = *side.parts;
        for (int l = 0; l < L; ++l) most_layer = std::max({most_layer, std::abs(attention_of(x, l)), std::abs(x.mlp[l])});
        most_layer = std::max({most_layer, std::abs(x.embed), std::abs(x.constants), std::abs(x.norm)});
    }
    float* scale_of = &most;
    const float line = ImGui::GetTextLineHeight();
    // The numbers' column as wide as its numbers are (it reserved a side more than it wrote: a
    // narrow pane cut the base's column, "+0.57" for +0.573); in two decimals where three leave the
    // bars too little room.
    const float label_w = std::max(ImGui::CalcTextSize("L00 H00 ").x, ImGui::CalcTextSize("embeddings ").x), avail = ImGui::GetContentRegionAvail().x;
    const bool tens = std::max(most, most_layer) >= 9.9995f;
    auto numbers_w = [&](const char* one) {
        const float n = static_cast<float>(sides.size());
        return n * ImGui::CalcTextSize(one).x + (n - 1) * ImGui::CalcTextSize("  ").x + 6.0f + ImGui::GetStyle().ScrollbarSize;
    };
    const int decimals = avail - label_w - numbers_w(tens ? "+00.000" : "+0.000") >= 60.0f ? 3 : 2;
    const char* widest = decimals == 3 ? (tens ? "+00.000" : "+0.000") : (tens ? "+00.00" : "+0.00");
    const float width = std::max(40.0f, avail - label_w - numbers_w(widest));
    const float column_w = ImGui::CalcTextSize(widest).x, column_gap = ImGui::CalcTextSize("  ").x;  // each side's number right-aligned in its column
    ImDrawList* draw = ImGui::GetWindowDrawList();
    // What a row's hover says: each side's part, and beside a base what fine-tuning changed, split
    // into the temperatures' part (SSA - tau = 1) and the other weights' drift (tau = 1 - base).
    auto explain = [&](const std::string& what, const std::vector<std::pair<float, ImU32>>& bars) {
        const bool plural = !what.empty() && what.back() == 's';  // "biases' part", "L1 MLP's part"
        std::string text = what + (plural ? "' part" : "'s part") + whose;
        char buf[96];
        for (size_t k = 0; k < bars.size() && k < sides.size(); ++k) {
            std::snprintf(buf, sizeof buf, "%s %s %+.4f", k ? "," : "", sides[k].name.c_str(), bars[k].first);
            text += buf;
        }
        if (b && c && a.HasBase() && bars.size() == 3) {
            std::snprintf(buf, sizeof buf, "\nfine-tuning changed it by %+.4f = temperatures %+.4f + drift %+.4f",
                          bars[0].first - bars[2].first, bars[0].first - bars[1].first, bars[1].first - bars[2].first);
            text += buf;
        } else if (bars.size() == 2) {
            std::snprintf(buf, sizeof buf, "\nSSA - %s: %+.4f", sides[1].name.c_str(), bars[0].first - bars[1].first);
            text += buf;
        }
        return text;
    };
    // One row: a bar a side, stacked in the row's height, and their numbers; hover names them.
    auto row = [&](const std::string& label, const std::vector<std::pair<float, ImU32>>& bars, HeadRef* head) {
        const ImVec2 p = ImGui::GetCursorScreenPos();
        const float zero = p.x + label_w + width * 0.5f, scale = width * 0.5f / *scale_of;
        ImGui::TextUnformatted(label.c_str());
        const float h = line / static_cast<float>(bars.size());
        for (size_t k = 0; k < bars.size(); ++k) {
            Bar(draw, zero, scale, p.y + h * static_cast<float>(k), h, bars[k].first, bars[k].second);
            char buf[32];
            std::snprintf(buf, sizeof buf, "%+.*f", decimals, bars[k].first);
            const std::string number = viz::SignlessZero(buf);
            const float right = p.x + label_w + width + 6.0f + column_w * static_cast<float>(k + 1) + column_gap * static_cast<float>(k);
            draw->AddText(ImVec2(right - ImGui::CalcTextSize(number.c_str()).x, p.y), ImGui::GetColorU32(ImGuiCol_Text), number.c_str());
        }
        draw->AddLine(ImVec2(zero, p.y), ImVec2(zero, p.y + line), IM_COL32(200, 200, 200, 90));
        ImGui::SetCursorScreenPos(ImVec2(p.x, p.y));
        ImGui::InvisibleButton(label.c_str(), ImVec2(label_w + width, line));
        if (ImGui::IsItemHovered())
            viz::Tooltip("%s%s", explain(label, bars).c_str(), head ? "\nclick shows this head, Ctrl+click pins it, right-click for what-ifs on it" : "");
        if (head) HandleHeadClick(state, *head);
    };
    if (b) {
        ImGui::TextDisabled("heads by");
        ImGui::SameLine();
        if (ImGui::RadioButton("their SSA part", !m_by_change)) m_by_change = false;
        viz::ItemTooltip("The heads that write most to the next token's logit in the fine-tune.");
        SameLineIfFits(ImGui::GetFrameHeight() + ImGui::GetStyle().ItemInnerSpacing.x + ImGui::CalcTextSize("change from base").x);
        if (ImGui::RadioButton("change from base", m_by_change)) m_by_change = true;
        viz::ItemTooltip("The heads whose part of the next token's logit fine-tuning changed most: |SSA - base|, both read through "
                         "SSA's final-norm divisor (a head that wrote the same reads no change). A head whose "
                         "SSA and tau = 1 bars differ owes its change to its temperatures; one whose tau = 1 and base bars "
                         "differ, to the other weights' drift.");
        const std::string legend = "(orange SSA, blue " + cmp + ", violet base); click selects the head";
        SameLineIfFits(ImGui::CalcTextSize(legend.c_str()).x);  // a narrow pane cut it at "blue ta", then at "click"
        Caption(legend);
    } else {
        Caption("heads by their part of the logit (orange SSA, blue " + cmp + "); click selects the head");
    }
    if (shown < static_cast<int>(order.size()))
        Caption("the " + std::to_string(shown) + " of " + std::to_string(order.size()) + " heads with the largest " +
                (by_change ? "change" : "part") + "; `ssaviz export --lens` writes every head's (dla.npy)");
    if (sides.size() > 1) {  // the numbers' columns named, in their sides' colours, over them
        const ImVec2 p = ImGui::GetCursorScreenPos();
        for (size_t k = 0; k < sides.size(); ++k) {
            const std::string name = viz::EllipsizeText(sides[k].name, column_w + column_gap * 0.5f);
            const float right = p.x + label_w + width + 6.0f + column_w * static_cast<float>(k + 1) + column_gap * static_cast<float>(k);
            draw->AddText(ImVec2(right - ImGui::CalcTextSize(name.c_str()).x, p.y), sides[k].color, name.c_str());
        }
        ImGui::Dummy(ImVec2(label_w + width, ImGui::GetTextLineHeight()));
    }
    const ImVec2 start = ImGui::GetCursorScreenPos();
    for (int k = 0; k < shown; ++k) {
        HeadRef head{order[k] / H, order[k] % H};
        std::vector<std::pair<float, ImU32>> bars;
        for (const Side& side : sides) bars.push_back({at(*side.parts, head.layer, head.head), side.color});
        row("L" + std::to_string(head.layer) + " H" + std::to_string(head.head), bars, &head);
    }
    const float heads_end = ImGui::GetCursorScreenPos().y;
    ImGui::Spacing();
    Caption(sides.size() > 1 ? "each layer: attention (its heads together) and MLP, every side (a scale of their own); final norm: what "
                               "a side's own divisor adds to its parts read through SSA's (?)"
                             : "each layer: attention (its heads together) and MLP (a scale of its own)");
    if (sides.size() > 1 && ImGui::IsItemHovered()) {
        std::string divisors = "SSA " + FormatNumber(s.divisor);
        if (c) divisors += ", " + cmp + " " + FormatNumber(own_c->divisor);
        if (b) divisors += ", base " + FormatNumber(own_b->divisor);
        viz::Tooltip("Every side's parts here are read through SSA's final-norm divisor at this position (%s), so a head, MLP or\n"
                     "embedding that wrote the same vector on two sides reads the same: through its own divisor each side's parts\n"
                     "are scaled by 1 / its divisor, and an unchanged part would read as changed. The final norm row is the rest\n"
                     "of each side's logit, what its own divisor adds; with it every side's rows sum to its logit.",
                     divisors.c_str());
    }
    const ImVec2 layers_start = ImGui::GetCursorScreenPos();
    scale_of = &most_layer;
    auto layer_row = [&](const std::string& label, auto&& value) {
        std::vector<std::pair<float, ImU32>> bars;
        for (const Side& side : sides) bars.push_back({value(*side.parts), side.color});
        row(label, bars, nullptr);
    };
    for (int l = 0; l < L; ++l) {
        layer_row("L" + std::to_string(l) + " attn", [&](const Parts& x) { return attention_of(x, l); });
        layer_row("L" + std::to_string(l) + " MLP", [&](const Parts& x) { return x.mlp[l]; });
    }
    layer_row("embeddings", [](const Parts& x) { return x.embed; });  // as the lens's rows
    layer_row("biases", [](const Parts& x) { return x.constants; });
    if (sides.size() > 1) layer_row("final norm", [](const Parts& x) { return x.norm; });
    state.regions["lens_attribution"] = Rect{start.x, start.y, label_w + width, heads_end - start.y};
    state.regions["lens_layers"] = Rect{layers_start.x, layers_start.y, label_w + width, ImGui::GetCursorScreenPos().y - layers_start.y};
}

}  // namespace app
