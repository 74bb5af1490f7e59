#include "app/gui/views/view_temperature.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <imgui.h>

#include "app/core/names.h"
#include "app/gui/views/view_common.h"
#include "viz/colormap.h"
#include "viz/imgui/widgets.h"
#include "viz/ticks.h"

namespace app {
namespace {

const ImU32 kTauQColor = IM_COL32(240, 145, 40, 255);
const ImU32 kTauVColor = IM_COL32(120, 200, 120, 255);
const ImU32 kFitColor = IM_COL32(255, 255, 255, 200);
const ImU32 kOtherColor = IM_COL32(235, 110, 210, 255);  // the base's or twin's tau_q

// Where layer l of L lies on viridis for the every-layer lines: from 0.3, as the darker end does not
// read on the dark plot.
float LayerShade(int l, int L) { return L > 1 ? 0.3f + 0.7f * static_cast<float>(l) / static_cast<float>(L - 1) : 0.6f; }

// The other SSA model's tau_q for head row `head_row`: the base's, else a twin's, where it has
// temperatures (a value other than 1; a vanilla base or twin has ones); empty otherwise.
std::vector<float> OtherTauQ(const model::Analysis& a, int64_t head_row, const char** name) {
    const bool base = a.HasBase();
    const model::RowArray& tau = base ? a.tau_q_base : a.tau_q_compare;
    if ((!base && !HasTwin(a)) || tau.rows() <= head_row || tau.tokens() != a.n_tokens) return {};
    std::vector<float> row = tau.Row(head_row);
    if (std::all_of(row.begin(), row.end(), [](float v) { return v == 1.0f; })) return {};
    *name = base ? "base" : "twin";
    return row;
}

// Least squares y = a + s ln(i + 1) over tokens 0..T-1 (position i + 1 counted from 1), and the
// correlation of y with ln(i + 1).
struct LogFit {
    float a = NAN, s = NAN, r = NAN;
};
LogFit FitLog(const float* y, int T) {
    double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0, syy = 0;
    for (int i = 0; i < T; ++i) {
        if (!std::isfinite(y[i])) continue;
        const double x = std::log(i + 1.0);
        n += 1, sx += x, sy += y[i], sxx += x * x, sxy += x * y[i], syy += static_cast<double>(y[i]) * y[i];
    }
    LogFit f;
    const double vx = n * sxx - sx * sx, vy = n * syy - sy * sy;
    if (n < 3 || vx <= 0) return f;
    f.s = static_cast<float>((n * sxy - sx * sy) / vx);
    f.a = static_cast<float>((sy - f.s * sx) / n);
    if (vy > 0) f.r = static_cast<float>((n * sxy - sx * sy) / std::sqrt(vx * vy));
    return f;
}

}  // namespace

void TemperatureView::Draw(WindowState& state) {
    if (DrawNoAnalysisNote(state)) return;
    const model::Analysis& a = *state.analysis;
    const int T = a.n_tokens;
    const HeadRef head = state.selected;
    const size_t row = a.RowIndex(head.layer, head.head);
    if (T == 0 || a.tau_q.size() < row + T || a.tau_v.size() < row + T) {
        ImGui::TextDisabled("no temperatures in this analysis");
        return;
    }
    const int64_t head_row = static_cast<int64_t>(head.layer) * a.n_head + head.head;
    const std::vector<float> tau_q_row = a.tau_q.Row(head_row), tau_v_row = a.tau_v.Row(head_row);
    const float* tau_q = tau_q_row.data();
    const float* tau_v = tau_v_row.data();
    const LogFit fit = FitLog(tau_q, T);
    const char* other_name = "";
    const std::vector<float> other_row = OtherTauQ(a, head_row, &other_name);
    const float* other = !other_row.empty() && m_show_other ? other_row.data() : nullptr;

    ImGui::Text("%s: temperatures by position", HeadName(head).c_str());
    ImGui::SameLine();
    viz::HelpMarker("tau is an inverse temperature: tau > 1 sharpens a row (or weights a value up), tau < 1 softens it, "
                    "tau = 1 is vanilla attention.\nOrange: tau_q(i) of each query; green: tau_v(j) of each key. White "
                    "dashes: the least-squares trend a + s ln i of tau_q, with r its correlation with ln i: near 1, the "
                    "position term dominates and a long text reads as a gradient on the chips. Blue line: the learned "
                    "position term 1 + s ln i itself (colour the chips by the token term alone to see past it). "
                    "\nHover a point for its token; "
                    "click it to make it the query. Arrows change the head.");
    ImGui::Checkbox("log position axis", &m_log_x);
    ImGui::SameLine();
    ImGui::Checkbox("tau_v", &m_show_tau_v);
    if (!other_row.empty()) {
        ImGui::SameLine();
        ImGui::Checkbox((std::string(other_name) + "'s tau_q").c_str(), &m_show_other);
        viz::ItemTooltip(("The " + std::string(other_name) + " is an SSA model too: its tau_q of the same head and tokens, as rings. "
                          "Where the rings leave the orange points, the temperatures moved between the two models.")
                             .c_str());
    }
    // The model's slopes (ModelInfo::query_slopes): each layer's learned position term, labelled.
    const std::vector<model::TemperatureSlope>* slopes = state.model && !state.model->query_slopes.empty() ? &state.model->query_slopes : nullptr;
    if (slopes) {
        ImGui::SameLine();
        ImGui::Checkbox("every layer", &m_every_layer);
        viz::ItemTooltip("Every layer's learned position term 1 + s ln i (one line a head where the layer has one slope a head), "
                         "labelled at the right: an official SSA checkpoint has one slope a layer, the same for every head and "
                         "token, so these lines are all its temperatures.");
    }
    const bool every_layer = slopes && m_every_layer;
    if (std::isfinite(fit.s)) {
        char trend[96];
        std::snprintf(trend, sizeof trend, "tau_q trend %.3f %+.3f ln i, r = %.2f", fit.a, fit.s, fit.r);
        SameLineIfFits(ImGui::CalcTextSize(trend).x);  // else on a line of its own: a narrow pane cut it off
        ImGui::TextDisabled("%s", trend);
    }

    // Plot area.
    const float line = ImGui::GetTextLineHeight();
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    const float h = std::clamp(avail.y - line * 3.0f, line * 8.0f, avail.x * 0.8f);
    float lo = 1.0f, hi = 1.0f;
    for (int i = 0; i < T; ++i) {
        if (std::isfinite(tau_q[i])) lo = std::min(lo, tau_q[i]), hi = std::max(hi, tau_q[i]);
        if (m_show_tau_v && std::isfinite(tau_v[i])) lo = std::min(lo, tau_v[i]), hi = std::max(hi, tau_v[i]);
        if (other && std::isfinite(other[i])) lo = std::min(lo, other[i]), hi = std::max(hi, other[i]);
    }
    if (every_layer)
        for (const model::TemperatureSlope& layer : *slopes)
            for (float s : layer.s) {
                const float end = 1.0f + s * std::log(static_cast<float>(std::max(1, T)));
                if (std::isfinite(end)) lo = std::min(lo, end), hi = std::max(hi, end);
            }
    const float pad = std::max(0.05f, (hi - lo) * 0.06f);
    lo -= pad, hi += pad;
    const std::vector<float> y_ticks = viz::NiceTicks({lo, hi}, false, 5);
    float axis_w = 0;
    for (float v : y_ticks) axis_w = std::max(axis_w, ImGui::CalcTextSize(viz::FormatTick(v).c_str()).x);
    // The layers' labels in a margin at the right, off the data.
    const float label_w = every_layer ? ImGui::CalcTextSize(("L" + std::to_string(slopes->size() - 1)).c_str()).x + 8.0f : 0.0f;
    const ImVec2 p0(origin.x + axis_w + 8.0f, origin.y + 4.0f), p1(origin.x + avail.x - 8.0f - label_w, origin.y + h);
    if (p1.x - p0.x < 40 || p1.y - p0.y < 40) return;
    constexpr float kInset = 9.0f;  // the first and last positions' points, and the query's ring, whole inside the frame
    auto x_of = [&](float i) {  // position i counted from 1
        const float t = m_log_x ? std::log(i) / std::log(std::max(2.0f, static_cast<float>(T))) : (i - 1) / std::max(1.0f, T - 1.0f);
        return p0.x + kInset + t * (p1.x - p0.x - 2 * kInset);
    };
    auto y_of = [&](float v) { return p1.y - (v - lo) / (hi - lo) * (p1.y - p0.y); };
    ImDrawList* draw = ImGui::GetWindowDrawList();
    const ImU32 dim = ImGui::GetColorU32(ImGuiCol_TextDisabled), grid = IM_COL32(255, 255, 255, 25);
    draw->AddRectFilled(p0, p1, IM_COL32(255, 255, 255, 8));
    for (float v : y_ticks) {
        draw->AddLine(ImVec2(p0.x, y_of(v)), ImVec2(p1.x, y_of(v)), grid);
        const std::string t = viz::FormatTick(v);
        draw->AddText(ImVec2(p0.x - 6 - ImGui::CalcTextSize(t.c_str()).x, y_of(v) - line * 0.5f), dim, t.c_str());
    }
    // Position ticks: 1, 2, 5, 10, ... on the log axis, round steps on the linear one.
    std::vector<int> x_ticks;
    if (m_log_x) {
        for (int m = 1; m <= T; m *= 10)
            for (int f : {1, 2, 5})
                if (f * m <= T) x_ticks.push_back(f * m);
    } else {
        for (float v : viz::NiceTicks({1.0f, static_cast<float>(T)}, false, 6))
            if (v >= 1 && v <= T) x_ticks.push_back(static_cast<int>(v));
    }
    for (int i : x_ticks) {
        const float x = x_of(static_cast<float>(i));
        draw->AddLine(ImVec2(x, p1.y), ImVec2(x, p1.y + 3), dim);
        const std::string t = std::to_string(i);
        draw->AddText(ImVec2(x - ImGui::CalcTextSize(t.c_str()).x * 0.5f, p1.y + 3), dim, t.c_str());
    }
    const std::string x_label = "query / key position i (from 1)";
    draw->AddText(ImVec2(p1.x - ImGui::CalcTextSize(x_label.c_str()).x, p1.y + line + 4), dim, x_label.c_str());
    // tau = 1: vanilla.
    draw->AddLine(ImVec2(p0.x, y_of(1.0f)), ImVec2(p1.x, y_of(1.0f)), IM_COL32(255, 255, 255, 110), 1.5f);
    // Its label on the side the head's curve leaves free: every 1 + s ln i starts at tau = 1.
    const bool rising = !std::isfinite(fit.s) || fit.s >= 0;
    draw->AddText(ImVec2(p0.x + 4, rising ? y_of(1.0f) + 2 : y_of(1.0f) - line), IM_COL32(255, 255, 255, 160), "tau = 1 (vanilla)");
    // The trend, dashed.
    if (std::isfinite(fit.s)) {
        constexpr int kSteps = 96;
        for (int k = 0; k < kSteps; k += 2) {
            auto at = [&](int step) {
                const float t = static_cast<float>(step) / kSteps;
                const float i = m_log_x ? std::pow(static_cast<float>(std::max(2, T)), t) : 1.0f + t * (T - 1);
                return ImVec2(x_of(i), y_of(fit.a + fit.s * std::log(i)));
            };
            draw->AddLine(at(k), at(k + 1), kFitColor, 2.0f);
        }
    }
    // The learned position term 1 + s ln i, the curve the points would follow without the token term.
    const bool has_position = a.tau_q_position.size() >= row + T;
    if (has_position) {
        const std::vector<float> position_row = a.tau_q_position.Row(head_row);
        const float* pos = position_row.data();
        std::vector<ImVec2> curve;
        for (int i = 0; i < T; ++i)
            if (std::isfinite(pos[i])) curve.push_back(ImVec2(x_of(i + 1.0f), y_of(pos[i])));
        draw->PushClipRect(p0, p1, true);
        draw->AddPolyline(curve.data(), static_cast<int>(curve.size()), IM_COL32(120, 190, 255, 255), 0, 2.5f);
        draw->PopClipRect();
    }
    // Every layer's learned position term, coloured by layer and labelled in the margin at the
    // right (drawn after the points, below).
    struct LayerLabel {
        ImVec2 pos;
        ImU32 color;
        std::string text;
    };
    std::vector<LayerLabel> layer_labels;
    if (every_layer) {
        draw->PushClipRect(p0, p1, true);
        const int L = static_cast<int>(slopes->size());
        std::vector<float> label_y;  // each layer's label beside its line's end, moved apart where they would overlap
        for (int l = 0; l < L; ++l)
            label_y.push_back(y_of(1.0f + (*slopes)[l].s.back() * std::log(static_cast<float>(std::max(2, T)))) - line * 0.5f);
        label_y = viz::SpreadLabels(label_y, line, p0.y, p1.y - line);
        for (int l = 0; l < L; ++l) {
            const viz::Rgba8 c = viz::SampleColormap(viz::Colormap::Viridis, LayerShade(l, L));
            const ImU32 color = IM_COL32(c.r, c.g, c.b, l == state.selected.layer ? 255 : 150);
            for (float s : (*slopes)[l].s) {
                constexpr int kSteps = 48;
                std::vector<ImVec2> curve;
                for (int k = 0; k <= kSteps; ++k) {
                    const float t = static_cast<float>(k) / kSteps;
                    const float i = m_log_x ? std::pow(static_cast<float>(std::max(2, T)), t) : 1.0f + t * (T - 1);
                    curve.push_back(ImVec2(x_of(i), y_of(1.0f + s * std::log(i))));
                }
                draw->AddPolyline(curve.data(), static_cast<int>(curve.size()), color, 0, l == state.selected.layer ? 2.0f : 1.0f);
            }
            const std::string label = "L" + std::to_string(l);
            layer_labels.push_back({ImVec2(p1.x + 4, label_y[l]), color | IM_COL32_A_MASK, label});
        }
        draw->PopClipRect();
    }
    // Points; the query ringed. Mouse: the nearest point within a few pixels.
    ImGui::SetCursorScreenPos(p0);
    ImGui::InvisibleButton("##tau_plot", ImVec2(p1.x - p0.x, p1.y - p0.y));
    const bool hovered = ImGui::IsItemHovered();
    const ImVec2 mouse = ImGui::GetIO().MousePos;
    int near = -1, near_series = 0;
    float near_d = 8.0f * 8.0f;
    const float r = T > 500 ? 1.5f : 2.5f;
    draw->PushClipRect(p0, p1, true);
    if (other)  // under SSA's points: rings
        for (int i = 0; i < T; ++i)
            if (std::isfinite(other[i])) draw->AddCircle(ImVec2(x_of(i + 1.0f), y_of(other[i])), r + 1.5f, kOtherColor, 10, 1.5f);
    for (int series = m_show_tau_v ? 1 : 0; series >= 0; --series) {
        const float* y = series == 0 ? tau_q : tau_v;
        const ImU32 color = series == 0 ? kTauQColor : kTauVColor;
        for (int i = 0; i < T; ++i) {
            if (!std::isfinite(y[i])) continue;
            const ImVec2 p(x_of(i + 1.0f), y_of(y[i]));
            draw->AddCircleFilled(p, r, color, 8);
            const float d = (p.x - mouse.x) * (p.x - mouse.x) + (p.y - mouse.y) * (p.y - mouse.y);
            if (hovered && d < near_d) near_d = d, near = i, near_series = series;
        }
    }
    if (state.query >= 0 && state.query < T) {
        const ImVec2 p(x_of(state.query + 1.0f), y_of(tau_q[state.query]));
        draw->AddCircle(p, r + 4, IM_COL32(0, 0, 0, 255), 12, 3.0f);
        draw->AddCircle(p, r + 4, IM_COL32(255, 220, 90, 255), 12, 1.5f);
    }
    draw->PopClipRect();
    for (const LayerLabel& label : layer_labels) AddLabel(draw, label.pos, label.color, label.text.c_str());
    if (near >= 0) {
        const std::vector<std::string>& pieces = a.tokens.pieces;
        const std::string label = near < static_cast<int>(pieces.size()) ? TokenLabel(pieces[near]) : "?";
        char terms[96] = "";
        if (has_position && a.tau_q_token.size() >= row + T)
            std::snprintf(terms, sizeof terms, " = position %.3f, token term %+.3f", a.tau_q_position[row + near], a.tau_q_token[row + near]);
        char beside[64] = "";
        if (!other_row.empty()) std::snprintf(beside, sizeof beside, "\n%s's tau_q %.3f", other_name, other_row[static_cast<size_t>(near)]);
        viz::Tooltip("'%s' (token %d, position %d)\ntau_q %.3f%s\ntau_v %.3f%s\nclick: make it the query", label.c_str(), near, near + 1,
                          tau_q[near], terms, tau_v[near], beside);
        if (ImGui::IsItemClicked(ImGuiMouseButton_Left)) state.query = near;
    }
    (void)near_series;
    // Legend.
    ImGui::SetCursorScreenPos(ImVec2(origin.x, p1.y + line * 2 + 6));
    const float right = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x;
    int keys = 0;
    enum class Mark { Dot, Ring, Layers };  // Layers: the layers' colours in order, as their lines are drawn
    auto key = [&](ImU32 color, const char* text, Mark mark = Mark::Dot) {  // on the line of the one before when it fits
        const float width = line * 0.9f + ImGui::GetStyle().ItemSpacing.x + ImGui::CalcTextSize(text).x;
        if (keys++ > 0 && ImGui::GetItemRectMax().x + line + width <= right) ImGui::SameLine(0, line);
        const ImVec2 p = ImGui::GetCursorScreenPos();
        if (mark == Mark::Ring) {
            draw->AddCircle(ImVec2(p.x + line * 0.4f, p.y + line * 0.5f), line * 0.3f, color, 12, 1.5f);
        } else if (mark == Mark::Layers) {
            constexpr int kParts = 6;
            for (int k = 0; k < kParts; ++k) {
                const viz::Rgba8 c = viz::SampleColormap(viz::Colormap::Viridis, LayerShade(k, kParts));
                draw->AddRectFilled(ImVec2(p.x + line * 0.9f * k / kParts, p.y + line * 0.35f),
                                    ImVec2(p.x + line * 0.9f * (k + 1) / kParts, p.y + line * 0.65f), IM_COL32(c.r, c.g, c.b, 255));
            }
        } else {
            draw->AddCircleFilled(ImVec2(p.x + line * 0.4f, p.y + line * 0.5f), line * 0.3f, color, 12);
        }
        ImGui::Dummy(ImVec2(line * 0.9f, line));
        ImGui::SameLine();
        ImGui::TextUnformatted(text);
    };
    key(kTauQColor, "tau_q (queries)");
    if (m_show_tau_v) key(kTauVColor, "tau_v (keys)");
    const std::string other_key = std::string(other_name) + "'s tau_q (rings)";
    if (other) key(kOtherColor, other_key.c_str(), Mark::Ring);
    if (has_position) key(IM_COL32(120, 190, 255, 255), "learned 1 + s ln i");
    const std::string layers_key = slopes ? "every layer's 1 + s ln i (L0 .. L" + std::to_string(slopes->size() - 1) + ")" : "";
    if (every_layer) key(0, layers_key.c_str(), Mark::Layers);
    key(kFitColor, "a + s ln i, fitted to tau_q");
    state.regions["temperature"] = Rect{p0.x, p0.y, p1.x - p0.x, p1.y - p0.y};
}

}  // namespace app
