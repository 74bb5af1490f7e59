#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "viz/colormap.h"

namespace {

TEST(Colormap, EndsMatchTheirKeyColours) {
    viz::Rgba8 lo = viz::SampleColormap(viz::Colormap::Viridis, 0.0f), hi = viz::SampleColormap(viz::Colormap::Viridis, 1.0f);
    EXPECT_EQ(lo.r, 68); EXPECT_EQ(lo.g, 1); EXPECT_EQ(lo.b, 84);
    EXPECT_EQ(hi.r, 253); EXPECT_EQ(hi.g, 231); EXPECT_EQ(hi.b, 37);
    viz::Rgba8 mid = viz::SampleColormap(viz::Colormap::Diverging, 0.5f);
    // 0.5 samples entry 128 of 256 (t = 0.502), one step past the white key.
    EXPECT_NEAR(mid.r, 247, 2); EXPECT_NEAR(mid.g, 247, 2); EXPECT_NEAR(mid.b, 247, 2);
}

TEST(Colormap, ClampsOutOfRangeAndNaN) {
    for (viz::Colormap map : {viz::Colormap::Viridis, viz::Colormap::Magma, viz::Colormap::Diverging}) {
        viz::Rgba8 lo = viz::SampleColormap(map, 0.0f), hi = viz::SampleColormap(map, 1.0f);
        viz::Rgba8 below = viz::SampleColormap(map, -3.0f), above = viz::SampleColormap(map, 7.0f), nan = viz::SampleColormap(map, NAN);
        EXPECT_EQ(below.r, lo.r); EXPECT_EQ(above.r, hi.r); EXPECT_EQ(nan.r, lo.r);
        EXPECT_EQ(below.b, lo.b); EXPECT_EQ(above.b, hi.b); EXPECT_EQ(nan.b, lo.b);
    }
}

TEST(Colormap, ViridisBrightensMonotonically) {
    float previous = -1;
    for (int i = 0; i <= 32; ++i) {
        viz::Rgba8 c = viz::SampleColormap(viz::Colormap::Viridis, i / 32.0f);
        float luma = 0.2126f * c.r + 0.7152f * c.g + 0.0722f * c.b;
        EXPECT_GT(luma, previous) << "at " << i;
        previous = luma;
    }
}

TEST(Normalize, LinearAndLogScales) {
    EXPECT_FLOAT_EQ(viz::Normalize(0.5f, {0, 1}, false), 0.5f);
    EXPECT_FLOAT_EQ(viz::Normalize(2.0f, {0, 1}, false), 1.0f);
    EXPECT_FLOAT_EQ(viz::Normalize(0.01f, {0.001f, 1}, true), 1.0f / 3.0f);
    EXPECT_FLOAT_EQ(viz::Normalize(0.0f, {0.001f, 1}, true), 0.0f);
    EXPECT_FLOAT_EQ(viz::Normalize(3.0f, {1, 1}, false), 0.0f);  // empty range: no division by zero
}

}  // namespace

