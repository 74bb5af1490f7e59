#include "viz/figure.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include <stb_truetype.h>  // the implementation lives in Debian's libstb (no STB_*_IMPLEMENTATION here)
#include <zlib.h>

#include "model/text/utf8.h"

namespace viz {
namespace {

static_assert(sizeof(Rgba8) == 4, "Image pixels are encoded as packed RGBA bytes");

// ---------------------------------------------------------------------------------------------
// Fonts

struct Face {
    std::vector<unsigned char> data;  // stbtt_fontinfo points into this buffer
    stbtt_fontinfo info = {};
    float em_scale = 0;  // font units to pixels at a 1 px em
};

struct FontSet {
    std::vector<std::unique_ptr<Face>> regular, bold;  // fallback order
    float baseline_em = 0;  // baseline below the vertical middle of a line, in ems (first face's metrics)
};

// Written once under the mutex, then only read: readers need no lock.
std::mutex g_font_mutex;
std::atomic<const FontSet*> g_fonts{nullptr};

const FontSet* Fonts() { return g_fonts.load(std::memory_order_acquire); }

std::unique_ptr<Face> LoadFace(const std::string& path) {
    std::ifstream file(path, std::ios::binary);
    if (!file) return nullptr;
    auto face = std::make_unique<Face>();
    face->data.assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
    if (face->data.empty()) return nullptr;
    const int offset = stbtt_GetFontOffsetForIndex(face->data.data(), 0);  // a .ttc's first face
    if (offset < 0 || !stbtt_InitFont(&face->info, face->data.data(), offset)) return nullptr;
    face->em_scale = stbtt_ScaleForMappingEmToPixels(&face->info, 1.0f);
    return face;
}

// "DejaVuSans.ttf" -> "DejaVuSans-Bold.ttf": the family's bold face sits next to the regular one.
std::string BoldPath(const std::string& path) {
    const size_t dot = path.rfind('.');
    if (dot == std::string::npos || path.find('/', dot) != std::string::npos) return path + "-Bold";
    return path.substr(0, dot) + "-Bold" + path.substr(dot);
}

// What a code point draws as: tab, newline and CR as a space; other controls (C0, DEL, C1, the
// bidirectional embeddings, overrides and isolates, which would turn an SVG viewer's label around)
// and the two non-characters XML forbids as nothing (U+0000 here). EscapeXml drops the same ones.
char32_t Printable(char32_t c) {
    if (c == '\t' || c == '\n' || c == '\r') return ' ';
    if (c < 0x20 || c == 0x7F || model::IsHiddenControl(c) || c == 0xFFFE || c == 0xFFFF) return 0;
    return c;
}

struct PlacedGlyph {
    const Face* face;
    int glyph;
    float x;  // pen position (ems are already scaled: pixels at the requested size)
};

struct TextRun {
    std::vector<PlacedGlyph> glyphs;
    float advance = 0;
};

// Glyph choice and pen positions of one line of text; MeasureText and RasterizeFigure share it.
TextRun LayoutText(const FontSet& fonts, const std::string& text, float size, bool bold) {
    TextRun run;
    const auto& faces = bold && !fonts.bold.empty() ? fonts.bold : fonts.regular;
    auto find = [&](char32_t c, const Face** face_out) {
        for (const auto& face : faces) {
            const int g = stbtt_FindGlyphIndex(&face->info, static_cast<int>(c));
            if (g) {
                *face_out = face.get();
                return g;
            }
        }
        return 0;
    };
    const Face* prev_face = nullptr;
    int prev_glyph = 0;
    float pen = 0;
    for (size_t pos = 0; pos < text.size();) {
        const char32_t c = Printable(model::NextCodePoint(text, &pos));
        if (!c) continue;
        const Face* face = nullptr;
        int glyph = find(c, &face);
        if (!glyph) glyph = find(0xFFFD, &face);
        if (!glyph) glyph = find('?', &face);
        if (!glyph) continue;
        const float scale = face->em_scale * size;
        if (face == prev_face) pen += stbtt_GetGlyphKernAdvance(&face->info, prev_glyph, glyph) * scale;
        int advance = 0, lsb = 0;
        stbtt_GetGlyphHMetrics(&face->info, glyph, &advance, &lsb);
        run.glyphs.push_back({face, glyph, pen});
        pen += advance * scale;
        prev_face = face;
        prev_glyph = glyph;
    }
    run.advance = pen;
    return run;
}

// ---------------------------------------------------------------------------------------------
// Rasteriser

// Source-over with straight alpha; `alpha` already includes the source colour's own alpha.
inline void Blend(Rgba8& d, Rgba8 s, float alpha) {
    if (!(alpha > 0.0f)) return;
    if (alpha >= 1.0f) {
        d = {s.r, s.g, s.b, 255};
        return;
    }
    const float da = d.a / 255.0f, keep = da * (1.0f - alpha), oa = alpha + keep;
    auto mix = [&](uint8_t sc, uint8_t dc) {
        return static_cast<uint8_t>(std::lround(std::clamp((sc * alpha + dc * keep) / oa, 0.0f, 255.0f)));
    };
    d = {mix(s.r, d.r), mix(s.g, d.g), mix(s.b, d.b), static_cast<uint8_t>(std::lround(oa * 255.0f))};
}

struct Canvas {
    Image& image;
    Rgba8* At(int x, int y) {
        if (x < 0 || y < 0 || x >= image.width || y >= image.height) return nullptr;
        return &image.pixels[static_cast<size_t>(y) * image.width + x];
    }
    void Put(int x, int y, Rgba8 c, float alpha) {
        if (Rgba8* p = At(x, y)) Blend(*p, c, alpha);
    }
};

bool Finite(float v) { return std::isfinite(v); }

// Pixel indices of a coordinate, clamped far outside any image so int conversions stay defined.
int Snap(float v) { return static_cast<int>(std::lround(std::clamp(v, -1e6f, 1e6f))); }
int Floor(float v) { return static_cast<int>(std::floor(std::clamp(v, -1e6f, 1e6f))); }
int Ceil(float v) { return static_cast<int>(std::ceil(std::clamp(v, -1e6f, 1e6f))); }

void DrawRect(Canvas& canvas, const FigRect& r) {
    if (!Finite(r.X) || !Finite(r.Y) || !Finite(r.W) || !Finite(r.H)) return;
    int x0 = Snap(r.X), x1 = Snap(r.X + r.W), y0 = Snap(r.Y), y1 = Snap(r.Y + r.H);
    if (x1 < x0) std::swap(x0, x1);
    if (y1 < y0) std::swap(y0, y1);
    const int w = canvas.image.width, h = canvas.image.height;
    if (r.Fill.a > 0) {
        const float alpha = r.Fill.a / 255.0f;
        for (int y = std::max(y0, 0); y < std::min(y1, h); ++y)
            for (int x = std::max(x0, 0); x < std::min(x1, w); ++x) canvas.Put(x, y, r.Fill, alpha);
    }
    if (r.Stroke.a > 0 && r.StrokeWidth > 0 && Finite(r.StrokeWidth)) {
        // A band of `sw` whole pixels on each edge, centred on it (odd widths lean inwards), each
        // pixel blended once so corners of a translucent outline are not darker.
        const int sw = std::max(1, Snap(r.StrokeWidth)), half = sw / 2;
        const int ox0 = x0 - half, ox1 = x1 + half, oy0 = y0 - half, oy1 = y1 + half;
        const int ix0 = ox0 + sw, ix1 = ox1 - sw, iy0 = oy0 + sw, iy1 = oy1 - sw;
        const float alpha = r.Stroke.a / 255.0f;
        for (int y = std::max(oy0, 0); y < std::min(oy1, h); ++y)
            for (int x = std::max(ox0, 0); x < std::min(ox1, w); ++x)
                if (x < ix0 || x >= ix1 || y < iy0 || y >= iy1) canvas.Put(x, y, r.Stroke, alpha);
    }
}

// Distance from p to the segment ab.
float SegmentDistance(float px, float py, float ax, float ay, float bx, float by) {
    const float dx = bx - ax, dy = by - ay, len2 = dx * dx + dy * dy;
    float t = len2 > 0 ? ((px - ax) * dx + (py - ay) * dy) / len2 : 0.0f;
    t = std::clamp(t, 0.0f, 1.0f);
    const float ex = ax + t * dx - px, ey = ay + t * dy - py;
    return std::sqrt(ex * ex + ey * ey);
}

void DrawSolidPolyline(Canvas& canvas, const FigPolyline& line);

// A dashed line as its dashes, each a solid polyline, the pattern from the start of each run of
// finite points.
void DrawPolyline(Canvas& canvas, const FigPolyline& line) {
    if (!(line.Dash > 0) || !Finite(line.Dash) || !(line.Gap >= 0) || !Finite(line.Gap)) return DrawSolidPolyline(canvas, line);
    FigPolyline dash;
    dash.Color = line.Color;
    dash.Width = line.Width;
    const float period = line.Dash + line.Gap;
    float along = 0;  // into the current dash-and-gap period
    auto end_dash = [&] {
        if (dash.Points.size() >= 4) DrawSolidPolyline(canvas, dash);
        dash.Points.clear();
    };
    const std::vector<float>& p = line.Points;
    for (size_t i = 0; i + 3 < p.size(); i += 2) {
        const float ax = p[i], ay = p[i + 1], bx = p[i + 2], by = p[i + 3];
        if (!Finite(ax) || !Finite(ay) || !Finite(bx) || !Finite(by)) {
            end_dash();
            along = 0;
            continue;
        }
        const float length = std::hypot(bx - ax, by - ay);
        for (float at = 0; at < length;) {
            const bool in_dash = along < line.Dash;
            const float step = std::min(length - at, (in_dash ? line.Dash : period) - along);
            if (in_dash) {
                if (dash.Points.empty()) dash.Points = {ax + (bx - ax) * (at / length), ay + (by - ay) * (at / length)};
                dash.Points.push_back(ax + (bx - ax) * ((at + step) / length));
                dash.Points.push_back(ay + (by - ay) * ((at + step) / length));
            }
            at += step, along += step;
            if (along >= line.Dash) end_dash();
            if (along >= period) along = 0;
            if (!(step > 0)) break;  // no progress (a length past float's steps)
        }
    }
    end_dash();
}

void DrawSolidPolyline(Canvas& canvas, const FigPolyline& line) {
    const std::vector<float>& p = line.Points;
    const size_t n = p.size() / 2;
    if (n < 2 || line.Color.a == 0 || !(line.Width > 0) || !Finite(line.Width)) return;
    const float half = line.Width * 0.5f, reach = half + 1.0f;
    // Coverage is the maximum over segments, blended once per pixel: joints are not darker.
    float bx0 = INFINITY, by0 = INFINITY, bx1 = -INFINITY, by1 = -INFINITY;
    for (size_t i = 0; i < n; ++i) {
        if (!Finite(p[2 * i]) || !Finite(p[2 * i + 1])) continue;
        bx0 = std::min(bx0, p[2 * i]), bx1 = std::max(bx1, p[2 * i]);
        by0 = std::min(by0, p[2 * i + 1]), by1 = std::max(by1, p[2 * i + 1]);
    }
    if (!(bx0 <= bx1)) return;
    const int x0 = std::max(0, Floor(bx0 - reach)), y0 = std::max(0, Floor(by0 - reach));
    const int x1 = std::min(canvas.image.width, Ceil(bx1 + reach)), y1 = std::min(canvas.image.height, Ceil(by1 + reach));
    if (x1 <= x0 || y1 <= y0) return;
    const int bw = x1 - x0;
    std::vector<float> coverage(static_cast<size_t>(bw) * (y1 - y0), 0.0f);
    for (size_t i = 0; i + 1 < n; ++i) {
        const float ax = p[2 * i], ay = p[2 * i + 1], cx = p[2 * i + 2], cy = p[2 * i + 3];
        if (!Finite(ax) || !Finite(ay) || !Finite(cx) || !Finite(cy)) continue;
        const int sx0 = std::max(x0, Floor(std::min(ax, cx) - reach)), sx1 = std::min(x1, Ceil(std::max(ax, cx) + reach));
        const int sy0 = std::max(y0, Floor(std::min(ay, cy) - reach)), sy1 = std::min(y1, Ceil(std::max(ay, cy) + reach));
        for (int y = sy0; y < sy1; ++y)
            for (int x = sx0; x < sx1; ++x) {
                const float d = SegmentDistance(x + 0.5f, y + 0.5f, ax, ay, cx, cy);
                const float c = std::clamp(half + 0.5f - d, 0.0f, 1.0f);
                float& cell = coverage[static_cast<size_t>(y - y0) * bw + (x - x0)];
                cell = std::max(cell, c);
            }
    }
    const float alpha = line.Color.a / 255.0f;
    for (int y = y0; y < y1; ++y)
        for (int x = x0; x < x1; ++x) {
            const float c = coverage[static_cast<size_t>(y - y0) * bw + (x - x0)];
            if (c > 0) canvas.Put(x, y, line.Color, c * alpha);
        }
}

void DrawCircle(Canvas& canvas, const FigCircle& c) {
    if (!Finite(c.X) || !Finite(c.Y) || !(c.R > 0) || !Finite(c.R) || c.Fill.a == 0) return;
    const int x0 = std::max(0, Floor(c.X - c.R - 1)), x1 = std::min(canvas.image.width, Ceil(c.X + c.R + 1));
    const int y0 = std::max(0, Floor(c.Y - c.R - 1)), y1 = std::min(canvas.image.height, Ceil(c.Y + c.R + 1));
    const float alpha = c.Fill.a / 255.0f;
    for (int y = y0; y < y1; ++y)
        for (int x = x0; x < x1; ++x) {
            const float dx = x + 0.5f - c.X, dy = y + 0.5f - c.Y;
            const float cover = std::clamp(c.R + 0.5f - std::sqrt(dx * dx + dy * dy), 0.0f, 1.0f);
            if (cover > 0) canvas.Put(x, y, c.Fill, cover * alpha);
        }
}

// `scale`: the figure's pixels per its own unit (its image's cells stay one colour each, larger).
void DrawImage(Canvas& canvas, const FigImage& figure_image, float scale) {
    const Image& cells = figure_image.Cells;
    const struct { float X, Y, W, H; } im = {figure_image.X * scale, figure_image.Y * scale, figure_image.W * scale, figure_image.H * scale};
    if (cells.width <= 0 || cells.height <= 0 || cells.pixels.size() < static_cast<size_t>(cells.width) * cells.height) return;
    if (!Finite(im.X) || !Finite(im.Y) || !(im.W > 0) || !(im.H > 0) || !Finite(im.W) || !Finite(im.H)) return;
    // Every pixel whose centre lies inside the rectangle takes the cell under that centre.
    const int x0 = std::max(0, Floor(im.X)), x1 = std::min(canvas.image.width, Ceil(im.X + im.W));
    const int y0 = std::max(0, Floor(im.Y)), y1 = std::min(canvas.image.height, Ceil(im.Y + im.H));
    for (int y = y0; y < y1; ++y) {
        const float cy = y + 0.5f;
        if (cy < im.Y || cy >= im.Y + im.H) continue;
        const int v = std::clamp(static_cast<int>((cy - im.Y) / im.H * cells.height), 0, cells.height - 1);
        for (int x = x0; x < x1; ++x) {
            const float cx = x + 0.5f;
            if (cx < im.X || cx >= im.X + im.W) continue;
            const int u = std::clamp(static_cast<int>((cx - im.X) / im.W * cells.width), 0, cells.width - 1);
            const Rgba8 c = cells.pixels[static_cast<size_t>(v) * cells.width + u];
            canvas.Put(x, y, c, c.a / 255.0f);
        }
    }
}

// Glyph bitmaps of one RasterizeFigure call, keyed by face, glyph, size and quarter-pixel phase.
struct GlyphBitmap {
    int x0 = 0, y0 = 0, w = 0, h = 0;
    std::vector<unsigned char> coverage;
};
using GlyphKey = std::tuple<const Face*, int, float, int, int>;
using GlyphCache = std::map<GlyphKey, GlyphBitmap>;

const GlyphBitmap& GetGlyph(GlyphCache& cache, const Face* face, int glyph, float size, int qx, int qy) {
    const GlyphKey key{face, glyph, size, qx, qy};
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
    GlyphBitmap b;
    const float scale = face->em_scale * size, sx = qx * 0.25f, sy = qy * 0.25f;
    int x1 = 0, y1 = 0;
    stbtt_GetGlyphBitmapBoxSubpixel(&face->info, glyph, scale, scale, sx, sy, &b.x0, &b.y0, &x1, &y1);
    b.w = std::max(0, x1 - b.x0);
    b.h = std::max(0, y1 - b.y0);
    if (b.w > 0 && b.h > 0) {
        b.coverage.assign(static_cast<size_t>(b.w) * b.h, 0);
        stbtt_MakeGlyphBitmapSubpixel(&face->info, b.coverage.data(), b.w, b.h, b.w, scale, scale, sx, sy, glyph);
    }
    return cache.emplace(key, std::move(b)).first->second;
}

// Whole pixel and quarter-pixel phase of a coordinate.
void Quantize(float v, int* whole, int* quarter) {
    const float q = std::floor(v * 4.0f + 0.5f);
    const float w = std::floor(q / 4.0f);
    *whole = static_cast<int>(w);
    *quarter = static_cast<int>(q - w * 4.0f);
}

void DrawText(Canvas& canvas, const FontSet& fonts, GlyphCache& cache, const FigText& t) {
    if (t.Text.empty() || t.Color.a == 0 || !(t.Size > 0) || t.Size > 4096 || !Finite(t.X) || !Finite(t.Y)) return;
    if (std::abs(t.X) > 1e6f || std::abs(t.Y) > 1e6f) return;
    // Layouts bound their labels; a text longer than any figure can show is laid out only so far.
    const TextRun run = LayoutText(fonts, t.Text.size() > kMaxDrawnTextBytes ? t.Text.substr(0, kMaxDrawnTextBytes) : t.Text, t.Size, t.Bold);
    const float start = t.Align == TextAlign::Left ? 0.0f : t.Align == TextAlign::Center ? -run.advance * 0.5f : -run.advance;
    const float baseline = fonts.baseline_em * t.Size;
    const float alpha = t.Color.a / 255.0f;
    // Glyphs are laid out in a horizontal frame (hx along the text, hy down the line). Vertical text
    // maps that frame onto the screen turned 90 degrees counter-clockwise: (hx, hy) -> (hy, -hx).
    const float origin_x = t.Vertical ? -t.Y : t.X, origin_y = t.Vertical ? t.X : t.Y;
    for (const PlacedGlyph& g : run.glyphs) {
        int ix = 0, qx = 0, iy = 0, qy = 0;
        Quantize(origin_x + start + g.x, &ix, &qx);
        Quantize(origin_y + baseline, &iy, &qy);
        const GlyphBitmap& b = GetGlyph(cache, g.face, g.glyph, t.Size, qx, qy);
        for (int v = 0; v < b.h; ++v)
            for (int u = 0; u < b.w; ++u) {
                const unsigned char c = b.coverage[static_cast<size_t>(v) * b.w + u];
                if (!c) continue;
                const int hx = ix + b.x0 + u, hy = iy + b.y0 + v;
                if (t.Vertical) canvas.Put(hy, -hx - 1, t.Color, c / 255.0f * alpha);
                else canvas.Put(hx, hy, t.Color, c / 255.0f * alpha);
            }
    }
}

// ---------------------------------------------------------------------------------------------
// SVG

// A coordinate with at most three decimals and no exponent, always with '.' (no locale).
std::string Num(double v) {
    if (!std::isfinite(v)) v = 0;
    v = std::clamp(v, -1e9, 1e9);
    long long m = std::llround(v * 1000.0);
    std::string out;
    if (m < 0) {
        out += '-';
        m = -m;
    }
    out += std::to_string(m / 1000);
    int frac = static_cast<int>(m % 1000);
    if (frac) {
        char buf[5];
        std::snprintf(buf, sizeof buf, ".%03d", frac);
        std::string f = buf;
        while (f.back() == '0') f.pop_back();
        out += f;
    }
    return out == "-0" ? "0" : out;
}

std::string Hex(Rgba8 c) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "#%02x%02x%02x", c.r, c.g, c.b);
    return buf;
}

