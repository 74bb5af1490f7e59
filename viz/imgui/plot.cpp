// The window's plots (viz/imgui/plot.h).
//
// Index of this file:
// [SECTION] Theme, and the description as the drawing code reads it
// [SECTION] Ranges, ticks and numbers
// [SECTION] A plot's frame: axes, ticks, legend, reference lines
// [SECTION] One function per kind of series
// [SECTION] DrawPlot

#include "viz/imgui/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "viz/imgui/widgets.h"
#include "viz/ticks.h"

namespace viz {
namespace {

//-------------------------------------------------------------------------------------------------
// [SECTION] Theme, and the description as the drawing code reads it
//-------------------------------------------------------------------------------------------------

constexpr float kInf = std::numeric_limits<float>::infinity();

const ImU32 kGridColor = IM_COL32(255, 255, 255, 22);
const ImU32 kAxisColor = IM_COL32(255, 255, 255, 90);
const ImU32 kLineColor = IM_COL32(255, 196, 64, 230);      // Options.YLine: amber on the dark theme (a file's is red)
const ImU32 kMarkerColor = IM_COL32(255, 255, 255, 110);   // Options.XMarker
const ImU32 kHighlightColor = IM_COL32(255, 230, 90, 255);
const ImU32 kHoverBand = IM_COL32(255, 255, 255, 28);

ImU32 WithAlpha(ImU32 color, float alpha) {
    const unsigned a = static_cast<unsigned>(std::clamp(alpha, 0.0f, 1.0f) * 255.0f + 0.5f);
    return (color & ~IM_COL32_A_MASK) | (a << IM_COL32_A_SHIFT);
}

// The window's view of a plot: the description's fields as the drawing code reads them.
struct PlotAxes {
    const char* x_label = nullptr;  // centred under the x axis
    const char* y_label = nullptr;  // above the y axis, top left
    std::optional<Range> x_range;
    std::optional<Range> y_range;
    std::optional<float> y_line;         // a horizontal reference line, e.g. a threshold
    const char* y_line_label = nullptr;  // written at the line's right end
    std::optional<float> x_line;         // a vertical marker line, e.g. the selected position
    bool legend_for_one = false;         // PlotOptions::LegendForOne
};

PlotAxes AxesOf(const PlotOptions& o) {
    PlotAxes axes;
    axes.x_label = o.XLabel.empty() ? nullptr : o.XLabel.c_str();
    axes.y_label = o.YLabel.empty() ? nullptr : o.YLabel.c_str();
    axes.x_range = o.XRange;
    axes.y_range = o.YRange;
    if (o.YLine) {
        axes.y_line = o.YLine->Value;
        axes.y_line_label = o.YLine->Label.empty() ? nullptr : o.YLine->Label.c_str();
    }
    axes.x_line = o.XMarker;
    axes.legend_for_one = o.LegendForOne;
    return axes;
}

ImU32 SeriesColorOf(const PlotSeries& s) { return ToImU32(s.Color); }
const char* LabelOf(const PlotSeries& s) { return s.Name.c_str(); }
int CountOf(const PlotSeries& s) { return static_cast<int>(s.X.empty() ? s.Y.size() : std::min(s.X.size(), s.Y.size())); }

//-------------------------------------------------------------------------------------------------
// [SECTION] Ranges, ticks and numbers
//-------------------------------------------------------------------------------------------------

// The finite min..max of some values.
struct Extent {
    float lo = kInf, hi = -kInf;
    void Add(float v) {
        if (!std::isfinite(v)) return;
        lo = std::min(lo, v);
        hi = std::max(hi, v);
    }
    bool Valid() const { return lo <= hi; }
};

// The extent widened by a fraction of its span on both sides, as the exported figures do (PaddedRange).
Range Padded(const Extent& e, float fraction = 0.05f) { return PaddedRange(e.lo, e.hi, fraction); }

// Tick positions at "nice" steps (1, 2, 5 times a power of ten).
struct Ticks {
    std::vector<double> values;
    double step = 1;
};

Ticks MakeTicks(Range r, float pixels, float min_spacing) {
    Ticks t;
    const double span = static_cast<double>(r.max) - r.min;
    if (!(span > 0) || !std::isfinite(span)) return t;
    const int target = std::max(2, static_cast<int>(pixels / std::max(min_spacing, 1.0f)));
    const double raw = span / target;
    const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
    const double f = raw / magnitude;
    t.step = (f < 1.5 ? 1.0 : f < 3.0 ? 2.0 : f < 7.0 ? 5.0 : 10.0) * magnitude;
    const double first = std::ceil(r.min / t.step - 1e-9) * t.step;
    for (double v = first; v <= r.max + t.step * 1e-9 && t.values.size() < 64; v += t.step)
        t.values.push_back(std::abs(v) < t.step * 1e-9 ? 0.0 : v);
    return t;
}

// Their labels as the exported figures write them (viz::FormatTicks): no two neighbours read the
// same (an entropy from 2.38175 to 2.38193 read "2.38" at every tick).
std::vector<std::string> TickLabels(const Ticks& t) { return FormatTicks(std::vector<float>(t.values.begin(), t.values.end())); }

// A value for a read-out.
std::string FormatValue(double v) {
    char buf[32];
    if (std::isnan(v)) return "NaN";
    std::snprintf(buf, sizeof buf, "%.4g", v);
    return buf;
}

struct LegendItem {
    const char* label;
    ImU32 color;
};

//-------------------------------------------------------------------------------------------------
// [SECTION] A plot's frame: axes, ticks, legend, reference lines
//-------------------------------------------------------------------------------------------------

// One plot being drawn: its rectangles, ranges and the mouse.
struct Frame {
    ImDrawList* draw = nullptr;
    ImVec2 outer_min, outer_max;
    ImVec2 min, max;  // the plot area
    Range xr, yr;
    bool hovered = false, clicked = false;
    ImVec2 mouse;

