// The text view (view_text.h): the editor, the colouring controls and the token strip, whose chips
// are laid out once per width and coloured from values computed once per analysis and colouring.
//
// Index of this file:
// [SECTION] Token bytes as text, small helpers
// [SECTION] Draw, the editor and the colouring controls
// [SECTION] Values: what colours each chip, and its scale
// [SECTION] Labels and layout of the chips
// [SECTION] The strip: chips, selection, hover
// [SECTION] Tooltip: a token's bytes, numbers and losses

#include "app/gui/views/view_text.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>

#include <imgui.h>
#include <imgui_stdlib.h>

#include "app/gui/fonts.h"
#include "app/gui/views/view_common.h"
#include "model/text/tokenizer.h"
#include "model/text/utf8.h"
#include "viz/colormap.h"
#include "viz/imgui/widgets.h"

namespace app {
namespace {

//-------------------------------------------------------------------------------------------------
// [SECTION] Token bytes as text, small helpers
//-------------------------------------------------------------------------------------------------

// Chip geometry, in multiples of the font size so it follows the DPI scale.
constexpr float kChipPadX = 0.22f, kChipPadY = 0.10f, kChipGapX = 0.14f, kChipGapY = 0.22f;
constexpr float kStaleAlpha = 0.5f;  // chips of an analysis older than the text

bool IsControl(unsigned char c) { return c < 0x20 || c == 0x7F; }

void AppendHexByte(std::string* out, unsigned char c) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "\\x%02X", c);
    *out += buf;
}

// The piece as a C-style quoted string for the tooltip: escapes for control characters and for
// bytes that are not a whole UTF-8 character.
std::string QuotePiece(const std::string& piece) {
    std::string q = "\"";
    for (size_t i = 0; i < piece.size();) {
        const unsigned char c = static_cast<unsigned char>(piece[i]);
        const size_t len = model::DecodeUtf8(piece, i).length;
        if (c == '\n') q += "\\n";
        else if (c == '\t') q += "\\t";
        else if (c == '\r') q += "\\r";
        else if (c == '"') q += "\\\"";
        else if (c == '\\') q += "\\\\";
        else if (len == 0 || IsControl(c)) AppendHexByte(&q, c);
        else {
            q.append(piece, i, len);
            i += len;
            continue;
        }
        ++i;
    }
    return q + "\"";
}

std::string HexBytes(const std::string& piece) {
    std::string s;
    for (unsigned char c : piece) {
        char buf[4];
        std::snprintf(buf, sizeof(buf), "%s%02X", s.empty() ? "" : " ", c);
        s += buf;
    }
    return s;
}

// For a piece holding part of a UTF-8 character (byte-level BPE splits rare characters), the
// whole character(s) it belongs to, rebuilt from the neighbouring pieces; empty otherwise.
std::string CharacterAround(const model::Tokenization& tok, int i) {
    const std::string& piece = tok.pieces[i];
    bool partial = false;
    for (size_t k = 0; k < piece.size();) {
        const size_t len = model::DecodeUtf8(piece, k).length;
        if (len == 0) {
            partial = true;
            break;
        }
        k += len;
    }
    if (!partial) return {};
    std::string s;
    size_t begin = 0, end = 0;
    const int T = static_cast<int>(tok.pieces.size());
    for (int k = std::max(0, i - 3); k < std::min(T, i + 4); ++k) {
        if (k == i) begin = s.size();
        s += tok.pieces[k];
        if (k == i) end = s.size();
    }
    auto continuation = [&](size_t k) { return model::IsUtf8Continuation(static_cast<unsigned char>(s[k])); };
    while (begin > 0 && continuation(begin)) --begin;
    while (end < s.size() && continuation(end)) ++end;
    for (size_t k = begin; k < end;) {
        const size_t len = model::DecodeUtf8(s, k).length;
        if (len == 0) return {};
        k += len;
    }
    return s.substr(begin, end - begin);
}

// "U+4F60 U+597D" for the characters of valid UTF-8 text.
std::string CodePoints(const std::string& s) {
    std::string out;
    for (size_t k = 0; k < s.size();) {
        const char32_t cp = model::NextCodePoint(s, &k);
        char buf[16];
        std::snprintf(buf, sizeof(buf), "%sU+%04X", out.empty() ? "" : " ", static_cast<unsigned>(cp));
        out += buf;
    }
    return out;
}

bool IsAscii(const std::string& s) {
    return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

HeadRef ClampedHead(const AppState& state) {
    const int L = std::max(1, state.Layers()), H = std::max(1, state.Heads());
    return {std::clamp(state.selected.layer, 0, L - 1), std::clamp(state.selected.head, 0, H - 1)};
}

std::string ScopeLabel(TokenScope scope, HeadRef head) {
    char buf[48];
    switch (scope) {
        case TokenScope::Head: std::snprintf(buf, sizeof(buf), "L%d H%d", head.layer, head.head); break;
        case TokenScope::LayerMean: std::snprintf(buf, sizeof(buf), "layer %d mean", head.layer); break;
        case TokenScope::ModelMean: std::snprintf(buf, sizeof(buf), "mean over heads"); break;  // as the exported highlight says it
    }
    return buf;
}

ImU32 ToU32(viz::Rgba8 c, float alpha) { return IM_COL32(c.r, c.g, c.b, static_cast<int>(c.a * alpha)); }

// Black or white, whichever reads better on the background (WCAG relative luminance).
bool PrefersDarkText(viz::Rgba8 c) {
    auto lin = [](uint8_t v) {
        const float s = v / 255.0f;
        return s <= 0.04045f ? s / 12.92f : std::pow((s + 0.055f) / 1.055f, 2.4f);
    };
    return 0.2126f * lin(c.r) + 0.7152f * lin(c.g) + 0.0722f * lin(c.b) > 0.179f;
}

}  // namespace