// fill="#rrggbb" plus fill-opacity when translucent (attribute name given).
std::string Paint(const char* name, Rgba8 c) {
    std::string out = std::string(" ") + name + "=\"" + Hex(c) + "\"";
    if (c.a < 255) out += std::string(" ") + name + "-opacity=\"" + Num(c.a / 255.0) + "\"";
    return out;
}

void SvgText(std::string& out, const FigText& t) {
    if (!Finite(t.X) || !Finite(t.Y) || !(t.Size > 0)) return;
    const std::string text = EscapeXml(t.Text);
    if (text.empty()) return;
    const char* anchor = t.Align == TextAlign::Left ? "start" : t.Align == TextAlign::Center ? "middle" : "end";
    out += "<text x=\"" + Num(t.X) + "\" y=\"" + Num(t.Y) + "\" font-family=\"DejaVu Sans, sans-serif\" font-size=\"" + Num(t.Size) +
           "\"" + Paint("fill", t.Color) + " text-anchor=\"" + anchor + "\" dominant-baseline=\"central\" xml:space=\"preserve\"";
    if (t.Bold) out += " font-weight=\"bold\"";
    if (t.Vertical) out += " transform=\"rotate(-90 " + Num(t.X) + " " + Num(t.Y) + ")\"";
    out += ">" + text + "</text>\n";
}

