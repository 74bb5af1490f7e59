#include "viz/figures.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <type_traits>

#include "model/text/utf8.h"
#include "viz/ticks.h"

namespace viz {
namespace {

// A paper's palette: white ground, near-black text, thin dark axes, faint grid.
constexpr Rgba8 kText = {38, 38, 38, 255};
constexpr Rgba8 kAxis = {64, 64, 64, 255};
constexpr Rgba8 kGrid = {228, 228, 228, 255};
constexpr Rgba8 kFaint = {140, 140, 140, 255};
constexpr Rgba8 kReference = {200, 60, 60, 255};  // a plot's reference line (PlotOptions::YLine)
constexpr float kPad = 12;  // outer margin of every figure

const char* const kEllipsis = "\xE2\x80\xA6";  // U+2026

bool Finite(float v) { return std::isfinite(v); }

void AddText(Figure& f, float x, float y, std::string text, float size, TextAlign align = TextAlign::Left, bool vertical = false,
             Rgba8 color = kText) {
    if (text.empty()) return;
    FigText t;
    t.X = x;
    t.Y = y;
    t.Text = std::move(text);
    t.Size = size;
    t.Color = color;
    t.Align = align;
    t.Vertical = vertical;
    f.Add(std::move(t));
}

// Axis-aligned lines as one-pixel rectangles: crisp in PNG and SVG alike.
void AddHLine(Figure& f, float x0, float x1, float y, Rgba8 color) {
    FigRect r;
    r.X = std::min(x0, x1);
    r.Y = y - 0.5f;
    r.W = std::abs(x1 - x0);
    r.H = 1;
    r.Fill = color;
    f.Add(r);
}
void AddVLine(Figure& f, float x, float y0, float y1, Rgba8 color) {
    FigRect r;
    r.X = x - 0.5f;
    r.Y = std::min(y0, y1);
    r.W = 1;
    r.H = std::abs(y1 - y0);
    r.Fill = color;
    f.Add(r);
}

void AddOutline(Figure& f, float x, float y, float w, float h, Rgba8 color = kAxis) {
    FigRect r;
    r.X = x;
    r.Y = y;
    r.W = w;
    r.H = h;
    r.Stroke = color;
    r.StrokeWidth = 1;
    f.Add(r);
}

size_t CountCodepoints(const std::string& s) {
    size_t n = 0;
    for (size_t pos = 0; pos < s.size(); ++n) model::NextCodePoint(s, &pos);
    return n;
}

// The first max_chars - 1 characters and an ellipsis when the text is longer than max_chars.
std::string EllipsizeChars(const std::string& s, size_t max_chars) {
    if (CountCodepoints(s) <= max_chars) return s;
    size_t pos = 0;
    for (size_t n = 0; n + 1 < max_chars && pos < s.size(); ++n) model::NextCodePoint(s, &pos);
    return s.substr(0, pos) + kEllipsis;
}

// The longest prefix (whole characters) that fits max_width with an ellipsis.
std::string EllipsizeWidth(const std::string& s, float max_width, float size, bool bold = false) {
    if (MeasureText(s, size, bold) <= max_width) return s;
    std::vector<size_t> ends;  // byte offset after each character
    for (size_t pos = 0; pos < s.size();) {
        model::NextCodePoint(s, &pos);
        ends.push_back(pos);
    }
    size_t lo = 0, hi = ends.size();  // largest k with prefix(k) + "…" fitting
    while (lo < hi) {
        const size_t mid = (lo + hi + 1) / 2;
        if (MeasureText(s.substr(0, ends[mid - 1]) + kEllipsis, size, bold) <= max_width) lo = mid;
        else hi = mid - 1;
    }
    return (lo ? s.substr(0, ends[lo - 1]) : std::string()) + kEllipsis;
}

// Any text from outside (a title naming a model and its what-ifs, a token that is a megabyte long)
// is cut to this many characters before it is measured, and then to the width it may take, so no
// text makes a figure larger than its content.
constexpr size_t kMaxLabelChars = 300;
// The widest a title may make a figure that is narrower than it (the highlight's, on one line).
constexpr float kMaxTitleWidth = 1200;
// A title wider than its figure widens it up to this; a longer one wraps at its words.
constexpr float kOneLineTitleWidth = 720;
constexpr size_t kMaxTitleLines = 3;

std::string BoundLabel(const std::string& s, float max_width, float size) {
    return EllipsizeWidth(EllipsizeChars(s, kMaxLabelChars), max_width, size);
}

// The pieces a title breaks between, `level` 0: its clauses (split at " · ", which a break takes
// the place of); 1: its words, a parenthesised group kept whole; 2: its words.
std::vector<std::string> TitlePieces(const std::string& title, int level) {
    const std::string kClause = " \xC2\xB7 ";
    std::vector<std::string> pieces;
    if (level == 0) {
        for (size_t pos = 0; pos <= title.size();) {
            const size_t end = std::min(title.find(kClause, pos), title.size());
            pieces.push_back(title.substr(pos, end - pos));
            pos = end + kClause.size();
        }
        return pieces;
    }
    int depth = 0;  // inside parentheses: the next word joins the group (level 1)
    for (size_t pos = 0; pos <= title.size();) {
        const size_t end = std::min(title.find(' ', pos), title.size());
        const std::string word = title.substr(pos, end - pos);
        pos = end + 1;
        if (depth > 0 && !pieces.empty()) pieces.back() += " " + word;
        else pieces.push_back(word);
        if (level == 1)
            for (char c : word) depth = std::max(0, depth + (c == '(') - (c == ')'));
    }
    return pieces;
}

// `pieces` packed into lines no wider than `wrap` (a piece wider than that alone on its line);
// joined by " " (words) or " · " (clauses) within a line.
std::vector<std::string> PackTitle(const std::vector<std::string>& pieces, const std::string& joiner, float wrap, float size, bool bold) {
    std::vector<std::string> lines;
    for (const std::string& piece : pieces) {
        std::string joined = lines.empty() ? piece : lines.back() + joiner + piece;
        if (!lines.empty() && MeasureText(joined, size, bold) <= wrap) lines.back() = std::move(joined);
        else lines.push_back(piece);
    }
    return lines;
}

// A title's lines over a figure whose content is `width` wide: one line where it fits that or
// `widest`, else wrapped to the wider of the two, at most kMaxTitleLines, the last cut with an
// ellipsis (a lens difference's title said its scale's largest value past the cut). It breaks
// between its clauses where each fits a line, else between words but not inside parentheses where
// each group fits, else between any words; the lines balanced, so that no word is left alone on
// the last ("largest 1.88)" was).
std::vector<std::string> TitleLines(const std::string& title_in, float width, float size, float widest = kOneLineTitleWidth,
                                    bool bold = false) {
    const std::string title = EllipsizeChars(title_in, kMaxLabelChars);
    if (title.empty()) return {};
    const float wrap = std::max(width, widest);
    if (MeasureText(title, size, bold) <= wrap) return {title};
    for (int level = 0; level < 3; ++level) {
        const std::vector<std::string> pieces = TitlePieces(title, level);
        const std::string joiner = level == 0 ? " \xC2\xB7 " : " ";
        const bool each_fits = std::all_of(pieces.begin(), pieces.end(), [&](const std::string& p) { return MeasureText(p, size, bold) <= wrap; });
        std::vector<std::string> lines = PackTitle(pieces, joiner, wrap, size, bold);
        if (level < 2 && (!each_fits || lines.size() > kMaxTitleLines)) continue;
        // Balanced: the narrowest wrap that needs no more lines (a few halvings of the interval).
        float lo = wrap * 0.4f, hi = wrap;
        for (int k = 0; k < 10; ++k) {
            const float mid = 0.5f * (lo + hi);
            const std::vector<std::string> tighter = PackTitle(pieces, joiner, mid, size, bold);
            const bool fits = std::all_of(tighter.begin(), tighter.end(), [&](const std::string& l) { return MeasureText(l, size, bold) <= mid; });
            if (fits && tighter.size() == lines.size()) hi = mid;
            else lo = mid;
        }
        lines = PackTitle(pieces, joiner, hi, size, bold);
        if (lines.size() > kMaxTitleLines) {  // the rest on the last line, cut below
            for (size_t i = kMaxTitleLines; i < lines.size(); ++i) lines[kMaxTitleLines - 1] += " " + lines[i];
            lines.resize(kMaxTitleLines);
        }
        for (std::string& line : lines) line = EllipsizeWidth(line, wrap, size, bold);
        return lines;
    }
    return {EllipsizeWidth(title, wrap, size, bold)};  // not reached: level 2 always returns
}

// TitleLines for a small figure: wrapped as near its content's width as the title allows in two
// lines, uncut (from 360 px), rather than widening the figure to 720 px with its content at one
// side (the dla_heads figures were 477, 608 and 633 px wide for one grid, by their titles).
std::vector<std::string> NarrowTitleLines(const std::string& title, float width, float size) {
    auto letters = [](std::string s) {  // what a break may drop: spaces and the clauses' middle dots
        for (const char* gone : {"\xC2\xB7", " "})
            for (size_t at; (at = s.find(gone)) != std::string::npos;) s.erase(at, std::strlen(gone));
        return s;
    };
    const std::string whole = letters(EllipsizeChars(title, kMaxLabelChars));
    for (float widest = std::max(width, 360.0f); widest < kOneLineTitleWidth; widest += 60.0f) {
        std::vector<std::string> lines = TitleLines(title, width, size, widest);
        std::string joined;
        for (const std::string& line : lines) joined += line;
        if (lines.size() <= 2 && letters(joined) == whole) return lines;
    }
    return TitleLines(title, width, size);
}

// The height a title of `lines` lines takes above a figure's content (1.5 em for one line).
float TitleHeight(size_t lines, float size) { return lines == 0 ? 0.0f : size * (1.5f + 1.25f * static_cast<float>(lines - 1)); }

// A token piece as an axis label: leading spaces as middle dots (they mark word starts), newline
// and tab as arrows, at most 16 characters.
std::string AxisLabel(const std::string& piece) {
    std::string out;
    bool leading = true;
    for (size_t pos = 0; pos < piece.size();) {
        const size_t start = pos;
        const char32_t c = model::NextCodePoint(piece, &pos);
        if (c != ' ') leading = false;
        if (c == ' ' && leading) out += "\xC2\xB7";  // U+00B7
        else if (c == '\n') out += "\xE2\x86\xB5";   // U+21B5
        else if (c == '\t') out += "\xE2\x86\x92";   // U+2192
        else out.append(piece, start, pos - start);
    }
    return EllipsizeChars(out, 16);
}

// "%.4g" with '.' whatever the C locale says.
std::string FormatValue(float v) {
    if (std::isnan(v)) return "n/a";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4g", static_cast<double>(v));
    for (char* c = buf; *c; ++c)
        if (*c == ',') *c = '.';
    return buf;
}

std::string Hex(Rgba8 c) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "#%02x%02x%02x", c.r, c.g, c.b);
    return buf;
}

