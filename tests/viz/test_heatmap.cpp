// viz::BakeHeatmap and viz::ResolveRange on small hand-made maps: exact pixels, max-pooling,
// regions, log scale, NaN and the automatic ranges. Pure CPU, no GL.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "viz/heatmap.h"

namespace {

using viz::Colormap;
using viz::HeatmapStyle;
using viz::Image;
using viz::Range;
using viz::Rgba8;

const float kNaN = std::numeric_limits<float>::quiet_NaN();

std::string Str(Rgba8 c) {
    return "(" + std::to_string(c.r) + ", " + std::to_string(c.g) + ", " + std::to_string(c.b) + ", " + std::to_string(c.a) + ")";
}

// The colour one cell of `value` should get.
Rgba8 Expected(float value, Colormap map, Range range, bool log_scale = false) {
    return viz::SampleColormap(map, viz::Normalize(value, range, log_scale));
}

::testing::AssertionResult SameColor(Rgba8 got, Rgba8 want) {
    if (got.r == want.r && got.g == want.g && got.b == want.b && got.a == want.a) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "got " << Str(got) << ", want " << Str(want);
}

// Within `tolerance` per channel: for values that land exactly between two entries of the
// 256-entry table, where float rounding may pick either.
::testing::AssertionResult NearColor(Rgba8 got, Rgba8 want, int tolerance = 3) {
    auto close = [&](int a, int b) { return std::abs(a - b) <= tolerance; };
    if (close(got.r, want.r) && close(got.g, want.g) && close(got.b, want.b) && got.a == want.a) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "got " << Str(got) << ", want " << Str(want) << " +- " << tolerance;
}

Rgba8 Pixel(const Image& image, int x, int y) { return image.pixels[static_cast<size_t>(y) * image.width + x]; }

// A row-normalised 3 x 3 causal map; the values above the diagonal are garbage on purpose (they
// must be neither drawn nor counted in a range).
const std::vector<float> kCausal3 = {1.0f, 9.0f, 9.0f,  //
                                     0.25f, 0.75f, 9.0f,  //
                                     0.5f, 0.2f, 0.3f};

TEST(BakeHeatmap, CausalMapAtOnePixelPerCell) {
    HeatmapStyle style;
    const Range range{0.0f, 1.0f};
    style.range = range;
    const Image image = viz::BakeHeatmap(kCausal3.data(), 3, 3, style);
    ASSERT_EQ(image.width, 3);
    ASSERT_EQ(image.height, 3);
    ASSERT_EQ(image.pixels.size(), 9u);
    for (int i = 0; i < 3; ++i) {
        for (int j = 0; j < 3; ++j) {
            const Rgba8 want = j > i ? style.blank : Expected(kCausal3[i * 3 + j], Colormap::Viridis, range);
            EXPECT_TRUE(SameColor(Pixel(image, j, i), want)) << "pixel x=" << j << " y=" << i;
        }
    }
    // The ends of the range land on the ends of the colour map.
    EXPECT_TRUE(SameColor(Pixel(image, 0, 0), viz::SampleColormap(Colormap::Viridis, 1.0f)));
}

TEST(BakeHeatmap, AutomaticRangeUsesOnlyCausalCells) {
    HeatmapStyle style;  // range: nullopt
    const Range range = viz::ResolveRange(kCausal3.data(), 3, 3, style);
    EXPECT_FLOAT_EQ(range.min, 0.2f);
    EXPECT_FLOAT_EQ(range.max, 1.0f);  // not 9: those cells are above the diagonal
    const Image image = viz::BakeHeatmap(kCausal3.data(), 3, 3, style);
    EXPECT_TRUE(SameColor(Pixel(image, 1, 2), viz::SampleColormap(Colormap::Viridis, 0.0f)));  // 0.2 is the minimum
    EXPECT_TRUE(SameColor(Pixel(image, 0, 0), viz::SampleColormap(Colormap::Viridis, 1.0f)));

    style.causal = false;  // a full map counts every cell
    const Range full = viz::ResolveRange(kCausal3.data(), 3, 3, style);
    EXPECT_FLOAT_EQ(full.max, 9.0f);
    const Image all = viz::BakeHeatmap(kCausal3.data(), 3, 3, style);
    EXPECT_TRUE(SameColor(Pixel(all, 2, 0), viz::SampleColormap(Colormap::Viridis, 1.0f)));
}

TEST(BakeHeatmap, MaxPoolsFourByFourToTwoByTwo) {
    // Each 2 x 2 block has one distinct maximum somewhere else in the block.
    const std::vector<float> values = {0.1f, 0.9f, 0.2f, 0.1f,  //
                                       0.3f, 0.2f, 0.1f, 0.1f,  //
                                       0.0f, 0.1f, 0.4f, 0.3f,  //
                                       0.6f, 0.0f, 0.2f, 0.7f};
    HeatmapStyle style;
    style.causal = false;
    style.colormap = Colormap::Magma;
    const Range range{0.0f, 1.0f};
    const Image image = viz::BakeHeatmap(values.data(), 4, 4, 0, 0, 4, 4, 2, 2, style, range);
    ASSERT_EQ(image.width, 2);
    ASSERT_EQ(image.height, 2);
    const float block_max[2][2] = {{0.9f, 0.2f}, {0.6f, 0.7f}};
    for (int y = 0; y < 2; ++y)
        for (int x = 0; x < 2; ++x)
            EXPECT_TRUE(SameColor(Pixel(image, x, y), Expected(block_max[y][x], Colormap::Magma, range))) << "block x=" << x << " y=" << y;

    // The whole-map overload pools the same way when a side exceeds max_side.
    const Image pooled = viz::BakeHeatmap(values.data(), 4, 4, style, 2);
    ASSERT_EQ(pooled.width, 2);
    ASSERT_EQ(pooled.height, 2);
    const Range auto_range = viz::ResolveRange(values.data(), 4, 4, style);
    EXPECT_TRUE(SameColor(Pixel(pooled, 0, 0), Expected(0.9f, Colormap::Magma, auto_range)));
}

TEST(BakeHeatmap, CausalPoolingIgnoresCellsAboveTheDiagonal) {
    // The top-right block lies entirely above the diagonal: blank. The top-left block holds the
    // diagonal; its masked cell (0, 1) = 5 must not win.
    const std::vector<float> values = {0.2f, 5.0f, 5.0f, 5.0f,  //
                                       0.3f, 0.4f, 5.0f, 5.0f,  //
                                       0.1f, 0.1f, 0.1f, 5.0f,  //
                                       0.1f, 0.1f, 0.1f, 0.8f};
    HeatmapStyle style;
    const Range range{0.0f, 1.0f};
    const Image image = viz::BakeHeatmap(values.data(), 4, 4, 0, 0, 4, 4, 2, 2, style, range);
    EXPECT_TRUE(SameColor(Pixel(image, 0, 0), Expected(0.4f, Colormap::Viridis, range)));
    EXPECT_TRUE(SameColor(Pixel(image, 1, 0), style.blank));
    EXPECT_TRUE(SameColor(Pixel(image, 0, 1), Expected(0.1f, Colormap::Viridis, range)));
    EXPECT_TRUE(SameColor(Pixel(image, 1, 1), Expected(0.8f, Colormap::Viridis, range)));
}

TEST(BakeHeatmap, DivergingPoolKeepsTheLargestMagnitudeWithItsSign) {
    const std::vector<float> values = {0.2f, -0.9f, 0.1f, 0.05f,  //
                                       0.5f, 0.1f, -0.3f, 0.6f,   //
                                       -0.1f, 0.0f, 0.0f, 0.0f,   //
                                       0.05f, -0.2f, 0.0f, 0.0f};
    HeatmapStyle style;
    style.causal = false;
    style.colormap = Colormap::Diverging;
    const Range range{-1.0f, 1.0f};
    const Image image = viz::BakeHeatmap(values.data(), 4, 4, 0, 0, 4, 4, 2, 2, style, range);
    const float block[2][2] = {{-0.9f, 0.6f}, {-0.2f, 0.0f}};
    for (int y = 0; y < 2; ++y)
        for (int x = 0; x < 2; ++x)
            EXPECT_TRUE(SameColor(Pixel(image, x, y), Expected(block[y][x], Colormap::Diverging, range))) << "block x=" << x << " y=" << y;
    // -0.9 is blue (below the white middle), not the red of +0.5.
    EXPECT_GT(Pixel(image, 0, 0).b, Pixel(image, 0, 0).r);
}

TEST(BakeHeatmap, RegionMatchesTheSameCellsOfTheWholeMap) {
    const int n = 6;
    std::vector<float> values(n * n);
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) values[i * n + j] = 0.01f * (i * n + j);
    HeatmapStyle style;
    const Range range{0.0f, 0.35f};
    style.range = range;
    const Image whole = viz::BakeHeatmap(values.data(), n, n, 0, 0, n, n, n, n, style, range);
    // Rows 2..4, columns 1..4: a region that straddles the diagonal.
    const int row0 = 2, col0 = 1, rows = 3, cols = 4;
    const Image region = viz::BakeHeatmap(values.data(), n, n, row0, col0, rows, cols, cols, rows, style, range);
    ASSERT_EQ(region.width, cols);
    ASSERT_EQ(region.height, rows);
    for (int y = 0; y < rows; ++y) {
        for (int x = 0; x < cols; ++x) {
            EXPECT_TRUE(SameColor(Pixel(region, x, y), Pixel(whole, col0 + x, row0 + y))) << "x=" << x << " y=" << y;
            const bool masked = col0 + x > row0 + y;
            if (masked) {
                EXPECT_TRUE(SameColor(Pixel(region, x, y), style.blank));
            }
        }
    }
    // The same region pooled 2:1 in columns: each pixel is the max of its two cells.
    const Image pooled = viz::BakeHeatmap(values.data(), n, n, row0, col0, rows, cols, cols / 2, rows, style, range);
    ASSERT_EQ(pooled.width, 2);
    EXPECT_TRUE(SameColor(Pixel(pooled, 0, 0), Expected(values[2 * n + 2], Colormap::Viridis, range)));  // cells (2,1), (2,2)
    EXPECT_TRUE(SameColor(Pixel(pooled, 1, 0), style.blank));                                             // (2,3), (2,4): future
    EXPECT_TRUE(SameColor(Pixel(pooled, 1, 1), Expected(values[3 * n + 3], Colormap::Viridis, range)));  // (3,3) only; (3,4) masked
}