void SvgRect(std::string& out, const FigRect& r) {
    if (!Finite(r.X) || !Finite(r.Y) || !Finite(r.W) || !Finite(r.H)) return;
    // The same whole pixels as the rasteriser; an odd stroke sits half a pixel inside, as there.
    double x0 = Snap(r.X), x1 = Snap(r.X + r.W), y0 = Snap(r.Y), y1 = Snap(r.Y + r.H);
    if (x1 < x0) std::swap(x0, x1);
    if (y1 < y0) std::swap(y0, y1);
    const bool stroke = r.Stroke.a > 0 && r.StrokeWidth > 0 && Finite(r.StrokeWidth);
    if (r.Fill.a == 0 && !stroke) return;
    int sw = 0;
    if (stroke) {
        sw = std::max(1, Snap(r.StrokeWidth));
        if (sw % 2) x0 += 0.5, x1 -= 0.5, y0 += 0.5, y1 -= 0.5;
        x1 = std::max(x1, x0), y1 = std::max(y1, y0);
    }
    out += "<rect x=\"" + Num(x0) + "\" y=\"" + Num(y0) + "\" width=\"" + Num(x1 - x0) + "\" height=\"" + Num(y1 - y0) + "\"";
    out += r.Fill.a > 0 ? Paint("fill", r.Fill) : std::string(" fill=\"none\"");
    if (stroke) out += Paint("stroke", r.Stroke) + " stroke-width=\"" + std::to_string(sw) + "\"";
    out += " shape-rendering=\"crispEdges\"/>\n";
}