// Dark text on light colours, white on dark ones.
Rgba8 TextOn(Rgba8 fill) {
    const float luminance = 0.299f * fill.r + 0.587f * fill.g + 0.114f * fill.b;
    return luminance > 140 ? Rgba8{0, 0, 0, 255} : Rgba8{255, 255, 255, 255};
}

float LogFloor(Range r, bool log_scale) { return log_scale ? std::max(r.min, 1e-6f) : r.min; }

// Tick values for a colour bar: round values inside the range, else just its two ends.
std::vector<float> BarTicks(Range range, bool log_scale, int max_ticks) {
    std::vector<float> ticks;
    for (float v : NiceTicks(range, log_scale, max_ticks)) {
        const float lo = LogFloor(range, log_scale);
        if (v >= lo - std::abs(lo) * 1e-5f && v <= range.max + std::abs(range.max) * 1e-5f) ticks.push_back(v);
    }
    if (ticks.size() < 2 && range.max > range.min) ticks = {LogFloor(range, log_scale), range.max};
    if (ticks.empty()) ticks = {range.min};
    return ticks;
}

// A sane range: finite, min <= max.
Range Sanitize(Range r) {
    if (!Finite(r.min) || !Finite(r.max)) return {0.0f, 1.0f};
    if (r.min > r.max) std::swap(r.min, r.max);
    return r;
}

// ---------------------------------------------------------------------------------------------
// Colour bars

struct ColorBarSpec {
    Colormap map = Colormap::Viridis;
    Range range;              // what the bar's ends and ticks read
    float t0 = 0, t1 = 1;     // the part of the colour map the bar shows (a scale's part: HighlightOptions::LegendRange)
    bool log_scale = false;
    std::string caption;
    float font = 12;
};

ColorBarSpec ColorBarFor(const HeatmapStyle& style, Range range, const std::string& caption, float font) {
    ColorBarSpec bar;
    bar.map = style.colormap;
    bar.range = range;
    bar.log_scale = style.log_scale;
    bar.caption = caption;
    bar.font = font;
    return bar;
}

constexpr float kBarThickness = 14, kTickLength = 4, kTickGap = 3;

int VerticalBarTickCount(float height, float font) { return std::clamp(static_cast<int>(height / (font * 2.2f)), 2, 8); }

// A vertical bar's ticks: BarTicks, and on a linear scale whose top lies far above its last round
// value (0.1 on a bar to 0.139: the fine-tune's JS, scaled to the whole change's largest), the top
// itself, so the bar says where it ends.
std::vector<float> VerticalBarTicks(const ColorBarSpec& s, float height) {
    std::vector<float> ticks = BarTicks(s.range, s.log_scale, VerticalBarTickCount(height, s.font));
    const float span = s.range.max - s.range.min;
    if (s.log_scale && !ticks.empty() && s.range.min > 0 && s.range.max > s.range.min) {
        // A short log bar's decades thinned to every third: its bottom end named where it has room
        // (a 5-row lens grid's bar read "1" and "0.001" over 1e-04 .. 1).
        const float decades = std::log10(s.range.max / s.range.min), at = std::log10(ticks.front() / s.range.min);
        if (ticks.front() > s.range.min * 1.001f && at / decades * height >= s.font * 1.6f) ticks.insert(ticks.begin(), s.range.min);
        return ticks;
    }
    if (s.log_scale || ticks.size() < 2 || !(span > 0)) return ticks;
    // How far an end lies from the round value nearest it, as a part of its half of the bar (a
    // diverging one's, +-0.68 past +-0.5) or of the bar; and whether a label fits between them.
    const bool diverging = s.range.min < 0 && s.range.max > 0;
    // Far in value but near on the bar (0.685 a label's height above 0.5): the end in the round
    // value's place, so the two labels never touch.
    enum class End { Skip, Add, Replace };
    auto far = [&](float end, float nearest) {
        const float half = diverging ? std::abs(end) : span;
        if (std::abs(end - nearest) <= 0.2f * half || FormatTick(end) == FormatTick(nearest)) return End::Skip;
        return std::abs(end - nearest) / span * height >= s.font * 2.2f ? End::Add : End::Replace;
    };
    // Not the only round value between the ends, nor 0 on a diverging bar.
    auto replaceable = [&](float round) { return ticks.size() > 2 && !(diverging && round == 0.0f); };
    if (const End e = far(s.range.max, ticks.back()); e == End::Add) ticks.push_back(s.range.max);
    else if (e == End::Replace && replaceable(ticks.back())) ticks.back() = s.range.max;
    if (diverging) {
        if (const End e = far(s.range.min, ticks.front()); e == End::Add) ticks.insert(ticks.begin(), s.range.min);
        else if (e == End::Replace && replaceable(ticks.front())) ticks.front() = s.range.min;
    }
    return ticks;
}

// A vertical bar's caption in one line, or in two where it is much longer than a short bar and
// has a ", " to break at (a 1-layer dla_heads' "direct logit attribution, mean over positions"
// ran five times the bar's height down a blank figure).
std::vector<std::string> VerticalCaptionLines(const ColorBarSpec& s, float height) {
    if (s.caption.empty()) return {};
    if (MeasureText(s.caption, s.font) + 8 <= 1.5f * std::max(height, 120.0f)) return {s.caption};
    // At the ", " nearest the middle; without one, at the space nearest it (the lens's "p(token | the
    // tokens before it)" ran 2.5 times a 5-row grid's bar down a blank band).
    auto nearest = [&](const char* mark) {
        size_t best = std::string::npos;
        for (size_t at = s.caption.find(mark); at != std::string::npos; at = s.caption.find(mark, at + 1))
            if (best == std::string::npos || std::abs(static_cast<float>(at) - s.caption.size() * 0.5f) < std::abs(static_cast<float>(best) - s.caption.size() * 0.5f))
                best = at;
        return best;
    };
    const float most = 1.5f * std::max(height, 120.0f);
    auto fit = [&](const std::vector<std::string>& lines) {
        for (const std::string& line : lines)
            if (MeasureText(line, s.font) + 8 > most) return false;
        return true;
    };
    std::vector<std::string> two;
    if (const size_t comma = nearest(", "); comma != std::string::npos) two = {s.caption.substr(0, comma + 1), s.caption.substr(comma + 2)};
    else if (const size_t space = nearest(" "); space != std::string::npos) two = {s.caption.substr(0, space), s.caption.substr(space + 1)};
    else return {s.caption};
    if (fit(two)) return two;
    // Still much longer than the bar (large text beside a few rows: at --text-scale 3 dla_heads'
    // caption ran 3.5 times its 4-row map down a blank figure): word by word, as many lines as it takes.
    std::vector<std::string> lines;
    for (size_t at = 0; at < s.caption.size();) {
        size_t end = s.caption.find(' ', at);
        if (end == std::string::npos) end = s.caption.size();
        const std::string word = s.caption.substr(at, end - at);
        if (!lines.empty() && MeasureText(lines.back() + " " + word, s.font) + 8 <= most) lines.back() += " " + word;
        else lines.push_back(word);
        at = end + 1;
    }
    return lines;
}

// How far down from the bar's top its caption runs: the bar's height, or the caption's length.
float VerticalCaptionEnd(const ColorBarSpec& s, float height) {
    float longest = 0;
    for (const std::string& line : VerticalCaptionLines(s, height)) longest = std::max(longest, std::ceil(MeasureText(line, s.font)) + 8);
    return std::max(height, longest);
}

