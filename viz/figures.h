// Layouts of the figures ssaviz exports: an attention heatmap with token labels and a colour bar,
// the temperature highlight of the text (the paper's Figure 1, also as HTML), the grid of all
// heads, and plots (a viz/plot.h description, which the window draws too). Each returns a Figure
// (viz/figure.h) that becomes PNG or SVG; the same inputs give the same figure in the GUI's export
// preview and on the command line.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "viz/figure.h"
#include "viz/plot.h"

namespace viz {

struct HeatmapFigureOptions {
    std::string Title;                         // e.g. "model · layer 0 · head 1 · SSA"
    std::vector<std::string> RowLabels;        // one per row (token pieces, display form); empty: indices
    std::vector<std::string> ColLabels;        // one per column
    HeatmapStyle Style;                        // colour map, scale, range (nullopt: the data's)
    std::string ValueLabel = "attention weight";  // caption of the colour bar
    std::string RowAxis = "query", ColAxis = "key";  // the axes' names
    int MapSize = 0;                           // side of the map area in pixels; 0: from the size of the map
    int MinRowHeight = 0;                      // rows at least this tall in pixels at text scale 1, times Text's scale (cells then
                                               // taller than wide): a few rows over many tokens keep every row's label (12 px fonts: 15)
    float FontSize = 12;
    std::string CellValues;                    // a printf format ("%.3f"): each cell's value written in it, where every cell
                                               // holds its text; empty: none
    FigureText Text;                           // the title drawn or not, every font size scaled
    bool NarrowTitle = false;                  // a figure of its own: a long title wraps near the map's width (from 360 px)
                                               // rather than widening the figure to 720 px; false for a panel of Beside,
                                               // whose titles should take one line each, the panels' grids level
};

// rows x cols values, row-major. Labels are thinned to every k-th (k = 1, 2, 5, 10, ...) so that
// they are at least 1.2 x FontSize apart; the map is pooled (max) when it has more cells than pixels.
// A label's leading spaces (GPT-2's word starts) are drawn as middle dots, "·The", so they
// show on both axes; a newline draws as U+21B5, a tab as U+2192, and labels longer than 16
// characters end in an ellipsis. MapSize 0 gives cells of round(720 / max(rows, cols)) pixels,
// clamped to 1..28 (8 tokens: 28 px cells; 1,024 tokens: 1 px).
Figure HeatmapFigure(const float* values, int rows, int cols, const HeatmapFigureOptions& options);

// Figures side by side, their tops aligned, `gap` pixels apart, under a title of their own (the
// panels keep theirs: a heatmap's says which map it is): "SSA | comparison | difference" for a
// paper. Empty panels are skipped. The title is bold and larger than a heatmap's (15 px): it heads
// the panels' titles (at 13 px it read as one of them).
// `text`: the title drawn or not, its size scaled (the panels were laid out with their own).
Figure Beside(const std::vector<Figure>& panels, const std::string& title, const FigureText& text = {}, float gap = 16, float font_size = 16);

struct HighlightOptions {
    std::string Title;
    std::string ValueLabel = "tau_q";  // legend caption
    Colormap Map = Colormap::Viridis;
    std::optional<Range> ValueRange;   // nullopt: min..max of the finite values
    // The part of the value range the legend's colour bar shows, in the range's own colours
    // (nullopt: all of it): a temperature scale's half that the values reach.
    std::optional<Range> LegendRange;
    bool LogScale = false;
    int Width = 900;                   // the text wraps to this width (pixels)
    float FontSize = 18;
    FigureText Text;                   // the title drawn or not (the HTML's <h1> too), FontSize and the legend's scaled
};

// Text with each token's background coloured by its value (NaN: no colour). Pieces are UTF-8; a
// '\n' inside a piece ends the line; an empty piece (a token that continues a character the one
// before it began) is a narrow chip of its colour. The legend is a colour bar with ticks under the text.
Figure HighlightFigure(const std::vector<std::string>& pieces, const std::vector<float>& values, const HighlightOptions& options);
// The same as one self-contained HTML file (inline CSS, a hover title per token, no scripts).
std::string HighlightHtml(const std::vector<std::string>& pieces, const std::vector<float>& values, const HighlightOptions& options);

struct HeadsGridOptions {
    std::string Title;
    HeatmapStyle Style;                 // one range for every head (nullopt: the maximum over all)
    std::string ValueLabel = "attention weight";
    std::vector<std::string> Captions;  // [layers * heads], under each thumbnail; empty: "L{l} H{h}"
    int Thumb = 160;                    // thumbnail side in pixels
    FigureText Text;                    // the title drawn or not, every font size scaled
};

// maps: [layers, heads, tokens, tokens] row-major. Layers are rows, heads are columns.
Figure HeadsGridFigure(const float* maps, int layers, int heads, int tokens, const HeadsGridOptions& options);

// A plot description (viz/plot.h) as a paper figure: axes with round ticks and a light grid; data
// outside given ranges is clipped to the axes. Histogram series are counted into bars, category
// bars (Bars without X) placed side by side in their slots, and Options.YLine drawn as a line
// across the data in the legend. The legend sits inside the axes at the top right, or in the first
// other corner (top left, bottom right, bottom left) that hides less of the data. Categories turn
// vertical when they do not fit. The window's selection (XMarker, Highlighted) and point labels
// are not drawn.
Figure PlotFigure(const std::vector<PlotSeries>& series, const PlotOptions& options);
inline Figure PlotFigure(const Plot& plot) { return PlotFigure(plot.Series, plot.Options); }

}  // namespace viz