//-------------------------------------------------------------------------------------------------
// [SECTION] Draw, the editor and the colouring controls
//-------------------------------------------------------------------------------------------------

void TextView::Draw(WindowState& state) {
    const float avail_h = ImGui::GetContentRegionAvail().y;
    const float line_h = ImGui::GetTextLineHeightWithSpacing();
    PaneLayout& layout = state.settings.layout;
    DrawEditor(state, std::max(3 * line_h, avail_h * layout.editor));
    if (layout.editor_open) {  // a splitter under the editor: drag to give it more or less of the column
        ImGui::InvisibleButton("##editor_splitter", ImVec2(-FLT_MIN, 6.0f));
        const bool hot = ImGui::IsItemHovered() || ImGui::IsItemActive();
        if (hot) ImGui::SetMouseCursor(ImGuiMouseCursor_ResizeNS);
        if (ImGui::IsItemActive() && avail_h > 0) layout.editor = std::clamp(layout.editor + ImGui::GetIO().MouseDelta.y / avail_h, 0.05f, 0.9f);
        const ImVec2 p0 = ImGui::GetItemRectMin(), p1 = ImGui::GetItemRectMax();
        ImGui::GetWindowDrawList()->AddLine(ImVec2(p0.x, (p0.y + p1.y) * 0.5f), ImVec2(p1.x, (p0.y + p1.y) * 0.5f),
                                            ImGui::GetColorU32(hot ? ImGuiCol_SeparatorHovered : ImGuiCol_Separator), hot ? 2.0f : 1.0f);
    }
    DrawControls(state);

    // The strip takes the rest of the column but leaves room for the Model section under it
    // (app/gui/gui.cpp draws it as a "Model" collapsing header in the same child window), so both fit
    // without scrolling the column unless the window is short.
    const bool model_open = ImGui::GetStateStorage()->GetInt(ImGui::GetID("Model"), 1) != 0;
    const float model_h = ImGui::GetFrameHeightWithSpacing() + (model_open ? 15.0f * line_h : 0.0f);
    const float rest = ImGui::GetContentRegionAvail().y - ImGui::GetStyle().ItemSpacing.y;
    DrawStrip(state, std::max(6 * line_h, rest - model_h));
}

void TextView::DrawEditor(WindowState& state, float height) {
    PaneLayout& layout = state.settings.layout;
    if (layout.editor_open) {
        // Tab types a tab (a pasted one was dropped: the window analysed another text than the file's).
        if (ImGui::InputTextMultiline("##text", &state.text, ImVec2(-FLT_MIN, height), ImGuiInputTextFlags_AllowTabInput)) state.text_changed = true;
        const ImVec2 r_min = ImGui::GetItemRectMin(), r_max = ImGui::GetItemRectMax();
        state.regions["text"] = {r_min.x, r_min.y, r_max.x - r_min.x, r_max.y - r_min.y};
    }
    // Fold the editor away for room (the token strip shows the text), or bring it back.
    ImGui::AlignTextToFramePadding();
    if (ImGui::ArrowButton("##editor_fold", layout.editor_open ? ImGuiDir_Down : ImGuiDir_Right)) layout.editor_open = !layout.editor_open;
    if (ImGui::IsItemHovered())
        viz::Tooltip(layout.editor_open ? "Hide the text editor (the token strip still shows the text). Drag the line under the "
                                               "editor to resize it."
                                             : "Show the text editor.");
    ImGui::SameLine();

    // Token count against the context, and the truncation switch.
    const model::Analysis* a = state.analysis.get();
    const int context = state.model ? state.model->config.n_positions : 0;
    ImGui::AlignTextToFramePadding();
    if (a) {
        const bool full = context > 0 && a->n_tokens >= context;
        if (full) ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.0f, 0.75f, 0.3f, 1.0f));
        if (context > 0) ImGui::Text("%d / %d tokens", a->n_tokens, context);
        else ImGui::Text("%d tokens", a->n_tokens);
        if (full) ImGui::PopStyleColor();
        const bool truncated = state.truncate && !a->tokens.offsets.empty() && a->tokens.offsets.back().second < state.text.size();
        if (truncated && !state.busy) {
            ImGui::SameLine();
            ImGui::TextColored(ImVec4(1.0f, 0.75f, 0.3f, 1.0f), "(truncated)");
            if (ImGui::IsItemHovered())
                viz::Tooltip("Only the first %d tokens are analysed: the text after byte %zu is not.", a->n_tokens,
                                  a->tokens.offsets.back().second);
        }
    } else if (context > 0) {
        ImGui::TextDisabled("- / %d tokens", context);
    } else {
        ImGui::TextDisabled("no model");
    }
    if (state.busy && !state.lens_running && !state.ranking_heads) {  // a job of the tabs' leaves the tokens as they are
        ImGui::SameLine();
        ImGui::TextDisabled("updating...");
    }
    // Beside the count, or under it in a narrow pane.
    const float checkbox_w = ImGui::GetFrameHeight() + ImGui::GetStyle().ItemInnerSpacing.x + ImGui::CalcTextSize("truncate to context").x;
    SameLineIfFits(checkbox_w, ImGui::GetFontSize() * 1.5f);
    if (ImGui::Checkbox("truncate to context", &state.truncate)) state.text_changed = true;
    if (ImGui::IsItemHovered())
        viz::Tooltip("Analyse the first %d tokens of a longer text instead of refusing it.", context > 0 ? context : 1024);
}