float VerticalColorBarWidth(const ColorBarSpec& s, float height) {
    float labels = 0;
    for (const std::string& label : FormatTicks(VerticalBarTicks(s, height))) labels = std::max(labels, MeasureText(label, s.font));
    const size_t lines = VerticalCaptionLines(s, height).size();
    return kBarThickness + kTickLength + kTickGap + labels + (lines == 0 ? 0.0f : 8 + s.font * 1.2f * static_cast<float>(lines));
}

// The gradient over t0..t1 of the colour map as one-pixel strips (t0 at the bottom or left):
// plain rects, so an SVG's class="cell" rects are the map's cells alone.
void AddGradient(Figure& f, Colormap map, float x, float y, float w, float h, bool vertical, float t0 = 0, float t1 = 1) {
    const int length = std::max(1, static_cast<int>(std::lround(vertical ? h : w)));
    for (int k = 0; k < length; ++k) {
        const float t = t0 + (t1 - t0) * (k + 0.5f) / length;
        FigRect strip;
        strip.X = vertical ? x : x + k * w / length;
        strip.Y = vertical ? y + k * h / length : y;
        strip.W = vertical ? w : w / length;
        strip.H = vertical ? h / length : h;
        strip.Fill = SampleColormap(map, vertical ? 1.0f - t : t);
        f.Add(strip);
    }
}

// Bar at (x, y) of the given height, ticks and labels on its right, the caption turned beside them.
void AddVerticalColorBar(Figure& f, float x, float y, float height, const ColorBarSpec& s) {
    AddGradient(f, s.map, x, y, kBarThickness, height, true);
    AddOutline(f, x, y, kBarThickness, height);
    float labels = 0;
    const float tick_x = x + kBarThickness;
    const std::vector<float> ticks = VerticalBarTicks(s, height);
    const std::vector<std::string> texts = FormatTicks(ticks);
    for (size_t k = 0; k < ticks.size(); ++k) {
        const float ty = y + height - Normalize(ticks[k], s.range, s.log_scale) * height;
        AddHLine(f, tick_x, tick_x + kTickLength, std::clamp(ty, y + 0.5f, y + height - 0.5f), kAxis);
        const std::string& label = texts[k];
        labels = std::max(labels, MeasureText(label, s.font));
        AddText(f, tick_x + kTickLength + kTickGap, ty, label, s.font);
    }
    // A caption longer than the bar starts at its top and runs on below it (the bar is the map's
    // height: a 5-row lens grid's bar ran 2.5 times the grid's height to hold its caption).
    const std::vector<std::string> lines = VerticalCaptionLines(s, height);
    for (size_t k = 0; k < lines.size(); ++k)
        AddText(f, tick_x + kTickLength + kTickGap + labels + 8 + s.font * (0.6f + 1.2f * static_cast<float>(k)), y + VerticalCaptionEnd(s, height) * 0.5f,
                lines[k], s.font, TextAlign::Center, true);
}

float HorizontalColorBarHeight(const ColorBarSpec& s) {
    return kBarThickness + kTickLength + kTickGap + s.font * 1.2f + (s.caption.empty() ? 0.0f : 4 + s.font * 1.2f);
}

struct BarTick {
    float offset;  // from the bar's left end, pixels
    std::string text;
    float width;   // of the text
};

// A horizontal bar's ticks: as many round values as fit without their labels touching.
std::vector<BarTick> HorizontalBarTicks(const ColorBarSpec& s, float width) {
    std::vector<BarTick> ticks;
    for (int max_ticks = 7; max_ticks >= 2; --max_ticks) {
        ticks.clear();
        bool fits = true;
        float prev_end = -INFINITY;
        const std::vector<float> values = BarTicks(s.range, s.log_scale, max_ticks);
        const std::vector<std::string> texts = FormatTicks(values);
        for (size_t k = 0; k < values.size(); ++k) {
            BarTick t{Normalize(values[k], s.range, s.log_scale) * width, texts[k], 0};
            t.width = MeasureText(t.text, s.font);
            fits &= t.offset - t.width * 0.5f >= prev_end + 6;
            prev_end = t.offset + t.width * 0.5f;
            ticks.push_back(std::move(t));
        }
        if (fits) break;
    }
    return ticks;
}

// How far the centred end labels reach past the bar's left and right ends.
std::pair<float, float> HorizontalBarOverhang(const ColorBarSpec& s, float width) {
    float left = 0, right = 0;
    for (const BarTick& t : HorizontalBarTicks(s, width)) {
        left = std::max(left, t.width * 0.5f - t.offset);
        right = std::max(right, t.offset + t.width * 0.5f - width);
    }
    return {std::ceil(left), std::ceil(right)};
}

// Bar at (x, y) of the given width, ticks and labels under it, the caption under those.
void AddHorizontalColorBar(Figure& f, float x, float y, float width, const ColorBarSpec& s) {
    AddGradient(f, s.map, x, y, width, kBarThickness, false, s.t0, s.t1);
    AddOutline(f, x, y, width, kBarThickness);
    const float label_y = y + kBarThickness + kTickLength + kTickGap + s.font * 0.6f;
    for (const BarTick& t : HorizontalBarTicks(s, width)) {
        AddVLine(f, std::clamp(std::floor(x + t.offset) + 0.5f, x + 0.5f, x + width - 0.5f), y + kBarThickness,
                 y + kBarThickness + kTickLength, kAxis);
        AddText(f, x + t.offset, label_y, t.text, s.font, TextAlign::Center);
    }
    if (!s.caption.empty()) {
        // Centred under the bar unless that would push a long caption off the figure's left edge.
        const float centre = std::max(x + width * 0.5f, kPad + MeasureText(s.caption, s.font) * 0.5f);
        AddText(f, centre, label_y + s.font * 0.6f + 4 + s.font * 0.6f, s.caption, s.font, TextAlign::Center);
    }
}

// A title's lines (TitleLines) centred on `centre`, the first at `y`, but kept inside the figure;
// widens the figure when it must.
void AddTitle(Figure& f, const std::vector<std::string>& lines, float centre, float y, float size) {
    float w = 0;
    for (const std::string& line : lines) w = std::max(w, MeasureText(line, size));
    centre = std::max(std::min(centre, static_cast<float>(f.Width) - kPad - w * 0.5f), kPad + w * 0.5f);
    f.Width = std::max(f.Width, static_cast<int>(std::ceil(centre + w * 0.5f + kPad)));
    for (size_t i = 0; i < lines.size(); ++i) AddText(f, centre, y + 1.25f * size * static_cast<float>(i), lines[i], size, TextAlign::Center);
}

// Every k-th label, k in 1, 2, 5, 10, 20, 50, ..., so that labels are at least `min_spacing` apart.
int LabelStride(float cell, float min_spacing) {
    if (!(cell > 0)) return 1;
    for (int scale = 1;; scale *= 10)
        for (int k : {1, 2, 5})
            if (cell * k * scale >= min_spacing || scale >= 100000000) return k * scale;
}

// Each cell's value (options.CellValues' format) written in it, dark on light colours and light on
// dark; nothing where a cell is too small for the widest text (a grid of a few heads, not a map of
// tokens). Cells off a causal map and values that are not finite are left blank.
void AddCellValues(Figure& f, const float* values, int rows, int cols, float map_x, float map_y, float cell_w, float cell_h,
                   const HeatmapStyle& style, Range range, const HeatmapFigureOptions& options) {
    const float fs = options.Text.Size(options.FontSize > 0 && options.FontSize < 200 ? options.FontSize * 0.85f : 10.0f);
    if (cell_w < fs * 2 || cell_h < fs * 1.4f) return;  // no text fits (a map of many tokens: not formatted at all)
    const size_t n = static_cast<size_t>(rows) * cols;
    std::vector<std::string> texts(n);
    float widest = 0;
    for (size_t k = 0; k < n; ++k) {
        const int i = static_cast<int>(k / cols), j = static_cast<int>(k % cols);
        if (!Finite(values[k]) || (style.causal && j > i)) continue;
        char buf[64];
        std::snprintf(buf, sizeof buf, options.CellValues.c_str(), values[k]);
        texts[k] = SignlessZero(buf);
        widest = std::max(widest, MeasureText(texts[k], fs));
    }
    if (cell_w < widest + 6) return;
    for (size_t k = 0; k < n; ++k) {
        if (texts[k].empty()) continue;
        const Rgba8 c = SampleColormap(style.colormap, Normalize(values[k], range, style.log_scale));
        const bool light = 0.299f * c.r + 0.587f * c.g + 0.114f * c.b > 140;
        const float x = map_x + (static_cast<float>(k % cols) + 0.5f) * cell_w, y = map_y + (static_cast<float>(k / cols) + 0.5f) * cell_h;
        AddText(f, x, y, std::move(texts[k]), fs, TextAlign::Center, false, light ? Rgba8{20, 20, 20, 255} : Rgba8{245, 245, 245, 255});
    }
}

}  // namespace

// -------------------------------------------------------------------------------------------------

