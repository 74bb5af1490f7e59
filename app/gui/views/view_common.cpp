// Small pieces shared by the views.
#include "app/gui/views/view_common.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <imgui.h>

#include "app/core/names.h"
#include "app/gui/views/view_interventions.h"
#include "viz/imgui/widgets.h"

namespace app {

const LensPair* CurrentLens(const WindowState& state) {
    if (!state.lens || !state.analysis || !state.model) return nullptr;
    const model::Analysis& a = *state.analysis;
    const bool current = state.lens->ids == a.tokens.ids && state.lens->model_dir == state.model->dir && state.lens->compare_label == LensKey(a);
    return current ? state.lens.get() : nullptr;
}

LensTabAt LensTabPosition(const WindowState& state) {
    LensTabAt shown;
    if (!state.analysis || !state.model) return shown;
    const model::Analysis& a = *state.analysis;
    const int64_t T = a.n_tokens;
    shown.position = state.query >= 0 && state.query < T ? state.query : T - 2;
    shown.target = shown.position == T - 1 ? LensTarget::Top : state.settings.lens_target;
    const LensAtPair* at = state.lens_at.get();
    if (at && at->ids == a.tokens.ids && at->model_dir == state.model->dir && at->compare_label == LensKey(a) && at->position == shown.position &&
        at->target == shown.target)
        shown.at = at;
    return shown;
}

const RunTrack* CurrentTimeline(const WindowState& state) {
    const RunTrack* t = state.timeline.get();
    if (!t || t->timeline.steps.empty() || t->text != state.text || !state.analysis) return nullptr;
    // The shown tokens (Continue's ids: the text tokenised again may split otherwise) and comparison.
    const model::Analysis& a = *state.analysis;  // the timeline's steps run without the what-ifs (export --run --ablate runs them)
    return t->timeline.ids == a.tokens.ids && t->compared == LensKey(a) && a.interventions.empty() ? t : nullptr;
}

std::string TimelineMismatch(const WindowState& state) {
    const RunTrack* t = state.timeline.get();
    if (state.run_dir.empty() || CurrentTimeline(state)) return "";
    if (!t) return "the timeline has not run";
    if (t->timeline.steps.empty()) return t->failed.empty() ? "the timeline has no step yet" : "no step ran: " + t->failed.front();
    if (t->text != state.text) return "the text changed since it ran";
    if (state.analysis && !state.analysis->interventions.empty()) return "its steps ran without the what-ifs shown (export --run --ablate runs them)";
    if (state.analysis && t->timeline.ids != state.analysis->tokens.ids)
        return "it ran on the text tokenised anew, other tokens than the ones shown (Continue's): edit the text to run it on its own";
    return "it ran against another comparison: run it again";
}

RunTokenPick RunTabToken(const WindowState& state, const RunTimeline& t, bool piece) {
    RunTokenPick pick;
    const int T = t.n_tokens;
    pick.token = state.query >= 0 && state.query < T ? state.query : T - 1;
    pick.head = state.selected;
    if (piece && state.analysis && state.analysis->n_tokens == T && pick.token >= 0)
        pick.piece = TokenLabels(state.analysis->tokens).at(static_cast<size_t>(pick.token));
    return pick;
}

bool DrawNoAnalysisNote(const AppState& state) {
    if (state.analysis) return false;
    ImGui::TextDisabled("%s", state.error.empty() ? "waiting for the model..." : "no analysis (see the message above)");
    return true;
}

namespace {

// Text in the text, within a token or across tokens ("WITHOUT" over W|IT|H|OU|T): the token where
// its next match after token `after` starts (from the start again past the end); -1 where the text
// has none.
int FindAcrossTokens(const std::vector<std::string>& pieces, int T, const std::string& what, int after) {
    std::string joined;
    std::vector<size_t> starts;
    for (int i = 0; i < T && i < static_cast<int>(pieces.size()); ++i) {
        starts.push_back(joined.size());
        joined += pieces[i];
    }
    const size_t from = after >= 0 && after + 1 < static_cast<int>(starts.size()) ? starts[after + 1] : 0;
    size_t at = joined.find(what, from);
    if (at == std::string::npos) at = joined.find(what);
    if (at == std::string::npos) return -1;
    return static_cast<int>(std::upper_bound(starts.begin(), starts.end(), at) - starts.begin()) - 1;
}

}  // namespace

// The text first: a search of each token first never reached "ra" in war|r|ant while ' program' held it.
int FindToken(const std::vector<std::string>& pieces, const std::vector<std::string>& labels, int T, const std::string& what, int after) {
    int found = FindAcrossTokens(pieces, T, what, after);
    for (int k = 1; k <= T && found < 0; ++k) {
        const int i = (after + k) % T;
        if (i >= 0 && i < static_cast<int>(labels.size()) && labels[i].find(what) != std::string::npos) found = i;
    }
    return found;
}

std::string PasteNotice(std::string_view text) {
    int dropped = 0, returns = 0;
    std::string which;
    for (const char c : text) {
        const unsigned char b = static_cast<unsigned char>(c);
        if (b >= 0x20 || b == '\n' || b == '\t') continue;
        if (b == '\r') {
            ++returns;
            continue;
        }
        if (dropped++ < 4) {
            char name[12];
            std::snprintf(name, sizeof name, "%sU+%04X", which.empty() ? "" : ", ", b);
            which += name;
        }
    }
    if (dropped == 0 && returns == 0) return "";
    std::string line = "the paste left out ";
    if (dropped > 0) line += std::to_string(dropped) + " control character" + (dropped == 1 ? "" : "s") + " (" + which + (dropped > 4 ? ", ..." : "") + ")";
    if (returns > 0) line += std::string(dropped > 0 ? " and " : "") + std::to_string(returns) + " carriage return" + (returns == 1 ? "" : "s");
    return line + ": the editor holds tab and newline only (--text-file keeps every character)";
}

bool EscapeClosesWindow(WindowState& state) {
    if (!ImGui::IsWindowFocused(ImGuiFocusedFlags_RootAndChildWindows) || ImGui::GetIO().WantTextInput ||
        !ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Escape), false))
        return false;
    state.escape_taken = true;
    return true;
}