    float X(double v) const { return min.x + static_cast<float>((v - xr.min) / (static_cast<double>(xr.max) - xr.min)) * (max.x - min.x); }
    float Y(double v) const { return max.y - static_cast<float>((v - yr.min) / (static_cast<double>(yr.max) - yr.min)) * (max.y - min.y); }
    double XValue(float px) const { return xr.min + (static_cast<double>(px) - min.x) / (max.x - min.x) * (static_cast<double>(xr.max) - xr.min); }
    bool MouseInPlot() const { return hovered && mouse.x >= min.x && mouse.x <= max.x && mouse.y >= min.y && mouse.y <= max.y; }
    float Width() const { return max.x - min.x; }
    float Height() const { return max.y - min.y; }
};

// Reserves the widget, lays out margins for tick labels, axis labels and legend, and draws the
// frame, grid and ticks. numeric_x: false for bar charts, which label their own slots in
// category_rows rows under the axis. The caller draws the data, then calls EndPlot.
Frame BeginPlot(const char* id, ImVec2 size, Range xr, Range yr, const PlotAxes& axes, const std::vector<LegendItem>& legend,
                bool numeric_x = true, int category_rows = 0) {
    Frame f;
    ImGui::PushID(id);
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    if (size.x <= 0.0f) size.x = avail.x + size.x;
    if (size.y <= 0.0f) size.y = 220.0f;
    size.x = std::max(size.x, 60.0f);
    size.y = std::max(size.y, 60.0f);
    f.outer_min = ImGui::GetCursorScreenPos();
    f.outer_max = ImVec2(f.outer_min.x + size.x, f.outer_min.y + size.y);
    ImGui::InvisibleButton("##plot", size);
    f.hovered = ImGui::IsItemHovered();
    f.clicked = f.hovered && ImGui::IsItemClicked(ImGuiMouseButton_Left);
    f.mouse = ImGui::GetIO().MousePos;
    f.draw = ImGui::GetWindowDrawList();
    f.xr = xr;
    f.yr = yr;
    if (!(f.xr.max > f.xr.min)) f.xr = {f.xr.min - 0.5f, f.xr.min + 0.5f};
    if (!(f.yr.max > f.yr.min)) f.yr = {f.yr.min - 0.5f, f.yr.min + 0.5f};
    if (!std::isfinite(f.xr.min) || !std::isfinite(f.xr.max)) f.xr = {0.0f, 1.0f};
    if (!std::isfinite(f.yr.min) || !std::isfinite(f.yr.max)) f.yr = {0.0f, 1.0f};

    const float line = ImGui::GetTextLineHeight();
    const float pad = 4.0f;
    const ImU32 text = ImGui::GetColorU32(ImGuiCol_Text);
    const ImU32 dim = ImGui::GetColorU32(ImGuiCol_TextDisabled);

    // Top: the y label on the left, the legend on the right, its items in as many rows as the width
    // needs (a run's "compare run, mean of every head" was cut at the pane's edge); the y label on a
    // row of its own when the legend's first row does not fit beside it.
    auto item_w = [](const LegendItem& item) { return 16.0f + ImGui::CalcTextSize(item.label).x + 12.0f; };
    std::vector<size_t> row_start;  // the legend's rows: each one's first item
    std::vector<float> row_w;
    for (size_t i = 0; i < legend.size(); ++i) {
        if (row_start.empty() || row_w.back() + item_w(legend[i]) > size.x) row_start.push_back(i), row_w.push_back(0.0f);
        row_w.back() += item_w(legend[i]);
    }
    const float y_label_w = axes.y_label ? ImGui::CalcTextSize(axes.y_label).x : 0.0f;
    const int legend_rows = static_cast<int>(row_start.size());
    const bool label_alone = axes.y_label && (legend.empty() || y_label_w + row_w[0] + 16.0f > size.x);
    const int top_rows = legend_rows + (label_alone ? 1 : 0);
    // An x marker's triangle above the plot gets its own room (it sat on the legend's last words).
    const float marker = axes.x_line ? std::max(3.0f, ImGui::GetFontSize() * 0.3f) + 2.0f : 0.0f;
    const float top = (top_rows > 0 ? top_rows * line + pad + 2.0f : pad + line * 0.5f) + marker;
    const int bottom_rows = (numeric_x ? 1 : category_rows) + (axes.x_label ? 1 : 0);
    const float bottom = bottom_rows * line + pad + 4.0f;
    const float plot_h = std::max(size.y - top - bottom, 10.0f);

    const Ticks y_ticks = MakeTicks(f.yr, plot_h, line * 1.9f);
    const std::vector<std::string> y_text = TickLabels(y_ticks);
    float y_text_w = 0;
    for (const std::string& label : y_text) y_text_w = std::max(y_text_w, ImGui::CalcTextSize(label.c_str()).x);
    const float left = y_text_w + 9.0f;
    const float right = numeric_x ? 10.0f : 4.0f;
    f.min = ImVec2(f.outer_min.x + left, f.outer_min.y + top);
    f.max = ImVec2(f.outer_max.x - right, f.outer_min.y + top + plot_h);
    if (f.max.x < f.min.x + 10.0f) f.max.x = f.min.x + 10.0f;

    ImDrawList* d = f.draw;
    d->AddRectFilled(f.min, f.max, ImGui::GetColorU32(ImGuiCol_FrameBg, 0.45f));

    // y grid and tick labels.
    for (size_t i = 0; i < y_ticks.values.size(); ++i) {
        const float y = std::round(f.Y(y_ticks.values[i]));
        d->AddLine(ImVec2(f.min.x, y), ImVec2(f.max.x, y), kGridColor);
        d->AddLine(ImVec2(f.min.x - 4.0f, y), ImVec2(f.min.x, y), kAxisColor);
        const ImVec2 ts = ImGui::CalcTextSize(y_text[i].c_str());
        d->AddText(ImVec2(f.min.x - 6.0f - ts.x, y - ts.y * 0.5f), dim, y_text[i].c_str());
    }

    // x grid and tick labels, spaced so labels never touch.
    if (numeric_x) {
        float spacing = 60.0f;
        Ticks x_ticks;
        std::vector<std::string> x_text;
        for (int pass = 0; pass < 3; ++pass) {
            x_ticks = MakeTicks(f.xr, f.Width(), spacing);
            x_text = TickLabels(x_ticks);
            float widest = 0;
            for (const std::string& label : x_text) widest = std::max(widest, ImGui::CalcTextSize(label.c_str()).x);
            const float px_step = x_ticks.values.size() > 1 ? f.X(x_ticks.values[1]) - f.X(x_ticks.values[0]) : kInf;
            if (px_step >= widest + 14.0f) break;
            spacing = (widest + 14.0f) * 1.6f;
        }
        for (size_t i = 0; i < x_ticks.values.size(); ++i) {
            const float x = std::round(f.X(x_ticks.values[i]));
            d->AddLine(ImVec2(x, f.min.y), ImVec2(x, f.max.y), kGridColor);
            d->AddLine(ImVec2(x, f.max.y), ImVec2(x, f.max.y + 4.0f), kAxisColor);
            const ImVec2 ts = ImGui::CalcTextSize(x_text[i].c_str());
            float tx = x - ts.x * 0.5f;
            tx = std::clamp(tx, f.outer_min.x, f.outer_max.x - ts.x);
            d->AddText(ImVec2(tx, f.max.y + 5.0f), dim, x_text[i].c_str());
        }
    }
    d->AddLine(ImVec2(f.min.x, f.min.y), ImVec2(f.min.x, f.max.y), kAxisColor);
    d->AddLine(ImVec2(f.min.x, f.max.y), ImVec2(f.max.x, f.max.y), kAxisColor);

    if (axes.x_label) {
        const ImVec2 ts = ImGui::CalcTextSize(axes.x_label);
        const float y = f.max.y + 5.0f + (bottom_rows - 1) * line;
        d->AddText(ImVec2(std::max(f.outer_min.x, (f.min.x + f.max.x - ts.x) * 0.5f), y), text, axes.x_label);
    }
    if (axes.y_label) d->AddText(ImVec2(f.outer_min.x, f.outer_min.y + 1.0f), text, axes.y_label);
    for (int r = 0; r < legend_rows; ++r) {  // each row right-aligned
        float x = std::max(f.outer_max.x - row_w[r] + 12.0f, f.outer_min.x);
        const float y = f.outer_min.y + 1.0f + (top_rows - legend_rows + r) * line;
        const size_t end = r + 1 < legend_rows ? row_start[r + 1] : legend.size();
        for (size_t i = row_start[r]; i < end; ++i) {
            d->AddRectFilled(ImVec2(x, y + line * 0.5f - 2.0f), ImVec2(x + 12.0f, y + line * 0.5f + 2.0f), legend[i].color);
            d->AddText(ImVec2(x + 16.0f, y), text, legend[i].label);
            x += item_w(legend[i]);
        }
    }
    d->PushClipRect(ImVec2(f.min.x, f.min.y - 1.0f), ImVec2(f.max.x + 1.0f, f.max.y + 1.0f), true);
    return f;
}

void DashedLine(ImDrawList* d, ImVec2 a, ImVec2 b, ImU32 color, float thickness, float dash = 6.0f, float gap = 4.0f) {
    const float dx = b.x - a.x, dy = b.y - a.y, len = std::sqrt(dx * dx + dy * dy);
    if (len <= 0) return;
    for (float t = 0; t < len; t += dash + gap) {
        const float e = std::min(t + dash, len);
        d->AddLine(ImVec2(a.x + dx * t / len, a.y + dy * t / len), ImVec2(a.x + dx * e / len, a.y + dy * e / len), color, thickness);
    }
}

// Reference lines on top of the data, then the label of the y line outside the clip.
void EndPlot(const Frame& f, const PlotAxes& axes) {
    ImDrawList* d = f.draw;
    // The marker a pixel inside the frame (at the last step it fell on the edge, clipped), with a
    // notch above the plot that no line covers.
    const bool x_line_visible = axes.x_line && std::isfinite(*axes.x_line) && f.X(*axes.x_line) >= f.min.x - 0.5f && f.X(*axes.x_line) <= f.max.x + 0.5f;
    const float x_line = x_line_visible ? std::clamp(std::round(f.X(*axes.x_line)), f.min.x + 1.0f, f.max.x - 2.0f) : 0.0f;
    if (x_line_visible) d->AddLine(ImVec2(x_line + 0.5f, f.min.y), ImVec2(x_line + 0.5f, f.max.y), kMarkerColor, 1.0f);
    const bool y_line_visible = axes.y_line && std::isfinite(*axes.y_line) && *axes.y_line >= f.yr.min && *axes.y_line <= f.yr.max;
    if (y_line_visible) DashedLine(d, ImVec2(f.min.x, f.Y(*axes.y_line)), ImVec2(f.max.x, f.Y(*axes.y_line)), kLineColor, 1.5f);
    d->PopClipRect();
    if (x_line_visible) {
        const float s = std::max(3.0f, ImGui::GetFontSize() * 0.3f);
        d->AddTriangleFilled(ImVec2(x_line + 0.5f - s, f.min.y - s - 1.0f), ImVec2(x_line + 0.5f + s, f.min.y - s - 1.0f),
                             ImVec2(x_line + 0.5f, f.min.y - 1.0f), IM_COL32(255, 255, 255, 200));
    }
    if (y_line_visible && axes.y_line_label) {
        const ImVec2 ts = ImGui::CalcTextSize(axes.y_line_label);
        const float y = f.Y(*axes.y_line);
        ImVec2 p(f.max.x - ts.x - 4.0f, y - ts.y - 2.0f);
        if (p.y < f.min.y) p.y = y + 2.0f;
        d->AddRectFilled(ImVec2(p.x - 2.0f, p.y), ImVec2(p.x + ts.x + 2.0f, p.y + ts.y), IM_COL32(20, 20, 24, 190), 2.0f);
        d->AddText(p, kLineColor, axes.y_line_label);
    }
    ImGui::PopID();
}

void NoData(const Frame& f) {
    const char* msg = "no data";
    const ImVec2 ts = ImGui::CalcTextSize(msg);
    f.draw->AddText(ImVec2((f.min.x + f.max.x - ts.x) * 0.5f, (f.min.y + f.max.y - ts.y) * 0.5f), ImGui::GetColorU32(ImGuiCol_TextDisabled), msg);
}

// The series' names and colours, when there are several to tell apart (or one that asks).
std::vector<LegendItem> Legend(const std::vector<PlotSeries>& series, const PlotAxes& axes) {
    std::vector<LegendItem> items;
    if (series.size() < 2 && !(axes.legend_for_one && series.size() == 1 && !series[0].Name.empty())) return items;
    for (const PlotSeries& s : series) items.push_back({LabelOf(s), SeriesColorOf(s)});
    return items;
}

float SeriesX(const PlotSeries& s, int i) { return s.X.empty() ? static_cast<float>(i + 1) : s.X[i]; }

// A coloured bullet and text in a tooltip.
void TooltipSeriesLine(ImU32 color, const char* label, const std::string& value) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::ColorConvertU32ToFloat4(WithAlpha(color, 1.0f)));
    ImGui::Bullet();
    ImGui::PopStyleColor();
    ImGui::SameLine();
    if (label && *label) ImGui::Text("%s: %s", label, value.c_str());
    else ImGui::TextUnformatted(value.c_str());
}