Figure HeatmapFigure(const float* values, int rows, int cols, const HeatmapFigureOptions& options) {
    Figure f;
    f.Title = options.Title;
    rows = std::max(rows, 0);
    cols = std::max(cols, 0);
    const bool empty = rows == 0 || cols == 0 || !values;
    const float fs = options.Text.Size(options.FontSize > 0 && options.FontSize < 200 ? options.FontSize : 12.0f);
    const float title_fs = fs * 1.25f;

    // Map area: square cells.
    const int n = std::max({rows, cols, 1});
    float cell = options.MapSize > 0 ? static_cast<float>(std::min(options.MapSize, 16384)) / n
                                     : static_cast<float>(std::clamp(static_cast<int>(std::lround(720.0 / n)), 1, 28));
    int map_w = empty ? 160 : std::max(1, static_cast<int>(std::lround(cell * cols)));
    int map_h = empty ? 160 : std::max(1, static_cast<int>(std::lround(cell * rows)));
    // At the text's scale: a row's label is a line of text (at --text-scale 3 a lens's rows of 15 px
    // kept one label in five, "embeddings" alone).
    if (!empty && options.MinRowHeight > 0)
        map_h = std::max(map_h, static_cast<int>(std::ceil(rows * std::min(options.MinRowHeight, 64) * options.Text.Size(1.0f))));
    const float cell_w = empty ? 0.0f : static_cast<float>(map_w) / cols, cell_h = empty ? 0.0f : static_cast<float>(map_h) / rows;

    // Labels shown: every k-th, so that they are at least a line (1.2 em) apart.
    const float min_spacing = fs * 1.2f;
    const int row_stride = LabelStride(cell_h, min_spacing), col_stride = LabelStride(cell_w, min_spacing);
    auto label = [](const std::vector<std::string>& labels, int i) {
        return i < static_cast<int>(labels.size()) ? AxisLabel(labels[static_cast<size_t>(i)]) : std::to_string(i);
    };
    std::vector<std::pair<int, std::string>> row_labels, col_labels;
    float row_label_w = 0, col_label_h = 0;
    if (!empty) {
        for (int i = 0; i < rows; i += row_stride) {
            row_labels.emplace_back(i, label(options.RowLabels, i));
            row_label_w = std::max(row_label_w, MeasureText(row_labels.back().second, fs));
        }
        for (int j = 0; j < cols; j += col_stride) {
            col_labels.emplace_back(j, label(options.ColLabels, j));
            col_label_h = std::max(col_label_h, MeasureText(col_labels.back().second, fs));
        }
    }

    // Margins from measured text; the colour bar to the right, as tall as the map (at least a
    // readable height; a longer caption runs on below it); the title over all.
    const float caption_h = fs * 1.2f, tick = 3, gap = 3;
    const float map_x = std::ceil(kPad + caption_h + 6 + row_label_w + tick + gap);
    HeatmapStyle style = options.Style;
    Range range = empty ? Range{0.0f, 1.0f} : Sanitize(ResolveRange(values, rows, cols, style));
    const ColorBarSpec bar = ColorBarFor(style, range, options.ValueLabel, fs);
    const float bar_h = std::max(static_cast<float>(map_h), 48.0f), caption_end = VerticalCaptionEnd(bar, bar_h);
    const float bar_x = map_x + map_w + 16;
    const float content_w = bar_x + VerticalColorBarWidth(bar, bar_h) - kPad;
    const std::string shown = options.Text.Shown(options.Title);
    const std::vector<std::string> title = options.NarrowTitle ? NarrowTitleLines(shown, content_w, title_fs) : TitleLines(shown, content_w, title_fs);
    const float title_h = TitleHeight(title.size(), title_fs);
    const float map_y = std::ceil(kPad + title_h + 4);

    // Pixels: pooled to at most one pixel per cell of output.
    if (!empty) {
        FigImage map;
        map.X = map_x;
        map.Y = map_y;
        map.W = static_cast<float>(map_w);
        map.H = static_cast<float>(map_h);
        map.Cells = BakeHeatmap(values, rows, cols, 0, 0, rows, cols, std::min(cols, map_w), std::min(rows, map_h), style, range);
        f.Add(std::move(map));
    } else {
        AddText(f, map_x + map_w * 0.5f, map_y + map_h * 0.5f, "no tokens", fs, TextAlign::Center, false, kFaint);
    }
    AddOutline(f, map_x, map_y, static_cast<float>(map_w), static_cast<float>(map_h));
    if (!empty && !options.CellValues.empty()) AddCellValues(f, values, rows, cols, map_x, map_y, cell_w, cell_h, style, range, options);

    // Row labels left of the map, column labels hanging below it, each with a small tick.
    for (const auto& [i, text] : row_labels) {
        const float y = map_y + (i + 0.5f) * cell_h;
        AddHLine(f, map_x - tick, map_x, y, kAxis);
        AddText(f, map_x - tick - gap, y, text, fs, TextAlign::Right);
    }
    for (const auto& [j, text] : col_labels) {
        const float x = map_x + (j + 0.5f) * cell_w;
        AddVLine(f, x, map_y + map_h, map_y + map_h + tick, kAxis);
        AddText(f, x, map_y + map_h + tick + gap, text, fs, TextAlign::Right, true);
    }
    const float map_bottom = map_y + map_h + tick + gap + col_label_h;
    // The row axis's name beside the map, from its top where it is longer than the map is tall (a
    // lens's few rows at --text-scale 3: it ran up into the title).
    const float row_axis_w = MeasureText(options.RowAxis, fs);
    const float row_axis_y = std::max(map_y + map_h * 0.5f, map_y + row_axis_w * 0.5f);
    AddText(f, kPad + caption_h * 0.5f, row_axis_y, options.RowAxis, fs, TextAlign::Center, true);
    // The column axis under the map, clear of a bar caption running on below the bar (a 2-token
    // lens's "token (predicted ...)" crossed "p(token | ...)"): moved left, else under the caption.
    const float axis_w = MeasureText(options.ColAxis, fs),
                caption_left = bar_x + VerticalColorBarWidth(bar, bar_h) - fs * 1.2f * static_cast<float>(VerticalCaptionLines(bar, bar_h).size()) - 4;
    // Centred under the map, but never past the figure's left edge (a panel's wider name ran into the panel before it).
    float axis_x = std::max(map_x + map_w * 0.5f, kPad + axis_w * 0.5f), axis_y = map_bottom + 6 + caption_h * 0.5f;
    if (!bar.caption.empty() && map_y + caption_end > axis_y - caption_h * 0.5f && axis_x + axis_w * 0.5f > caption_left) {
        axis_x = std::max(kPad + axis_w * 0.5f, caption_left - axis_w * 0.5f);
        if (axis_x + axis_w * 0.5f > caption_left) axis_x = std::max(kPad + axis_w * 0.5f, map_x + map_w * 0.5f), axis_y = map_y + caption_end + 4 + caption_h * 0.5f;
    }
    AddText(f, axis_x, axis_y, options.ColAxis, fs, TextAlign::Center);

    AddVerticalColorBar(f, bar_x, map_y, bar_h, bar);

    f.Width = static_cast<int>(std::ceil(std::max(content_w + 2 * kPad, axis_x + axis_w * 0.5f + kPad)));  // a column axis wider than a tiny map
    f.Height = static_cast<int>(std::ceil(std::max({axis_y + caption_h * 0.5f, map_y + caption_end, row_axis_y + row_axis_w * 0.5f}) + kPad));
    AddTitle(f, title, map_x + map_w * 0.5f, kPad + title_fs * 0.75f, title_fs);
    return f;
}

namespace {

// The options' range, or min..max of the finite values (0..1 when there are none).
Range HighlightRange(const std::vector<std::string>& pieces, const std::vector<float>& values, const HighlightOptions& options) {
    Range range = {0.0f, 1.0f};
    if (options.ValueRange) {
        range = Sanitize(*options.ValueRange);
    } else {
        float lo = INFINITY, hi = -INFINITY;
        for (size_t i = 0; i < pieces.size() && i < values.size(); ++i)
            if (Finite(values[i])) lo = std::min(lo, values[i]), hi = std::max(hi, values[i]);
        if (lo <= hi) range = {lo, hi};
    }
    return range;
}

}  // namespace

