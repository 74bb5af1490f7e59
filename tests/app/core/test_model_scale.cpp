// app/core/model_scale.h: when a model is big, and how the model panel says its size.
#include <gtest/gtest.h>

#include "app/core/model_scale.h"

namespace {

TEST(CountName, ThreeSignificantDigitsAndAUnit) {
    EXPECT_EQ(app::CountName(0), "0");
    EXPECT_EQ(app::CountName(999), "999");
    EXPECT_EQ(app::CountName(1000), "1 k");
    EXPECT_EQ(app::CountName(1100), "1.1 k");        // the graph model: was "0 M"
    EXPECT_EQ(app::CountName(236364), "236 k");
    EXPECT_EQ(app::CountName(999'499), "999 k");
    EXPECT_EQ(app::CountName(999'500), "1 M");       // not "1e+03 k"
    EXPECT_EQ(app::CountName(1'353'472), "1.35 M");  // the English model: was "1 M"
    EXPECT_EQ(app::CountName(124'439'808), "124 M");
    EXPECT_EQ(app::CountName(400'000'000), "400 M");
    EXPECT_EQ(app::CountName(1'100'048'384), "1.1 B");
    EXPECT_EQ(app::CountName(70'553'706'496), "70.6 B");
    EXPECT_EQ(app::CountName(2'000'000'000'000), "2000 B");
}

TEST(ModelScale, TheReasonNamesTheSizeAndTheLine) {
    model::ModelInfo info;
    info.device = "cpu";
    info.parameters = 1100;
    app::ModelScale s = app::ScaleOf(info);
    EXPECT_FALSE(s.big);
    EXPECT_EQ(s.reason.rfind("1.1 k parameters: under 400 M parameters", 0), 0u) << s.reason;
    info.parameters = 1'100'048'384;
    s = app::ScaleOf(info);
    EXPECT_TRUE(s.big);
    EXPECT_EQ(s.reason.rfind("1.1 B parameters on the CPU: big (400 M parameters or more)", 0), 0u) << s.reason;
    info.device = "cuda:1";
    s = app::ScaleOf(info);
    EXPECT_FALSE(s.big) << "on a GPU no model is big";
    EXPECT_EQ(app::ScaleOf(info, 1000).big, false);
    info.device = "cpu";
    EXPECT_TRUE(app::ScaleOf(info, 1'100'048'384).big) << "the line itself is big";
}

}  // namespace