//-------------------------------------------------------------------------------------------------
// [SECTION] One function per kind of series
//-------------------------------------------------------------------------------------------------

PlotHit LinePlot(const char* id, ImVec2 size, const std::vector<PlotSeries>& series, const PlotAxes& axes) {
    PlotHit hit;
    const int series_count = static_cast<int>(series.size());
    Extent ex, ey;
    int points = 0;
    for (const PlotSeries& ps : series) {
        for (int i = 0; i < CountOf(ps); ++i) {
            const float x = SeriesX(ps, i), y = ps.Y[i];
            if (!std::isfinite(x) || !std::isfinite(y)) continue;
            ex.Add(x);
            ey.Add(y);
            ++points;
        }
    }
    if (axes.y_line) ey.Add(*axes.y_line);
    Range xr = axes.x_range ? *axes.x_range : (ex.Valid() && ex.lo < ex.hi ? Range{ex.lo, ex.hi} : Padded(ex));
    Range yr = axes.y_range ? *axes.y_range : Padded(ey, 0.08f);
    Frame f = BeginPlot(id, size, xr, yr, axes, Legend(series, axes));
    if (points == 0) NoData(f);

    std::vector<ImVec2> run;
    for (const PlotSeries& ps : series) {
        const ImU32 color = SeriesColorOf(ps);
        const int count = CountOf(ps);
        const bool markers = count > 0 && count * 7.0f < f.Width();
        auto flush = [&] {
            if (run.size() == 1) {
                f.draw->AddCircleFilled(run[0], 2.0f, color);
            } else if (ps.Dashed) {  // as a file draws it (one head's line among the layers' means)
                for (size_t i = 1; i < run.size(); ++i) DashedLine(f.draw, run[i - 1], run[i], color, 1.6f);
            } else if (run.size() > 1) {
                f.draw->AddPolyline(run.data(), static_cast<int>(run.size()), color, 0, 1.6f);
            }
            run.clear();
        };
        for (int i = 0; i < count; ++i) {
            const float x = SeriesX(ps, i), y = ps.Y[i];
            if (!std::isfinite(x) || !std::isfinite(y)) {
                flush();
                continue;
            }
            run.emplace_back(f.X(x), f.Y(y));
            if (markers) f.draw->AddCircleFilled(run.back(), 2.2f, color);
        }
        flush();
    }

    if (f.MouseInPlot() && points > 0) {
        // Every series at the x nearest the mouse; the reported series is the nearest on screen.
        const double mx = f.XValue(f.mouse.x);
        std::vector<int> nearest(series_count, -1);
        float best_dist = kInf;
        double shown_x = mx;
        for (int s = 0; s < series_count; ++s) {
            const PlotSeries& ps = series[s];
            double best_dx = kInf;
            for (int i = 0; i < CountOf(ps); ++i) {
                const float x = SeriesX(ps, i);
                if (!std::isfinite(x) || !std::isfinite(ps.Y[i])) continue;
                const double dx = std::abs(x - mx);
                if (dx < best_dx) best_dx = dx, nearest[s] = i;
            }
            if (nearest[s] < 0) continue;
            const ImVec2 p(f.X(SeriesX(ps, nearest[s])), f.Y(ps.Y[nearest[s]]));
            const float dist = std::hypot(p.x - f.mouse.x, p.y - f.mouse.y);
            if (dist < best_dist) {
                best_dist = dist;
                hit.index = nearest[s];
                hit.series = s;
                shown_x = SeriesX(ps, nearest[s]);
            }
        }
        f.draw->AddLine(ImVec2(f.X(shown_x), f.min.y), ImVec2(f.X(shown_x), f.max.y), kHoverBand);
        for (int s = 0; s < series_count; ++s) {
            if (nearest[s] < 0) continue;
            const ImVec2 p(f.X(SeriesX(series[s], nearest[s])), f.Y(series[s].Y[nearest[s]]));
            f.draw->AddCircle(p, 4.5f, SeriesColorOf(series[s]), 0, 1.5f);
        }
        hit.clicked = f.clicked && hit.index >= 0;
        ImGui::BeginTooltip();
        ImGui::Text("%s: %s", axes.x_label ? axes.x_label : "x", FormatValue(shown_x).c_str());
        for (int s = 0; s < series_count; ++s) {
            if (nearest[s] < 0) continue;
            std::string value = FormatValue(series[s].Y[nearest[s]]);
            if (SeriesX(series[s], nearest[s]) != shown_x) value += " (at " + FormatValue(SeriesX(series[s], nearest[s])) + ")";
            TooltipSeriesLine(SeriesColorOf(series[s]), LabelOf(series[s]), value);
        }
        ImGui::EndTooltip();
    }
    EndPlot(f, axes);
    return hit;
}