Figure HighlightFigure(const std::vector<std::string>& pieces, const std::vector<float>& values, const HighlightOptions& options) {
    Figure f;
    f.Title = options.Title;
    const float fs = options.Text.Size(options.FontSize > 0 && options.FontSize < 200 ? options.FontSize : 18.0f);
    const float wrap = static_cast<float>(std::max(options.Width, 50));
    const float line_h = std::ceil(fs * 1.6f), chip_h = std::ceil(fs * 1.3f);

    const Range range = HighlightRange(pieces, values, options);

    // Flow: break between words, as text is set ("det|ails" was split over two lines where a
    // word's tokens met the edge): a word's tokens move to the next line together; a word wider
    // than the line (or text without spaces) breaks between its tokens, a token wider than the line
    // on a line of its own; '\n' ends a line. A word begins with a token that begins with a space.
    struct Placed {
        float x, w;
        int line;
        std::string text;
        size_t token;
    };
    std::vector<Placed> placed;
    float x = 0;
    int line = 0;
    size_t word = 0;  // the first of the current word's parts on this line
    auto new_line = [&] { x = 0, ++line, word = placed.size(); };
    for (size_t i = 0; i < pieces.size(); ++i) {
        const std::string& piece = pieces[i];
        if (piece.empty()) {  // a narrow chip, no text, kept beside the piece before it
            const float w = std::round(fs * 0.3f);
            placed.push_back({x, w, line, "", i});
            x += w;
            continue;
        }
        size_t begin = 0;
        for (bool first = true;; first = false) {
            const size_t end = std::min(piece.find('\n', begin), piece.size());
            if (!first) new_line();
            // A part wider than a line (one token can be a megabyte of text) is cut to the line.
            const std::string part = BoundLabel(piece.substr(begin, std::min(end - begin, kMaxLabelChars * 4)), wrap, fs);
            const float w = MeasureText(part, fs);
            if (!part.empty()) {
                if (part[0] == ' ' || part[0] == '\t') word = placed.size();
                if (x > 0 && x + w > wrap) {
                    const float shift = word < placed.size() ? placed[word].x : x;
                    if (shift > 0 && x - shift + w <= wrap) {  // the word so far moves down with this part
                        for (size_t k = word; k < placed.size(); ++k) placed[k].x -= shift, ++placed[k].line;
                        x -= shift, ++line;
                    } else {
                        new_line();
                    }
                }
                placed.push_back({x, w, line, part, i});
                x += w;
            }
            if (end >= piece.size()) break;
            begin = end + 1;
        }
    }
    float content_w = 0;
    for (const Placed& p : placed) content_w = std::max(content_w, p.x + p.w);
    const int lines = placed.empty() ? 1 : line + 1;

    const float title_fs = fs;
    const std::string shown = options.Text.Shown(options.Title);
    const float title_h = shown.empty() ? 0.0f : std::ceil(title_fs * 1.8f);
    const float text_x = kPad + 4, text_y = kPad + title_h;
    const std::string title = BoundLabel(shown, std::max(wrap, kMaxTitleWidth), title_fs);
    if (!title.empty()) AddText(f, text_x, kPad + title_fs * 0.7f, title, title_fs);
    for (const Placed& p : placed) {
        const float v = p.token < values.size() ? values[p.token] : std::numeric_limits<float>::quiet_NaN();
        const float cy = text_y + p.line * line_h + line_h * 0.5f;
        Rgba8 ink = kText;
        if (Finite(v)) {
            FigRect chip;
            chip.X = text_x + p.x;
            chip.Y = cy - chip_h * 0.5f;
            chip.W = p.w;
            chip.H = chip_h;
            chip.Fill = SampleColormap(options.Map, Normalize(v, range, options.LogScale));
            ink = TextOn(chip.Fill);
            f.Add(chip);
        }
        if (!p.text.empty()) AddText(f, text_x + p.x, cy, p.text, fs, TextAlign::Left, false, ink);
    }
    if (placed.empty()) AddText(f, text_x, text_y + line_h * 0.5f, "(no tokens)", fs, TextAlign::Left, false, kFaint);

    // Legend under the text.
    const ScalePart legend = PartOfScale(range, options.LegendRange.value_or(range), options.LogScale);
    ColorBarSpec bar;
    bar.map = options.Map;
    bar.range = legend.range;
    bar.t0 = legend.t0;
    bar.t1 = legend.t1;
    bar.log_scale = options.LogScale;
    bar.caption = options.ValueLabel;
    bar.font = std::max(options.Text.Size(11.0f), std::round(fs * 0.72f));
    const float bar_w = std::clamp(std::round(content_w * 0.5f), 200.0f, 360.0f);
    const float bar_y = text_y + lines * line_h + fs;
    const auto [overhang_left, overhang_right] = HorizontalBarOverhang(bar, bar_w);
    const float bar_x = text_x + std::max(0.0f, overhang_left - 4);
    AddHorizontalColorBar(f, bar_x, bar_y, bar_w, bar);

    const float caption_w = MeasureText(options.ValueLabel, bar.font);
    const float caption_right = std::max(bar_x + bar_w * 0.5f, kPad + caption_w * 0.5f) + caption_w * 0.5f;
    const float legend_w = std::max(bar_x + bar_w + overhang_right, caption_right) - text_x;
    f.Width = static_cast<int>(std::ceil(text_x + std::max(content_w, legend_w) + 4 + kPad));
    if (!title.empty()) f.Width = std::max(f.Width, static_cast<int>(std::ceil(text_x + MeasureText(title, title_fs) + kPad)));
    f.Height = static_cast<int>(std::ceil(bar_y + HorizontalColorBarHeight(bar) + kPad));
    return f;
}

std::string HighlightHtml(const std::vector<std::string>& pieces, const std::vector<float>& values, const HighlightOptions& options) {
    const float fs = options.Text.Size(options.FontSize > 0 && options.FontSize < 200 ? options.FontSize : 18.0f);
    const Range range = HighlightRange(pieces, values, options);
    const ScalePart legend = PartOfScale(range, options.LegendRange.value_or(range), options.LogScale);
    const std::string label = EscapeXml(options.ValueLabel);
    char size[64], legend_size[64];
    std::snprintf(size, sizeof size, "%d", static_cast<int>(std::lround(fs)));
    std::snprintf(legend_size, sizeof legend_size, "%d", static_cast<int>(std::lround(options.Text.Size(13))));

    std::string out;
    out += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n";
    out += "<title>" + EscapeXml(options.Title.empty() ? std::string("ssaviz highlight") : options.Title) + "</title>\n";
    out += "<style>\n"
           "body { margin: 24px; background: #ffffff; color: #262626; font-family: \"DejaVu Sans\", Verdana, sans-serif; }\n"
           "h1 { font-size: " + std::string(size) + "px; font-weight: normal; margin: 0 0 12px 0; }\n"
           ".text { font-size: " + std::string(size) + "px; line-height: 1.6; white-space: pre-wrap; max-width: " +
           std::to_string(std::max(options.Width, 50)) + "px; }\n"
           ".legend { display: flex; align-items: center; gap: 8px; margin-top: 16px; font-size: " + std::string(legend_size) + "px; }\n"
           ".bar { display: inline-block; width: 240px; height: 12px; border: 1px solid #404040; }\n"
           // A token with no text of its own (it continues a character): a narrow chip, as the figure's.
           ".t:empty { display: inline-block; width: 0.3em; height: 1.2em; vertical-align: text-bottom; }\n"
           "</style>\n</head>\n<body>\n";
    if (!options.Text.Shown(options.Title).empty()) out += "<h1>" + EscapeXml(options.Title) + "</h1>\n";
    out += "<div class=\"text\">";
    for (size_t i = 0; i < pieces.size(); ++i) {
        const float v = i < values.size() ? values[i] : std::numeric_limits<float>::quiet_NaN();
        out += "<span class=\"t\"";
        if (Finite(v)) {
            const Rgba8 fill = SampleColormap(options.Map, Normalize(v, range, options.LogScale));
            out += " style=\"background:" + Hex(fill) + ";color:" + Hex(TextOn(fill)) + "\"";
        }
        out += " title=\"" + label + " = " + FormatValue(v) + "\">";
        // Newlines as <br/> (and not as characters, which pre-wrap would show a second time).
        const std::string& piece = pieces[i];
        size_t begin = 0;
        for (;;) {
            const size_t end = std::min(piece.find('\n', begin), piece.size());
            out += EscapeXml(piece.substr(begin, end - begin));
            if (end >= piece.size()) break;
            out += "<br/>";
            begin = end + 1;
        }
        out += "</span>";
    }
    out += "</div>\n";
    std::string gradient = "linear-gradient(to right";
    for (int k = 0; k <= 10; ++k)
        gradient += ", " + Hex(SampleColormap(options.Map, legend.t0 + (legend.t1 - legend.t0) * k / 10.0f)) + " " + std::to_string(k * 10) + "%";
    gradient += ")";
    const std::vector<std::string> ends = FormatTicks({LogFloor(legend.range, options.LogScale), legend.range.max});  // the bars' notation
    out += "<div class=\"legend\"><span class=\"caption\">" + label + "</span><span class=\"lo\">" + EscapeXml(ends[0]) +
           "</span><span class=\"bar\" style=\"background:" + gradient + "\"></span><span class=\"hi\">" + EscapeXml(ends[1]) + "</span>" +
           (options.LogScale ? "<span class=\"scale\">(log scale)</span>" : "") + "</div>\n";
    out += "</body>\n</html>\n";
    return out;
}

