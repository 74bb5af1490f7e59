#include "viz/imgui/widgets.h"

#include <algorithm>
#include <cfloat>
#include <cstdarg>
#include <cmath>
#include <cstdio>
#include <cstring>

#include <imgui_internal.h>  // ImTextCharFromUtf8

namespace viz {
namespace {

constexpr float kLogFloor = 1e-6f;  // Normalize() clamps log values to this, so ticks do too

float BarWidth(float widget_width) { return std::min(16.0f, std::max(4.0f, widget_width * 0.4f)); }

// The value at position t in [0, 1] along the bar (inverse of Normalize()).
float ValueAt(float t, Range range, bool log_scale) {
    if (log_scale) {
        const float lo = std::log10(std::max(range.min, kLogFloor)), hi = std::log10(std::max(range.max, kLogFloor));
        return std::pow(10.0f, lo + t * (hi - lo));
    }
    return range.min + t * (range.max - range.min);
}

}  // namespace

float ColorBarWidth() {
    return 16.0f + ImGui::GetStyle().ItemInnerSpacing.x + 4.0f + ImGui::CalcTextSize("-2.5e-04").x + 2.0f;
}

void ColorBar(const char* id, const char* what, Colormap map, Range range, bool log_scale, ImVec2 size) {
    ColorBar(id, what, map, range, log_scale, size, range);
}

void ColorBar(const char* id, const char* what, Colormap map, Range scale, bool log_scale, ImVec2 size, Range shown) {
    const ScalePart part = PartOfScale(scale, shown, log_scale);  // what the bar reads: t0..t1 of the colour map
    const Range range = part.range;
    const float t0 = part.t0, t1 = part.t1;
    size.x = std::max(size.x, 8.0f);
    size.y = std::max(size.y, 8.0f);
    ImGui::PushID(id);
    const ImVec2 pos = ImGui::GetCursorScreenPos();
    ImGui::InvisibleButton("##colorbar", size);
    const bool hovered = ImGui::IsItemHovered();
    ImDrawList* draw = ImGui::GetWindowDrawList();

    // The bar spans the widget's full height, so it lines up with a map of the same height.
    const float bar_w = BarWidth(size.x);
    const float x0 = pos.x, x1 = pos.x + bar_w, y_top = pos.y, y_bottom = pos.y + size.y;
    const float height = y_bottom - y_top;
    const int strips = std::clamp(static_cast<int>(height / 2.0f), 2, 128);
    for (int k = 0; k < strips; ++k) {
        const float t_top = 1.0f - static_cast<float>(k) / strips, t_bottom = 1.0f - static_cast<float>(k + 1) / strips;
        const Rgba8 a = SampleColormap(map, t0 + (t1 - t0) * t_top), b = SampleColormap(map, t0 + (t1 - t0) * t_bottom);
        const ImU32 ca = IM_COL32(a.r, a.g, a.b, 255), cb = IM_COL32(b.r, b.g, b.b, 255);
        draw->AddRectFilledMultiColor(ImVec2(x0, y_top + height * k / strips), ImVec2(x1, y_top + height * (k + 1) / strips),
                                      ca, ca, cb, cb);
    }
    draw->AddRect(ImVec2(x0, y_top), ImVec2(x1, y_bottom), ImGui::GetColorU32(ImGuiCol_Border));

    // Labels: the range's ends (aligned to the bar's ends) and round values in between that do
    // not collide with them.
    const float line_h = ImGui::GetTextLineHeight();
    const ImU32 text_col = ImGui::GetColorU32(ImGuiCol_Text), tick_col = ImGui::GetColorU32(ImGuiCol_Text, 0.6f);
    const float label_x = x1 + ImGui::GetStyle().ItemInnerSpacing.x + 4.0f;
    const float lo_value = log_scale ? std::max(range.min, kLogFloor) : range.min;
    auto y_of = [&](float v) { return y_bottom - Normalize(v, range, log_scale) * height; };
    struct Label {
        float y_text;  // top of the text
        std::string text;
    };
    // Every value in one notation, as the exported figures' bars (FormatTicks: "10⁻⁴" beside "10⁻³").
    const std::vector<float> ticks = NiceTicks(range, log_scale, 6);
    std::vector<float> values = ticks;
    values.push_back(lo_value);
    values.push_back(range.max);
    std::sort(values.begin(), values.end());
    values.erase(std::unique(values.begin(), values.end()), values.end());
    const std::vector<std::string> texts = FormatTicks(values);
    auto text_of = [&](float v) { return texts[std::lower_bound(values.begin(), values.end(), v) - values.begin()]; };
    std::vector<Label> labels;
    labels.push_back({y_top, text_of(range.max)});
    labels.push_back({y_bottom - line_h, text_of(lo_value)});
    for (float v : ticks) {
        const float y = y_of(v);
        draw->AddLine(ImVec2(x1, y), ImVec2(x1 + 4.0f, y), tick_col);
        const float y_text = y - line_h * 0.5f;
        bool collides = false;
        for (const Label& l : labels) collides |= std::abs(l.y_text - y_text) < line_h * 1.05f;
        if (!collides) labels.push_back({y_text, text_of(v)});
    }
    for (const Label& l : labels) draw->AddText(ImVec2(label_x, std::round(l.y_text)), text_col, l.text.c_str());

    if (hovered) {
        const float t = std::clamp((y_bottom - ImGui::GetIO().MousePos.y) / height, 0.0f, 1.0f);
        const float value = ValueAt(t, range, log_scale);
        draw->AddLine(ImVec2(x0, ImGui::GetIO().MousePos.y), ImVec2(x1, ImGui::GetIO().MousePos.y), IM_COL32(255, 255, 255, 200));
        ImGui::SetTooltip("%s %.4g\nrange %.4g .. %.4g%s (%s)", what, value, lo_value, range.max, log_scale ? ", log scale" : "",
                          ColormapName(map));
    }
    ImGui::PopID();
}

void HelpMarker(const char* text) {
    ImGui::TextDisabled("(?)");
    ItemTooltip(text);
}

bool SelectableText(const std::string& text, bool selected, ImGuiSelectableFlags flags) {
    const ImVec2 at = ImGui::GetCursorScreenPos();
    // As wide as the text, at least (a menu sizes itself by its items: an empty label made it a
    // sliver that cut every name), and the whole width where there is more.
    const float width = std::max(ImGui::CalcTextSize(text.data(), text.data() + text.size(), false).x, ImGui::GetContentRegionAvail().x);
    const bool clicked = ImGui::Selectable("##text", selected, flags, ImVec2(width, 0.0f));
    // Where Selectable draws its label, in the text colour the caller pushed; the Selectable stays the
    // last item, so IsItemHovered() and double-clicks after the call are about it.
    ImGui::GetWindowDrawList()->AddText(at, ImGui::GetColorU32(ImGuiCol_Text), text.data(), text.data() + text.size());
    return clicked;
}

void ItemTooltip(const char* text) {
    if (!ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled)) return;
    ImGui::BeginTooltip();
    ImGui::PushTextWrapPos(ImGui::GetFontSize() * 32.0f);
    ImGui::TextUnformatted(text);
    ImGui::PopTextWrapPos();
    ImGui::EndTooltip();
}

