// MapCells (model/nn/attention_maps.h): a head's map read in parts where the engine keeps it. The
// torch path that a GPU runs is checked here on CPU tensors against plain loops: the levels of
// detail against the pooling rule written out cell by cell, windows, values, rows, the extent
// against the host's, the difference, and texels coloured where the map is against the host's
// colour pass.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <cmath>
#include <future>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <memory>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include <ATen/ATen.h>

#include "model/nn/attention_maps_torch.h"
#include "model/nn/forward.h"
#include "viz/heatmap.h"

namespace {

// The rule, cell by cell: the block's largest value, or for a difference the value of largest
// magnitude (the positive one on a tie). n x n -> ceil(n / 2) a side; odd edges pool what they have.
std::vector<float> PoolReference(const std::vector<float>& src, int n, bool diverging) {
    const int m = (n + 1) / 2;
    std::vector<float> out(static_cast<size_t>(m) * m);
    for (int i = 0; i < m; ++i)
        for (int j = 0; j < m; ++j) {
            bool any = false;
            float best = 0;
            for (int r = 2 * i; r < std::min(2 * i + 2, n); ++r)
                for (int c = 2 * j; c < std::min(2 * j + 2, n); ++c) {
                    const float v = src[static_cast<size_t>(r) * n + c];
                    const bool stronger = diverging ? std::abs(v) > std::abs(best) || (std::abs(v) == std::abs(best) && v > best) : v > best;
                    if (!any || stronger) best = v;
                    any = true;
                }
            out[static_cast<size_t>(i) * m + j] = best;
        }
    return out;
}

// A causal map like softmax rows (zero above the diagonal), with exact ties and a few sign-flipped twins.
std::vector<float> RandomMap(int T, unsigned seed, bool signed_values) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(signed_values ? -1.0f : 0.0f, 1.0f);
    std::vector<float> map(static_cast<size_t>(T) * T, 0.0f);
    for (int i = 0; i < T; ++i)
        for (int j = 0; j <= i; ++j) {
            float v = u(rng);
            if (rng() % 7 == 0) v = 0.25f;                    // ties
            if (signed_values && rng() % 11 == 0) v = -0.25f;  // a tie in magnitude, opposite sign
            map[static_cast<size_t>(i) * T + j] = v;
        }
    return map;
}

at::Tensor AsTensor(const std::vector<float>& map, int T) { return at::from_blob(const_cast<float*>(map.data()), {T, T}, at::kFloat).clone(); }

TEST(MapCells, PoolByTwoKeepsEachBlocksStrongestValue) {
    const std::vector<float> map = {0.1f, 0.0f, 0.0f,   //
                                    0.7f, 0.2f, 0.0f,   //
                                    0.3f, 0.9f, 0.4f};
    const std::vector<float> diff = {0.1f, -0.5f, 0.2f, 0.3f,    //
                                     0.0f, 0.2f, -0.2f, 0.0f,    //
                                     -0.4f, 0.4f, 0.0f, 0.0f,    //
                                     0.1f, 0.0f, 0.0f, -0.05f};
    for (auto pool : {model::PoolByTwo, model::PoolByTwoOps}) {  // the CPU's loop and a device's ops
        at::Tensor pooled = pool(AsTensor(map, 3), false).contiguous();
        EXPECT_EQ(std::vector<float>(pooled.data_ptr<float>(), pooled.data_ptr<float>() + 4), (std::vector<float>{0.7f, 0.0f, 0.9f, 0.4f}));
        pooled = pool(AsTensor(diff, 4), true).contiguous();
        EXPECT_EQ(std::vector<float>(pooled.data_ptr<float>(), pooled.data_ptr<float>() + 4), (std::vector<float>{-0.5f, 0.3f, 0.4f, -0.05f}));
    }
}

// Both ways of pooling against the rule, level by level, on maps of 1 to 37 tokens.
TEST(MapCells, PoolByTwoOnTheCpuAndByTorchOpsAgree) {
    for (int T = 1; T <= 37; ++T)
        for (bool diverging : {false, true}) {
            const std::vector<float> map = RandomMap(T, static_cast<unsigned>(100 + T), diverging);
            at::Tensor loop = AsTensor(map, T), ops = loop;
            std::vector<float> want = map;
            for (int n = T; n > 1; n = (n + 1) / 2) {
                want = PoolReference(want, n, diverging);
                loop = model::PoolByTwo(loop, diverging).contiguous();
                ops = model::PoolByTwoOps(ops, diverging).contiguous();
                ASSERT_EQ(loop.numel(), static_cast<int64_t>(want.size()));
                EXPECT_EQ(std::vector<float>(loop.data_ptr<float>(), loop.data_ptr<float>() + loop.numel()), want) << T;
                EXPECT_EQ(std::vector<float>(ops.data_ptr<float>(), ops.data_ptr<float>() + ops.numel()), want) << T;
            }
        }
}