void TextView::DrawControls(WindowState& state) {
    ViewSettings& s = state.settings;
    const float fs = ImGui::GetFontSize();
    const HeadRef head = ClampedHead(state);

    ImGui::AlignTextToFramePadding();
    ImGui::TextUnformatted("Colour by");
    ImGui::SameLine();
    // As wide as the colouring's name ("JS to comp" and "delta loss v" were cut), the scope on the
    // next line where both do not fit the pane.
    const ImGuiStyle& style = ImGui::GetStyle();
    const float combo_extra = ImGui::GetFrameHeight() + 2 * style.FramePadding.x;
    ImGui::SetNextItemWidth(std::min(std::max(fs * 6.5f, ImGui::CalcTextSize(Coloring(s.token_color).label.c_str()).x + combo_extra),
                                     ImGui::GetContentRegionAvail().x));
    // The position and token terms are offered when the analysis has them, the losses with predictions.
    TokenColorCombo("##token_color", &s.token_color, state.analysis.get());
    const TokenColoring& coloring = Coloring(s.token_color);
    const float scope_w = std::max(fs * 8.0f, ImGui::CalcTextSize(ScopeLabel(TokenScope::ModelMean, head).c_str()).x + combo_extra);
    SameLineIfFits(ImGui::CalcTextSize("Scope").x + style.ItemSpacing.x + scope_w);
    ImGui::TextUnformatted("Scope");
    ImGui::SameLine();
    ImGui::SetNextItemWidth(scope_w);
    ImGui::BeginDisabled(IsLoss(s.token_color));  // a loss belongs to the token, not to a head
    if (ImGui::BeginCombo("##token_scope", ScopeLabel(s.token_scope, head).c_str())) {
        for (TokenScope scope : {TokenScope::Head, TokenScope::LayerMean, TokenScope::ModelMean})
            if (ImGui::Selectable(ScopeLabel(scope, head).c_str(), s.token_scope == scope)) s.token_scope = scope;
        ImGui::EndCombo();
    }
    ImGui::EndDisabled();

    // Legend: the colour ramp between the smallest and largest value the chips show.
    UpdateValues(state);
    ImGui::AlignTextToFramePadding();
    ImGui::BeginGroup();
    if (!m_values_valid) {
        ImGui::TextDisabled(state.analysis ? "no values for this choice" : "no values yet");
        ImGui::EndGroup();
        return;
    }
    const bool temperature = IsTemperature(s.token_color), delta = IsDelta(s.token_color);
    const viz::Colormap colormap = temperature || delta ? viz::Colormap::Diverging : s.colormap;
    char lo[32], hi[32];
    std::snprintf(lo, sizeof(lo), "%.3g", m_legend.min);
    std::snprintf(hi, sizeof(hi), "%.3g", m_legend.max);
    const bool flat = m_scale.max <= m_scale.min || m_legend.max <= m_legend.min;
    // The ramp shows the legend's part of the scale (a temperature's half that its values reach)
    // in the scale's own colours: t0..t1 of the colour map.
    const viz::ScalePart part = viz::PartOfScale(m_scale, m_legend, false);
    const float t0 = flat ? 0.0f : part.t0, t1 = flat ? 1.0f : part.t1;
    const bool cropped = t0 > 0.0f || t1 < 1.0f;
    // The scale's centre (tau = 1, or a loss difference of 0), where the legend reaches both sides of it.
    const float centre = temperature ? 1.0f : 0.0f;
    const bool both_sides = (temperature || delta) && !flat && m_legend.min < centre && m_legend.max > centre;
    if (flat) {
        ImGui::Text("%s = %s for every token", coloring.label.c_str(), lo);
    } else {
        ImGui::TextUnformatted(lo);
        ImGui::SameLine();
        const ImVec2 p = ImGui::GetCursorScreenPos();
        const float w = fs * 7.0f, h = ImGui::GetFrameHeight();
        const float y0 = p.y + h * 0.2f, y1 = p.y + h * 0.8f;
        ImDrawList* draw = ImGui::GetWindowDrawList();
        constexpr int kSteps = 24;
        for (int k = 0; k < kSteps; ++k) {
            const ImU32 c0 = ToU32(viz::SampleColormap(colormap, t0 + (t1 - t0) * k / kSteps), 1.0f);
            const ImU32 c1 = ToU32(viz::SampleColormap(colormap, t0 + (t1 - t0) * (k + 1) / kSteps), 1.0f);
            draw->AddRectFilledMultiColor(ImVec2(p.x + w * k / kSteps, y0), ImVec2(p.x + w * (k + 1) / kSteps, y1), c0, c1, c1, c0);
        }
        // Where the shown tokens lie on the ramp, and tau = 1 (vanilla) where the ramp has both sides.
        auto at = [&](float v) { return p.x + w * std::clamp((viz::Normalize(v, m_scale, false) - t0) / (t1 - t0), 0.0f, 1.0f); };
        draw->AddRectFilled(ImVec2(at(m_value_min), y1 + 1), ImVec2(std::max(at(m_value_min) + 2, at(m_value_max)), y1 + 3),
                            ImGui::GetColorU32(ImGuiCol_Text));
        if (both_sides) {  // the centre, a tick inside the ramp: tau = 1 (vanilla), or no difference in loss
            const float x = std::round(at(centre));
            draw->AddLine(ImVec2(x, y0), ImVec2(x, y1), IM_COL32(0, 0, 0, 255), 1.0f);
        }
        ImGui::Dummy(ImVec2(w, h));
        ImGui::SameLine();
        ImGui::TextUnformatted(hi);
    }
    ImGui::EndGroup();
    if (ImGui::IsItemHovered()) {
        char shown[96];
        std::snprintf(shown, sizeof shown, "The bar under the ramp: the shown tokens, %.3g..%.3g.", m_value_min, m_value_max);
        if (IsLoss(s.token_color))
            viz::Tooltip("%s.\nThe first token has no loss (nothing predicts it): grey.%s\n%s", coloring.help.c_str(),
                              delta ? "\nThe scale is symmetric around 0: blue, SSA's temperatures help there; red, they hurt." : "", shown);
        else if (!temperature)
            viz::Tooltip("Range over query rows 2..T: row 1 sees only itself (entropy 0, spikiness 1, sink mass 1).\n%s", shown);
        else
            viz::Tooltip("tau is an inverse temperature: larger = sharper attention.\nBlue: tau < 1, flatter than vanilla. "
                              "White: tau = 1, vanilla attention. Red: tau > 1, sharper.\nThe scale is %s (View > Temperature "
                              "scale per head), centred at 1 from %.3g to %.3g%s.\n%s",
                              s.per_head_scale ? "this head's own"
                              : m_values_run   ? "the same for every head and every step of the run's timeline"
                                               : "the same for every head of the model",
                              m_scale.min, m_scale.max,
                              !cropped                ? ""
                              : m_legend.min >= 1.0f  ? "; the ramp shows its upper half, from 1: no temperature here is below 1"
                              : m_legend.max <= 1.0f  ? "; the ramp shows its lower half, up to 1: no temperature here is above 1"
                                                      : "; the ramp shows the part the temperatures reach, the black tick at 1",
                              shown);
    }
    // The legend's words after the ramp, each on the ramp's line while it fits, else on the next.
    auto note = [](const std::string& text) {
        SameLineIfFits(ImGui::CalcTextSize(text.c_str()).x);
        Caption(text, ", ");  // a narrow pane cut "red sharper"
    };
    if (temperature)
        // tau = 1, not "vanilla": beside a base the base is the vanilla model (its folder often named so).
        note(both_sides || !cropped ? "blue flatter, white tau = 1, red sharper"
             : m_legend.min >= 1.0f ? "white tau = 1, red sharper"
                                    : "blue flatter, white tau = 1");
    if (delta) note(IsBaseMode(coloring.mode) ? "blue: fine-tuning helped, red: hurt" : "blue SSA better, red worse");
    note(coloring.label + ", " + (IsLoss(s.token_color) ? coloring.quantity->unit : ScopeLabel(s.token_scope, head)));
}