void Tooltip(const char* format, ...) {
    ImGui::BeginTooltip();
    const ImGuiStyle& style = ImGui::GetStyle();
    const float widest = ImGui::GetMainViewport()->WorkSize.x - 2.0f * (style.WindowPadding.x + style.DisplaySafeAreaPadding.x) - 16.0f;
    ImGui::PushTextWrapPos(ImGui::GetCursorPosX() + std::max(ImGui::GetFontSize() * 16.0f, widest));
    va_list args;
    va_start(args, format);
    ImGui::TextV(format, args);
    va_end(args);
    ImGui::PopTextWrapPos();
    ImGui::EndTooltip();
}

void AddTextVertical(ImDrawList* draw_list, ImVec2 pos, ImU32 color, const char* text_begin, const char* text_end) {
    // Glyph quads are emitted directly, rotated, rather than through AddText(): AddText culls
    // glyphs against the clip rect before any rotation could be applied.
    ImFont* font = ImGui::GetFont();
    const float scale = ImGui::GetFontSize() / font->FontSize;
    if (!text_end) text_end = text_begin + std::strlen(text_begin);
    const bool push_texture = draw_list->_CmdHeader.TextureId != font->ContainerAtlas->TexID;
    if (push_texture) draw_list->PushTextureID(font->ContainerAtlas->TexID);
    pos.x = std::round(pos.x);
    pos.y = std::round(pos.y);
    float advance = 0.0f;
    for (const char* s = text_begin; s < text_end;) {
        unsigned int c = 0;
        const int n = ImTextCharFromUtf8(&c, s, text_end);
        s += n > 0 ? n : 1;
        if (c == 0) break;
        if (c < 32) continue;
        const ImFontGlyph* glyph = font->FindGlyph(static_cast<ImWchar>(c));
        if (!glyph) continue;
        if (glyph->Visible) {
            // Unrotated glyph box: u along the text, v down the line; (u, v) -> (pos.x + v, pos.y - u).
            const float u0 = advance + glyph->X0 * scale, u1 = advance + glyph->X1 * scale;
            const float v0 = glyph->Y0 * scale, v1 = glyph->Y1 * scale;
            draw_list->PrimReserve(6, 4);
            draw_list->PrimQuadUV(ImVec2(pos.x + v0, pos.y - u0), ImVec2(pos.x + v0, pos.y - u1), ImVec2(pos.x + v1, pos.y - u1),
                                  ImVec2(pos.x + v1, pos.y - u0), ImVec2(glyph->U0, glyph->V0), ImVec2(glyph->U1, glyph->V0),
                                  ImVec2(glyph->U1, glyph->V1), ImVec2(glyph->U0, glyph->V1), color);
        }
        advance += glyph->AdvanceX * scale;
    }
    if (push_texture) draw_list->PopTextureID();
}

std::string EllipsizeText(const std::string& text, float max_width) {
    if (ImGui::CalcTextSize(text.c_str()).x <= max_width) return text;
    const float dots = ImGui::CalcTextSize("..").x;
    std::string out;
    float width = 0.0f;
    ImFont* font = ImGui::GetFont();
    const float size = ImGui::GetFontSize();
    const char* end = text.c_str() + text.size();
    for (const char* s = text.c_str(); s < end;) {
        unsigned int c = 0;
        const int n = std::max(1, ImTextCharFromUtf8(&c, s, end));
        const float w = font->CalcTextSizeA(size, FLT_MAX, 0.0f, s, s + n).x;
        if (width + w + dots > max_width) break;
        width += w;
        out.append(s, n);
        s += n;
    }
    return out + "..";
}

}  // namespace viz