// Every level of maps of 1 to 37 tokens (odd sizes, one-cell levels), and random windows of each,
// equal the rule applied level by level on the host: bit for bit (pooling only picks values).
TEST(MapCells, LevelsAndWindowsAreTheRulesCells) {
    std::mt19937 rng(7);
    for (int T = 1; T <= 37; ++T)
        for (bool diverging : {false, true}) {
            const std::vector<float> map = RandomMap(T, static_cast<unsigned>(T * 2 + diverging), diverging);
            const model::MapCellsPtr cells =
                diverging ? model::TensorMapCells(AsTensor(map, T), false)->Minus(*model::TensorMapCells(at::zeros({T, T}), false))
                          : model::TensorMapCells(AsTensor(map, T), false);
            ASSERT_TRUE(cells);
            ASSERT_EQ(cells->Tokens(), T);
            std::vector<float> level = map;
            for (int k = 0, n = T;; ++k) {
                EXPECT_EQ(cells->Cells(k, 0, 0, n, n), level) << "T " << T << " level " << k << (diverging ? " (difference)" : "");
                const int r0 = static_cast<int>(rng() % n), c0 = static_cast<int>(rng() % n);
                const int rows = 1 + static_cast<int>(rng() % (n - r0)), cols = 1 + static_cast<int>(rng() % (n - c0));
                std::vector<float> window;
                for (int i = r0; i < r0 + rows; ++i)
                    for (int j = c0; j < c0 + cols; ++j) window.push_back(level[static_cast<size_t>(i) * n + j]);
                EXPECT_EQ(cells->Cells(k, r0, c0, rows, cols), window) << "T " << T << " level " << k;
                if (n == 1) break;
                level = PoolReference(level, n, diverging);
                n = (n + 1) / 2;
            }
        }
}

TEST(MapCells, ValuesRowsAndOutOfRangeRequests) {
    const int T = 9;
    const std::vector<float> map = RandomMap(T, 3, false);
    auto host = std::make_shared<const std::vector<float>>(map);
    for (const model::MapCellsPtr& cells : {model::HostMapCells(host, T), model::TensorMapCells(AsTensor(map, T), false)}) {
        ASSERT_TRUE(cells);
        for (int i = 0; i < T; ++i) {
            const std::vector<float> row(map.begin() + i * T, map.begin() + (i + 1) * T);
            EXPECT_EQ(cells->Row(i), row);
            for (int j = 0; j < T; ++j) EXPECT_EQ(cells->At(i, j), map[static_cast<size_t>(i) * T + j]);
        }
        EXPECT_TRUE(std::isnan(cells->At(T, 0)) && std::isnan(cells->At(0, -1)));
        EXPECT_TRUE(cells->Row(T).empty() && cells->Row(-1).empty());
        EXPECT_TRUE(cells->Cells(0, T, 0, 1, 1).empty() && cells->Cells(-1, 0, 0, 1, 1).empty() && cells->Cells(0, 0, 0, 0, 3).empty());
        EXPECT_EQ(cells->Cells(0, T - 2, T - 2, 100, 100).size(), 4u) << "clipped to the map";
        EXPECT_EQ(cells->Cells(40, 0, 0, 1, 1).size(), 0u) << "past the deepest level";
    }
    EXPECT_FALSE(model::HostMapCells(host, T + 1)) << "a size that is not T x T";
}