TEST(BakeHeatmap, LargerOutputRepeatsCells) {
    const std::vector<float> values = {0.0f, 0.0f,  //
                                       1.0f, 0.5f};
    HeatmapStyle style;
    const Range range{0.0f, 1.0f};
    const Image image = viz::BakeHeatmap(values.data(), 2, 2, 0, 0, 2, 2, 4, 4, style, range);
    ASSERT_EQ(image.width, 4);
    for (int y = 0; y < 4; ++y)
        for (int x = 0; x < 4; ++x) {
            const int i = y / 2, j = x / 2;
            const Rgba8 want = j > i ? style.blank : Expected(values[i * 2 + j], Colormap::Viridis, range);
            EXPECT_TRUE(SameColor(Pixel(image, x, y), want)) << "x=" << x << " y=" << y;
        }
}

TEST(BakeHeatmap, LogScaleSpacesDecadesEvenly) {
    // Over [1e-4, 1] (four decades) 1e-2 sits in the middle and 1e-3 a quarter of the way up.
    const std::vector<float> values = {1.0f, 0.0f, 0.0f,  //
                                       1e-2f, 1e-3f, 0.0f,  //
                                       1e-4f, 1e-9f, 0.0f};
    HeatmapStyle style;
    style.log_scale = true;
    const Range range{1e-4f, 1.0f};
    const Image image = viz::BakeHeatmap(values.data(), 3, 3, 0, 0, 3, 3, 3, 3, style, range);
    EXPECT_TRUE(SameColor(Pixel(image, 0, 0), viz::SampleColormap(Colormap::Viridis, 1.0f)));
    EXPECT_TRUE(NearColor(Pixel(image, 0, 1), viz::SampleColormap(Colormap::Viridis, 0.5f)));
    EXPECT_TRUE(NearColor(Pixel(image, 1, 1), viz::SampleColormap(Colormap::Viridis, 0.25f)));
    EXPECT_TRUE(SameColor(Pixel(image, 0, 2), viz::SampleColormap(Colormap::Viridis, 0.0f)));
    EXPECT_TRUE(SameColor(Pixel(image, 1, 2), viz::SampleColormap(Colormap::Viridis, 0.0f)));  // below the range: clamped
    EXPECT_TRUE(SameColor(Pixel(image, 2, 2), viz::SampleColormap(Colormap::Viridis, 0.0f)));  // an exact zero too
    // A linear bake of the same map differs: 1e-2 is nearly the bottom colour there.
    style.log_scale = false;
    const Image linear = viz::BakeHeatmap(values.data(), 3, 3, 0, 0, 3, 3, 3, 3, style, Range{0.0f, 1.0f});
    EXPECT_TRUE(SameColor(Pixel(linear, 0, 1), Expected(1e-2f, Colormap::Viridis, Range{0.0f, 1.0f})));
}