PlotHit Histogram(const char* id, ImVec2 size, const std::vector<PlotSeries>& series, int bins, const PlotAxes& axes) {
    PlotHit hit;
    const int series_count = static_cast<int>(series.size());
    Extent ex;
    int finite = 0, skipped = 0;
    for (const PlotSeries& ps : series) {
        for (float v : ps.Y) {
            if (std::isfinite(v)) ex.Add(v), ++finite;
            else ++skipped;
        }
    }
    if (bins <= 0) bins = std::clamp(static_cast<int>(std::ceil(std::log2(std::max(finite, 1)) + 1.0)), 5, 40);
    Range br = axes.x_range ? *axes.x_range : Padded(ex, 0.0f);
    if (!(br.max > br.min)) br = {br.min - 0.5f, br.min + 0.5f};
    double width = (static_cast<double>(br.max) - br.min) / bins;
    if (!axes.x_range && ex.Valid() && ex.lo < ex.hi) {
        // Bin edges on round numbers: a nice width, the first edge a multiple of it.
        const Ticks nice = MakeTicks(br, static_cast<float>(bins), 1.0f);
        width = nice.step;
        const double lo = std::floor(ex.lo / width) * width;
        bins = std::max(1, static_cast<int>(std::floor((ex.hi - lo) / width)) + 1);
        br = {static_cast<float>(lo), static_cast<float>(lo + bins * width)};
    }

    // counts[s][b]; values outside an explicit range are left out.
    std::vector<std::vector<int>> counts(series_count, std::vector<int>(bins, 0));
    std::vector<int> totals(series_count, 0);
    int max_count = 0;
    for (int s = 0; s < series_count; ++s) {
        for (float v : series[s].Y) {
            if (!std::isfinite(v) || v < br.min || v > br.max) continue;
            const int b = std::clamp(static_cast<int>((v - br.min) / width), 0, bins - 1);
            max_count = std::max(max_count, ++counts[s][b]);
            ++totals[s];
        }
    }
    PlotAxes a = axes;
    if (!a.y_label) a.y_label = "count";
    const Range yr = axes.y_range ? *axes.y_range : Range{0.0f, std::max(1.0f, max_count * 1.1f)};
    Frame f = BeginPlot(id, size, br, yr, a, Legend(series, a));
    if (finite == 0) NoData(f);

    int hovered_bin = -1;
    if (f.MouseInPlot() && finite > 0) {
        hovered_bin = static_cast<int>((f.XValue(f.mouse.x) - br.min) / width);
        if (hovered_bin < 0 || hovered_bin >= bins) hovered_bin = -1;
    }
    if (hovered_bin >= 0)
        f.draw->AddRectFilled(ImVec2(f.X(br.min + hovered_bin * width), f.min.y), ImVec2(f.X(br.min + (hovered_bin + 1) * width), f.max.y), kHoverBand);
    const float fill_alpha = series_count > 1 ? 0.45f : 0.75f;
    for (int s = 0; s < series_count; ++s) {
        const ImU32 color = SeriesColorOf(series[s]);
        for (int b = 0; b < bins; ++b) {
            if (counts[s][b] == 0) continue;
            const ImVec2 p0(f.X(br.min + b * width) + 0.5f, f.Y(counts[s][b]));
            const ImVec2 p1(f.X(br.min + (b + 1) * width) - 0.5f, f.Y(0));
            f.draw->AddRectFilled(p0, p1, WithAlpha(color, fill_alpha));
            f.draw->AddRect(p0, p1, color);
        }
    }
    if (hovered_bin >= 0) {
        hit.index = hovered_bin;
        hit.series = 0;
        hit.clicked = f.clicked;
        ImGui::BeginTooltip();
        ImGui::Text("%s [%s, %s)", axes.x_label ? axes.x_label : "bin", FormatValue(br.min + hovered_bin * width).c_str(),
                    FormatValue(br.min + (hovered_bin + 1) * width).c_str());
        for (int s = 0; s < series_count; ++s) {
            char buf[64];
            const int c = counts[s][hovered_bin];
            std::snprintf(buf, sizeof buf, "%d (%.1f%%)", c, totals[s] ? 100.0 * c / totals[s] : 0.0);
            TooltipSeriesLine(SeriesColorOf(series[s]), LabelOf(series[s]), buf);
        }
        if (skipped) ImGui::TextDisabled("%d non-finite values left out", skipped);
        ImGui::EndTooltip();
    }
    EndPlot(f, a);
    return hit;
}