// The extent the colour scales use, in torch ops (a GPU's) against the host loop, on maps with
// NaN, infinities and negative values: bit for bit (max and min pick values).
// The host's loop takes eight cells at a time, so the sizes cover rows shorter than eight, whole
// lanes and a remainder, and the odd values fall in lanes and in remainders.
TEST(MapCells, ExtentOnTheDeviceEqualsTheHosts) {
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    for (int T : {1, 2, 5, 8, 9, 17, 64, 100}) {
        for (bool signed_values : {false, true}) {
            std::vector<float> map = RandomMap(T, static_cast<unsigned>(T), signed_values);
            if (T >= 5) {
                map[static_cast<size_t>(4) * T + 1] = nan;
                map[static_cast<size_t>(3) * T + 3] = inf;
                map[static_cast<size_t>(1) * T + 4] = 50.0f;  // above the diagonal: not counted
            }
            if (T >= 17) {
                map[static_cast<size_t>(16) * T + 2] = -inf;  // in a lane
                map[static_cast<size_t>(16) * T + 9] = inf;   // in a lane
                map[static_cast<size_t>(16) * T + 16] = nan;  // in a row's remainder
                map[static_cast<size_t>(12) * T + 5] = 1e-30f;  // the smallest positive, in a lane
                map[static_cast<size_t>(T - 1) * T + T - 1] = signed_values ? -7.5f : 0.0f;  // the largest magnitude, last
            }
            const model::MapExtent want = model::HostMapExtent(map.data(), T), got = model::TensorMapExtent(AsTensor(map, T));
            EXPECT_EQ(got.max, want.max) << T;
            EXPECT_EQ(got.min_positive, want.min_positive) << T;
            EXPECT_EQ(got.max_abs, want.max_abs) << T;
            EXPECT_LT(want.max, 50.0f);
        }
    }
    const std::vector<float> zeros(16, 0.0f);
    const model::MapExtent none = model::TensorMapExtent(AsTensor(zeros, 4));
    EXPECT_EQ(none.max, 0.0f);
    EXPECT_EQ(none.min_positive, 1.0f);
    EXPECT_EQ(none.max_abs, 0.0f);
    EXPECT_EQ(model::TensorMapCells(at::zeros({0, 0}), false)->Extent().max, 0.0f) << "an empty map";
}

TEST(MapCells, MinusIsTheCellByCellDifference) {
    const int T = 13;
    const std::vector<float> a = RandomMap(T, 1, false), b = RandomMap(T, 2, false);
    const model::MapCellsPtr d = model::TensorMapCells(AsTensor(a, T), false)->Minus(*model::TensorMapCells(AsTensor(b, T), false));
    ASSERT_TRUE(d);
    std::vector<float> want(a.size());
    for (size_t k = 0; k < a.size(); ++k) want[k] = a[k] - b[k];
    EXPECT_EQ(d->Cells(0, 0, 0, T, T), want);
    EXPECT_EQ(d->Cells(1, 0, 0, 7, 7), PoolReference(want, T, /*diverging=*/true));
    EXPECT_EQ(d->Extent().max_abs, model::HostMapExtent(want.data(), T).max_abs);
    EXPECT_FALSE(model::TensorMapCells(AsTensor(a, T), false)->Minus(*model::TensorMapCells(at::zeros({3, 3}), false))) << "sizes differ";
}

// A layer's q, k and tau_q of random heads ([H, T, D], one key head for two query heads), with
// scores large enough that some rows are sharp: what RecomputedMaps rebuilds maps from.
model::RecomputedMaps::Layer RandomLayer(int64_t T, unsigned seed, int window) {
    at::manual_seed(seed);
    const int64_t H = 2, D = 16;
    return {at::randn({H, T, D}) * 1.5, at::randn({1, T, D}) * 1.5, at::rand({H, T}) * 2.0 + 0.1, window};
}

// Head h's whole [T, T] map the way the map used to be made: every row over every key at once.
at::Tensor WholeMap(const model::RecomputedMaps::Layer& x, int h) {
    return model::AttentionRows(x.q[h], x.k[0], x.tau_q[h], 0, x.window).contiguous();
}

