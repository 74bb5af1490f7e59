// Figures for papers: a flat list of drawing commands in pixel coordinates (origin top-left, y
// down). One figure renders to PNG (a CPU rasteriser, stb_truetype text, zlib's deflate) and to
// SVG, so both files show the same picture, and the GUI and `ssaviz export` write the same bytes
// for the same figure. No ImGui, no OpenGL, no torch.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "viz/colormap.h"
#include "viz/heatmap.h"

namespace viz {

enum class TextAlign { Left, Center, Right };

// Text is UTF-8 (invalid bytes draw as U+FFFD). (X, Y) is the anchor: the text's vertical middle
// sits on Y and Align places its start, middle or end on X. Vertical text is the horizontal
// layout turned 90 degrees counter-clockwise about the anchor (it reads bottom to top), so
// Align::Right text hangs down from the anchor: the column labels under a heatmap.
struct FigText {
    float X = 0, Y = 0;
    std::string Text;
    float Size = 12;  // font size in pixels (em height)
    Rgba8 Color = {0, 0, 0, 255};
    TextAlign Align = TextAlign::Left;
    bool Vertical = false;
    bool Bold = false;
};

struct FigRect {
    float X = 0, Y = 0, W = 0, H = 0;
    Rgba8 Fill = {0, 0, 0, 0};        // alpha 0: no fill
    Rgba8 Stroke = {0, 0, 0, 0};      // alpha 0: no outline
    float StrokeWidth = 1;
};

struct FigPolyline {
    std::vector<float> Points;  // x0, y0, x1, y1, ...
    Rgba8 Color = {0, 0, 0, 255};
    float Width = 1.5f;
    // Dash > 0: drawn in dashes Dash long, Gap apart, along the path from its start (SVG's
    // stroke-dasharray; a non-finite point starts the pattern again, as a new subpath does there).
    float Dash = 0, Gap = 0;
};

struct FigCircle {
    float X = 0, Y = 0, R = 2;
    Rgba8 Fill = {0, 0, 0, 255};
};

// An image stretched over a rectangle with nearest sampling: each pixel is one heatmap cell
// (already pooled by BakeHeatmap when the map is larger). SVG writes one <rect class="cell"> per
// pixel while Cells.width * Cells.height <= the SVG cell limit, else embeds the image as a PNG.
// Every cell is written, a transparent one with fill-opacity="0", so the count is always
// width * height; layouts draw everything else (colour bars included) without class="cell".
struct FigImage {
    float X = 0, Y = 0, W = 0, H = 0;
    Image Cells;
};

// How a layout sets its text, every layout alike: a figure shrunk to a paper's column needs larger
// text than one read on a screen, and a paper's caption often says what the title would.
constexpr float kMinTextScale = 0.5f, kMaxTextScale = 3.0f;
struct FigureText {
    bool Titles = true;  // false: no title is drawn and none takes room (a figure's SVG <title> keeps it)
    float Scale = 1;     // every font size times this, kMinTextScale to kMaxTextScale (others are clamped)

    float Size(float base) const;                                    // base times the scale
    std::string Shown(const std::string& title) const { return Titles ? title : std::string(); }
};

using FigItem = std::variant<FigText, FigRect, FigPolyline, FigCircle, FigImage>;

struct Figure {
    int Width = 0, Height = 0;
    Rgba8 Background = {255, 255, 255, 255};
    std::string Title;  // the SVG <title>; not drawn (layouts add a FigText for that)
    std::vector<FigItem> Items;

    template <typename T>
    T& Add(T item) {
        Items.emplace_back(std::move(item));
        return std::get<T>(Items.back());
    }
};

// The largest figure RasterizeFigure draws: a heatmap of the largest --size (8,192 px) with its
// labels and colour bar fits with room to spare. Layouts bound their labels so that text never
// makes a figure larger; a caller refuses a figure that does not fit before rasterising it.
constexpr int kMaxFigureSide = 16384;
constexpr int64_t kMaxFigurePixels = int64_t{1} << 27;  // 128 M pixels: 512 MB of RGBA
// A PNG's pixels per figure pixel (export --png-scale): 2 or 3 for a paper's print resolution.
constexpr int kMaxPngScale = 4;
// Whether the figure, drawn at `scale` (1 to kMaxPngScale), stays within the limits above.
bool FigureFits(const Figure& figure, int scale = 1);

// Fonts: the first file that has a glyph draws it (DejaVu Sans, then WenQuanYi Micro Hei for CJK,
// then Symbola for emoji and symbols, in the text's colour, by default). Loaded once per process; every call below is safe from any thread after that.
std::vector<std::string> DefaultFigureFonts();  // regular faces, in fallback order
// Loads the fonts (idempotent: the first call that finds a font wins, later calls return true).
// Files that cannot be read are skipped; false with a one-line message when none can be. Bold
// takes "<name>-Bold.ttf" beside each file when there is one, else the regular face.
bool LoadFigureFonts(std::string* error, const std::vector<std::string>& paths = DefaultFigureFonts());

// Advance width in pixels of the text at this size, as RasterizeFigure draws it (kerning and
// fallback fonts included). Without fonts, an estimate (0.6 em per character) so layouts still work.
float MeasureText(const std::string& text, float size, bool bold = false);

// Draws the figure at `scale` times its own size, every coordinate, line and font size scaled
// (an empty image for one that does not fit at that scale, or a scale out of range). Requires
// LoadFigureFonts (text is skipped without fonts); of a text, at most kMaxDrawnTextBytes are drawn.
// Rects snap to whole pixels; lines, circles and glyphs are anti-aliased by coverage (glyphs at
// quarter-pixel positions). Tab and newline draw as a space, other control characters as nothing.
constexpr size_t kMaxDrawnTextBytes = size_t{64} << 10;
Image RasterizeFigure(const Figure& figure, int scale = 1);

// Standalone SVG 1.1 document. Text uses font-family "DejaVu Sans" with the same metrics. Images
// are written cell by cell while all images of the figure together have at most max_svg_cells
// cells, else each is embedded as a PNG.
std::string FigureToSvg(const Figure& figure, int64_t max_svg_cells = 65536);

// PNG bytes (8-bit RGBA, deterministic: same pixels, same bytes). Empty for an empty image. With
// `pixels_per_inch` > 0 a pHYs chunk says it, so that a figure's PNG prints at its SVG's size (a
// figure's pixels are CSS pixels, 96 an inch: RasterizeFigure at scale N is 96 N an inch).
std::vector<uint8_t> EncodePng(const Image& image, float pixels_per_inch = 0);
// The pixels an inch of a figure drawn at `scale` (RasterizeFigure's): its SVG's 96 times the scale.
inline float FigurePixelsPerInch(int scale) { return 96.0f * static_cast<float>(scale); }
std::string EncodeBase64(const std::vector<uint8_t>& bytes);

// Text for XML/HTML content and attribute values: & < > " ' escaped, invalid UTF-8 as U+FFFD,
// and the characters XML 1.0 forbids or that draw nothing (controls other than tab and newline,
// U+FFFE, U+FFFF) dropped, the same ones RasterizeFigure skips.
std::string EscapeXml(const std::string& text);

}  // namespace viz