// Every series' points; the highlighted point (of the first series) ringed and labelled.
PlotHit ScatterPlot(const char* id, ImVec2 size, const std::vector<PlotSeries>& series, int highlighted, const PlotAxes& axes) {
    PlotHit hit;
    Extent ex, ey;
    for (const PlotSeries& ps : series)
        for (int i = 0; i < CountOf(ps); ++i) {
            if (!std::isfinite(SeriesX(ps, i)) || !std::isfinite(ps.Y[i])) continue;
            ex.Add(SeriesX(ps, i));
            ey.Add(ps.Y[i]);
        }
    if (axes.y_line) ey.Add(*axes.y_line);
    const Range xr = axes.x_range ? *axes.x_range : Padded(ex, 0.08f);
    const Range yr = axes.y_range ? *axes.y_range : Padded(ey, 0.1f);
    Frame f = BeginPlot(id, size, xr, yr, axes, Legend(series, axes));
    if (!ex.Valid()) NoData(f);

    float best = 10.0f;  // pick radius in pixels
    for (int s = 0; s < static_cast<int>(series.size()); ++s) {
        const PlotSeries& ps = series[s];
        const ImU32 color = SeriesColorOf(ps);
        for (int i = 0; i < CountOf(ps); ++i) {
            if (!std::isfinite(SeriesX(ps, i)) || !std::isfinite(ps.Y[i])) continue;
            const ImVec2 p(f.X(SeriesX(ps, i)), f.Y(ps.Y[i]));
            f.draw->AddCircleFilled(p, 3.5f, WithAlpha(color, 0.8f));
            if (f.MouseInPlot()) {
                const float dist = std::hypot(p.x - f.mouse.x, p.y - f.mouse.y);
                if (dist < best) best = dist, hit.index = i, hit.series = s;
            }
        }
    }
    auto label = [&](const PlotSeries& ps, int i) { return i < static_cast<int>(ps.Labels.size()) ? ps.Labels[i].c_str() : nullptr; };
    const PlotSeries* first = series.empty() ? nullptr : &series[0];
    if (first && highlighted >= 0 && highlighted < CountOf(*first) && std::isfinite(SeriesX(*first, highlighted)) &&
        std::isfinite(first->Y[highlighted])) {
        const ImVec2 p(f.X(SeriesX(*first, highlighted)), f.Y(first->Y[highlighted]));
        f.draw->AddCircleFilled(p, 4.5f, kHighlightColor);
        f.draw->AddCircle(p, 8.0f, kHighlightColor, 0, 2.0f);
        if (const char* text = label(*first, highlighted)) {
            const ImVec2 ts = ImGui::CalcTextSize(text);
            ImVec2 t(p.x + 10.0f, p.y - ts.y - 4.0f);
            if (t.x + ts.x > f.max.x) t.x = p.x - 10.0f - ts.x;
            if (t.y < f.min.y) t.y = p.y + 4.0f;
            f.draw->AddRectFilled(ImVec2(t.x - 2.0f, t.y), ImVec2(t.x + ts.x + 2.0f, t.y + ts.y), IM_COL32(20, 20, 24, 200), 2.0f);
            f.draw->AddText(t, kHighlightColor, text);
        }
    }
    if (hit.index >= 0) {
        const PlotSeries& ps = series[hit.series];
        const ImVec2 p(f.X(SeriesX(ps, hit.index)), f.Y(ps.Y[hit.index]));
        f.draw->AddCircle(p, 6.0f, IM_COL32(255, 255, 255, 220), 0, 1.5f);
        hit.clicked = f.clicked;
        ImGui::BeginTooltip();
        if (const char* text = label(ps, hit.index)) ImGui::TextUnformatted(text);
        ImGui::Text("%s: %s", axes.x_label ? axes.x_label : "x", FormatValue(SeriesX(ps, hit.index)).c_str());
        ImGui::Text("%s: %s", axes.y_label ? axes.y_label : "y", FormatValue(ps.Y[hit.index]).c_str());
        ImGui::EndTooltip();
    }
    EndPlot(f, axes);
    return hit;
}