std::vector<float> Values(const at::Tensor& t) {
    const at::Tensor c = t.contiguous();
    return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

// `got` and `want` (the same map, `want` perhaps made another way) read the same: every level
// whole, random windows of each, rows, cells (above the diagonal too) and the extent, each value
// within `tolerance` (0: bit for bit); and the bands' window in torch ops (a device's way) is the
// host's copy of the same cells, exactly. For a difference made another way within a tolerance,
// only level 0: a level picks the value of largest magnitude, and a near tie of d and -d may go
// either way (ExpectLevelsPoolTheMap checks its levels).
void ExpectSameCells(const model::MapCells& got, const model::MapCells& want, const std::string& what, float tolerance = 0.0f,
                     bool difference = false) {
    const int levels = difference && tolerance > 0.0f ? 0 : -1;
    const int T = want.Tokens();
    ASSERT_EQ(got.Tokens(), T) << what;
    auto same = [&](const std::vector<float>& x, const std::vector<float>& y, const std::string& where) {
        if (tolerance == 0.0f) {
            EXPECT_EQ(x, y) << what << ": " << where;
            return;
        }
        ASSERT_EQ(x.size(), y.size()) << what << ": " << where;
        float worst = 0.0f;
        for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(x[i] - y[i]));
        EXPECT_LE(worst, tolerance) << what << ": " << where;
    };
    const auto* banded = dynamic_cast<const model::BandedMap*>(&got);
    std::mt19937 rng(static_cast<unsigned>(T));
    for (int k = 0, n = T; levels < 0 || k <= levels; ++k, n = (n + 1) / 2) {
        same(got.Cells(k, 0, 0, n, n), want.Cells(k, 0, 0, n, n), "level " + std::to_string(k));
        for (int w = 0; w < 3; ++w) {
            const int r0 = static_cast<int>(rng() % n), c0 = static_cast<int>(rng() % n);
            const int rows = 1 + static_cast<int>(rng() % (n - r0)), cols = 1 + static_cast<int>(rng() % (n - c0 + 3));
            const std::vector<float> window = got.Cells(k, r0, c0, rows, cols);
            same(window, want.Cells(k, r0, c0, rows, cols), "level " + std::to_string(k) + " window " + std::to_string(r0) + ", " + std::to_string(c0));
            if (banded) {
                EXPECT_EQ(Values(banded->Window(k, r0, c0, rows, cols)), window) << what << ": level " << k << " (torch ops)";
            }
        }
        if (n == 1) break;
    }
    for (int i : {0, T / 3, T / 2, T - 1}) {
        same(got.Row(i), want.Row(i), "row " + std::to_string(i));
        for (int j : {0, i / 2, i, std::min(i + 1, T - 1), T - 1})
            same({got.At(i, j)}, {want.At(i, j)}, "cell " + std::to_string(i) + ", " + std::to_string(j));
    }
    const model::MapExtent a = got.Extent(), b = want.Extent();
    if (tolerance == 0.0f) {
        EXPECT_EQ(a.max, b.max) << what;
        EXPECT_EQ(a.min_positive, b.min_positive) << what;
        EXPECT_EQ(a.max_abs, b.max_abs) << what;
        return;
    }
    EXPECT_NEAR(a.max, b.max, tolerance) << what;
    EXPECT_NEAR(a.max_abs, b.max_abs, tolerance) << what;
    // The smallest weight, relatively (down among subnormals, to within a few of their steps); a
    // difference's smallest positive value is any small difference's rounding: not compared.
    if (!difference) {
        EXPECT_NEAR(a.min_positive, b.min_positive, 10 * tolerance * b.min_positive + 1e-44f) << what;
    }
}

// Every level of `map` from its own level 0 by the pooling rule, exactly (a difference's levels:
// made against another map, a near tie of magnitudes could go either way).
void ExpectLevelsPoolTheMap(const model::MapCells& map, bool diverging, const std::string& what) {
    const int T = map.Tokens();
    std::vector<float> level = map.Cells(0, 0, 0, T, T);
    for (int k = 1, n = T; n > 1; ++k) {
        level = PoolReference(level, n, diverging);
        n = (n + 1) / 2;
        EXPECT_EQ(map.Cells(k, 0, 0, n, n), level) << what << ": level " << k;
    }
}

}  // namespace

