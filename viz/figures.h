// Layouts of the figures ssaviz exports: an attention heatmap with token labels and a colour bar,
// the temperature highlight of the text (the paper's Figure 1, also as HTML), the grid of all
// heads, and line / scatter / bar plots. Each returns a Figure (viz/figure.h) that becomes PNG or
// SVG; the same inputs give the same figure in the GUI's export preview and on the command line.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "viz/figure.h"

namespace viz {

struct HeatmapFigureOptions {
    std::string Title;                         // e.g. "model · layer 0 · head 1 · SSA"
    std::vector<std::string> RowLabels;        // one per row (token pieces, display form); empty: indices
    std::vector<std::string> ColLabels;        // one per column
    HeatmapStyle Style;                        // colour map, scale, range (nullopt: the data's)
    std::string ValueLabel = "attention weight";  // caption of the colour bar
    int MapSize = 0;                           // side of the map area in pixels; 0: from the size of the map
    float FontSize = 12;
};

// rows x cols values, row-major. Labels are thinned to every k-th (k = 1, 2, 5, 10, ...) so that
// they are at least 1.2 x FontSize apart; the map is pooled (max) when it has more cells than pixels.
// A label's leading spaces (GPT-2's word starts) are drawn as middle dots, "·The", so they
// show on both axes; a newline draws as U+21B5, a tab as U+2192, and labels longer than 16
// characters end in an ellipsis. MapSize 0 gives cells of round(720 / max(rows, cols)) pixels,
// clamped to 1..28 (8 tokens: 28 px cells; 1,024 tokens: 1 px).
Figure HeatmapFigure(const float* values, int rows, int cols, const HeatmapFigureOptions& options);

struct HighlightOptions {
    std::string Title;
    std::string ValueLabel = "tau_q";  // legend caption
    Colormap Map = Colormap::Viridis;
    std::optional<Range> ValueRange;   // nullopt: min..max of the finite values
    bool LogScale = false;
    int Width = 900;                   // the text wraps to this width (pixels)
    float FontSize = 18;
};

// Text with each token's background coloured by its value (NaN: no colour). Pieces are UTF-8; a
// '\n' inside a piece ends the line. The legend is a colour bar with ticks under the text.
Figure HighlightFigure(const std::vector<std::string>& pieces, const std::vector<float>& values, const HighlightOptions& options);
// The same as one self-contained HTML file (inline CSS, a hover title per token, no scripts).
std::string HighlightHtml(const std::vector<std::string>& pieces, const std::vector<float>& values, const HighlightOptions& options);

struct HeadsGridOptions {
    std::string Title;
    HeatmapStyle Style;                 // one range for every head (nullopt: the maximum over all)
    std::string ValueLabel = "attention weight";
    std::vector<std::string> Captions;  // [layers * heads], under each thumbnail; empty: "L{l} H{h}"
    int Thumb = 160;                    // thumbnail side in pixels
};

// maps: [layers, heads, tokens, tokens] row-major. Layers are rows, heads are columns.
Figure HeadsGridFigure(const float* maps, int layers, int heads, int tokens, const HeadsGridOptions& options);

enum class SeriesKind { Line, Points, Bars };

// In an inline namespace because viz/imgui/plot.h (the GUI's ImGui plots) has its own, different
// viz::PlotSeries: two definitions of one name break the one-definition rule at link time
// (std::vector<PlotSeries> members would be merged). Code says viz::PlotSeries as usual; a file
// that includes both headers names this one viz::fig::PlotSeries.
inline namespace fig {
struct PlotSeries {
    std::string Name;  // legend entry (empty: not in the legend)
    SeriesKind Kind = SeriesKind::Line;
    std::vector<float> X, Y;  // NaN points are skipped (a line breaks there)
    Rgba8 Color = {31, 119, 180, 255};
    float BarWidth = 0.8f;    // Bars: width in x units, centred on X
};
}  // namespace fig

struct PlotOptions {
    std::string Title, XLabel, YLabel;
    int Width = 640, Height = 400;
    std::optional<Range> XRange, YRange;  // nullopt: fitted to the data (bars include 0)
    std::vector<std::string> XCategories; // when set, x ticks are these labels at x = 0, 1, ...
};

// Axes with round ticks and a light grid; data outside given ranges is clipped to the axes. The
// legend sits inside the axes at the top right, or in the first other corner (top left, bottom
// right, bottom left) that hides less of the data. Categories turn vertical when they do not fit.
Figure PlotFigure(const std::vector<PlotSeries>& series, const PlotOptions& options);

// The i-th colour of the plot palette (SSA, comparison, then others).
Rgba8 SeriesColor(int i);

}  // namespace viz