// Bar i of each series in slot i, the series side by side. labels (may be empty) name the slots;
// with groups, a slot's tick reads its place in the group and each group is labelled once.
PlotHit BarChart(const char* id, ImVec2 size, const std::vector<PlotSeries>& series, const std::vector<std::string>& labels,
                 int group_size, const std::vector<std::string>& group_labels, int highlighted, const PlotAxes& axes) {
    PlotHit hit;
    const int series_count = static_cast<int>(series.size());
    int count = series_count > 0 ? static_cast<int>(series[0].Y.size()) : 0;
    for (const PlotSeries& ps : series) count = std::min(count, static_cast<int>(ps.Y.size()));
    Extent ey;
    for (const PlotSeries& ps : series)
        for (int i = 0; i < count; ++i) ey.Add(ps.Y[i]);
    if (axes.y_line) ey.Add(*axes.y_line);
    Range yr;
    if (axes.y_range) {
        yr = *axes.y_range;
    } else {
        const float lo = ey.Valid() ? std::min(0.0f, ey.lo) : 0.0f, hi = ey.Valid() ? std::max(0.0f, ey.hi) : 1.0f;
        const float span = hi > lo ? hi - lo : 1.0f;
        yr = {lo < 0 ? lo - span * 0.05f : lo, hi + span * 0.08f};
    }
    const int groups = group_size > 0 ? (count + group_size - 1) / group_size : 0;
    const bool grouped = groups > 0 && static_cast<int>(group_labels.size()) >= groups;
    const bool labelled = static_cast<int>(labels.size()) >= count;
    auto tick_text = [&](int i) {
        if (grouped) return std::to_string(i % group_size);
        return labelled ? labels[i] : std::to_string(i);
    };
    float widest = 0;
    for (int i = 0; i < count; ++i) widest = std::max(widest, ImGui::CalcTextSize(tick_text(i).c_str()).x);
    // Grouped bars too narrow for their own ticks show only the group labels (one row).
    const float estimated_slot = count > 0 ? ((size.x > 0 ? size.x : ImGui::GetContentRegionAvail().x + size.x) - 50.0f) / count : 0.0f;
    const bool bar_ticks = !grouped || estimated_slot >= widest + 4.0f;
    Frame f = BeginPlot(id, size, Range{-0.5f, std::max(count, 1) - 0.5f}, yr, axes, Legend(series, axes), false, grouped && bar_ticks ? 2 : 1);
    if (count == 0) NoData(f);
    const float slot = count > 0 ? f.Width() / count : f.Width();
    const float line = ImGui::GetTextLineHeight();
    const ImU32 dim = ImGui::GetColorU32(ImGuiCol_TextDisabled);

    int hovered = -1, hovered_series = -1;
    if (f.MouseInPlot() && count > 0) {
        hovered = std::clamp(static_cast<int>((f.mouse.x - f.min.x) / slot), 0, count - 1);
        const float inner = slot >= 4.0f ? slot * 0.8f : slot;
        const float rel = (f.mouse.x - (f.min.x + hovered * slot + (slot - inner) * 0.5f)) / inner;
        hovered_series = std::clamp(static_cast<int>(rel * series_count), 0, series_count - 1);
    }
    if (highlighted >= 0 && highlighted < count)
        f.draw->AddRectFilled(ImVec2(f.min.x + highlighted * slot, f.min.y), ImVec2(f.min.x + (highlighted + 1) * slot, f.max.y),
                              IM_COL32(255, 230, 90, 40));
    if (hovered >= 0)
        f.draw->AddRectFilled(ImVec2(f.min.x + hovered * slot, f.min.y), ImVec2(f.min.x + (hovered + 1) * slot, f.max.y), kHoverBand);
    if (grouped) {
        for (int g = group_size; g < count; g += group_size) {
            const float x = std::round(f.min.x + g * slot);
            f.draw->AddLine(ImVec2(x, f.min.y), ImVec2(x, f.max.y), IM_COL32(255, 255, 255, 60));
        }
    }
    const float inner = slot >= 4.0f ? slot * 0.8f : slot;
    const float bar_w = inner / std::max(series_count, 1);
    const float base = f.Y(std::clamp(0.0f, yr.min, yr.max));
    for (int s = 0; s < series_count; ++s) {
        const ImU32 color = SeriesColorOf(series[s]);
        for (int i = 0; i < count; ++i) {
            const float v = series[s].Y[i];
            if (!std::isfinite(v)) continue;
            const bool above = !axes.y_line || v > *axes.y_line;
            const float x0 = f.min.x + i * slot + (slot - inner) * 0.5f + s * bar_w;
            const float x1 = x0 + std::max(bar_w - (bar_w >= 4.0f ? 1.0f : 0.0f), 1.0f);
            const float y = f.Y(v);
            f.draw->AddRectFilled(ImVec2(x0, std::min(y, base)), ImVec2(x1, std::max(y, base)), above ? color : WithAlpha(color, 0.4f));
        }
    }
    EndPlot(f, axes);

    // Slot labels under the axis: every k-th, so they never touch; the group labels under them.
    if (count > 0) {
        int every = 1;
        while (every < count && every * slot < widest + 6.0f) ++every;
        for (int i = 0; bar_ticks && i < count; i += every) {
            const std::string t = tick_text(i);
            const ImVec2 ts = ImGui::CalcTextSize(t.c_str());
            const ImU32 c = i == highlighted ? kHighlightColor : dim;
            f.draw->AddText(ImVec2(f.min.x + (i + 0.5f) * slot - ts.x * 0.5f, f.max.y + 3.0f), c, t.c_str());
        }
        if (grouped) {
            float group_widest = 0;
            for (int g = 0; g < groups; ++g) group_widest = std::max(group_widest, ImGui::CalcTextSize(group_labels[g].c_str()).x);
            int g_every = 1;
            while (g_every < groups && g_every * slot * group_size < group_widest + 6.0f) ++g_every;
            for (int g = 0; g < groups; g += g_every) {
                const ImVec2 ts = ImGui::CalcTextSize(group_labels[g].c_str());
                const float cx = f.min.x + (g * group_size + std::min(group_size, count - g * group_size) * 0.5f) * slot;
                const bool has_highlight = highlighted >= g * group_size && highlighted < (g + 1) * group_size;
                f.draw->AddText(ImVec2(cx - ts.x * 0.5f, f.max.y + 3.0f + (bar_ticks ? line : 0.0f)),
                                has_highlight ? kHighlightColor : ImGui::GetColorU32(ImGuiCol_Text), group_labels[g].c_str());
            }
        }
    }

    if (hovered >= 0) {
        hit.index = hovered;
        hit.series = hovered_series;
        hit.clicked = f.clicked;
        ImGui::BeginTooltip();
        if (labelled) ImGui::TextUnformatted(labels[hovered].c_str());
        else ImGui::Text("#%d", hovered);
        for (const PlotSeries& ps : series) TooltipSeriesLine(SeriesColorOf(ps), LabelOf(ps), FormatValue(ps.Y[hovered]));
        if (axes.y_line) ImGui::TextDisabled("line at %s", FormatValue(*axes.y_line).c_str());
        ImGui::EndTooltip();
    }
    return hit;
}

}  // namespace

//-------------------------------------------------------------------------------------------------
// [SECTION] DrawPlot
//-------------------------------------------------------------------------------------------------

PlotHit DrawPlot(const char* id, ImVec2 size, const Plot& plot) {
    const PlotOptions& o = plot.Options;
    const PlotAxes axes = AxesOf(o);
    switch (plot.Series.empty() ? SeriesKind::Line : plot.Series[0].Kind) {
        case SeriesKind::Histogram: return Histogram(id, size, plot.Series, o.HistogramBins, axes);
        case SeriesKind::Points: return ScatterPlot(id, size, plot.Series, o.Highlighted, axes);
        case SeriesKind::Bars: return BarChart(id, size, plot.Series, o.XCategories, o.CategoryGroup, o.GroupLabels, o.Highlighted, axes);
        case SeriesKind::Line: break;
    }
    return LinePlot(id, size, plot.Series, axes);
}

}  // namespace viz
