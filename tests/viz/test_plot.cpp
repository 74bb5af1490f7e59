// Plot descriptions (viz/plot.h) as files: what viz::PlotFigure makes of each kind of series is
// the figure of the plain series it stands for: a histogram the bars of its counts, category bars
// side by side in their slots, the reference line a line series in the legend, a line without X
// at 1, 2, ... The window's selection (XMarker, Highlighted) and point labels leave a file as it was.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "viz/figure.h"
#include "viz/figures.h"
#include "viz/plot.h"
#include "viz/ticks.h"

namespace {

class PlotDescription : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        std::string error;
        ASSERT_TRUE(viz::LoadFigureFonts(&error)) << error;
    }
};

std::string Svg(const viz::Plot& plot) { return viz::FigureToSvg(viz::PlotFigure(plot)); }

viz::PlotSeries Series(const std::string& name, viz::SeriesKind kind, std::vector<float> x, std::vector<float> y, viz::Rgba8 color) {
    viz::PlotSeries s;
    s.Name = name;
    s.Kind = kind;
    s.X = std::move(x);
    s.Y = std::move(y);
    s.Color = color;
    return s;
}

// Axis labels: short where they differ, more digits where two neighbours would read the same
// (a run's loss between 10.75 and 10.92 had "10.8" twice on its axis; a tiny run's entropy from
// 2.38175 to 2.38193 read "2.38" at every tick of the window's Run tab, which now labels its axes
// with these).
TEST(Ticks, NeighbouringLabelsNeverReadTheSame) {
    EXPECT_EQ(viz::FormatTicks({10.8f, 10.85f, 10.9f}), (std::vector<std::string>{"10.8", "10.85", "10.9"}));
    EXPECT_EQ(viz::FormatTicks({0.0f, 0.25f, 0.5f}), (std::vector<std::string>{"0", "0.25", "0.5"}));
    EXPECT_EQ(viz::FormatTicks({1000.0f, 1500.0f}), (std::vector<std::string>{"1000", "1500"}));
    for (const viz::Range r : {viz::Range{10.75f, 10.92f}, viz::Range{0.1231f, 0.1236f}, viz::Range{-2.0f, 3.0f}, viz::Range{999.1f, 999.4f},
                               viz::Range{2.38174f, 2.38192f}}) {
        const std::vector<std::string> labels = viz::FormatTicks(viz::NiceTicks(r, false, 6));
        ASSERT_GE(labels.size(), 2u) << r.min;
        for (size_t k = 1; k < labels.size(); ++k) EXPECT_NE(labels[k], labels[k - 1]) << r.min << ".." << r.max;
    }
}

// One notation on a linear axis: qk_spectrum's read "0, 5e-04, 0.001, 0.0015". A log axis's decades
// are powers of ten ("10⁻⁴, 10⁻³, 10⁻²", not "1e-04, 0.001, 0.01"; a bar's end not a decade
// "3.2×10⁻⁷"); ticks that are all small keep theirs.
TEST(Ticks, ALinearAxisKeepsOneNotation) {
    EXPECT_EQ(viz::FormatTicks({0.0f, 0.0005f, 0.001f, 0.0015f}), (std::vector<std::string>{"0", "0.0005", "0.001", "0.0015"}));
    EXPECT_EQ(viz::FormatTicks({-0.0002f, 0.0f, 0.0002f}), (std::vector<std::string>{"-2e-04", "0", "2e-04"}));
    EXPECT_EQ(viz::FormatTicks({0.00025f, 0.0005f, 0.00075f, 0.001f}), (std::vector<std::string>{"0.00025", "0.0005", "0.00075", "0.001"}));
    EXPECT_EQ(viz::FormatTicks({1e-4f, 1e-3f, 1e-2f}), (std::vector<std::string>{"10\xE2\x81\xBB\xE2\x81\xB4", "10\xE2\x81\xBB\xC2\xB3", "10\xE2\x81\xBB\xC2\xB2"}));
    EXPECT_EQ(viz::FormatTicks({3.2e-7f, 1e-6f, 1e-3f, 1.0f, 10.0f}),
              (std::vector<std::string>{"3.2\xC3\x97" "10\xE2\x81\xBB\xE2\x81\xB7", "10\xE2\x81\xBB\xE2\x81\xB6", "10\xE2\x81\xBB\xC2\xB3", "10\xE2\x81\xB0", "10\xC2\xB9"}));
    EXPECT_EQ(viz::FormatTicks({0.001f, 0.01f, 0.1f, 1.0f}), (std::vector<std::string>{"0.001", "0.01", "0.1", "1"}));  // not mixed: kept
    // A bar's end next to a decade in the digits that tell them apart; a linear bar's ticks are no decades.
    EXPECT_EQ(viz::FormatTicks({9.97e-5f, 1e-4f, 1e-3f, 1e-2f})[0], "9.97\xC3\x97" "10\xE2\x81\xBB\xE2\x81\xB5");
    EXPECT_EQ(viz::FormatTicks({1e-4f, 2.5e-4f, 5e-4f, 7.5e-4f, 1e-3f, 1.2e-3f}),
              (std::vector<std::string>{"0.0001", "0.00025", "0.0005", "0.00075", "0.001", "0.0012"}));
    EXPECT_EQ(viz::FormatTicks({0.0f, 5e-4f, 1e-3f, 1.37e-3f}), (std::vector<std::string>{"0", "0.0005", "0.001", "0.00137"}));
    EXPECT_EQ(viz::FormatTicks({0.0f, 500000.0f, 1000000.0f}), (std::vector<std::string>{"0", "500000", "1000000"}));  // a run's steps
    // Values a float's spacing apart: one tick each, never one value twice (labels printed over each other).
    const std::vector<float> tight = viz::NiceTicks({1.6782631f, 1.6782634f}, false, 6);
    for (size_t k = 1; k < tight.size(); ++k) EXPECT_NE(tight[k], tight[k - 1]);
    // A narrow range just above 1 (the highlight's tau_q position term read "1, 1, 1").
    const std::vector<std::string> near_one = viz::FormatTicks(viz::NiceTicks({1.0f, 1.0004f}, false, 5));
    ASSERT_GE(near_one.size(), 2u);
    for (size_t k = 1; k < near_one.size(); ++k) EXPECT_NE(near_one[k], near_one[k - 1]) << near_one[k];
}