//-------------------------------------------------------------------------------------------------
// [SECTION] Values: what colours each chip, and its scale
//-------------------------------------------------------------------------------------------------

void TextView::UpdateValues(const WindowState& state) {
    const ViewSettings& s = state.settings;
    const HeadRef head = ClampedHead(state);
    const bool own = s.per_head_scale && s.token_scope == TokenScope::Head;
    const RunTrack* run = s.token_color == TokenColor::TauQ && !s.per_head_scale && state.timeline && state.timeline->text == state.text
                              ? state.timeline.get()
                              : nullptr;
    if (SameAnalysis(m_values_for, state.analysis) && s.token_color == m_values_color && s.token_scope == m_values_scope && head == m_values_head &&
        s.per_head_scale == m_values_per_head && run == m_values_run)
        return;
    m_values_run = run;
    m_values_per_head = s.per_head_scale;
    m_values_for = state.analysis;
    m_values_color = s.token_color;
    m_values_scope = s.token_scope;
    m_values_head = head;
    m_values.clear();
    m_values_valid = false;
    const model::Analysis* a = state.analysis.get();
    if (!a || a->n_tokens <= 0) return;
    if (IsLoss(s.token_color)) return UpdateLossValues(*a, s.token_color);
    const model::RowArray* rows = TokenQuantity(*a, s.token_color);
    m_values.assign(a->n_tokens, NAN);
    if (!rows) return;
    const float offset = TokenColorOffset(s.token_color);
    for (int i = 0; i < a->n_tokens; ++i) m_values[i] = ScopedTokenValue(*a, *rows, s.token_scope, head, i) + offset;

    // The first row of a row metric is trivial (one key): it would pin the range to 0 or 1.
    const int first = IsRowMetric(s.token_color) && a->n_tokens > 1 ? 1 : 0;
    float lo = INFINITY, hi = -INFINITY;
    for (int i = first; i < a->n_tokens; ++i)
        if (std::isfinite(m_values[i])) lo = std::min(lo, m_values[i]), hi = std::max(hi, m_values[i]);
    if (lo > hi) return;
    m_value_min = lo;
    m_value_max = hi - lo < 1e-6f * std::max(1.0f, std::fabs(hi)) ? lo : hi;
    m_values_valid = true;
    if (IsTemperature(s.token_color)) {
        // One diverging scale around tau = 1 for every head (a colour is one tau everywhere), or
        // this head's own when asked; a mean over heads lies inside the model's range.
        TemperatureScale scale = s.per_head_scale && s.token_scope != TokenScope::Head
                                     ? TemperatureScaleOver(lo, hi)
                                     : TemperatureRange(*a, *rows, own ? std::optional<HeadRef>(head) : std::nullopt, offset);
        if (run) {  // the run's every step, each head's tau_q (its scale rescaled from step to step)
            float run_lo = scale.used.min, run_hi = scale.used.max;
            for (const std::vector<float>& step : run->timeline.tau_q)
                for (float v : step)
                    if (std::isfinite(v)) run_lo = std::min(run_lo, v), run_hi = std::max(run_hi, v);
            scale = TemperatureScaleOver(run_lo, run_hi);
        }
        m_scale = scale.range;
        m_legend = scale.used;
    } else {
        m_scale = m_legend = {m_value_min, m_value_max};
    }
}