void SameLineIfFits(float width, float spacing) {
    // The right edge of the region the cursor is in: a table column's inside a table (the window's
    // let the export dialog's settings column run past its edge, cut), else the window's.
    const float right = ImGui::GetCursorScreenPos().x + ImGui::GetContentRegionAvail().x;
    const float gap = spacing >= 0.0f ? spacing : ImGui::GetStyle().ItemSpacing.x;
    if (ImGui::GetItemRectMax().x + gap + width <= right) ImGui::SameLine(0.0f, spacing);
}

void AddLabel(ImDrawList* draw, ImVec2 pos, ImU32 color, const char* text) {
    const ImVec2 size = ImGui::CalcTextSize(text);
    draw->AddRectFilled(ImVec2(pos.x - 2, pos.y), ImVec2(pos.x + size.x + 2, pos.y + size.y), kLabelPlate, 2.0f);
    draw->AddText(pos, color, text);
}

namespace {

// "-0.147", "3", "+2e-05": a word a caption keeps with the one before it.
bool IsNumber(const std::string& w) {
    const size_t i = !w.empty() && (w[0] == '+' || w[0] == '-') ? 1 : 0;
    return i < w.size() && std::isdigit(static_cast<unsigned char>(w[i]));
}

// "L1": a layer, kept with the word after it ("L1 H2", "L0 MLP").
bool IsLayer(const std::string& w) {
    return w.size() >= 2 && w[0] == 'L' && std::all_of(w.begin() + 1, w.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

void Pieces(const std::string& text, const std::string& breaks, bool dimmed) {
    const std::string kept = breaks.substr(0, breaks.find_last_not_of(' ') + 1);
    const float gap = ImGui::CalcTextSize(breaks.c_str() + kept.size()).x;
    ImGui::BeginGroup();
    ImGui::PushStyleVar(ImGuiStyleVar_ItemSpacing, ImVec2(ImGui::GetStyle().ItemSpacing.x, 0.0f));  // lines as close as text's
    const std::vector<std::string> pieces = CaptionPieces(text, breaks, ImGui::GetContentRegionAvail().x);
    for (size_t k = 0; k < pieces.size(); ++k) {
        if (k > 0) SameLineIfFits(ImGui::CalcTextSize(pieces[k].c_str()).x, gap);
        if (dimmed) ImGui::TextDisabled("%s", pieces[k].c_str());
        else ImGui::TextUnformatted(pieces[k].c_str());
    }
    ImGui::PopStyleVar();
    ImGui::EndGroup();
}

}  // namespace

std::vector<std::string> CaptionPieces(const std::string& text, const std::string& breaks, float line) {
    const std::string kept = breaks.substr(0, breaks.find_last_not_of(' ') + 1);  // ", " keeps its ","
    std::vector<std::string> pieces;
    // A number stays with the word before it, a layer with what follows, and a quoted piece whole
    // (' F' broke at its leading space, "'" on one line and "F' -0.81" on the next).
    auto words = [&pieces](const std::string& piece) {
        std::string last;
        bool quoted = false;  // inside a piece opened by a word starting with '
        const size_t first = pieces.size();
        for (size_t word = 0; word < piece.size();) {
            const size_t space = std::min(piece.find(' ', word), piece.size());
            std::string w = piece.substr(word, space - word);
            const bool opens = !quoted && !w.empty() && w[0] == '\'' && (w.size() == 1 || w.find('\'', 1) == std::string::npos);
            // "tau = 1" whole: its "=" and what follows it with the word before.
            if (quoted || (space > word && pieces.size() > first && (IsNumber(w) || IsLayer(last) || w == "=" || last == "=")))
                pieces.back() += " " + w;  // "L1 H2 -0.147", "' F'", "tau = 1:"
            else if (space > word)
                pieces.push_back(w);
            if (quoted && w.find('\'') != std::string::npos) quoted = false;
            if (opens) quoted = true;
            if (space > word) last = std::move(w);
            word = space + 1;
        }
    };
    if (breaks == " ") words(text);
    for (size_t start = 0; breaks != " " && start <= text.size();) {  // the pieces between breaks; one wider than a line, its words
        size_t end = breaks.empty() ? std::string::npos : text.find(breaks, start);
        const bool last = end == std::string::npos;
        if (last) end = text.size();
        const std::string piece = text.substr(start, end - start) + (last ? "" : kept);
        start = last ? text.size() + 1 : end + breaks.size();
        if (piece.empty()) continue;
        if (ImGui::CalcTextSize(piece.c_str()).x <= line || piece.find(' ') == std::string::npos) pieces.push_back(piece);
        else words(piece);
    }
    return pieces;
}

void Caption(const std::string& text, const std::string& breaks) { Pieces(text, breaks, true); }

void WrappedLine(const std::string& text, const std::string& breaks) { Pieces(text, breaks, false); }

void TitleWithHelp(const char* title, const char* help) {
    const float right = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x;
    const float width = ImGui::CalcTextSize(title).x + ImGui::GetStyle().ItemSpacing.x + ImGui::CalcTextSize("(?)").x;
    if (ImGui::GetCursorScreenPos().x + width <= right) {
        ImGui::TextUnformatted(title);
        ImGui::SameLine();
        viz::HelpMarker(help);
        return;
    }
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextUnformatted(title);
    ImGui::PopTextWrapPos();
    viz::ItemTooltip(help);
}

bool SameAnalysis(const std::weak_ptr<const model::Analysis>& cached, const std::shared_ptr<const model::Analysis>& now) {
    if (!now) return false;
    return !cached.owner_before(now) && !now.owner_before(cached);
}

std::string FormatNumber(float v) {
    char buf[32];
    if (!std::isfinite(v)) return "n/a";
    const float m = std::abs(v);
    if (m >= 100.0f) std::snprintf(buf, sizeof buf, "%.0f", v);
    else if (m >= 10.0f) std::snprintf(buf, sizeof buf, "%.1f", v);
    else if (m >= 1.0f) std::snprintf(buf, sizeof buf, "%.2f", v);
    // Three significant digits below 1 (0.00153 and 0.00148 both read "0.001", and 4.4e-04 had two):
    // heads ranked by their cells.
    else if (m >= 0.1f || m == 0.0f) std::snprintf(buf, sizeof buf, "%.3f", v);
    else if (m >= 0.01f) std::snprintf(buf, sizeof buf, "%.4f", v);
    else if (m >= 0.001f) std::snprintf(buf, sizeof buf, "%.5f", v);
    else std::snprintf(buf, sizeof buf, "%.2e", v);
    return buf;
}

std::string FormatCompact(float v) {
    if (!std::isfinite(v)) return "-";
    char buf[32];
    const float m = std::abs(v);
    // Below 0.001 in powers of ten, as FormatNumber writes them there (%.2g wrote .00083 beside 4.1e-05).
    std::snprintf(buf, sizeof buf, m >= 99.5f ? "%.0f" : m >= 0.001f || m == 0.0f ? "%.2g" : "%.1e", v);  // 99.7: 100, not 1e+02
    std::string s = buf;
    if (s.rfind("0.", 0) == 0) s.erase(0, 1);
    else if (s.rfind("-0.", 0) == 0) s.erase(1, 1);
    const size_t e = s.find("e-0");  // 4.1e-05: 4.1e-5
    if (e != std::string::npos) s.erase(e + 2, 1);
    return s;
}

std::string FormatPowerOfTen(float v) {
    if (!std::isfinite(v)) return "-";
    if (v == 0.0f) return "0";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1e", v);
    std::string s = buf;
    // 1.1e-03: 1.1e-3; 2.0e+01: 2.0e1
    const size_t e = s.find('e');
    if (e != std::string::npos) {
        std::string exponent = s.substr(e + 1);
        const bool negative = exponent[0] == '-';
        exponent.erase(0, exponent[0] == '-' || exponent[0] == '+' ? 1 : 0);
        exponent.erase(0, std::min(exponent.find_first_not_of('0'), exponent.size() - 1));
        s = s.substr(0, e + 1) + (negative ? "-" : "") + exponent;
    }
    return s;
}

int NiceStride(float raw) {
    if (raw <= 1.0f) return 1;
    for (int magnitude = 1;; magnitude *= 10) {
        for (int f : {1, 2, 5})
            if (f * magnitude >= raw) return f * magnitude;
        if (magnitude > 100000000) return magnitude * 10;
    }
}

float CellGridNameWidth(const CellGrid& grid) {
    float w = 0;
    for (int r = 0; r < grid.rows; ++r) w = std::max(w, ImGui::CalcTextSize(grid.row_name(r).c_str()).x);
    return w + 8.0f;
}

CellGridHit DrawCellGrid(const CellGrid& g) {
    const float line = ImGui::GetTextLineHeight(), label_w = CellGridNameWidth(g);
    const float avail = g.width > 0 ? std::min(g.width, ImGui::GetContentRegionAvail().x) : ImGui::GetContentRegionAvail().x;
    const float height = g.rows * g.cell_h + line + 4.0f + ImGui::GetStyle().ScrollbarSize;
    const ImU32 query_colour = IM_COL32(255, 220, 90, 255);
    CellGridHit hit;
    ImGui::BeginChild(g.id, ImVec2(avail, height), false, ImGuiWindowFlags_HorizontalScrollbar);
    if (g.follow_query && g.query >= 0 && g.query < g.columns) {
        const float x = label_w + g.query * g.cell_w, scroll = ImGui::GetScrollX(), seen = ImGui::GetWindowWidth() - label_w;
        if (x < scroll + label_w || x + g.cell_w > scroll + label_w + seen) ImGui::SetScrollX(std::max(0.0f, x - label_w - seen * 0.5f));
    }
    const ImVec2 o = ImGui::GetCursorScreenPos();
    ImDrawList* draw = ImGui::GetWindowDrawList();
    const float left = ImGui::GetWindowPos().x;
    const bool over_cells = ImGui::IsWindowHovered() && ImGui::GetMousePos().x >= left + label_w;  // not under the names
    for (int t = 0; t < g.columns; ++t) {
        const float x = o.x + label_w + t * g.cell_w;
        if (!ImGui::IsRectVisible(ImVec2(x, o.y), ImVec2(x + g.cell_w, o.y + g.rows * g.cell_h))) continue;
        for (int r = 0; r < g.rows; ++r) {
            const float y = o.y + r * g.cell_h;
            const ImVec2 p0(x, y), p1(x + g.cell_w - (g.cell_w > 8 ? 1.0f : 0.0f), y + g.cell_h - (g.cell_h > 3 ? 1.0f : 0.0f));
            draw->AddRectFilled(p0, p1, viz::ToImU32(g.colour(r, t)));
            if (g.over_cell) g.over_cell(draw, p0, p1, r, t);
            if (over_cells && ImGui::IsMouseHoveringRect(p0, ImVec2(x + g.cell_w, y + g.cell_h))) hit.row = r, hit.column = t;
        }
        if (t == g.query) draw->AddRect(ImVec2(x - 1, o.y - 1), ImVec2(x + g.cell_w, o.y + g.rows * g.cell_h), query_colour, 0, 0, 2.0f);
    }
    const float labels_y = o.y + g.rows * g.cell_h + 2.0f;
    const bool pieces = g.cell_w >= line * 1.5f;
    const int stride = pieces ? 1 : std::max(1, NiceStride(ImGui::CalcTextSize("0000").x / g.cell_w));
    for (int t = 0; t < g.columns; t += stride) {
        const float x = o.x + label_w + t * g.cell_w;
        if (!ImGui::IsRectVisible(ImVec2(x, labels_y), ImVec2(x + g.cell_w * stride, labels_y + line))) continue;
        if (x < left + label_w) continue;  // half under the names ("110" read ".10")
        const std::string text = pieces ? viz::EllipsizeText(g.piece(t), g.cell_w - 2.0f) : std::to_string(g.number(t));
        draw->AddText(ImVec2(x + 1.0f, labels_y), t == g.query ? query_colour : ImGui::GetColorU32(ImGuiCol_TextDisabled), text.c_str());
    }
    // The names stay at the left edge while the cells scroll under them: on the window's own colour.
    ImVec4 plate = ImGui::GetStyleColorVec4(ImGuiCol_WindowBg);
    plate.w = 1.0f;  // the style's is a little transparent
    draw->AddRectFilled(ImVec2(left, o.y), ImVec2(left + label_w - 2.0f, o.y + g.rows * g.cell_h + line + 2.0f), ImGui::ColorConvertFloat4ToU32(plate));
    const int row_stride = std::max(1, static_cast<int>(std::ceil(line / g.cell_h)));  // thin rows: every few named
    for (int r = 0; r < g.rows; r += row_stride)
        draw->AddText(ImVec2(ImGui::GetWindowPos().x + 2.0f, o.y + r * g.cell_h + std::max(0.0f, (g.cell_h - line) * 0.5f)),
                      r == g.marked_row ? query_colour : ImGui::GetColorU32(ImGuiCol_Text), g.row_name(r).c_str());
    draw->AddText(ImVec2(ImGui::GetWindowPos().x + 2.0f, labels_y), ImGui::GetColorU32(ImGuiCol_TextDisabled), pieces ? g.axis_with_pieces : g.axis);
    ImGui::SetCursorScreenPos(ImVec2(o.x, labels_y));
    // Room for the last column's number where it is wider than its column (a piece is cut to fit).
    const float overhang = pieces || g.columns == 0 ? 0.0f : std::max(0.0f, ImGui::CalcTextSize(std::to_string(g.number(g.columns - 1)).c_str()).x + 2.0f - g.cell_w);
    ImGui::Dummy(ImVec2(label_w + g.columns * g.cell_w + overhang, line));
    const float x0 = std::max(o.x, left) + label_w, x1 = std::min(o.x + label_w + g.columns * g.cell_w, left + ImGui::GetWindowWidth());
    hit.cells = Rect{x0, o.y, std::max(0.0f, x1 - x0), g.rows * g.cell_h};
    ImGui::EndChild();
    return hit;
}

void HeadTooltip(const AppState& state, const HeadSummary& s) {
    const model::Analysis& a = *state.analysis;
    const std::string cmp = CompareName(a);
    ImGui::BeginTooltip();
    ImGui::Text("%s%s%s", HeadName(s.ref).c_str(), s.ref == state.selected ? "  (selected)" : "",
                state.IsPinned(s.ref) ? "  (pinned)" : "");
    const bool base = a.HasBase();
    if (ImGui::BeginTable("##tip", base ? 4 : 3, ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_RowBg)) {
        ImGui::TableSetupColumn("per head");
        ImGui::TableSetupColumn("SSA");
        ImGui::TableSetupColumn(cmp.c_str());
        if (base) ImGui::TableSetupColumn("base");
        ImGui::TableHeadersRow();
        // The head's main numbers (the catalogue's `shown`), the other sides' beside SSA's where it has them.
        for (const HeadValue& v : HeadValues()) {
            const Quantity& q = *v.quantity;
            if (!Has(q.shown, Side::Ssa) || !v.Primary()) continue;
            ImGui::TableNextRow();
            ImGui::TableNextColumn();
            ImGui::Text("%s%s%s%s", v.label.c_str(), q.unit.empty() ? "" : " (", q.unit.c_str(), q.unit.empty() ? "" : ")");
            for (Side side : kAllSides) {
                if (!HasSide(a, side)) continue;
                ImGui::TableNextColumn();
                if (Has(q.sides, side)) ImGui::TextUnformatted(FormatNumber(s.Get(v, side)).c_str());
            }
        }
        ImGui::EndTable();
    }
    const float eps = state.settings.sink_epsilon;
    ImGui::Text("sink head (eps %.2f): SSA: %s, %s: %s%s%s", eps, IsSinkHead(s, Side::Ssa, eps) ? "yes" : "no", cmp.c_str(),
                IsSinkHead(s, Side::Compare, eps) ? "yes" : "no", base ? ", base: " : "",
                base ? (IsSinkHead(s, Side::Base, eps) ? "yes" : "no") : "");
    if (state.model) {
        const std::string group = KvGroupNote(state.model->config, s.ref.head);
        if (!group.empty()) ImGui::Text("%s", group.c_str());
    }
    Caption("click: select   Ctrl+click: pin / unpin   right-click: what-ifs", "   ");
    ImGui::EndTooltip();
}

std::vector<TokenColor> OfferedColorings(const model::Analysis* analysis) {
    std::vector<TokenColor> out;
    for (const TokenColoring& c : TokenColorings())
        if (!analysis || Holds(*analysis, c.id)) out.push_back(c.id);
    return out;
}

bool TokenColorCombo(const char* id, TokenColor* color, const model::Analysis* analysis) {
    bool changed = false;
    if (!ImGui::BeginCombo(id, Coloring(*color).label.c_str())) return false;
    for (TokenColor offered : OfferedColorings(analysis)) {
        const TokenColoring& c = Coloring(offered);
        if (ImGui::Selectable(c.label.c_str(), *color == c.id)) *color = c.id, changed = true;
        if (ImGui::IsItemHovered()) viz::Tooltip("%s", c.help.c_str());
    }
    ImGui::EndCombo();
    return changed;
}

void HandleHeadClick(AppState& state, HeadRef ref) {
    if (ImGui::BeginPopupContextItem()) {  // right-click: what-ifs on this head
        DrawHeadWhatIfMenu(state, ref);
        ImGui::EndPopup();
    }
    if (!ImGui::IsItemClicked(ImGuiMouseButton_Left)) return;
    if (ImGui::GetIO().KeyCtrl) state.TogglePin(ref);
    else state.selected = ref;
}

bool HeadSummaries::Update(const WindowState& state) {
    if (!state.analysis || SameAnalysis(m_for, state.analysis)) return false;
    m_for = state.analysis;
    if (state.head_summaries && SameAnalysis(state.head_summaries_of, state.analysis)) m_summary = state.head_summaries;
    else m_summary = std::make_shared<const std::vector<HeadSummary>>(SummarizeHeads(*state.analysis));
    return true;
}

const std::vector<HeadSummary>& HeadSummaries::Get() const {
    static const std::vector<HeadSummary> none;
    return m_summary ? *m_summary : none;
}

void DrawGridLabels(ImDrawList* draw, const GridGeometry& g, int layers, int heads, HeadRef selected) {
    const ImVec2 view = ImGui::GetWindowPos(), view_size = ImGui::GetWindowSize();  // the child's visible rectangle
    const float line = ImGui::GetTextLineHeight();
    const ImU32 text = ImGui::GetColorU32(ImGuiCol_Text), dim = ImGui::GetColorU32(ImGuiCol_TextDisabled);
    const ImU32 backing = ImGui::GetColorU32(ImGuiCol_WindowBg);
    const float left = std::max(g.origin.x, view.x), top = std::max(g.origin.y, view.y);
    const float first_row = g.origin.y + g.header;
    // Labels every k-th column or row when the cells are smaller than the text; the selected
    // one always, its neighbours within k left out so that nothing overlaps.
    // Heads as "H11" where that fits over every column, else as bare numbers with "H" in the corner
    // (at 12 heads in a narrow pane "H11" labelled every other head).
    const std::string last_head = std::to_string(std::max(heads - 1, 0));
    const bool bare = ImGui::CalcTextSize(("H" + last_head).c_str()).x + 4.0f > g.pitch.x;
    const char* prefix = bare ? "" : "H";
    const int col_every = std::max(1, static_cast<int>(std::ceil((ImGui::CalcTextSize((prefix + last_head).c_str()).x + 4.0f) / g.pitch.x)));
    const int row_every = std::max(1, static_cast<int>(std::ceil(line / g.pitch.y)));
    auto shown = [](int i, int every, int chosen) { return i == chosen || (i % every == 0 && std::abs(i - chosen) >= every); };

    // Backing under the column labels, over this grid's columns only: a grid beside it keeps its labels.
    const float right = std::min(view.x + view_size.x, g.origin.x + g.label_w + heads * g.pitch.x);
    draw->AddRectFilled(ImVec2(left, top), ImVec2(right, top + g.header), backing);
    for (int h = 0; h < heads; ++h) {
        if (!shown(h, col_every, selected.head)) continue;
        const float x = g.origin.x + g.label_w + h * g.pitch.x;
        if (x + g.cell_size.x < left + g.label_w || x > view.x + view_size.x) continue;
        const std::string t = prefix + std::to_string(h);
        // Centred over its cell, but never under the row labels' corner.
        const float tx = std::max(x + (g.cell_size.x - ImGui::CalcTextSize(t.c_str()).x) * 0.5f, left + g.label_w);
        draw->AddText(ImVec2(tx, top), h == selected.head ? text : dim, t.c_str());
    }
    draw->AddRectFilled(ImVec2(left, std::max(first_row, view.y)), ImVec2(left + g.label_w, view.y + view_size.y), backing);
    for (int l = 0; l < layers; ++l) {
        if (!shown(l, row_every, selected.layer)) continue;
        const float y = first_row + l * g.pitch.y + (g.cell_size.y - line) * 0.5f;
        if (y < top + g.header - line * 0.5f || y > view.y + view_size.y) continue;  // under the column labels, or below the view
        const std::string t = "L" + std::to_string(l);
        draw->AddText(ImVec2(left, y), l == selected.layer ? text : dim, t.c_str());
    }
    draw->AddRectFilled(ImVec2(left, top), ImVec2(left + g.label_w, top + g.header), backing);  // the corner
    if (bare) draw->AddText(ImVec2(left + g.label_w - ImGui::CalcTextSize("H ").x, top), dim, "H");  // what the numbers count
}

}  // namespace app