void SvgPolyline(std::string& out, const FigPolyline& line) {
    if (line.Color.a == 0 || !(line.Width > 0) || !Finite(line.Width)) return;
    // A path, so that non-finite points lift the pen as they do in the rasteriser.
    std::string d;
    bool pen_down = false, any_segment = false;
    for (size_t i = 0; i + 1 < line.Points.size(); i += 2) {
        const float x = line.Points[i], y = line.Points[i + 1];
        if (!Finite(x) || !Finite(y)) {
            pen_down = false;
            continue;
        }
        if (!d.empty()) d += ' ';
        d += (pen_down ? "L" : "M") + Num(x) + " " + Num(y);
        any_segment |= pen_down;
        pen_down = true;
    }
    if (!any_segment) return;
    const bool dashed = line.Dash > 0 && Finite(line.Dash) && line.Gap >= 0 && Finite(line.Gap);
    out += "<path d=\"" + d + "\" fill=\"none\"" + Paint("stroke", line.Color) + " stroke-width=\"" + Num(line.Width) +
           "\" stroke-linecap=\"round\" stroke-linejoin=\"round\"" +
           (dashed ? " stroke-dasharray=\"" + Num(line.Dash) + " " + Num(line.Gap) + "\"" : std::string()) + "/>\n";
}