// A fitted axis: padded, but not across zero where the data stays on one side of it (a run's JS
// divergence from 0 up had its axis start at -0.003).
// A printed number that rounds to zero loses its sign (head_impacts.png's cells and the Lens tab's
// bars read "-0.000" for -0.000214); others keep theirs.
TEST(Ticks, ANumberThatRoundsToZeroHasNoSign) {
    EXPECT_EQ(viz::SignlessZero("-0.000"), "0.000");
    EXPECT_EQ(viz::SignlessZero("+0.000"), "0.000");
    EXPECT_EQ(viz::SignlessZero("-0"), "0");
    for (const char* kept : {"-0.001", "+0.010", "-1e-04", "-nan", "+inf", "-", "0.000", ""}) EXPECT_EQ(viz::SignlessZero(kept), kept) << kept;
}

TEST(Ticks, AFittedAxisCrossesZeroOnlyWithItsData) {
    auto expect = [](viz::Range got, float lo, float hi) {
        EXPECT_NEAR(got.min, lo, 1e-6f);
        EXPECT_NEAR(got.max, hi, 1e-6f);
    };
    expect(viz::PaddedRange(0.0f, 0.06f, 0.05f), 0.0f, 0.063f);      // from 0 up: starts at 0
    expect(viz::PaddedRange(0.01f, 0.11f, 0.05f), 0.005f, 0.115f);   // clear of 0: padded both ways
    expect(viz::PaddedRange(0.001f, 0.101f, 0.05f), 0.0f, 0.106f);   // padding would cross 0: stops there
    expect(viz::PaddedRange(-0.2f, 0.0f, 0.05f), -0.21f, 0.0f);      // from 0 down: ends at 0
    expect(viz::PaddedRange(-1.0f, 1.0f, 0.05f), -1.1f, 1.1f);       // across 0: padded both ways
    expect(viz::PaddedRange(2.0f, 2.0f, 0.05f), 1.8f, 2.2f);         // one value: 10% of it
    expect(viz::PaddedRange(-3.0f, -3.0f, 0.05f), -3.3f, -2.7f);     // one negative value
    expect(viz::PaddedRange(0.0f, 0.0f, 0.05f), 0.0f, 1.0f);         // zero alone: from 0 up, not across
    expect(viz::PaddedRange(1.0f, 0.0f, 0.05f), 0.0f, 1.0f);         // no data
    expect(viz::PaddedRange(NAN, 1.0f, 0.05f), 0.0f, 1.0f);
}