TEST(ResolveRange, SkipsNaNAndInfinity) {
    const std::vector<float> values = {kNaN, 0.0f, 0.0f,  //
                                       0.3f, std::numeric_limits<float>::infinity(), 0.0f,  //
                                       0.1f, kNaN, 0.7f};
    HeatmapStyle style;
    const Range range = viz::ResolveRange(values.data(), 3, 3, style);
    EXPECT_FLOAT_EQ(range.min, 0.1f);
    EXPECT_FLOAT_EQ(range.max, 0.7f);
}

TEST(ResolveRange, AllNaNFallsBackToZeroOne) {
    const std::vector<float> values(4, kNaN);
    HeatmapStyle style;
    const Range range = viz::ResolveRange(values.data(), 2, 2, style);
    EXPECT_FLOAT_EQ(range.min, 0.0f);
    EXPECT_FLOAT_EQ(range.max, 1.0f);
}

TEST(BakeHeatmap, NaNCellDrawsAsTheLowestColour) {
    const std::vector<float> values = {kNaN, 0.0f,  //
                                       0.5f, 1.0f};
    HeatmapStyle style;
    for (Colormap map : {Colormap::Viridis, Colormap::Diverging}) {
        style.colormap = map;
        const Range range = map == Colormap::Diverging ? Range{-1.0f, 1.0f} : Range{0.0f, 1.0f};
        const Image image = viz::BakeHeatmap(values.data(), 2, 2, 0, 0, 2, 2, 2, 2, style, range);
        EXPECT_TRUE(SameColor(Pixel(image, 0, 0), viz::SampleColormap(map, 0.0f))) << viz::ColormapName(map);
        EXPECT_TRUE(SameColor(Pixel(image, 1, 1), Expected(1.0f, map, range))) << viz::ColormapName(map);
    }
}

