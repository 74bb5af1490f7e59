// Small reusable ImGui widgets on plain data: a vertical colour bar with tick labels, a "(?)" help
// marker, text rotated to read bottom-to-top (column labels), text shortened to a width, and the
// shared colours (viz/palette.h) as ImGui's. Nothing here knows about models or the app; every
// widget is shown in viz::ShowDemoWindow().
#pragma once

#include <string>
#include <vector>

#include <imgui.h>

#include "viz/colormap.h"
#include "viz/ticks.h"  // NiceTicks, FormatTick (moved there; callers keep including this)

namespace viz {

// A colour of viz (palette, colour maps) as ImGui's packed colour.
inline ImU32 ToImU32(Rgba8 c) { return IM_COL32(c.r, c.g, c.b, c.a); }

// A vertical colour bar for `map` over `range` (top = range.max), with the range's ends and a few
// round tick values labelled on its right. `size` is the whole widget, labels included (the bar
// itself is at most 16 px wide). Hovering shows the value under the mouse, named `what` (the
// quantity: "attention weight", "tau_q").
void ColorBar(const char* id, const char* what, Colormap map, Range range, bool log_scale, ImVec2 size);
// The same showing only `shown`, a part of `range`, in the range's colours: the part of a
// temperature scale that the values reach (the scale stays centred at 1, so a colour is one temperature).
void ColorBar(const char* id, const char* what, Colormap map, Range range, bool log_scale, ImVec2 size, Range shown);

// The width ColorBar() needs for its bar and labels at the current font, for laying out beside a map.
float ColorBarWidth();

// A dimmed "(?)" that shows `text` as a tooltip when hovered.
void HelpMarker(const char* text);

// Shows `text` as a tooltip when the last item is hovered (for help on toolbar controls).
void ItemTooltip(const char* text);

// ImGui::SetTooltip, its lines wrapped where they would be wider than the window (ImGui's run off
// its edge, cut: a narrow window lost the ends of the longer ones); hard line breaks stay.
void Tooltip(const char* format, ...) IM_FMTARGS(1);

// A Selectable (the whole width) showing `text` exactly as it is: ImGui reads "##" in a label as
// the start of its ID, so a folder named "a##b" showed as "a". Its ID is "##text" under the
// caller's (PushID); it returns whether it was clicked, as Selectable does.
bool SelectableText(const std::string& text, bool selected, ImGuiSelectableFlags flags = 0);

// Draws text rotated 90 degrees counter-clockwise (reading bottom to top), starting at `pos`,
// which becomes the bottom-left corner of the rotated text; it extends up by the text's width
// and right by one line height.
void AddTextVertical(ImDrawList* draw_list, ImVec2 pos, ImU32 color, const char* text_begin,
                     const char* text_end = nullptr);

// `text` shortened with ".." so that it fits `max_width` at the current font (unchanged if it fits).
// Cuts only at UTF-8 character boundaries.
std::string EllipsizeText(const std::string& text, float max_width);

}  // namespace viz
