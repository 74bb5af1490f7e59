// Small plots drawn with ImDrawList on plain arrays: lines, histograms, scatter and bars, with
// axes, tick labels, a legend and a hover read-out. They keep no state between frames and return
// what the mouse is on, so a view can select the head a point or bar stands for.
#pragma once

#include <optional>
#include <string>

#include <imgui.h>

#include "viz/colormap.h"

namespace viz {

// Axis options shared by all plots. Ranges left empty follow the data (non-finite values are
// ignored) with a little padding.
struct PlotAxes {
    const char* x_label = nullptr;  // centred under the x axis
    const char* y_label = nullptr;  // above the y axis, top left
    std::optional<Range> x_range;
    std::optional<Range> y_range;
    std::optional<float> y_line;         // a horizontal reference line, e.g. a threshold
    const char* y_line_label = nullptr;  // written at the line's right end
    std::optional<float> x_line;         // a vertical reference line, e.g. the selected position
};

// One series. For LinePlot: points (x[i], y[i]); for Histogram: y holds the values to bin; for
// BarChart: y holds one value per bar (all series the same count).
struct PlotSeries {
    const char* label = "";
    const float* y = nullptr;
    int count = 0;
    const float* x = nullptr;  // LinePlot only; nullptr: 1..count
    ImU32 color = 0;           // 0: PlotColor(series index)
};

// What the mouse is on this frame.
struct PlotHit {
    int index = -1;        // point, bin or bar; -1 for none
    int series = -1;       // its series (LinePlot, Histogram, BarChart)
    bool clicked = false;  // left-clicked this frame while on it
};

// Bars grouped (e.g. heads by layer): separators between groups, group labels under the axis,
// and each bar's tick reads its position in the group.
struct BarGroups {
    int size = 0;                         // bars per group, 0 for no groups
    const std::string* labels = nullptr;  // [count / size]
};

// A palette for series that distinguishes well on a dark background: orange, blue, green, red, ...
ImU32 PlotColor(int index);

// size.x <= 0: the available width plus size.x; size.y <= 0: a default height. NaN breaks a line.
// Hover reads out every series at the x nearest to the mouse.
PlotHit LinePlot(const char* id, ImVec2 size, const PlotSeries* series, int series_count, const PlotAxes& axes = {});

// Bins computed from all series' finite values (bins <= 0: Sturges' rule, 5..40 bins); several
// series share the bins and overlay. Hover shows a bin's range and counts.
PlotHit Histogram(const char* id, ImVec2 size, const PlotSeries* series, int series_count, int bins = 0,
                  const PlotAxes& axes = {});

// Points (x[i], y[i]); hover shows labels[i] (may be null) and the values; the highlighted point
// is ringed and labelled. Points with a non-finite coordinate are left out.
PlotHit ScatterPlot(const char* id, ImVec2 size, const float* x, const float* y, int count,
                    const std::string* labels = nullptr, int highlighted = -1, const PlotAxes& axes = {});

// Vertical bars, several series side by side per slot; labels[i] (may be null) names slot i.
// With axes.y_line, bars above the line are drawn brighter than those below.
PlotHit BarChart(const char* id, ImVec2 size, const PlotSeries* series, int series_count,
                 const std::string* labels = nullptr, int highlighted = -1, const PlotAxes& axes = {},
                 BarGroups groups = {});

}  // namespace viz