TEST(BakeHeatmap, NaNDoesNotHideTheMaximumOfAPooledBlock) {
    // A pooled pixel shows its block's largest finite value wherever the NaN sits in the block.
    HeatmapStyle style;
    style.causal = false;
    const Range range{0.0f, 1.0f};
    const std::vector<std::vector<float>> blocks = {{kNaN, 0.9f, 0.1f, 0.2f}, {0.1f, 0.9f, kNaN, 0.2f}, {0.1f, 0.2f, 0.3f, kNaN}};
    const float want[] = {0.9f, 0.9f, 0.3f};
    for (size_t b = 0; b < blocks.size(); ++b) {
        for (Colormap map : {Colormap::Viridis, Colormap::Diverging}) {
            style.colormap = map;
            const Image image = viz::BakeHeatmap(blocks[b].data(), 2, 2, 0, 0, 2, 2, 1, 1, style, range);
            EXPECT_TRUE(SameColor(Pixel(image, 0, 0), Expected(want[b], map, range))) << "block " << b << ", " << viz::ColormapName(map);
        }
    }
}

TEST(ResolveRange, DivergingAutoRangeIsSymmetricAroundZero) {
    const std::vector<float> values = {0.6f, 0.0f,  //
                                       -0.2f, 0.1f};
    HeatmapStyle style;
    style.colormap = Colormap::Diverging;
    Range range = viz::ResolveRange(values.data(), 2, 2, style);
    EXPECT_FLOAT_EQ(range.min, -0.6f);
    EXPECT_FLOAT_EQ(range.max, 0.6f);
    // Mostly negative values: the magnitude of the minimum decides.
    const std::vector<float> negative = {-0.8f, 0.0f,  //
                                         0.3f, -0.1f};
    range = viz::ResolveRange(negative.data(), 2, 2, style);
    EXPECT_FLOAT_EQ(range.min, -0.8f);
    EXPECT_FLOAT_EQ(range.max, 0.8f);
    // Zero is the middle (white) of the baked map.
    const Image image = viz::BakeHeatmap(negative.data(), 2, 2, style);
    EXPECT_TRUE(SameColor(Pixel(image, 1, 1), Expected(-0.1f, Colormap::Diverging, range)));
    EXPECT_TRUE(SameColor(Pixel(image, 0, 0), viz::SampleColormap(Colormap::Diverging, 0.0f)));
    // An explicit range is returned as given.
    style.range = Range{-2.0f, 3.0f};
    range = viz::ResolveRange(negative.data(), 2, 2, style);
    EXPECT_FLOAT_EQ(range.min, -2.0f);
    EXPECT_FLOAT_EQ(range.max, 3.0f);
}