void SvgCircle(std::string& out, const FigCircle& c) {
    if (!Finite(c.X) || !Finite(c.Y) || !(c.R > 0) || !Finite(c.R) || c.Fill.a == 0) return;
    out += "<circle cx=\"" + Num(c.X) + "\" cy=\"" + Num(c.Y) + "\" r=\"" + Num(c.R) + "\"" + Paint("fill", c.Fill) + "/>\n";
}

void SvgImage(std::string& out, const FigImage& im, int64_t max_cells) {
    const Image& cells = im.Cells;
    const int64_t count = static_cast<int64_t>(cells.width) * cells.height;
    if (cells.width <= 0 || cells.height <= 0 || cells.pixels.size() < static_cast<size_t>(count)) return;
    if (!Finite(im.X) || !Finite(im.Y) || !(im.W > 0) || !(im.H > 0) || !Finite(im.W) || !Finite(im.H)) return;
    if (count <= max_cells) {
        // Every cell is written, transparent ones with fill-opacity 0, so a map of r x c cells is
        // always r * c rects (tools can read the values back by position).
        const double cw = static_cast<double>(im.W) / cells.width, ch = static_cast<double>(im.H) / cells.height;
        out += "<g shape-rendering=\"crispEdges\">\n";
        for (int v = 0; v < cells.height; ++v)
            for (int u = 0; u < cells.width; ++u) {
                const Rgba8 c = cells.pixels[static_cast<size_t>(v) * cells.width + u];
                out += "<rect class=\"cell\" x=\"" + Num(im.X + u * cw) + "\" y=\"" + Num(im.Y + v * ch) + "\" width=\"" + Num(cw) +
                       "\" height=\"" + Num(ch) + "\"" + Paint("fill", c) + "/>\n";
            }
        out += "</g>\n";
        return;
    }
    const std::string uri = "data:image/png;base64," + EncodeBase64(EncodePng(cells));
    out += "<image class=\"cells\" x=\"" + Num(im.X) + "\" y=\"" + Num(im.Y) + "\" width=\"" + Num(im.W) + "\" height=\"" + Num(im.H) +
           "\" preserveAspectRatio=\"none\" style=\"image-rendering:pixelated\" href=\"" + uri + "\" xlink:href=\"" + uri + "\"/>\n";
}

}  // namespace

