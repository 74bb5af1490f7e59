// A plot described once, as data: its series, axes, labels, ranges and colours. Two backends draw
// the same description: viz::PlotFigure (viz/figures.h) makes it a paper figure (PNG, SVG) and
// viz::DrawPlot (viz/imgui/plot.h) an interactive plot in the window. A figure shown in both is
// one function that returns a Plot (app/export/plots.h); neither backend is told twice.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "viz/colormap.h"
#include "viz/figure.h"
#include "viz/palette.h"

namespace viz {

enum class SeriesKind {
    Line,       // (X[i], Y[i]) joined in order; NaN breaks the line. X empty: 1, 2, ...
    Points,     // (X[i], Y[i]) as dots. X empty: 1, 2, ...
    Bars,       // Y[i] as a bar from 0: centred on X[i] and BarWidth wide, or, with X empty, in slot i of
                // the categories, side by side with the other such series
    Histogram,  // Y holds the values to count; all histogram series of a plot share their bins
};

struct PlotSeries {
    std::string Name;  // legend entry (empty: not in the legend)
    SeriesKind Kind = SeriesKind::Line;
    std::vector<float> X, Y;  // non-finite points are skipped
    Rgba8 Color = SeriesColor(0);
    float BarWidth = 0.8f;            // Bars at X: width in x units
    std::vector<std::string> Labels;  // Points: a name per point, which the window shows on hover
    bool Dashed = false;              // Line: drawn in dashes (a file's reference line, as the window's)
};

// A horizontal reference line (a threshold) with its label: a legend entry in a file, written at
// the line's end in the window. Each backend draws it in its own reference colour.
struct PlotLine {
    float Value = 0;
    std::string Label;
};

struct PlotOptions {
    std::string Title, XLabel, YLabel;  // the window shows the title in the header above the plot
    int Width = 640, Height = 400;      // a file's size in pixels; the window's plots take their pane's
    FigureText Text;                    // a file's title and text size; the window's plots use its font
    std::optional<Range> XRange, YRange;  // nullopt: fitted to the data (bars include 0); the window's
                                          // bar charts fill their slots whatever XRange says
    std::vector<std::string> XCategories; // when set, x ticks are these labels at x = 0, 1, ...
    int CategoryGroup = 0;                 // the categories come in groups of this many (heads by layer):
    std::vector<std::string> GroupLabels;  // the window labels each group once and its bars by place
    std::optional<PlotLine> YLine;
    // Histogram bins: this many over the values' range; 0: a file takes 40 (a paper's fine
    // distribution), the window Sturges' rule on round edges (so a hovered bin reads round numbers).
    int HistogramBins = 0;
    // The window shows a legend for two series or more; this: for one too, whose name says what it
    // is (a one-layer run's "ssa (run), all heads (layer 0)"), as a file's legend always does.
    bool LegendForOne = false;
    // The window's selection, which a file leaves out, as it leaves out hover and clicks.
    std::optional<float> XMarker;  // a vertical line: the selected query, or tau = 1 among temperatures
    int Highlighted = -1;          // the selected point (Points) or category (Bars)
};

struct Plot {
    std::vector<PlotSeries> Series;
    PlotOptions Options;
};

}  // namespace viz