Figure HeadsGridFigure(const float* maps, int layers, int heads, int tokens, const HeadsGridOptions& options) {
    Figure f;
    f.Title = options.Title;
    layers = std::max(layers, 0);
    heads = std::max(heads, 0);
    tokens = std::max(tokens, 0);
    const float fs = options.Text.Size(12), title_fs = options.Text.Size(15), caption_fs = options.Text.Size(11);
    const int thumb = std::clamp(options.Thumb, 8, 4096);
    const size_t map_cells = static_cast<size_t>(tokens) * tokens;

    // One range for every head.
    HeatmapStyle style = options.Style;
    Range range = {0.0f, 1.0f};
    if (style.range) {
        range = Sanitize(*style.range);
    } else if (maps) {
        float m = 0;
        const bool diverging = style.colormap == Colormap::Diverging;
        for (size_t k = 0; k < static_cast<size_t>(layers) * heads; ++k)
            for (int i = 0; i < tokens; ++i) {
                const float* row = maps + k * map_cells + static_cast<size_t>(i) * tokens;
                const int last = style.causal ? std::min(i + 1, tokens) : tokens;
                for (int j = 0; j < last; ++j)
                    if (Finite(row[j])) m = std::max(m, diverging ? std::abs(row[j]) : row[j]);
            }
        if (m > 0) range = diverging ? Range{-m, m} : Range{0.0f, m};
    }
    style.range = range;

    float row_label_w = 0;
    for (int l = 0; l < layers; ++l) row_label_w = std::max(row_label_w, MeasureText("layer " + std::to_string(l), fs));
    const float col_label_h = fs * 1.5f, caption_h = caption_fs * 1.6f;
    const float gap_x = 12, gap_y = 8;
    const float step_x = thumb + gap_x, step_y = thumb + caption_h + gap_y;
    const float grid_x = std::ceil(kPad + row_label_w + 10);
    const float grid_w = heads > 0 ? heads * step_x - gap_x : 0.0f;
    const float grid_h = layers > 0 ? layers * step_y - gap_y : 0.0f;
    const ColorBarSpec bar = ColorBarFor(style, range, options.ValueLabel, fs);
    const float bar_h = std::max({120.0f, layers > 0 ? layers * step_y - gap_y - caption_h : 0.0f, std::ceil(MeasureText(bar.caption, fs)) + 8});
    const float bar_x = grid_x + std::max(grid_w, heads == 0 || layers == 0 ? 60.0f : 0.0f) + 20;
    const float content_w = bar_x + VerticalColorBarWidth(bar, bar_h) - kPad;
    const std::vector<std::string> title = TitleLines(options.Text.Shown(options.Title), content_w, title_fs);
    const float grid_y = std::ceil(kPad + TitleHeight(title.size(), title_fs) + col_label_h);

    for (int h = 0; h < heads; ++h)
        AddText(f, grid_x + h * step_x + thumb * 0.5f, grid_y - col_label_h * 0.5f, "head " + std::to_string(h), fs, TextAlign::Center);
    for (int l = 0; l < layers; ++l) {
        const float y = grid_y + l * step_y;
        AddText(f, grid_x - 10, y + thumb * 0.5f, "layer " + std::to_string(l), fs, TextAlign::Right);
        for (int h = 0; h < heads; ++h) {
            const float x = grid_x + h * step_x;
            if (maps && tokens > 0) {
                FigImage im;
                im.X = x;
                im.Y = y;
                im.W = im.H = static_cast<float>(thumb);
                const float* map = maps + (static_cast<size_t>(l) * heads + h) * map_cells;
                const int out = std::min(tokens, thumb);
                im.Cells = BakeHeatmap(map, tokens, tokens, 0, 0, tokens, tokens, out, out, style, range);
                f.Add(std::move(im));
            }
            AddOutline(f, x, y, static_cast<float>(thumb), static_cast<float>(thumb));
            const size_t index = static_cast<size_t>(l) * heads + h;
            std::string caption = index < options.Captions.size() ? options.Captions[index]
                                                                  : "L" + std::to_string(l) + " H" + std::to_string(h);
            caption = EllipsizeWidth(caption, thumb + gap_x - 2, caption_fs);
            AddText(f, x + thumb * 0.5f, y + thumb + caption_h * 0.5f, caption, caption_fs, TextAlign::Center);
        }
    }
    if (layers == 0 || heads == 0) AddText(f, grid_x, grid_y + 20, "no heads", fs, TextAlign::Left, false, kFaint);

    AddVerticalColorBar(f, bar_x, grid_y, bar_h, bar);
    f.Width = static_cast<int>(std::ceil(content_w + 2 * kPad));
    // The bar's last label is centred on its end: half a line more (at --text-scale 3 its "0" was cut).
    f.Height = static_cast<int>(std::ceil(grid_y + std::max(grid_h, bar_h + bar.font * 0.6f) + kPad));
    AddTitle(f, title, grid_x + grid_w * 0.5f, kPad + title_fs * 0.75f, title_fs);
    return f;
}