// -------------------------------------------------------------------------------------------------

std::string EscapeXml(const std::string& text) {
    std::string out;
    out.reserve(text.size());
    for (size_t pos = 0; pos < text.size();) {
        const char32_t c = model::NextCodePoint(text, &pos);
        switch (c) {
            case '&': out += "&amp;"; continue;
            case '<': out += "&lt;"; continue;
            case '>': out += "&gt;"; continue;
            case '"': out += "&quot;"; continue;
            case '\'': out += "&#39;"; continue;
            case '\t': out += '\t'; continue;
            case '\n': out += '\n'; continue;
            default: break;
        }
        if (Printable(c) == 0 || c == '\r') continue;
        model::AppendUtf8(c, &out);
    }
    return out;
}

std::vector<std::string> DefaultFigureFonts() {
    // Symbola last: emoji and symbols neither of the others has (a token's 🙂 drew as U+FFFD in PNGs).
    return {"/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf", "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc",
            "/usr/share/fonts/truetype/ancient-scripts/Symbola_hint.ttf"};
}

bool LoadFigureFonts(std::string* error, const std::vector<std::string>& paths) {
    std::lock_guard<std::mutex> lock(g_font_mutex);
    if (Fonts()) return true;
    auto fonts = std::make_unique<FontSet>();
    for (const std::string& path : paths) {
        std::unique_ptr<Face> regular = LoadFace(path);
        if (!regular) continue;
        std::unique_ptr<Face> bold = LoadFace(BoldPath(path));
        fonts->bold.push_back(bold ? std::move(bold) : LoadFace(path));
        fonts->regular.push_back(std::move(regular));
    }
    if (fonts->regular.empty()) {
        if (error) {
            std::string list;
            for (const std::string& p : paths) list += (list.empty() ? "" : ", ") + p;
            *error = "no figure font could be read (tried: " + (list.empty() ? std::string("no paths") : list) + ")";
        }
        return false;
    }
    const Face& first = *fonts->regular.front();
    int ascent = 0, descent = 0, gap = 0;
    stbtt_GetFontVMetrics(&first.info, &ascent, &descent, &gap);
    // The middle of the ascent..descent box sits on the anchor: SVG's dominant-baseline="central".
    fonts->baseline_em = (ascent + descent) * 0.5f * first.em_scale;
    g_fonts.store(fonts.release(), std::memory_order_release);  // lives until the process ends
    return true;
}

