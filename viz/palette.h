// The colours every figure and view shares, kept in one place: the two sides of a comparison
// (SSA orange, its comparison blue: in the window, in exported figures and in notebooks alike) and
// the palette for further series. Plain Rgba8; viz/imgui converts them with ToImU32.
#pragma once

#include "viz/colormap.h"

namespace viz {

constexpr Rgba8 kSsaColor = {240, 145, 40, 255};
constexpr Rgba8 kCompareColor = {95, 160, 225, 255};
// A fine-tune's base, the third side beside SSA and its weights at tau = 1 (violet).
constexpr Rgba8 kBaseColor = {175, 130, 215, 255};
// A fine-tune's change in two parts (beside its base): the temperatures' (SSA's own orange) and the
// other weights' drift (green).
constexpr Rgba8 kTemperaturePartColor = kSsaColor;
constexpr Rgba8 kDriftPartColor = {60, 175, 90, 255};

// The i-th colour of the palette for series that are neither side (matplotlib's tab10, blue first).
constexpr Rgba8 SeriesColor(int i) {
    constexpr Rgba8 kPalette[] = {{31, 119, 180, 255}, {255, 127, 14, 255}, {44, 160, 44, 255},   {214, 39, 40, 255},
                                  {148, 103, 189, 255}, {140, 86, 75, 255}, {227, 119, 194, 255}, {127, 127, 127, 255},
                                  {188, 189, 34, 255},  {23, 190, 207, 255}};
    constexpr int n = static_cast<int>(sizeof kPalette / sizeof kPalette[0]);
    return kPalette[((i % n) + n) % n];
}

}  // namespace viz