namespace {

// Liang-Barsky: the part of segment a-b inside the rectangle, false when none is.
bool ClipSegment(float& ax, float& ay, float& bx, float& by, float x0, float y0, float x1, float y1) {
    float t0 = 0, t1 = 1;
    const float dx = bx - ax, dy = by - ay;
    const float p[4] = {-dx, dx, -dy, dy}, q[4] = {ax - x0, x1 - ax, ay - y0, y1 - ay};
    for (int k = 0; k < 4; ++k) {
        if (p[k] == 0) {
            if (q[k] < 0) return false;
            continue;
        }
        const float r = q[k] / p[k];
        if (p[k] < 0) t0 = std::max(t0, r);
        else t1 = std::min(t1, r);
        if (t0 > t1) return false;
    }
    const float nax = ax + t0 * dx, nay = ay + t0 * dy, nbx = ax + t1 * dx, nby = ay + t1 * dy;
    ax = nax, ay = nay, bx = nbx, by = nby;
    return true;
}

// How much of the data items [begin, end) a box would hide: points and line samples inside it,
// and the area of bars under it (in 4 x 4 pixel units).
float HiddenData(const Figure& f, size_t begin, size_t end, float x0, float y0, float x1, float y1) {
    auto inside = [&](float x, float y) { return x >= x0 && x <= x1 && y >= y0 && y <= y1; };
    float cost = 0;
    for (size_t k = begin; k < end; ++k) {
        const FigItem& item = f.Items[k];
        if (const auto* c = std::get_if<FigCircle>(&item)) {
            cost += inside(c->X, c->Y);
        } else if (const auto* r = std::get_if<FigRect>(&item)) {
            const float w = std::min(x1, r->X + r->W) - std::max(x0, r->X), h = std::min(y1, r->Y + r->H) - std::max(y0, r->Y);
            if (w > 0 && h > 0) cost += w * h / 16;
        } else if (const auto* l = std::get_if<FigPolyline>(&item)) {
            for (size_t i = 0; i + 3 < l->Points.size(); i += 2) {
                const float ax = l->Points[i], ay = l->Points[i + 1], bx = l->Points[i + 2], by = l->Points[i + 3];
                const int steps = std::clamp(static_cast<int>(std::hypot(bx - ax, by - ay) / 4), 1, 1000);
                for (int s = 0; s <= steps; ++s) cost += inside(ax + (bx - ax) * s / steps, ay + (by - ay) * s / steps);
            }
        }
    }
    return cost;
}

// The description as the layout below draws it: histograms counted into bars (a paper's 40 bins
// over all their values by default; later series translucent so the first shows through), bars
// without X placed side by side in their category slots, and the reference line as one more line
// series across the categories (or the data), so it is fitted and in the legend like the others.
std::vector<PlotSeries> SeriesToDraw(const std::vector<PlotSeries>& described, const PlotOptions& options) {
    std::vector<PlotSeries> out = described;
    float lo = INFINITY, hi = -INFINITY;
    int category_series = 0;
    for (const PlotSeries& s : described) {
        if (s.Kind == SeriesKind::Histogram)
            for (float v : s.Y)
                if (Finite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
        category_series += s.Kind == SeriesKind::Bars && s.X.empty();
    }
    if (!(lo <= hi)) lo = hi = 1.0f;
    if (!(hi > lo)) hi = lo + 1.0f, lo -= 1.0f;
    const int bins = options.HistogramBins > 0 ? options.HistogramBins : 40;
    const float bin_width = (hi - lo) / bins;
    const float slot_width = category_series > 0 ? 0.8f / category_series : 0.8f;
    int histograms = 0, categories = 0;
    for (PlotSeries& s : out) {
        if (s.Kind == SeriesKind::Histogram) {
            std::vector<float> counts(bins, 0.0f);
            for (float v : s.Y)
                if (Finite(v)) counts[std::clamp(static_cast<int>((v - lo) / bin_width), 0, bins - 1)] += 1.0f;
            s.Kind = SeriesKind::Bars;
            s.X.clear();
            for (int b = 0; b < bins; ++b) s.X.push_back(lo + (b + 0.5f) * bin_width);
            s.Y = std::move(counts);
            s.BarWidth = bin_width;
            if (histograms++ > 0) s.Color.a = 170;
        } else if (s.Kind == SeriesKind::Bars && s.X.empty()) {
            const float offset = (categories++ - (category_series - 1) * 0.5f) * slot_width;
            for (size_t k = 0; k < s.Y.size(); ++k) s.X.push_back(static_cast<float>(k) + offset);
            s.BarWidth = slot_width;
        } else if (s.X.empty()) {  // a line or points at 1, 2, ...
            for (size_t k = 0; k < s.Y.size(); ++k) s.X.push_back(static_cast<float>(k + 1));
        }
    }
    if (options.YLine) {
        PlotSeries line;
        line.Name = options.YLine->Label;
        line.Color = kReference;
        line.Dashed = true;  // as the window draws it: a threshold, not data
        const float value = options.YLine->Value;
        if (!options.XCategories.empty()) {
            line.X = {-0.5f, static_cast<float>(options.XCategories.size()) - 0.5f};
        } else {
            float x_lo = INFINITY, x_hi = -INFINITY;
            for (const PlotSeries& s : out)
                for (float x : s.X)
                    if (Finite(x)) x_lo = std::min(x_lo, x), x_hi = std::max(x_hi, x);
            line.X = x_lo <= x_hi ? std::vector<float>{x_lo, x_hi} : std::vector<float>{0.0f, 1.0f};
        }
        line.Y = {value, value};
        out.push_back(std::move(line));
    }
    return out;
}

Range UsableRange(Range r) {
    r = Sanitize(r);
    if (r.max == r.min) {
        const float d = r.min != 0 ? std::abs(r.min) * 0.1f : 0.5f;
        r = {r.min - d, r.max + d};
    }
    if (!(r.max > r.min)) r = {0.0f, 1.0f};  // overflowed or still degenerate
    return r;
}

}  // namespace

Figure PlotFigure(const std::vector<PlotSeries>& described, const PlotOptions& options) {
    const std::vector<PlotSeries> series = SeriesToDraw(described, options);
    Figure f;
    f.Title = options.Title;
    f.Width = std::clamp(options.Width, 160, 8192);
    f.Height = std::clamp(options.Height, 120, 8192);
    const float fs = options.Text.Size(11), label_fs = options.Text.Size(12), title_fs = options.Text.Size(14);
    const int categories = static_cast<int>(options.XCategories.size());

    // Ranges: given, or fitted to the finite data (bars reach down to 0).
    float xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
    for (const PlotSeries& s : series) {
        const size_t count = std::min(s.X.size(), s.Y.size());
        const float half = s.Kind == SeriesKind::Bars && Finite(s.BarWidth) ? std::abs(s.BarWidth) * 0.5f : 0.0f;
        for (size_t i = 0; i < count; ++i) {
            if (!Finite(s.X[i]) || !Finite(s.Y[i])) continue;
            xlo = std::min(xlo, s.X[i] - half), xhi = std::max(xhi, s.X[i] + half);
            ylo = std::min(ylo, s.Y[i]), yhi = std::max(yhi, s.Y[i]);
            if (s.Kind == SeriesKind::Bars) ylo = std::min(ylo, 0.0f), yhi = std::max(yhi, 0.0f);
        }
    }
    Range xr, yr;
    if (options.XRange) {
        xr = UsableRange(*options.XRange);
    } else if (categories > 0) {
        xr = {std::min(xlo, -0.5f), std::max(xhi, categories - 0.5f)};
    } else {
        xr = UsableRange(PaddedRange(xlo, xhi, 0.05f));
    }
    yr = options.YRange ? UsableRange(*options.YRange) : UsableRange(PaddedRange(ylo, yhi, 0.05f));

    // Left margin from the y tick labels (tick count from a first guess of the plot height).
    const float tick = 4, gap = 3, caption_h = label_fs * 1.2f;
    const std::vector<std::string> title = TitleLines(options.Text.Shown(options.Title), static_cast<float>(f.Width) - 2 * kPad, title_fs, 0);  // the width asked for
    const float top = std::ceil(kPad + (title.empty() ? 4.0f : title_fs * (1.6f + 1.25f * static_cast<float>(title.size() - 1))));
    const std::vector<float> y_ticks = NiceTicks(yr, false, std::clamp(static_cast<int>((f.Height - top - 60) / 40), 3, 8));
    const std::vector<std::string> y_text = FormatTicks(y_ticks);
    float y_label_w = 0;
    for (const std::string& t : y_text) y_label_w = std::max(y_label_w, MeasureText(t, fs));
    const float left = std::ceil(kPad + (options.YLabel.empty() ? 0.0f : caption_h + 6) + y_label_w + gap + tick);

    // X ticks: the categories (turned when they do not fit side by side, thinned when crowded) or
    // round values spaced so that their labels do not touch.
    struct XTick {
        float value;
        std::string text;
    };
    std::vector<XTick> x_ticks;
    bool x_vertical = false;
    float right = kPad + 8;
    const float guess_w = f.Width - left - right;
    float x_label_extent = fs * 1.2f;  // how far labels reach below the ticks
    if (categories > 0) {
        std::vector<std::string> texts;
        float widest = 0;
        for (const std::string& c : options.XCategories) {  // token pieces among them: their word starts as the maps show them, "·The"
            texts.push_back(c.size() > 0 && c[0] == ' ' ? AxisLabel(c) : EllipsizeChars(c, 20));
            widest = std::max(widest, MeasureText(texts.back(), fs));
        }
        const float spacing = guess_w / (xr.max - xr.min);
        x_vertical = widest + 8 > spacing;
        const int stride = x_vertical ? LabelStride(spacing, fs * 1.3f) : 1;
        float extent = 0;
        for (int i = 0; i < categories; i += stride) {
            if (i < xr.min || i > xr.max) continue;
            x_ticks.push_back({static_cast<float>(i), texts[static_cast<size_t>(i)]});
            extent = std::max(extent, MeasureText(texts[static_cast<size_t>(i)], fs));
        }
        if (x_vertical) x_label_extent = extent;
    } else {
        for (int max_ticks = std::clamp(static_cast<int>(guess_w / 60), 2, 10); max_ticks >= 2; --max_ticks) {
            x_ticks.clear();
            const std::vector<float> values = NiceTicks(xr, false, max_ticks);
            const std::vector<std::string> texts = FormatTicks(values);
            for (size_t k = 0; k < values.size(); ++k) x_ticks.push_back({values[k], texts[k]});
            bool fits = true;
            float prev_end = -INFINITY;
            for (const XTick& t : x_ticks) {
                const float cx = (t.value - xr.min) / (xr.max - xr.min) * guess_w, w = MeasureText(t.text, fs);
                fits &= cx - w * 0.5f >= prev_end + 8;
                prev_end = cx + w * 0.5f;
            }
            if (fits) break;
        }
        if (!x_ticks.empty()) right = std::max(right, kPad + MeasureText(x_ticks.back().text, fs) * 0.5f);
    }
    const float bottom = std::ceil(kPad + tick + gap + x_label_extent + (options.XLabel.empty() ? 0.0f : 6 + caption_h));

    // Wide enough for the x axis's caption, centred on the plot area (at --text-scale 3 it ran off both sides).
    if (!options.XLabel.empty())
        f.Width = std::max(f.Width, static_cast<int>(std::ceil(std::min(MeasureText(options.XLabel, label_fs), 2 * kMaxTitleWidth) + std::abs(left - right) + 2)));
    // The plot area in whole pixels; the figure grows if margins leave too little, or the y axis's
    // caption is longer than the plot is tall (at --text-scale 2 it ran off the figure's top).
    const float px0 = left, py0 = top;
    const float y_caption = options.YLabel.empty() ? 0.0f : std::min(std::ceil(MeasureText(options.YLabel, label_fs)) + 8, kMaxTitleWidth);
    const float px1 = std::max(px0 + 40, std::floor(f.Width - right)), py1 = std::max({py0 + 40, py0 + y_caption, std::floor(f.Height - bottom)});
    f.Width = std::max(f.Width, static_cast<int>(std::ceil(px1 + right)));
    f.Height = std::max(f.Height, static_cast<int>(std::ceil(py1 + bottom)));
    const float pw = px1 - px0, ph = py1 - py0;
    auto X = [&](float x) { return px0 + (x - xr.min) / (xr.max - xr.min) * pw; };
    auto Y = [&](float y) { return py1 - (y - yr.min) / (yr.max - yr.min) * ph; };
    auto inside_x = [&](float v) { return v >= xr.min - (xr.max - xr.min) * 1e-4f && v <= xr.max + (xr.max - xr.min) * 1e-4f; };
    auto inside_y = [&](float v) { return v >= yr.min - (yr.max - yr.min) * 1e-4f && v <= yr.max + (yr.max - yr.min) * 1e-4f; };
    // Pixel centres of grid lines and ticks, so one-pixel lines stay crisp.
    auto centre = [](float v) { return std::floor(v) + 0.5f; };

    // Grid, then data, then the frame and ticks over them.
    for (const XTick& t : x_ticks)
        if (inside_x(t.value) && categories == 0) AddVLine(f, std::clamp(centre(X(t.value)), px0 + 0.5f, px1 - 0.5f), py0, py1, kGrid);
    for (float v : y_ticks)
        if (inside_y(v)) AddHLine(f, px0, px1, std::clamp(centre(Y(v)), py0 + 0.5f, py1 - 0.5f), kGrid);

    const size_t data_begin = f.Items.size();
    for (const PlotSeries& s : series) {
        const size_t count = std::min(s.X.size(), s.Y.size());
        if (s.Kind == SeriesKind::Bars) {
            const float half = Finite(s.BarWidth) ? std::abs(s.BarWidth) * 0.5f : 0.4f;
            for (size_t i = 0; i < count; ++i) {
                if (!Finite(s.X[i]) || !Finite(s.Y[i])) continue;
                const float x0 = std::clamp(X(s.X[i] - half), px0, px1), x1 = std::clamp(X(s.X[i] + half), px0, px1);
                const float ya = std::clamp(Y(s.Y[i]), py0, py1), yb = std::clamp(Y(0.0f), py0, py1);
                if (x1 - x0 <= 0 || std::abs(yb - ya) <= 0) continue;
                FigRect r;
                r.X = x0;
                r.Y = std::min(ya, yb);
                r.W = x1 - x0;
                r.H = std::abs(yb - ya);
                r.Fill = s.Color;
                f.Add(r);
            }
        } else if (s.Kind == SeriesKind::Points) {
            for (size_t i = 0; i < count; ++i) {
                if (!Finite(s.X[i]) || !Finite(s.Y[i]) || !inside_x(s.X[i]) || !inside_y(s.Y[i])) continue;
                FigCircle c;
                c.X = X(s.X[i]);
                c.Y = Y(s.Y[i]);
                c.R = 2.5f;
                c.Fill = s.Color;
                f.Add(c);
            }
        } else {
            // Segments clipped to the plot area; a NaN or a clipped end starts a new polyline.
            FigPolyline current;
            current.Color = s.Color;
            current.Width = 1.75f;
            if (s.Dashed) current.Dash = 6, current.Gap = 4;  // the window's DashedLine's
            auto flush = [&]() {
                if (current.Points.size() >= 4) f.Add(current);
                current.Points.clear();
            };
            for (size_t i = 0; i + 1 < count; ++i) {
                if (!Finite(s.X[i]) || !Finite(s.Y[i]) || !Finite(s.X[i + 1]) || !Finite(s.Y[i + 1])) {
                    flush();
                    continue;
                }
                float ax = X(s.X[i]), ay = Y(s.Y[i]), bx = X(s.X[i + 1]), by = Y(s.Y[i + 1]);
                const float ox = ax, oy = ay;
                if (!ClipSegment(ax, ay, bx, by, px0, py0, px1, py1)) {
                    flush();
                    continue;
                }
                const bool joined = !current.Points.empty() && ax == ox && ay == oy && current.Points[current.Points.size() - 2] == ax &&
                                    current.Points.back() == ay;
                if (!joined) {
                    flush();
                    current.Points = {ax, ay};
                }
                current.Points.push_back(bx);
                current.Points.push_back(by);
                if (bx != X(s.X[i + 1]) || by != Y(s.Y[i + 1])) flush();  // left the plot area
            }
            flush();
        }
    }

    const size_t data_end = f.Items.size();
    AddOutline(f, px0, py0, pw, ph);
    for (const XTick& t : x_ticks) {
        if (!inside_x(t.value)) continue;
        const float x = std::clamp(centre(X(t.value)), px0 + 0.5f, px1 - 0.5f);
        AddVLine(f, x, py1, py1 + tick, kAxis);
        if (x_vertical) AddText(f, X(t.value), py1 + tick + gap, t.text, fs, TextAlign::Right, true);
        else AddText(f, X(t.value), py1 + tick + gap + fs * 0.6f, t.text, fs, TextAlign::Center);
    }
    for (size_t k = 0; k < y_ticks.size(); ++k) {
        const float v = y_ticks[k];
        if (!inside_y(v)) continue;
        const float y = std::clamp(centre(Y(v)), py0 + 0.5f, py1 - 0.5f);
        AddHLine(f, px0 - tick, px0, y, kAxis);
        AddText(f, px0 - tick - gap, Y(v), y_text[k], fs, TextAlign::Right);
    }
    if (!options.XLabel.empty())
        AddText(f, px0 + pw * 0.5f, py1 + tick + gap + x_label_extent + 6 + caption_h * 0.5f, options.XLabel, label_fs, TextAlign::Center);
    if (!options.YLabel.empty()) AddText(f, kPad + caption_h * 0.5f, py0 + ph * 0.5f, options.YLabel, label_fs, TextAlign::Center, true);
    AddTitle(f, title, px0 + pw * 0.5f, kPad + title_fs * 0.7f, title_fs);

    // Legend: top right inside the axes, for named series, each name up to kLegendChars characters
    // (a run's "vanilla (compare run), mean of every head" and "temperatures and what-ifs: SSA with
    // what-ifs - tau = 1" were cut at 40).
    constexpr size_t kLegendChars = 64;
    std::vector<const PlotSeries*> named;
    float name_w = 0;
    for (const PlotSeries& s : series)
        if (!s.Name.empty()) {
            named.push_back(&s);
            name_w = std::max(name_w, MeasureText(EllipsizeChars(s.Name, kLegendChars), fs));
        }
    if (!named.empty()) {
        const float row_h = std::ceil(fs * 1.5f), sample_w = 20;
        const float box_w = std::ceil(8 + sample_w + 6 + name_w + 8), box_h = std::ceil(6 + row_h * named.size() + 2);
        // Top right, unless another corner hides less of the data (then the first such in the
        // order top left, bottom right, bottom left).
        const float corners[4][2] = {{std::floor(px1 - 8 - box_w), py0 + 8},
                                     {px0 + 8, py0 + 8},
                                     {std::floor(px1 - 8 - box_w), std::floor(py1 - 8 - box_h)},
                                     {px0 + 8, std::floor(py1 - 8 - box_h)}};
        float best_cost = INFINITY, bx = corners[0][0], by = corners[0][1];
        for (const auto& corner : corners) {
            const float cost = HiddenData(f, data_begin, data_end, corner[0] - 2, corner[1] - 2, corner[0] + box_w + 2, corner[1] + box_h + 2);
            if (cost < best_cost) best_cost = cost, bx = corner[0], by = corner[1];
        }
        // Every corner hides some data (a run's four curves spread over the axes): the legend goes
        // right of the axes, the figure wider by it.
        if (best_cost > 0) {
            bx = std::ceil(px1 + 12);
            by = py0;
            f.Width = std::max(f.Width, static_cast<int>(std::ceil(bx + box_w + kPad)));
        }
        FigRect box;
        box.X = bx;
        box.Y = by;
        box.W = box_w;
        box.H = box_h;
        box.Fill = {255, 255, 255, 230};
        box.Stroke = {204, 204, 204, 255};
        f.Add(box);
        for (size_t k = 0; k < named.size(); ++k) {
            const PlotSeries& s = *named[k];
            const float cy = by + 4 + row_h * (k + 0.5f), sx = bx + 8;
            if (s.Kind == SeriesKind::Bars) {
                FigRect r;
                r.X = sx + 4;
                r.Y = cy - 5;
                r.W = sample_w - 8;
                r.H = 10;
                r.Fill = s.Color;
                f.Add(r);
            } else if (s.Kind == SeriesKind::Points) {
                FigCircle c;
                c.X = sx + sample_w * 0.5f;
                c.Y = cy;
                c.R = 3;
                c.Fill = s.Color;
                f.Add(c);
            } else {
                FigPolyline l;
                l.Points = {sx, centre(cy), sx + sample_w, centre(cy)};
                l.Color = s.Color;
                l.Width = 1.75f;
                if (s.Dashed) l.Dash = 6, l.Gap = 4;
                f.Add(l);
            }
            AddText(f, sx + sample_w + 6, cy, EllipsizeChars(s.Name, kLegendChars), fs);
        }
    }
    return f;
}

//-------------------------------------------------------------------------------------------------
// [SECTION] Panels side by side
//-------------------------------------------------------------------------------------------------

namespace {

void Shift(FigItem& item, float dx, float dy) {
    std::visit(
        [&](auto& x) {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, FigPolyline>) {
                for (size_t k = 0; k + 1 < x.Points.size(); k += 2) x.Points[k] += dx, x.Points[k + 1] += dy;
            } else {
                x.X += dx, x.Y += dy;
            }
        },
        item);
}

}  // namespace