float MeasureText(const std::string& text, float size, bool bold) {
    const FontSet* fonts = Fonts();
    if (!fonts) {
        // No fonts: nothing will be drawn, but layouts still get a plausible size.
        size_t count = 0;
        for (size_t pos = 0; pos < text.size();) count += Printable(model::NextCodePoint(text, &pos)) != 0;
        return count * size * 0.6f;
    }
    return LayoutText(*fonts, text, size, bold).advance;
}

float FigureText::Size(float base) const {
    return base * (std::isfinite(Scale) ? std::clamp(Scale, kMinTextScale, kMaxTextScale) : 1.0f);
}

bool FigureFits(const Figure& figure, int scale) {
    if (scale < 1 || scale > kMaxPngScale || figure.Width < 0 || figure.Height < 0) return false;
    const int64_t w = int64_t{figure.Width} * scale, h = int64_t{figure.Height} * scale;
    return w <= kMaxFigureSide && h <= kMaxFigureSide && w * h <= kMaxFigurePixels;
}

Image RasterizeFigure(const Figure& figure, int scale) {
    Image image;
    if (!FigureFits(figure, scale)) return image;
    image.width = figure.Width * scale;
    image.height = figure.Height * scale;
    image.pixels.assign(static_cast<size_t>(image.width) * image.height, figure.Background);
    Canvas canvas{image};
    const FontSet* fonts = Fonts();
    GlyphCache cache;
    const float s = static_cast<float>(scale);
    // Each item at `s` times its coordinates and sizes (a copy: small, but for images, drawn in place).
    for (const FigItem& item : figure.Items) {
        if (const auto* t = std::get_if<FigText>(&item)) {
            if (!fonts) continue;
            FigText scaled = *t;
            scaled.X *= s, scaled.Y *= s, scaled.Size *= s;
            DrawText(canvas, *fonts, cache, scaled);
        } else if (const auto* r = std::get_if<FigRect>(&item)) {
            FigRect scaled = *r;
            scaled.X *= s, scaled.Y *= s, scaled.W *= s, scaled.H *= s, scaled.StrokeWidth *= s;
            DrawRect(canvas, scaled);
        } else if (const auto* l = std::get_if<FigPolyline>(&item)) {
            FigPolyline scaled = *l;
            for (float& v : scaled.Points) v *= s;
            scaled.Width *= s, scaled.Dash *= s, scaled.Gap *= s;
            DrawPolyline(canvas, scaled);
        } else if (const auto* c = std::get_if<FigCircle>(&item)) {
            FigCircle scaled = *c;
            scaled.X *= s, scaled.Y *= s, scaled.R *= s;
            DrawCircle(canvas, scaled);
        } else if (const auto* im = std::get_if<FigImage>(&item)) {
            DrawImage(canvas, *im, s);
        }
    }
    return image;
}

std::string FigureToSvg(const Figure& figure, int64_t max_svg_cells) {
    const int w = std::max(0, figure.Width), h = std::max(0, figure.Height);
    std::string out;
    out += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
    out += "<svg xmlns=\"http://www.w3.org/2000/svg\" xmlns:xlink=\"http://www.w3.org/1999/xlink\" version=\"1.1\" width=\"" +
           std::to_string(w) + "\" height=\"" + std::to_string(h) + "\" viewBox=\"0 0 " + std::to_string(w) + " " + std::to_string(h) +
           "\">\n";
    out += "<title>" + EscapeXml(figure.Title) + "</title>\n";
    if (figure.Background.a > 0)
        out += "<rect x=\"0\" y=\"0\" width=\"" + std::to_string(w) + "\" height=\"" + std::to_string(h) + "\"" +
               Paint("fill", figure.Background) + "/>\n";
    // The cell budget is for the whole figure: a grid of many small maps embeds them all as images
    // rather than writing hundreds of thousands of rectangles.
    int64_t cells = 0;
    for (const FigItem& item : figure.Items)
        if (const auto* im = std::get_if<FigImage>(&item)) cells += static_cast<int64_t>(im->Cells.width) * im->Cells.height;
    const int64_t per_image_limit = cells <= max_svg_cells ? max_svg_cells : -1;
    for (const FigItem& item : figure.Items) {
        if (const auto* t = std::get_if<FigText>(&item)) SvgText(out, *t);
        else if (const auto* r = std::get_if<FigRect>(&item)) SvgRect(out, *r);
        else if (const auto* l = std::get_if<FigPolyline>(&item)) SvgPolyline(out, *l);
        else if (const auto* c = std::get_if<FigCircle>(&item)) SvgCircle(out, *c);
        else if (const auto* im = std::get_if<FigImage>(&item)) SvgImage(out, *im, per_image_limit);
    }
    out += "</svg>\n";
    return out;
}