TEST(BakeHeatmap, EmptyRequestsGiveAnEmptyImage) {
    const std::vector<float> values = {1.0f};
    HeatmapStyle style;
    EXPECT_TRUE(viz::BakeHeatmap(values.data(), 1, 1, 0, 0, 1, 1, 0, 4, style, Range{}).pixels.empty());
    EXPECT_TRUE(viz::BakeHeatmap(values.data(), 1, 1, 0, 0, 0, 1, 4, 4, style, Range{}).pixels.empty());
    const Image one = viz::BakeHeatmap(values.data(), 1, 1, style);
    ASSERT_EQ(one.pixels.size(), 1u);
}

// A window cut out of a map bakes as the same region of the whole map: the causal cells are the
// map's own (the window's corner is not its diagonal), blocks of several cells per pixel too.
TEST(BakeHeatmapWindow, EqualsTheSameRegionOfTheWholeMap) {
    const int n = 40;
    std::vector<float> map(static_cast<size_t>(n) * n, 0.0f);
    for (int i = 0; i < n; ++i)
        for (int j = 0; j <= i; ++j) map[static_cast<size_t>(i) * n + j] = static_cast<float>((i * 31 + j * 17) % 97) / 97.0f;
    viz::HeatmapStyle style;
    const viz::Range range{0.0f, 1.0f};
    struct Region {
        int row0, col0, rows, cols, out_w, out_h;
    };
    for (const Region& r : {Region{10, 5, 12, 20, 20, 12}, Region{0, 20, 40, 20, 7, 13}, Region{30, 30, 10, 10, 10, 10}, Region{5, 0, 1, 40, 40, 1}}) {
        std::vector<float> window;
        for (int i = r.row0; i < r.row0 + r.rows; ++i)
            window.insert(window.end(), map.begin() + i * n + r.col0, map.begin() + i * n + r.col0 + r.cols);
        const Image want = viz::BakeHeatmap(map.data(), n, n, r.row0, r.col0, r.rows, r.cols, r.out_w, r.out_h, style, range);
        const Image got = viz::BakeHeatmapWindow(window.data(), r.row0, r.col0, r.rows, r.cols, r.out_w, r.out_h, style, range);
        ASSERT_EQ(got.width, want.width);
        ASSERT_EQ(got.height, want.height);
        size_t differ = 0, blank = 0;
        for (size_t k = 0; k < want.pixels.size(); ++k) {
            differ += std::memcmp(&got.pixels[k], &want.pixels[k], sizeof(viz::Rgba8)) != 0;
            blank += std::memcmp(&want.pixels[k], &style.blank, sizeof(viz::Rgba8)) == 0;
        }
        EXPECT_EQ(differ, 0u) << r.row0 << "," << r.col0;
        if (r.col0 > r.row0) {
            EXPECT_GT(blank, 0u) << "the region crosses the diagonal: masked cells are blank";
        }
    }
}