// A loss colouring: both sides' losses on one scale from 0 (so SSA's and the comparison's colours
// compare), the delta on a symmetric one around 0.
void TextView::UpdateLossValues(const model::Analysis& a, TokenColor color) {
    m_values = TokenLosses(a, color);
    float lo = INFINITY, hi = -INFINITY;
    for (float v : m_values)
        if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
    if (lo > hi) return;
    m_value_min = lo;
    m_value_max = hi;
    m_values_valid = true;
    if (IsDelta(color)) {
        const float d = std::max({1e-3f, std::abs(lo), std::abs(hi)});
        m_scale = m_legend = {-d, d};
        return;
    }
    float top = hi;
    for (TokenColor side : {TokenColor::Loss, TokenColor::LossCompare, TokenColor::LossBase})  // one scale for every side's loss
        for (float v : TokenLosses(a, side))
            if (std::isfinite(v)) top = std::max(top, v);
    m_scale = m_legend = {0.0f, std::max(top, 1e-3f)};
}

//-------------------------------------------------------------------------------------------------
// [SECTION] Labels and layout of the chips
//-------------------------------------------------------------------------------------------------

TextView::Label TextView::MakeLabel(const std::string& piece) {
    Label label;
    auto mark = [&](const char* s) {
        const uint32_t begin = static_cast<uint32_t>(label.text.size());
        label.text += s;
        label.marks.push_back({begin, static_cast<uint32_t>(label.text.size())});
    };
    for (size_t i = 0; i < piece.size();) {
        const unsigned char c = static_cast<unsigned char>(piece[i]);
        const size_t len = model::DecodeUtf8(piece, i).length;
        if (c == ' ') {
            mark("\xC2\xB7");  // ·
        } else if (c == '\n') {
            mark("\xE2\x86\xB5");  // ↵
            label.line_break = true;
        } else if (c == '\t') {
            mark("\xE2\x86\x92");  // →
        } else if (c == '\r') {
            mark("\\r");
        } else if (len == 2 && c == 0xC2 && static_cast<unsigned char>(piece[i + 1]) == 0xA0) {
            mark("\xE2\x90\xA3");  // no-break space: ␣
        } else if (len == 0 || IsControl(c)) {
            // One «...» for a run of bytes that are not whole characters (or are control codes).
            label.text += "\xC2\xAB";
            for (; i < piece.size(); ++i) {
                const unsigned char b = static_cast<unsigned char>(piece[i]);
                const bool escaped = model::DecodeUtf8(piece, i).length == 0 || (IsControl(b) && b != '\n' && b != '\t' && b != '\r');
                if (!escaped) break;
                AppendHexByte(&label.text, b);
            }
            label.text += "\xC2\xBB";
            continue;
        } else {
            label.text.append(piece, i, len);
        }
        i += len;
    }
    if (label.text.empty()) mark("\"\"");
    return label;
}

void TextView::UpdateLabels(const AppState& state) {
    const unsigned generation = FontAtlasGeneration();
    const bool current = SameAnalysis(m_labels_for, state.analysis);
    if (current && generation == m_font_generation) return;
    if (!current) {
        m_labels_for = state.analysis;
        m_labels.clear();
        if (state.analysis) {
            const model::Tokenization& tokens = state.analysis->tokens;
            m_labels.reserve(tokens.pieces.size());
            for (size_t i = 0; i < tokens.pieces.size(); ++i) {
                // A token that stands for no text (a BOS, a "▁" the tokenizer adds) shows its own text, faint.
                const int32_t id = tokens.ids[i];
                if (tokens.pieces[i].empty() && state.vocab && id >= 0 && static_cast<size_t>(id) < state.vocab->size() &&
                    !(*state.vocab)[id].empty()) {
                    Label label = MakeLabel((*state.vocab)[id]);
                    label.marks = {{0, static_cast<uint32_t>(label.text.size())}};
                    m_labels.push_back(std::move(label));
                    continue;
                }
                m_labels.push_back(MakeLabel(tokens.pieces[i]));
            }
            // Tokens that split a character show it whole, with their part faint ("泳 1/2").
            const std::vector<std::string> grouped = TokenLabels(state.analysis->tokens);
            const std::vector<std::string>& pieces = state.analysis->tokens.pieces;
            for (size_t i = 0; i < m_labels.size() && i < grouped.size(); ++i) {
                if (model::FindInvalidUtf8(pieces[i]) == std::string::npos) continue;
                const size_t space = grouped[i].rfind(' ');
                if (space == std::string::npos || grouped[i].find('/', space) == std::string::npos) continue;  // never completes: escapes stay
                Label label;
                label.text = grouped[i];
                label.marks.push_back({static_cast<uint32_t>(space), static_cast<uint32_t>(label.text.size())});
                m_labels[i] = std::move(label);
            }
        }
    }
    m_font_generation = generation;
    m_label_widths.resize(m_labels.size());
    for (size_t i = 0; i < m_labels.size(); ++i) {
        const std::string& t = m_labels[i].text;
        m_label_widths[i] = ImGui::CalcTextSize(t.data(), t.data() + t.size()).x;
    }
    m_layout_width = -1;  // widths changed
}