// A head's map in bands (one band, band edges, a partial last band, levels past a band's depth,
// a sliding window) reads as the whole map made at once and pooled whole; so does the difference
// of two sides' banded maps. A band's rows are the same products and softmax rows over only the
// keys up to its last row (the keys after a row's own are masked: exp(-inf) adds 0). On this
// CPU's OpenBLAS kernels that gives the same bits; other kernels (Haswell's, a GPU's) may round a
// narrower product differently in the last bit, so values agree within 1e-5 (scores up to ~80 here).
TEST(MapBands, ReadAsTheWholeMap) {
    constexpr float kTolerance = 1e-5f;
    for (int64_t T : {1, 200, 256, 257, 700, 1100})
        for (int window : {0, 300}) {
            const model::RecomputedMaps::Layer ssa = RandomLayer(T, static_cast<unsigned>(T + window), window);
            const model::RecomputedMaps::Layer other = RandomLayer(T, static_cast<unsigned>(T + window + 1), window);
            model::RecomputedMaps maps;
            maps.Add(model::MapSide::Ssa, ssa);
            maps.Add(model::MapSide::Compare, other);
            const std::string what = "T " + std::to_string(T) + ", window " + std::to_string(window);
            const model::MapCellsPtr a = maps.Cells(model::MapSide::Ssa, 0, 1), b = maps.Cells(model::MapSide::Compare, 0, 1);
            ASSERT_TRUE(a && b) << what;
            EXPECT_EQ(maps.Banded(model::MapSide::Ssa, 0, 1)->Bands().size(), static_cast<size_t>((T + 255) / 256));
            const model::MapCellsPtr whole_a = model::TensorMapCells(WholeMap(ssa, 1), false), whole_b = model::TensorMapCells(WholeMap(other, 1), false);
            ExpectSameCells(*a, *whole_a, what, kTolerance);  // max pooling moves a value by at most what the cells move
            ExpectLevelsPoolTheMap(*a, false, what);
            const std::vector<float> head = *maps.Head(model::MapSide::Ssa, 0, 1);
            EXPECT_EQ(head, a->Cells(0, 0, 0, static_cast<int>(T), static_cast<int>(T))) << what << ": Head, the host's whole map";
            const model::MapCellsPtr difference = a->Minus(*b);
            ASSERT_TRUE(difference) << what;
            ExpectSameCells(*difference, *whole_a->Minus(*whole_b), what + " (difference)", 2 * kTolerance, /*difference=*/true);
            ExpectLevelsPoolTheMap(*difference, true, what + " (difference)");
        }
}