namespace {

// The entry SampleColormap reads for t, as it documents it: t clamped to [0, 1] (NaN as 0), times
// 255, rounded half away from zero.
int EntryOf(float t) {
    if (!(t >= 0.0f)) t = 0.0f;
    return static_cast<int>(std::lround(std::min(t, 1.0f) * 255.0f));
}

struct ScaleCase {
    const char* name;
    viz::Colormap map;
    viz::Range range;
    bool log_scale;
};

// Ranges a heatmap meets (attention on log and linear scales, a difference map, a narrow log
// range whose guess can be entries off) and ones it should survive (empty, inverted, below the log
// floor, as wide as no float, infinite, NaN).
const ScaleCase kScales[] = {
    {"log attention", viz::Colormap::Viridis, {1e-9f, 1.0f}, true},
    {"log from 1e-3", viz::Colormap::Magma, {1e-3f, 0.7f}, true},
    {"narrow log", viz::Colormap::Viridis, {0.5f, 0.6f}, true},
    {"log below the floor", viz::Colormap::Viridis, {1e-9f, 1e-8f}, true},
    {"linear", viz::Colormap::Viridis, {0.0f, 1.0f}, false},
    {"linear offset", viz::Colormap::Magma, {-0.3f, 2.9f}, false},
    {"diverging", viz::Colormap::Diverging, {-0.8f, 0.8f}, false},
    {"empty", viz::Colormap::Viridis, {0.5f, 0.5f}, false},
    {"a few floats wide", viz::Colormap::Viridis, {1.0f, 1.0000005f}, false},
    {"subnormally wide", viz::Colormap::Viridis, {0.0f, 1e-40f}, false},
    {"inverted", viz::Colormap::Viridis, {1.0f, 0.0f}, true},
    {"as wide as no float", viz::Colormap::Diverging, {-3e38f, 3e38f}, false},
    {"infinite", viz::Colormap::Viridis, {0.0f, INFINITY}, false},
    {"NaN", viz::Colormap::Viridis, {NAN, 1.0f}, true},
};

void ExpectSameEntries(const viz::ColourScale& scale, const ScaleCase& c, const std::vector<float>& values) {
    int failures = 0;
    for (float v : values) {
        const float t = viz::Normalize(v, c.range, c.log_scale);
        const viz::Rgba8 got = scale(v), want = viz::SampleColormap(c.map, t);
        if (scale.Index(v) == EntryOf(t) && got.r == want.r && got.g == want.g && got.b == want.b) continue;
        ADD_FAILURE() << c.name << ": value " << std::hexfloat << v << std::defaultfloat << " (" << v << ") gets entry "
                      << int(scale.Index(v)) << ", Normalize and SampleColormap give " << EntryOf(t);
        if (++failures == 5) return;
    }
}

}  // namespace

// ColourScale against SampleColormap(Normalize(...)) value by value: every float of a quarter octave in
// the range (each step's first float and the one before it among them), random bit patterns
// (NaN, infinities, subnormals, both zeros) and random values across the range, in both of its
// modes (many values: the steps; few: value by value).
TEST(ColourScale, EveryValueSamplesTheEntryNormalizeGives) {
    std::mt19937 rng(11);
    for (const ScaleCase& c : kScales) {
        std::vector<float> values = {0.0f, -0.0f, NAN, INFINITY, -INFINITY, 1e-6f, std::nextafter(1e-6f, 0.0f), c.range.min,
                                     c.range.max, std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max()};
        std::uniform_int_distribution<uint32_t> bits;
        for (int i = 0; i < 50000; ++i) {
            const uint32_t b = bits(rng);
            float f;
            std::memcpy(&f, &b, sizeof f);
            values.push_back(f);
        }
        const bool finite = std::isfinite(c.range.min) && std::isfinite(c.range.max);
        const float lo = finite ? std::min(c.range.min, c.range.max) : 0.0f, hi = finite ? std::max(c.range.min, c.range.max) : 1.0f;
        std::uniform_real_distribution<float> within(lo - 0.1f * (hi - lo), hi + 0.1f * (hi - lo));
        for (int i = 0; i < 50000 && std::isfinite(hi - lo); ++i) values.push_back(within(rng));
        // A quarter of an octave inside the range, every float of it (2^21 of them), where steps lie.
        const float octave = c.log_scale ? std::max(std::sqrt(std::max(lo, 1e-6f) * hi), 1e-6f) : std::max(hi / 3, 1e-3f);
        for (float f = octave; f < 1.19f * octave && std::isfinite(octave); f = std::nextafter(f, INFINITY)) values.push_back(f);
        ExpectSameEntries(viz::ColourScale(c.map, c.range, c.log_scale, size_t{1} << 20), c, values);
        values.resize(100000);  // value by value is Normalize itself: the random ones are enough
        ExpectSameEntries(viz::ColourScale(c.map, c.range, c.log_scale, 10), c, values);
    }
}