void TextView::UpdateLayout(float width) {
    const float fs = ImGui::GetFontSize();
    const float chip_h = fs + 2 * kChipPadY * fs, line_step = chip_h + kChipGapY * fs;
    if (width == m_layout_width && line_step == m_layout_line_step && m_chips.size() == m_labels.size()) return;
    m_layout_width = width;
    m_layout_line_step = line_step;
    m_chips.assign(m_labels.size(), Chip{});
    m_line_first.clear();
    float x = 0;
    int line = 0;
    if (!m_labels.empty()) m_line_first.push_back(0);
    for (size_t i = 0; i < m_labels.size(); ++i) {
        const float w = std::min(width, std::max(fs * 0.6f, m_label_widths[i]) + 2 * kChipPadX * fs);
        if (x > 0 && x + w > width) {  // wrap like text
            x = 0;
            ++line;
            m_line_first.push_back(static_cast<int>(i));
        }
        m_chips[i] = {x, line * line_step, w};
        x += w + kChipGapX * fs;
        if (m_labels[i].line_break && i + 1 < m_labels.size()) {  // the text's own line breaks
            x = 0;
            ++line;
            m_line_first.push_back(static_cast<int>(i + 1));
        }
    }
    m_line_first.push_back(static_cast<int>(m_labels.size()));
    m_content_height = m_labels.empty() ? 0 : (line + 1) * line_step;
}

//-------------------------------------------------------------------------------------------------
// [SECTION] The strip: chips, selection, hover
//-------------------------------------------------------------------------------------------------

