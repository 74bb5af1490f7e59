#include <gtest/gtest.h>

#include <cmath>

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