// The colours of a window of cells as the window's heatmap bakes them on the host (a pixel a cell,
// cells right of the diagonal blank), and as a GPU makes them where the map is (ColourTexels: how
// many of the colour scale's steps a value is at or above, then the table), on CPU tensors here.
// The two must be the same bytes: every value at and beside each step, NaN, the infinities, -0,
// subnormals, and scales whose upper steps no value reaches (a range of one value). Then a
// banded map's and a whole map's Texels against the same bake of their cells.
TEST(MapTexels, ColourAsTheHostsColourPass) {
    struct Case {
        viz::Colormap map;
        viz::Range range;
        bool log;
    };
    const Case cases[] = {
        {viz::Colormap::Viridis, {1e-4f, 0.9f}, true},  {viz::Colormap::Magma, {0.0f, 1.0f}, false},
        {viz::Colormap::Diverging, {-0.3f, 0.3f}, false}, {viz::Colormap::Viridis, {0.5f, 0.50000006f}, true},
        {viz::Colormap::Viridis, {0.5f, 0.50000006f}, false}, {viz::Colormap::Viridis, {0.25f, 0.25f}, false},
        {viz::Colormap::Viridis, {1e-30f, 1e30f}, true},
    };
    const float inf = std::numeric_limits<float>::infinity();
    for (const Case& c : cases) {
        viz::HeatmapStyle style;
        style.colormap = c.map;
        style.log_scale = c.log;
        const viz::ColourScale colour(c.map, c.range, c.log, SIZE_MAX);
        model::TexelScale scale;
        ASSERT_TRUE(colour.Steps(&scale.steps));
        std::memcpy(scale.table.data(), colour.Colours().data(), sizeof scale.table);
        std::memcpy(&scale.blank, &style.blank, sizeof scale.blank);
        // The values: each step and its neighbours, then the awkward ones, then random ones.
        std::vector<float> values = {NAN, inf, -inf, 0.0f, -0.0f, 1e-40f, -1e-40f, 1e-6f, c.range.min, c.range.max};
        for (float step : scale.steps)
            if (std::isfinite(step)) values.insert(values.end(), {step, std::nextafter(step, -inf), std::nextafter(step, inf)});
        std::mt19937 rng(7);
        std::uniform_real_distribution<float> u(c.range.min - 0.1f * std::abs(c.range.min), c.range.max * 1.1f);
        while (values.size() % 37 != 0 || values.size() < 2000) values.push_back(u(rng));
        const int cols = 37, rows = static_cast<int>(values.size()) / cols;
        for (const auto& origin : {std::pair<int, int>{0, 0}, std::pair<int, int>{40, 3}, std::pair<int, int>{0, 100}}) {
            const std::string what = std::string(viz::ColormapName(c.map)) + (c.log ? " log " : " ") + std::to_string(c.range.min) + ".." +
                                     std::to_string(c.range.max) + " at " + std::to_string(origin.first) + ", " + std::to_string(origin.second);
            const viz::Image want = viz::BakeHeatmapWindow(values.data(), origin.first, origin.second, rows, cols, cols, rows, style, c.range);
            const std::vector<uint32_t> got = model::TexelsToHost(
                model::ColourTexels(at::from_blob(values.data(), {rows, cols}, at::kFloat), origin.first, origin.second, scale));
            ASSERT_EQ(got.size(), want.pixels.size()) << what;
            int wrong = 0;
            for (size_t i = 0; i < got.size(); ++i) {
                uint32_t pixel;
                std::memcpy(&pixel, &want.pixels[i], sizeof pixel);
                if (got[i] != pixel && ++wrong <= 3)
                    ADD_FAILURE() << what << ": value " << values[i] << " (cell " << i / cols << ", " << i % cols << ") " << std::hex << got[i]
                                  << " against the host's " << pixel;
            }
            EXPECT_EQ(wrong, 0) << what;
        }
    }
    // A map's own Texels: a banded map (the host's cells coloured in place) and a whole one, every
    // level and a window, against the bake of the same cells.
    const int64_t T = 600;
    model::RecomputedMaps maps;
    maps.Add(model::MapSide::Ssa, RandomLayer(T, 5, 0));
    const model::MapCellsPtr banded = maps.Cells(model::MapSide::Ssa, 0, 1);
    const model::MapCellsPtr whole = model::TensorMapCells(WholeMap(RandomLayer(T, 5, 0), 1), false);
    for (const model::MapCellsPtr& map : {banded, whole}) {
        const model::MapExtent e = map->Extent();
        viz::HeatmapStyle style;
        style.log_scale = true;
        const viz::Range range{e.min_positive, e.max};
        const viz::ColourScale colour(style.colormap, range, true, SIZE_MAX);
        model::TexelScale scale;
        ASSERT_TRUE(colour.Steps(&scale.steps));
        std::memcpy(scale.table.data(), colour.Colours().data(), sizeof scale.table);
        std::memcpy(&scale.blank, &style.blank, sizeof scale.blank);
        for (int k = 0, n = static_cast<int>(T); ; ++k, n = (n + 1) / 2) {
            for (const std::array<int, 4>& w : {std::array<int, 4>{0, 0, n, n}, std::array<int, 4>{n / 3, n / 5, n / 2 + 1, n}}) {
                const int rows = std::min(w[2], n - w[0]), cols = std::min(w[3], n - w[1]);
                const std::vector<float> cells = map->Cells(k, w[0], w[1], w[2], w[3]);
                const viz::Image want = viz::BakeHeatmapWindow(cells.data(), w[0], w[1], rows, cols, cols, rows, style, range);
                const std::vector<uint32_t> got = map->Texels(k, w[0], w[1], w[2], w[3], scale);
                ASSERT_EQ(got.size(), want.pixels.size()) << "level " << k;
                EXPECT_EQ(std::memcmp(got.data(), want.pixels.data(), got.size() * sizeof(uint32_t)), 0) << "level " << k << " window " << w[0];
            }
            if (n == 1) break;
        }
        EXPECT_TRUE(map->Texels(0, static_cast<int>(T), 0, 4, 4, scale).empty());
        EXPECT_TRUE(map->Texels(-1, 0, 0, 4, 4, scale).empty());
        EXPECT_FALSE(map->OnDevice());
    }
}