void TextView::DrawStrip(WindowState& state, float height) {
    ImGui::BeginChild("##tokens", ImVec2(0, height), true, ImGuiWindowFlags_AlwaysVerticalScrollbar);
    const model::Analysis* a = state.analysis.get();
    if (!a || a->n_tokens == 0) {
        ImGui::TextDisabled(state.busy ? "analysing the text (its progress in the status bar)..." : "The tokens appear here once the text is analysed.");
        ImGui::EndChild();
        const ImVec2 r_min = ImGui::GetItemRectMin(), r_max = ImGui::GetItemRectMax();
        state.regions["tokens"] = {r_min.x, r_min.y, r_max.x - r_min.x, r_max.y - r_min.y};
        return;
    }

    UpdateLabels(state);
    UpdateValues(state);
    const float width = std::max(1.0f, ImGui::GetContentRegionAvail().x);
    UpdateLayout(width);
    const int T = std::min<int>(a->n_tokens, static_cast<int>(m_labels.size()));
    const float fs = ImGui::GetFontSize();
    const float chip_h = fs + 2 * kChipPadY * fs, pad_x = kChipPadX * fs, pad_y = kChipPadY * fs;
    const float rounding = 0.2f * fs;

    const ImVec2 origin = ImGui::GetCursorScreenPos();
    ImGui::InvisibleButton("##chips", ImVec2(width, std::max(1.0f, m_content_height)));
    const bool strip_hovered = ImGui::IsItemHovered();
    const bool strip_clicked = ImGui::IsItemClicked(ImGuiMouseButton_Left);

    // Lines that intersect the visible part of the child; everything else is skipped.
    ImDrawList* draw = ImGui::GetWindowDrawList();
    const float visible_top = draw->GetClipRectMin().y - origin.y, visible_bottom = draw->GetClipRectMax().y - origin.y;
    const int lines = static_cast<int>(m_line_first.size()) - 1;
    const int line_begin = std::clamp(static_cast<int>(std::floor(visible_top / m_layout_line_step)), 0, lines);
    const int line_end = std::clamp(static_cast<int>(std::floor(visible_bottom / m_layout_line_step)) + 1, 0, lines);

    // The chip under the mouse.
    int hovered = -1;
    if (strip_hovered) {
        const ImVec2 m = ImGui::GetIO().MousePos;
        const float mx = m.x - origin.x, my = m.y - origin.y;
        const int line = static_cast<int>(std::floor(my / m_layout_line_step));
        if (line >= 0 && line < lines && my - line * m_layout_line_step <= chip_h)
            for (int i = m_line_first[line]; i < m_line_first[line + 1] && i < T; ++i)
                if (mx >= m_chips[i].x && mx <= m_chips[i].x + m_chips[i].w) hovered = i;
    }
    if (strip_clicked && hovered >= 0) state.query = hovered;

    // A query chosen elsewhere (the heatmap) scrolls into view.
    if (state.query != m_shown_query) {
        m_shown_query = state.query;
        if (state.query >= 0 && state.query < T) {
            const float y = m_chips[state.query].y, view_h = ImGui::GetWindowHeight();
            if (y < ImGui::GetScrollY() || y + chip_h > ImGui::GetScrollY() + view_h - 2 * ImGui::GetStyle().WindowPadding.y)
                ImGui::SetScrollY(std::max(0.0f, y - view_h * 0.3f));
        }
    }

    // Zoomed in on the map, the strip follows its columns: the first visible key scrolls into view
    // when the view moves to other tokens (and the strip then marks the visible keys).
    const MapView& view = state.settings.map_view;
    const bool zoomed = view.zoom > 1.001f;
    const int key_first = zoomed ? std::clamp(static_cast<int>(std::floor(view.pan_x)), 0, T - 1) : -1;
    const int key_end = zoomed ? std::clamp(static_cast<int>(std::ceil(view.pan_x + T / view.zoom)), key_first + 1, T) : -1;
    if (zoomed && key_first != m_shown_key) {
        const float y = m_chips[key_first].y, view_h = ImGui::GetWindowHeight();
        if (y < ImGui::GetScrollY() || y + chip_h > ImGui::GetScrollY() + view_h - 2 * ImGui::GetStyle().WindowPadding.y)
            ImGui::SetScrollY(std::max(0.0f, y - chip_h));
    }
    m_shown_key = key_first;

    // An analysis older than the text stays, dimmed, until the new one arrives.
    // A job (Continue, the heads ranking) keeps the worker busy, but what is shown is current.
    const bool stale = (state.busy && !state.generating && !state.ranking_heads) || !state.error.empty();
    const float alpha = stale ? kStaleAlpha : 1.0f;
    const TokenColor color = state.settings.token_color;
    const viz::Colormap colormap = IsTemperature(color) || IsDelta(color) ? viz::Colormap::Diverging : state.settings.colormap;
    ImFont* font = ImGui::GetFont();
    for (int line = line_begin; line < line_end; ++line) {
        for (int i = m_line_first[line]; i < m_line_first[line + 1] && i < T; ++i) {
            const Chip& chip = m_chips[i];
            const ImVec2 p0(origin.x + chip.x, origin.y + chip.y), p1(p0.x + chip.w, p0.y + chip_h);
            const float v = i < static_cast<int>(m_values.size()) ? m_values[i] : NAN;
            viz::Rgba8 bg{90, 90, 96, 255};  // no value: neutral grey
            if (m_values_valid && std::isfinite(v))
                bg = viz::SampleColormap(colormap, m_scale.max > m_scale.min ? viz::Normalize(v, m_scale, false) : 0.5f);
            draw->AddRectFilled(p0, p1, ToU32(bg, alpha), rounding);

            const bool dark = PrefersDarkText(bg);
            const ImU32 ink = dark ? IM_COL32(0, 0, 0, static_cast<int>(255 * alpha)) : IM_COL32(255, 255, 255, static_cast<int>(255 * alpha));
            const ImU32 faint = dark ? IM_COL32(0, 0, 0, static_cast<int>(110 * alpha)) : IM_COL32(255, 255, 255, static_cast<int>(120 * alpha));
            const Label& label = m_labels[i];
            const ImVec4 clip(p0.x + 1, p0.y, p1.x - 1, p1.y);
            float x = p0.x + pad_x;
            const float y = p0.y + pad_y;
            uint32_t at = 0;
            auto run = [&](uint32_t begin, uint32_t end, ImU32 col) {
                if (begin >= end) return;
                const char* b = label.text.data() + begin;
                const char* e = label.text.data() + end;
                draw->AddText(font, fs, ImVec2(x, y), col, b, e, 0.0f, &clip);
                x += font->CalcTextSizeA(fs, FLT_MAX, 0.0f, b, e).x;
            };
            for (const auto& [mb, me] : label.marks) {
                run(at, mb, ink);
                run(mb, me, faint);
                at = me;
            }
            run(at, static_cast<uint32_t>(label.text.size()), ink);

            if (zoomed && i >= key_first && i < key_end)  // a key column the zoomed map shows: a white bar over the chip
                draw->AddRectFilled(ImVec2(p0.x, p0.y - 3), ImVec2(p1.x, p0.y - 1), IM_COL32(235, 235, 235, static_cast<int>(200 * alpha)));
            if (state.IsGenerated(a->tokens, i))  // Continue wrote it: a cyan bar under the chip
                draw->AddRectFilled(ImVec2(p0.x, p1.y + 1), ImVec2(p1.x, p1.y + 3), IM_COL32(70, 210, 235, static_cast<int>(255 * alpha)));
            if (i == state.query) {
                draw->AddRect(ImVec2(p0.x - 2, p0.y - 2), ImVec2(p1.x + 2, p1.y + 2), IM_COL32(0, 0, 0, 255), rounding + 2, 0, 3.0f);
                draw->AddRect(ImVec2(p0.x - 1.5f, p0.y - 1.5f), ImVec2(p1.x + 1.5f, p1.y + 1.5f), IM_COL32(255, 255, 255, 255), rounding + 1.5f, 0,
                              2.0f);
            } else if (i == hovered) {
                draw->AddRect(ImVec2(p0.x - 1, p0.y - 1), ImVec2(p1.x + 1, p1.y + 1), IM_COL32(255, 255, 255, 200), rounding + 1, 0, 1.0f);
            }
        }
    }
    if (hovered >= 0) DrawTooltip(state, hovered);

    ImGui::EndChild();
    const ImVec2 r_min = ImGui::GetItemRectMin(), r_max = ImGui::GetItemRectMax();
    state.regions["tokens"] = {r_min.x, r_min.y, r_max.x - r_min.x, r_max.y - r_min.y};
}

//-------------------------------------------------------------------------------------------------
// [SECTION] Tooltip: a token's bytes, numbers and losses
//-------------------------------------------------------------------------------------------------