// Line-end labels (the Temperatures tab's L0..L11): apart by the gap, in order, moved the least.
TEST(Ticks, LabelsSpreadApartInOrderAndInside) {
    // Apart already: unchanged.
    EXPECT_EQ(viz::SpreadLabels({10, 50, 30}, 16, 0, 100), (std::vector<float>{10, 50, 30}));
    // Three on one spot: the first stays, the others below it, a gap each.
    EXPECT_EQ(viz::SpreadLabels({40, 40, 40}, 16, 0, 100), (std::vector<float>{40, 56, 72}));
    // Against the bottom edge: pushed back up, still a gap apart, in order.
    EXPECT_EQ(viz::SpreadLabels({95, 99, 90}, 16, 0, 100), (std::vector<float>{84, 100, 68}));
    // Past the range and not finite: clamped, then spread.
    EXPECT_EQ(viz::SpreadLabels({-50, NAN, 500}, 10, 0, 100), (std::vector<float>{0, 10, 100}));
    // Twelve lines ending within a few pixels: every label readable (a gap apart), none outside.
    std::vector<float> at;
    for (int l = 0; l < 12; ++l) at.push_back(200.0f + (l % 3));
    std::vector<float> y = viz::SpreadLabels(at, 16, 0, 380);
    std::sort(y.begin(), y.end());
    for (size_t k = 1; k < y.size(); ++k) EXPECT_GE(y[k] - y[k - 1], 16.0f - 1e-4f);
    EXPECT_GE(y.front(), 0.0f);
    EXPECT_LE(y.back(), 380.0f);
    EXPECT_TRUE(viz::SpreadLabels({}, 16, 0, 100).empty());
    EXPECT_EQ(viz::SpreadLabels({5}, 16, 10, 0), (std::vector<float>{10}));  // a range upside down: its low end
}

TEST_F(PlotDescription, HistogramsAreTheBarsOfTheirCounts) {
    viz::Plot described;
    described.Series = {Series("a", viz::SeriesKind::Histogram, {}, {0.0f, 0.1f, 0.1f, 0.5f, NAN, 1.0f}, viz::kSsaColor),
                        Series("b", viz::SeriesKind::Histogram, {}, {0.2f, 2.0f}, viz::kCompareColor)};
    described.Options.HistogramBins = 4;
    // Shared bins over 0..2, half a unit wide; the second series translucent.
    viz::Plot plain = described;
    plain.Series[0] = Series("a", viz::SeriesKind::Bars, {0.25f, 0.75f, 1.25f, 1.75f}, {3, 1, 1, 0}, viz::kSsaColor);
    plain.Series[1] = Series("b", viz::SeriesKind::Bars, {0.25f, 0.75f, 1.25f, 1.75f}, {1, 0, 0, 1}, viz::kCompareColor);
    plain.Series[1].Color.a = 170;
    for (viz::PlotSeries& s : plain.Series) s.BarWidth = 0.5f;
    plain.Options.HistogramBins = 0;
    EXPECT_EQ(Svg(described), Svg(plain));
}

TEST_F(PlotDescription, CategoryBarsSitSideBySideAndTheLineSpansThem) {
    viz::Plot described;
    described.Series = {Series("SSA", viz::SeriesKind::Bars, {}, {0.1f, 0.6f, 0.3f}, viz::kSsaColor),
                        Series("twin", viz::SeriesKind::Bars, {}, {0.2f, 0.5f, 0.4f}, viz::kCompareColor)};
    described.Options.XCategories = {"L0 H0", "L0 H1", "L1 H0"};
    described.Options.YLine = viz::PlotLine{0.35f, "eps 0.35"};
    viz::Plot plain = described;
    plain.Options.YLine.reset();
    plain.Series[0].X = {-0.2f, 0.8f, 1.8f};
    plain.Series[1].X = {0.2f, 1.2f, 2.2f};
    for (viz::PlotSeries& s : plain.Series) s.BarWidth = 0.4f;
    viz::PlotSeries line = Series("eps 0.35", viz::SeriesKind::Line, {-0.5f, 2.5f}, {0.35f, 0.35f}, {200, 60, 60, 255});
    line.Dashed = true;  // a threshold, in dashes as the window draws it
    plain.Series.push_back(line);
    EXPECT_EQ(Svg(described), Svg(plain));
}

TEST_F(PlotDescription, LinesWithoutXStartAtOneAndTheSelectionStaysInTheWindow) {
    viz::Plot described;
    described.Series = {Series("SSA", viz::SeriesKind::Line, {}, {0.5f, 0.7f, 0.6f}, viz::kSsaColor),
                        Series("heads", viz::SeriesKind::Points, {}, {0.2f, 0.4f, 0.3f}, viz::kCompareColor)};
    described.Series[1].Labels = {"L0 H0", "L0 H1", "L1 H0"};
    described.Options.XMarker = 2.0f;
    described.Options.Highlighted = 1;
    viz::Plot plain;
    plain.Series = described.Series;
    plain.Series[0].X = plain.Series[1].X = {1, 2, 3};
    plain.Series[1].Labels.clear();
    EXPECT_EQ(Svg(described), Svg(plain));
}

}  // namespace