// Maps large enough for the colour steps (ColourScale::kFewValues pixels or more), at a pixel a
// cell, at two cells a pixel and in a window: every pixel is the colour SampleColormap(Normalize)
// gives its cell (its block's maximum), NaN the lowest, above the diagonal blank; log, linear and
// diverging, as a window of a map's corner (the heatmap view's region) too.
TEST(BakeHeatmap, LargeMapsGiveEveryCellTheColourNormalizeGives) {
    const int n = 240;
    std::vector<float> map(static_cast<size_t>(n) * n, 9.0f);
    uint32_t state = 12345;
    auto next = [&] { return (state = state * 1664525u + 1013904223u) >> 8; };
    for (int i = 0; i < n; ++i)
        for (int j = 0; j <= i; ++j) {
            const uint32_t r = next();
            float v = std::exp(-static_cast<float>(r % 20000) / 1000.0f) * (r & 1 ? 1.0f : -1.0f);  // e^-20 .. 1, both signs
            if (r % 997 == 0) v = kNaN;
            map[static_cast<size_t>(i) * n + j] = v;
        }
    for (Colormap colormap : {Colormap::Viridis, Colormap::Diverging})
        for (bool log_scale : {false, true}) {
            if (colormap == Colormap::Diverging && log_scale) continue;
            HeatmapStyle style;
            style.colormap = colormap;
            style.log_scale = log_scale;
            const Range range = viz::ResolveRange(map.data(), n, n, style);
            auto check = [&](const Image& image, int row0, int col0, int per_pixel) {
                size_t differ = 0;
                for (int y = 0; y < image.height; ++y)
                    for (int x = 0; x < image.width; ++x) {
                        float best = 0.0f;
                        bool any = false, any_nan = false;
                        for (int i = row0 + y * per_pixel; i < row0 + (y + 1) * per_pixel; ++i)
                            for (int j = col0 + x * per_pixel; j < col0 + (x + 1) * per_pixel && j <= i; ++j) {
                                const float v = map[static_cast<size_t>(i) * n + j];
                                if (std::isnan(v)) any_nan = true;
                                else if (!any || (colormap == Colormap::Diverging ? std::abs(v) > std::abs(best) : v > best)) best = v, any = true;
                            }
                        const Rgba8 want = any ? Expected(best, colormap, range, log_scale) : any_nan ? Expected(kNaN, colormap, range) : style.blank;
                        const Rgba8 got = Pixel(image, x, y);
                        differ += std::memcmp(&want, &got, sizeof want) != 0;
                    }
                return differ;
            };
            EXPECT_EQ(check(viz::BakeHeatmap(map.data(), n, n, 0, 0, n, n, n, n, style, range), 0, 0, 1), 0u) << log_scale;
            EXPECT_EQ(check(viz::BakeHeatmap(map.data(), n, n, 0, 0, n, n, n / 2, n / 2, style, range), 0, 0, 2), 0u) << log_scale;
            std::vector<float> window;  // rows 40.., columns 10.. (200 x 200: the steps too)
            for (int i = 40; i < n; ++i) window.insert(window.end(), map.begin() + i * n + 10, map.begin() + i * n + 210);
            EXPECT_EQ(check(viz::BakeHeatmapWindow(window.data(), 40, 10, 200, 200, 200, 200, style, range), 40, 10, 1), 0u) << log_scale;
        }
}

}  // namespace