Figure Beside(const std::vector<Figure>& panels, const std::string& title, const FigureText& text, float gap, float font_size) {
    Figure f;
    f.Title = title;
    font_size = text.Size(font_size);
    // A title wider than the panels wraps at its words (TitleLines), widening the figure up to
    // kOneLineTitleWidth, the panels centred under it.
    float panels_w = 0;
    for (const Figure& p : panels)
        if (p.Width > 0 && p.Height > 0) panels_w += (panels_w > 0 ? gap : 0.0f) + p.Width;
    const std::vector<std::string> lines = TitleLines(text.Shown(title), panels_w - 2 * font_size, font_size, kOneLineTitleWidth, /*bold=*/true);
    const float line_h = std::ceil(font_size * 1.4f);
    const float title_h = lines.empty() ? 0.0f : std::ceil(font_size * 2.0f) + line_h * static_cast<float>(lines.size() - 1);
    float title_w = 0;
    for (const std::string& line : lines) title_w = std::max(title_w, MeasureText(line, font_size, /*bold=*/true) + 2 * font_size);
    float x = std::max(0.0f, std::floor((title_w - panels_w) * 0.5f));
    const float left = x;
    int height = 0;
    for (const Figure& p : panels) {
        if (p.Width <= 0 || p.Height <= 0) continue;
        if (x > left) x += gap;
        for (FigItem item : p.Items) {
            Shift(item, x, title_h);
            f.Items.push_back(std::move(item));
        }
        x += p.Width;
        height = std::max(height, p.Height);
    }
    f.Width = static_cast<int>(std::ceil(std::max(x + left, title_w)));
    f.Height = height + static_cast<int>(title_h);
    for (size_t i = 0; i < lines.size(); ++i) {
        FigText t;
        t.X = f.Width * 0.5f;
        t.Y = std::ceil(font_size * 2.0f) * 0.5f + line_h * static_cast<float>(i);
        t.Text = lines[i];
        t.Size = font_size;
        t.Bold = true;
        t.Align = TextAlign::Center;
        f.Items.insert(f.Items.begin() + static_cast<std::ptrdiff_t>(i), FigItem(std::move(t)));
    }
    return f;
}

}  // namespace viz