// After an edit at p the map of a head the last analysis had built shares its whole bands above p
// (the same objects: no row computed or copied again) and computes the rest; it reads as a map
// made from scratch, bit for bit (each band the same products, whatever the BLAS kernels). The
// difference of two such maps subtracts only the bands that changed.
TEST(MapBands, AnEditSharesTheBandsAboveIt) {
    const int64_t T = 900;
    const model::RecomputedMaps::Layer ssa = RandomLayer(T, 11, 0), other = RandomLayer(T, 12, 0);
    auto maps_of = [](const model::RecomputedMaps::Layer& a, const model::RecomputedMaps::Layer& b, int64_t tokens) {
        auto maps = std::make_shared<model::RecomputedMaps>();
        auto first = [&](const model::RecomputedMaps::Layer& x) {
            return model::RecomputedMaps::Layer{x.q.narrow(1, 0, tokens), x.k.narrow(1, 0, tokens), x.tau_q.narrow(1, 0, tokens), x.window};
        };
        maps->Add(model::MapSide::Ssa, first(a));
        maps->Add(model::MapSide::Compare, first(b));
        return maps;
    };
    // Typing at the end: 600 tokens, then 700 with the first 600 kept; then an edit at 300 of 900.
    const auto before = maps_of(ssa, other, 600);
    const model::BandedMapPtr old_a = before->Banded(model::MapSide::Ssa, 0, 0), old_b = before->Banded(model::MapSide::Compare, 0, 0);
    const model::MapCellsPtr old_difference = old_a->Minus(*old_b);
    for (const auto& [tokens, p] : {std::pair<int64_t, int64_t>{700, 600}, {900, 300}}) {
        const auto after = maps_of(ssa, other, tokens);
        after->Reuse(*before, p);
        const model::BandedMapPtr a = after->Banded(model::MapSide::Ssa, 0, 0), b = after->Banded(model::MapSide::Compare, 0, 0);
        const std::string what = std::to_string(tokens) + " tokens, edit at " + std::to_string(p);
        auto shares = [](const model::BandedMap& now, const model::BandedMap& was, size_t band) {  // the old map may have fewer bands
            return band < was.Bands().size() && now.Bands()[band] == was.Bands()[band];
        };
        for (size_t band = 0; band < a->Bands().size(); ++band) {
            const bool above = static_cast<int64_t>(band + 1) * model::kMapBandRows <= p;
            EXPECT_EQ(shares(*a, *old_a, band), above) << what << ": band " << band;
            EXPECT_EQ(shares(*b, *old_b, band), above) << what << ": band " << band << " (comparison)";
        }
        const auto fresh = maps_of(ssa, other, tokens);
        ExpectSameCells(*a, *fresh->Cells(model::MapSide::Ssa, 0, 0), what);
        const model::MapCellsPtr kept = a->Minus(*b);
        const auto* difference = dynamic_cast<const model::BandedMap*>(kept.get());
        const auto* old = dynamic_cast<const model::BandedMap*>(old_difference.get());
        ASSERT_TRUE(difference && old);
        for (size_t band = 0; band < difference->Bands().size(); ++band)
            EXPECT_EQ(shares(*difference, *old, band), static_cast<int64_t>(band + 1) * model::kMapBandRows <= p) << what << ": difference band " << band;
        ExpectSameCells(*difference, *fresh->Cells(model::MapSide::Ssa, 0, 0)->Minus(*fresh->Cells(model::MapSide::Compare, 0, 0)),
                        what + " (difference)", 0.0f, /*difference=*/true);
    }
    EXPECT_FALSE(old_a->Minus(*before->Cells(model::MapSide::Ssa, 0, 1)) == nullptr) << "two heads of one size subtract";
    EXPECT_FALSE(old_a->Minus(*maps_of(ssa, other, 599)->Cells(model::MapSide::Ssa, 0, 0))) << "sizes differ";
}

