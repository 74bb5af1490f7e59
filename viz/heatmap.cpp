#include "viz/heatmap.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace viz {

Range ResolveRange(const float* values, int rows, int cols, const HeatmapStyle& style) {
    if (style.range) return *style.range;
    float lo = std::numeric_limits<float>::infinity(), hi = -lo;
    for (int i = 0; i < rows; ++i) {
        const int last = style.causal ? std::min(i + 1, cols) : cols;
        for (int j = 0; j < last; ++j) {
            float v = values[static_cast<size_t>(i) * cols + j];
            if (!std::isfinite(v)) continue;
            lo = std::min(lo, v);
            hi = std::max(hi, v);
        }
    }
    if (!(lo <= hi)) return {0.0f, 1.0f};
    if (style.colormap == Colormap::Diverging) {
        float m = std::max(std::abs(lo), std::abs(hi));
        return {-m, m};
    }
    return {lo, hi};
}

namespace {

// Cells held from (first_row, first_col) on, `stride` a row; (i, j) are the map's own indices, so
// the causal test (j > i) holds for a window cut out of it. rows x cols: where the map ends.
struct CellSource {
    const float* values;
    size_t stride;
    int first_row, first_col, rows, cols;
    float At(int i, int j) const { return values[static_cast<size_t>(i - first_row) * stride + static_cast<size_t>(j - first_col)]; }
};

Image Bake(const CellSource& src, int row0, int col0, int row_count, int col_count, int out_w, int out_h, const HeatmapStyle& style,
           const ColourScale& colour) {
    Image image;
    if (out_w <= 0 || out_h <= 0 || row_count <= 0 || col_count <= 0) return image;
    image.width = out_w;
    image.height = out_h;
    image.pixels.resize(static_cast<size_t>(out_w) * out_h);
    const bool diverging = style.colormap == Colormap::Diverging;
    if (out_w == col_count && out_h == row_count) {  // a pixel a cell: each shows its own
        for (int y = 0; y < out_h; ++y) {
            const int i = row0 + y;
            Rgba8* out = image.pixels.data() + static_cast<size_t>(y) * out_w;
            std::fill_n(out, out_w, style.blank);
            if (i < src.first_row || i >= src.rows) continue;
            const int begin = std::max(col0, src.first_col), end = std::min(col0 + col_count, style.causal ? std::min(i + 1, src.cols) : src.cols);
            for (int j = begin; j < end; ++j) out[j - col0] = colour(src.At(i, j));
        }
        return image;
    }
    // Cells [begin, end) under each pixel column and row; at least one each.
    auto spans = [](int first, int count, int pixels) {
        std::vector<std::pair<int, int>> out(pixels);
        for (int p = 0; p < pixels; ++p) {
            const int begin = first + static_cast<int>(static_cast<int64_t>(p) * count / pixels);
            out[p] = {begin, std::max(begin + 1, first + static_cast<int>(static_cast<int64_t>(p + 1) * count / pixels))};
        }
        return out;
    };
    const auto col_spans = spans(col0, col_count, out_w), row_spans = spans(row0, row_count, out_h);
    for (int y = 0; y < out_h; ++y) {
        const auto [r_begin, r_end] = row_spans[y];
        for (int x = 0; x < out_w; ++x) {
            const auto [c_begin, c_end] = col_spans[x];
            float best = 0.0f;
            bool any = false, any_nan = false;
            for (int i = std::max(r_begin, src.first_row); i < r_end && i < src.rows; ++i) {
                const int last = std::min(c_end, style.causal ? std::min(i + 1, src.cols) : src.cols);
                for (int j = std::max(c_begin, src.first_col); j < last; ++j) {
                    const float v = src.At(i, j);
                    if (std::isnan(v)) {  // NaN never wins a block that holds a number
                        any_nan = true;
                        continue;
                    }
                    if (!any || (diverging ? std::abs(v) > std::abs(best) : v > best)) best = v;
                    any = true;
                }
            }
            image.pixels[static_cast<size_t>(y) * out_w + x] = any || any_nan ? colour(any ? best : NAN) : style.blank;
        }
    }
    return image;
}

// The colours of an out_w x out_h bake (NaN: the lowest).
ColourScale ScaleFor(const HeatmapStyle& style, Range range, int out_w, int out_h) {
    return ColourScale(style.colormap, range, style.log_scale, static_cast<size_t>(std::max(out_w, 0)) * static_cast<size_t>(std::max(out_h, 0)));
}

}  // namespace

Image BakeHeatmap(const float* values, int rows, int cols, int row0, int col0, int row_count, int col_count, int out_w,
                  int out_h, const HeatmapStyle& style, Range range) {
    return Bake({values, static_cast<size_t>(cols), 0, 0, rows, cols}, row0, col0, row_count, col_count, out_w, out_h, style,
                ScaleFor(style, range, out_w, out_h));
}

Image BakeHeatmapWindow(const float* window, int row0, int col0, int rows, int cols, int out_w, int out_h, const HeatmapStyle& style,
                        Range range) {
    return Bake({window, static_cast<size_t>(cols), row0, col0, row0 + rows, col0 + cols}, row0, col0, rows, cols, out_w, out_h, style,
                ScaleFor(style, range, out_w, out_h));
}

Image BakeHeatmap(const float* values, int rows, int cols, const HeatmapStyle& style, int max_side) {
    const Range range = ResolveRange(values, rows, cols, style);
    return BakeHeatmap(values, rows, cols, 0, 0, rows, cols, std::min(cols, max_side), std::min(rows, max_side), style, range);
}

Image BakeHeatmap(const float* values, int rows, int cols, const HeatmapStyle& style, const ColourScale& colour, int max_side) {
    return Bake({values, static_cast<size_t>(cols), 0, 0, rows, cols}, 0, 0, rows, cols, std::min(cols, max_side), std::min(rows, max_side),
                style, colour);
}

}  // namespace viz
