// Heatmaps as images: a rows x cols float map (row-major) becomes RGBA pixels through a colour
// map. Maps larger than the output are max-pooled (a block shows its largest value, so a sharp
// weight never disappears when zoomed out). Pure CPU code: the same image feeds GL textures in
// the GUI and PNG files on export.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "viz/colormap.h"

namespace viz {

struct Image {
    int width = 0;
    int height = 0;
    std::vector<Rgba8> pixels;  // [height, width], top row first
};

struct HeatmapStyle {
    Colormap colormap = Colormap::Viridis;
    std::optional<Range> range;   // nullopt: the data's own min..max (symmetric around 0 for Diverging)
    bool log_scale = false;
    bool causal = true;           // cells above the diagonal (j > i) are not part of the map
    Rgba8 blank = {40, 40, 46, 255};  // colour of those cells
};

// The range a style resolves to for these values (causal cells only when style.causal).
Range ResolveRange(const float* values, int rows, int cols, const HeatmapStyle& style);

// Bakes the cells [row0, row0 + row_count) x [col0, col0 + col_count) into an out_w x out_h
// image; each pixel covers a block of cells and shows the block's maximum (for Diverging, the
// value of largest magnitude). out_w/out_h larger than the cell counts repeat cells (nearest).
Image BakeHeatmap(const float* values, int rows, int cols, int row0, int col0, int row_count, int col_count, int out_w,
                  int out_h, const HeatmapStyle& style, Range range);

// The same for a window already cut out of a map: `window` holds its cells [row0, row0 + rows) x
// [col0, col0 + cols), row-major, rows x cols of them; the causal cells are the map's (j <= i).
Image BakeHeatmapWindow(const float* window, int row0, int col0, int rows, int cols, int out_w, int out_h, const HeatmapStyle& style,
                        Range range);

// The whole map at one pixel per cell, pooled down when a side exceeds max_side.
Image BakeHeatmap(const float* values, int rows, int cols, const HeatmapStyle& style, int max_side = 2048);

// The same in the colours of `colour`, made once for many maps of one range (a grid of thumbnails)
// from style's colour map, range and log scale.
Image BakeHeatmap(const float* values, int rows, int cols, const HeatmapStyle& style, const ColourScale& colour, int max_side);

}  // namespace viz