// The extent of a band's rows counts each row's causal cells only, from the band's first row on.
TEST(MapBands, ABandsExtentCountsItsCausalCells) {
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    for (const auto& shape : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 0}, {3, 40, 37}, {20, 300, 280}, {9, 17, 4}}) {
        const int64_t rows = std::get<0>(shape), width = std::get<1>(shape), first = std::get<2>(shape);  // a lambda below reads them
        std::mt19937 rng(static_cast<unsigned>(rows * width));
        std::vector<float> cells(static_cast<size_t>(rows * width));
        for (float& v : cells) v = std::uniform_real_distribution<float>(-2.0f, 2.0f)(rng);
        auto cell = [&](int64_t r, int64_t j) -> float& { return cells[static_cast<size_t>(r * width + j)]; };
        if (first + 1 < width) cell(0, first + 1) = 90.0f;  // right of the first row's diagonal: not counted
        cell(rows - 1, 0) = inf;
        if (rows > 1) cell(1, 0) = nan;
        const at::Tensor t = at::from_blob(cells.data(), {rows, width}, at::kFloat).clone();
        model::MapExtent want;  // the rule, cell by cell
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t j = 0; j <= std::min(first + r, width - 1); ++j) {
                const float v = cells[static_cast<size_t>(r * width + j)];
                if (!std::isfinite(v)) continue;
                want.max = std::max(want.max, v);
                if (v > 0) want.min_positive = std::min(want.min_positive, v);
                want.max_abs = std::max(want.max_abs, std::abs(v));
            }
        const at::Tensor bits = model::ExtentBits(t, first).contiguous();
        for (const model::MapExtent& got : {model::HostMapExtent(cells.data(), rows, width, first), model::ExtentFromBits(bits.data_ptr<int32_t>())}) {
            EXPECT_EQ(got.max, want.max) << rows << " x " << width << " from " << first;
            EXPECT_EQ(got.min_positive, want.min_positive) << rows << " x " << width << " from " << first;
            EXPECT_EQ(got.max_abs, want.max_abs) << rows << " x " << width << " from " << first;
        }
        EXPECT_LT(want.max, 90.0f);
    }
}

namespace {

model::HeadMap MapOf(float value) { return std::make_shared<const std::vector<float>>(4, value); }

}  // namespace

// The map cache makes a map outside its lock: a map it keeps is read while another thread is
// still making one (the window's worker rebuilds the next head's map while the window reads the
// shown one). Made under the lock, the read waited for the make, which waits for the read: the
// make gives up after 20 s and the test fails.
TEST(MapCache, AKeptMapIsReadWhileAnotherIsMade) {
    model::LruMaps<model::HeadMap> cache(1 << 20);
    const model::LruMaps<model::HeadMap>::Key kept{0, 0, 0}, slow{0, 0, 1};
    cache.Get(kept, [] { return MapOf(1.0f); });
    std::promise<void> read;
    std::future<void> was_read = read.get_future();
    std::promise<void> making;
    std::future<void> started = making.get_future();
    bool waited_out = false;
    std::thread maker([&] {
        cache.Get(slow, [&] {
            making.set_value();
            waited_out = was_read.wait_for(std::chrono::seconds(20)) != std::future_status::ready;
            return MapOf(2.0f);
        });
    });
    started.wait();
    int made = 0;
    const model::HeadMap got = cache.Get(kept, [&] { ++made; return MapOf(3.0f); });
    read.set_value();
    maker.join();
    EXPECT_FALSE(waited_out) << "reading a kept map waited for another map's make";
    EXPECT_EQ(made, 0);
    EXPECT_EQ((*got)[0], 1.0f);
    EXPECT_EQ((*cache.Get(slow, [] { return MapOf(4.0f); }))[0], 2.0f) << "the slow map was kept";
}

// A make that throws leaves nothing behind: the next Get of that map makes it.
// The cache keeps its `keep` most recent maps whatever their size (a head's sides, which the next
// analysis after an edit keeps bands of), and beyond them what fits its budget.
TEST(MapCache, KeepsTheMostRecentMapsPastItsBudget) {
    model::LruMaps<model::HeadMap> cache(1, 3);  // a budget of one byte: only the three kept
    for (int h = 0; h < 5; ++h) cache.Get({0, 0, h}, [&] { return MapOf(static_cast<float>(h)); });
    const auto entries = cache.Entries();
    ASSERT_EQ(entries.size(), 3u);
    EXPECT_EQ(std::get<2>(entries[0].first), 4);
    EXPECT_EQ(std::get<2>(entries[2].first), 2);
    cache.SetBudget(size_t{1} << 20);
    for (int h = 5; h < 9; ++h) cache.Get({0, 0, h}, [&] { return MapOf(static_cast<float>(h)); });
    EXPECT_EQ(cache.Entries().size(), 7u) << "a larger budget keeps more";
}

TEST(MapCache, AFailedMakeIsTriedAgain) {
    model::LruMaps<model::HeadMap> cache(1 << 20);
    const model::LruMaps<model::HeadMap>::Key key{1, 2, 3};
    EXPECT_THROW(cache.Get(key, []() -> model::HeadMap { throw std::runtime_error("out of memory"); }), std::runtime_error);
    EXPECT_EQ((*cache.Get(key, [] { return MapOf(5.0f); }))[0], 5.0f);
}