// Every row but the first as its difference from the row above (PNG's "Up" filter), deflated by
// zlib at level 1: a 923-token heatmap in 35 ms and 1.24 MB, where stb_image_write's encoder
// (each row's best of five filters, its own deflate) took 105-128 ms and 1.64 MB; an export of
// every head's maps spent most of its time there.
std::vector<uint8_t> EncodePng(const Image& image, float pixels_per_inch) {
    std::vector<uint8_t> out;
    if (image.width <= 0 || image.height <= 0 || image.pixels.size() < static_cast<size_t>(image.width) * image.height) return out;
    const size_t w = static_cast<size_t>(image.width), h = static_cast<size_t>(image.height), row = w * 4;
    std::vector<uint8_t> filtered((row + 1) * h);
    const auto* px = reinterpret_cast<const uint8_t*>(image.pixels.data());
    for (size_t y = 0; y < h; ++y) {
        uint8_t* o = filtered.data() + y * (row + 1);
        const uint8_t* now = px + y * row;
        o[0] = y == 0 ? 0 : 2;  // None, then Up
        if (y == 0) {
            std::copy_n(now, row, o + 1);
        } else {
            const uint8_t* above = now - row;
            for (size_t x = 0; x < row; ++x) o[1 + x] = static_cast<uint8_t>(now[x] - above[x]);
        }
    }
    uLongf deflated_size = compressBound(static_cast<uLong>(filtered.size()));
    std::vector<uint8_t> deflated(deflated_size);
    if (compress2(deflated.data(), &deflated_size, filtered.data(), static_cast<uLong>(filtered.size()), 1) != Z_OK) return out;
    auto put32 = [&](uint32_t v) {
        for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(v >> shift));
    };
    auto chunk = [&](const char* type, const uint8_t* data, size_t size) {  // size < 2^31
        put32(static_cast<uint32_t>(size));
        const size_t at = out.size();
        out.insert(out.end(), type, type + 4);
        out.insert(out.end(), data, data + size);
        put32(static_cast<uint32_t>(crc32(0, out.data() + at, static_cast<uInt>(size + 4))));
    };
    static const uint8_t kSignature[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    out.assign(std::begin(kSignature), std::end(kSignature));
    const uint8_t header[] = {static_cast<uint8_t>(w >> 24), static_cast<uint8_t>(w >> 16), static_cast<uint8_t>(w >> 8), static_cast<uint8_t>(w),
                              static_cast<uint8_t>(h >> 24), static_cast<uint8_t>(h >> 16), static_cast<uint8_t>(h >> 8), static_cast<uint8_t>(h),
                              8, 6, 0, 0, 0};  // 8 bits a channel, RGBA, deflate, filters, no interlace
    chunk("IHDR", header, sizeof header);
    if (pixels_per_inch > 0 && pixels_per_inch < 1e6f) {
        const uint32_t per_metre = static_cast<uint32_t>(std::lround(pixels_per_inch / 0.0254f));
        uint8_t phys[9];
        for (int k = 0; k < 2; ++k)
            for (int b = 0; b < 4; ++b) phys[k * 4 + b] = static_cast<uint8_t>(per_metre >> (24 - 8 * b));
        phys[8] = 1;  // the unit is the metre
        chunk("pHYs", phys, sizeof phys);
    }
    constexpr size_t kPart = size_t{1} << 30;  // a chunk's length must stay below 2^31
    for (size_t at = 0; at < deflated_size; at += kPart) chunk("IDAT", deflated.data() + at, std::min(kPart, deflated_size - at));
    chunk("IEND", nullptr, 0);
    return out;
}

std::string EncodeBase64(const std::vector<uint8_t>& bytes) {
    static const char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    out.reserve((bytes.size() + 2) / 3 * 4);
    size_t i = 0;
    for (; i + 2 < bytes.size(); i += 3) {
        const uint32_t v = (bytes[i] << 16) | (bytes[i + 1] << 8) | bytes[i + 2];
        out += kAlphabet[v >> 18];
        out += kAlphabet[(v >> 12) & 63];
        out += kAlphabet[(v >> 6) & 63];
        out += kAlphabet[v & 63];
    }
    if (i < bytes.size()) {
        const bool two = i + 1 < bytes.size();
        const uint32_t v = (bytes[i] << 16) | (two ? bytes[i + 1] << 8 : 0);
        out += kAlphabet[v >> 18];
        out += kAlphabet[(v >> 12) & 63];
        out += two ? kAlphabet[(v >> 6) & 63] : '=';
        out += '=';
    }
    return out;
}

}  // namespace viz