// How well each side predicted token i from the tokens before it.
void TextView::DrawLossRows(const model::Analysis& a, int i) {
    ImGui::Separator();
    const size_t t = static_cast<size_t>(i) - 1;  // entry t is token t + 1's
    if (i == 0 || t >= a.loss.size() || t >= a.rank.size()) {
        ImGui::TextDisabled("No loss: nothing comes before the first token.");
        return;
    }
    const bool compare = a.HasComparePredictions() && t < a.loss_compare.size() && t < a.rank_compare.size();
    if (!ImGui::BeginTable("##loss", 4, ImGuiTableFlags_SizingFixedFit)) return;
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TableNextColumn();
    ImGui::TextDisabled("loss (nats)");
    ImGui::TableNextColumn();
    ImGui::TextDisabled("p");
    ImGui::TableNextColumn();
    ImGui::TextDisabled("rank");
    auto row = [&](const char* side, float loss, int rank) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(side);
        ImGui::TableNextColumn();
        ImGui::Text("%.4f", loss);
        ImGui::TableNextColumn();
        ImGui::Text("%.4f", std::exp(-loss));
        ImGui::TableNextColumn();
        ImGui::Text("%d", rank + 1);
    };
    row(a.interventions.empty() ? "SSA" : "SSA, what-ifs", a.loss[t], a.rank[t]);
    if (compare) row(a.comparison == model::Comparison::Unedited ? "unedited" : "comparison", a.loss_compare[t], a.rank_compare[t]);
    ImGui::EndTable();
    if (compare) {
        const float delta = a.loss[t] - a.loss_compare[t];
        ImGui::TextColored(delta > 0 ? ImVec4(1.0f, 0.5f, 0.45f, 1.0f) : ImVec4(0.5f, 0.7f, 1.0f, 1.0f), "loss change %+.4f: SSA predicts it %s",
                           delta, delta > 0 ? "worse" : "better");
    }
    ImGui::TextDisabled("rank 1 = the most likely next token");
}

void TextView::DrawTooltip(const AppState& state, int i) const {
    const model::Analysis& a = *state.analysis;
    const model::Tokenization& tok = a.tokens;
    const HeadRef head = ClampedHead(state);
    const TokenScope scope = state.settings.token_scope;
    ImGui::BeginTooltip();
    ImGui::Text("token %d of %d", i, a.n_tokens);
    if (i < static_cast<int>(tok.ids.size())) {
        ImGui::SameLine();
        ImGui::TextDisabled("id %d", tok.ids[i]);
    }
    if (i < static_cast<int>(tok.pieces.size())) {
        const std::string& piece = tok.pieces[i];
        ImGui::Text("piece %s", QuotePiece(piece).c_str());
        if (!IsAscii(piece)) {
            ImGui::SameLine();
            ImGui::TextDisabled("bytes %s", HexBytes(piece).c_str());
        }
        const std::string whole = CharacterAround(tok, i);
        if (!whole.empty()) {
            // Planes 1-16 (emoji) are not in the 16-bit font atlas: name them by code point only.
            bool drawable = true;
            for (size_t k = 0; k < whole.size();) drawable &= model::NextCodePoint(whole, &k) <= 0xFFFF;
            if (drawable) ImGui::Text("part of \"%s\" (%s)", whole.c_str(), CodePoints(whole).c_str());
            else ImGui::Text("part of %s", CodePoints(whole).c_str());
        }
    }
    if (i < static_cast<int>(tok.offsets.size())) ImGui::Text("text bytes [%zu, %zu)", tok.offsets[i].first, tok.offsets[i].second);
    ImGui::Separator();
    ImGui::TextDisabled("%s", ScopeLabel(scope, head).c_str());
    if (ImGui::BeginTable("##values", 2, ImGuiTableFlags_SizingFixedFit)) {
        // Every per-head colouring the analysis holds (the losses follow, both sides at once).
        // A term the model's temperatures do not have (1 for every token) is left out, unless chosen.
        const model::ModelConfig* config = state.model ? &state.model->config : nullptr;
        auto lacks = [&](TokenColor color) {
            return config && ((color == TokenColor::TauQPosition && config->query.position == model::PositionForm::None) ||
                              (color == TokenColor::TauQToken && config->query.token == model::TokenForm::None) ||
                              (color == TokenColor::TauV && !config->value.Active()));
        };
        for (const TokenColoring& c : TokenColorings()) {
            const model::RowArray* rows = TokenQuantity(a, c.id);
            const bool chosen = c.id == state.settings.token_color;
            if (!rows || (lacks(c.id) && !chosen)) continue;
            ImGui::TableNextRow();
            ImGui::TableNextColumn();
            if (chosen) ImGui::TextColored(ImVec4(1.0f, 0.85f, 0.4f, 1.0f), "%s", c.label.c_str());
            else ImGui::TextUnformatted(c.label.c_str());
            ImGui::TableNextColumn();
            const float v = ScopedTokenValue(a, *rows, scope, head, i) + c.quantity->offset;
            ImGui::Text("%.4f%s%s", v, c.quantity->unit.empty() ? "" : " ", c.quantity->unit.c_str());
        }
        ImGui::EndTable();
    }
    DrawLossRows(a, i);
    if (state.IsGenerated(tok, i)) ImGui::TextColored(ImVec4(0.45f, 0.85f, 0.95f, 1.0f), "generated by Continue");
    if (i == 0) ImGui::TextDisabled("Row 1 attends only to itself: its row metrics are trivial.");
    ImGui::TextDisabled("Click to select as the query.");
    ImGui::EndTooltip();
}

}  // namespace app
