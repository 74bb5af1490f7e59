// The window's backend for plot descriptions (viz/plot.h): draws a Plot with ImDrawList on the
// window's dark theme, with axes, tick labels, a legend, the window's selection and a hover
// read-out. It keeps no state between frames and returns what the mouse is on, so a view can
// select the query or head a point or bar stands for. Files draw the same description through
// viz::PlotFigure (viz/figures.h).
#pragma once

#include <imgui.h>

#include "viz/plot.h"

namespace viz {

// What the mouse is on this frame.
struct PlotHit {
    int index = -1;        // point, bin or bar; -1 for none
    int series = -1;       // its series
    bool clicked = false;  // left-clicked this frame while on it
};

// size.x <= 0: the available width plus size.x; size.y <= 0: a default height. The first series'
// kind says how the plot is drawn (the window draws plots whose series are all of one kind):
// - Line: NaN breaks a line; hover reads out every series at the x nearest to the mouse.
// - Histogram: bins from all series' finite values, overlaid; hover shows a bin's range and counts.
// - Points: hover shows a point's label and values; Options.Highlighted is ringed and labelled.
// - Bars: Y[i] in slot i (X is not read), series side by side, XCategories naming the slots
//   (grouped by Options.CategoryGroup); bars under Options.YLine are drawn dim.
// Options.Title is not drawn: the window names a plot in the header above it.
PlotHit DrawPlot(const char* id, ImVec2 size, const Plot& plot);

}  // namespace viz
