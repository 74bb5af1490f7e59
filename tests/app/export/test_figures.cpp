// The exported analysis figures against golden files, byte for byte (SSAVIZ_UPDATE_GOLDEN=1
// rewrites them): the Sparsity plots of a synthetic analysis against the tau = 1 comparison, the
// tau_q histogram against a twin (whose temperatures are overlaid), and the plots beside a
// fine-tune's base, as PNG and SVG.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <variant>
#include <vector>

#include "app/export/export_figures.h"
#include "app/export/run_curves.h"
#include "tests/app/gui/synthetic.h"
#include "viz/figure.h"
#include "viz/palette.h"

namespace {
namespace fs = std::filesystem;

class ExportFigures : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        std::string error;
        ASSERT_TRUE(viz::LoadFigureFonts(&error)) << error;
    }
};

std::string ReadFile(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void ExpectGolden(const std::string& bytes, const std::string& name) {
    const fs::path golden = fs::path(SSAVIZ_SOURCE_DIR) / "tests" / "app" / "export" / "golden" / name;
    if (const char* update = std::getenv("SSAVIZ_UPDATE_GOLDEN"); update && std::string(update) == "1") {
        fs::create_directories(golden.parent_path());
        std::ofstream(golden, std::ios::binary) << bytes;
        std::printf("SSAVIZ_UPDATE_GOLDEN=1: rewrote %s\n", golden.string().c_str());
        return;
    }
    const std::string want = ReadFile(golden);
    ASSERT_FALSE(want.empty()) << "no golden " << golden << " (SSAVIZ_UPDATE_GOLDEN=1 writes it)";
    if (bytes == want) return;
    const fs::path got = fs::path(SSAVIZ_TEST_OUT) / "export_figures" / name;
    fs::create_directories(got.parent_path());
    std::ofstream(got, std::ios::binary) << bytes;
    ADD_FAILURE() << name << " differs from the golden " << golden << " (" << bytes.size() << " bytes, golden " << want.size()
                  << "); this run's file: " << got;
}

void ExpectSparsityGoldens(const model::Analysis& a, const std::vector<std::string>& names, const std::string& suffix) {
    for (const std::string& name : names) {
        const viz::Figure f = app::SparsityFigure(a, "synthetic", name, 0.3f, {});
        const std::vector<uint8_t> png = viz::EncodePng(viz::RasterizeFigure(f));
        ExpectGolden(std::string(png.begin(), png.end()), "sparsity_" + name + suffix + ".png");
        ExpectGolden(viz::FigureToSvg(f), "sparsity_" + name + suffix + ".svg");
    }
}

TEST_F(ExportFigures, SparsityPlotsAgainstTauOne) {
    ExpectSparsityGoldens(app::MakeSyntheticAnalysis(2, 3, 12, 5), app::SparsityFigureNames(), "");
}

TEST_F(ExportFigures, SparsityPlotsAgainstATwin) {
    model::Analysis a = app::MakeSyntheticAnalysis(2, 3, 12, 5);
    a.comparison = model::Comparison::Twin;
    a.compare_label = "/models/english/vanilla";
    std::vector<float> tau_q(a.tau_q_compare.size());
    for (size_t k = 0; k < tau_q.size(); ++k) tau_q[k] = 0.8f + 0.05f * static_cast<float>(k % 9);
    a.tau_q_compare = model::RowArray(tau_q, a.tau_q_compare.rows(), a.tau_q_compare.tokens());
    ExpectSparsityGoldens(a, {"tau_q_histogram"}, "_twin");  // the others differ from tau = 1's in a legend entry alone
}

// Beside a fine-tune's base, each plot draws the base as a third side (violet): its dilution, its
// sink mass per head and, when it has temperatures of its own, its tau_q.
TEST_F(ExportFigures, SparsityPlotsBesideABase) {
    model::Analysis a = app::MakeSyntheticAnalysis(2, 3, 12, 5);
    const model::Analysis other = app::MakeSyntheticAnalysis(2, 3, 12, 6);
    a.comparison = model::Comparison::Base;
    a.base_label = "/models/pythia-base";
    a.metrics_base = other.metrics_compare;
    a.tau_q_base = other.tau_q_compare;  // a vanilla base: tau = 1 everywhere, no histogram of its own
    a.tau_v_base = other.tau_v_compare;
    ExpectSparsityGoldens(a, {"dilution", "sink_mass", "tau_q_histogram"}, "_base");
    a.tau_q_base = other.tau_q;  // a base that is itself an SSA model
    ExpectSparsityGoldens(a, {"tau_q_histogram"}, "_ssa_base");
}

// Past kFineTuneLossBars tokens the loss parts are lines: every token's faint, each part's centred
// mean over them (and only the means in the legend).
TEST_F(ExportFigures, LongFineTuneLossesAreFaintLinesUnderTheirMeans) {
    model::Analysis a = app::MakeSyntheticAnalysis(1, 1, 301, 5);
    a.comparison = model::Comparison::Base;
    a.base_label = "/models/pythia-base";
    a.loss.assign(300, 0.0f), a.loss_compare.assign(300, 0.0f), a.loss_base.assign(300, 0.0f);
    for (size_t t = 0; t < 300; ++t) {
        a.loss_base[t] = 3.0f;
        a.loss_compare[t] = 2.5f;                          // drift: -0.5 at every token
        a.loss[t] = a.loss_compare[t] + (t % 2 ? -1.0f : 1.0f);  // temperatures: +1, -1, ...
    }
    const viz::Figure f = app::FineTuneLossFigure(a, "synthetic", {});
    std::vector<const viz::FigPolyline*> faint, solid;
    for (const viz::FigItem& item : f.Items)
        if (const auto* line = std::get_if<viz::FigPolyline>(&item); line && line->Points.size() >= 2 * 300)
            (line->Color.a < 255 ? faint : solid).push_back(line);
    ASSERT_EQ(faint.size(), 2u);
    ASSERT_EQ(solid.size(), 2u);
    // The drift's mean is flat at -0.5: one y for every point.
    const std::vector<float>& drift = solid[1]->Points;
    for (size_t k = 3; k < drift.size(); k += 2) EXPECT_FLOAT_EQ(drift[k], drift[1]) << k / 2;
    std::string svg = viz::FigureToSvg(f);
    EXPECT_NE(svg.find("the mean of 9 tokens around it"), std::string::npos);
    EXPECT_EQ(svg.find("temperatures: SSA - tau = 1"), svg.rfind("temperatures: SSA - tau = 1")) << "one legend entry a part";
}

// The fine-tune matrices' one scale: on a log scale from the smallest value above float32 rounding
// (parts within a decade of each other were one colour over a fixed four decades), never more than
// four decades; linear from 0. Its top is the largest of the three JS, the whole change's too (the
// window's Matrix draws all three on it).
TEST(FineTuneRange, LogFromTheSmallestValueAtMostFourDecades) {
    model::Decomposition d;
    d.n_layer = 1, d.n_head = 2;
    d.js_total = {0.3f, 0.3f};
    d.js_temperature = {0.0f, 0.02f};
    d.js_drift = {1e-7f, 0.4f};  // below rounding: not the scale's bottom
    EXPECT_FLOAT_EQ(app::FineTuneRange(d, true).min, 0.02f);
    EXPECT_FLOAT_EQ(app::FineTuneRange(d, true).max, 0.4f);
    EXPECT_FLOAT_EQ(app::FineTuneRange(d, false).min, 0.0f);
    d.js_total = {0.5f, 0.5f};
    EXPECT_FLOAT_EQ(app::FineTuneRange(d, false).max, 0.5f);
    d.js_temperature = {1e-5f, NAN};
    EXPECT_FLOAT_EQ(app::FineTuneRange(d, true).min, 0.5f * 1e-4f);
    d.js_total = d.js_temperature = d.js_drift = {0.0f, 0.0f};  // nothing changed: a range still
    EXPECT_LT(app::FineTuneRange(d, true).min, app::FineTuneRange(d, true).max);
}

TEST(CentredMean, MeansOverTheWindowFewerAtTheEndsWithoutNonFinite) {
    const std::vector<float> m = app::CentredMean({1, 2, 3, 4, 5}, 3);
    EXPECT_EQ(m, (std::vector<float>{1.5f, 2, 3, 4, 4.5f}));
    const std::vector<float> gaps = app::CentredMean({1, NAN, 3, INFINITY, NAN, NAN, NAN}, 3);
    EXPECT_FLOAT_EQ(gaps[0], 1.0f);
    EXPECT_FLOAT_EQ(gaps[1], 2.0f);
    EXPECT_FLOAT_EQ(gaps[2], 3.0f);
    EXPECT_FLOAT_EQ(gaps[3], 3.0f);
    EXPECT_TRUE(std::isnan(gaps[5])) << "no finite value in its window";
    EXPECT_EQ(app::CentredMean({}, 9), std::vector<float>{});
}

}  // namespace

// The lens difference's scale (LensDifferenceOf): the 99th percentile of the cells' magnitudes by
// nearest rank, so one cell that changed by 10 nats leaves the rest of a 200-cell grid readable;
// under 100 cells it is the largest; non-finite cells are left out of both; at least 1e-3.
TEST(LensDifference, TheScaleIsThe99thPercentileOfTheCells) {
    model::Lens ssa, base;
    ssa.n_layer = base.n_layer = 1;
    for (int k = 0; k < 200; ++k) {  // [2, 100]
        ssa.loss.push_back(1.0f);
        base.loss.push_back(k % 2 ? 1.25f : 0.5f);  // SSA's loss lower by 0.25 or higher by 0.5
    }
    base.loss[7] = 11.0f;  // one cell of -10
    app::LensDifference d = app::LensDifferenceOf(ssa, base);
    ASSERT_EQ(d.delta.size(), 200u);
    EXPECT_FLOAT_EQ(d.delta[1], -0.25f);
    EXPECT_FLOAT_EQ(d.delta[2], 0.5f);
    EXPECT_FLOAT_EQ(d.most, 0.5f);  // the 198th smallest of 200 magnitudes
    EXPECT_FLOAT_EQ(d.largest, 10.0f);
    EXPECT_TRUE(d.Clips());
    EXPECT_NE(app::LensScaleNote(d).find("99th percentile"), std::string::npos);
    for (int k = 0; k < 3; ++k) base.loss[k * 10] = 8.0f;  // four cells far out: the 198th smallest is one of them
    d = app::LensDifferenceOf(ssa, base);
    EXPECT_FLOAT_EQ(d.most, 7.0f);
    EXPECT_FLOAT_EQ(d.largest, 10.0f);

    ssa.loss.resize(98), base.loss.resize(98);  // under 100 cells: the largest, nothing clipped
    base.loss[5] = NAN;
    base.loss[9] = INFINITY;
    d = app::LensDifferenceOf(ssa, base);
    EXPECT_FLOAT_EQ(d.most, 10.0f);
    EXPECT_FLOAT_EQ(d.largest, 10.0f);
    EXPECT_FALSE(d.Clips());
    EXPECT_EQ(app::LensScaleNote(d), "");
    EXPECT_TRUE(std::isnan(d.delta[5]));

    base.loss = ssa.loss;  // no change anywhere: the floor
    d = app::LensDifferenceOf(ssa, base);
    EXPECT_FLOAT_EQ(d.most, 1e-3f);
    EXPECT_FALSE(d.Clips());
    base.loss.pop_back();  // shapes differ
    EXPECT_TRUE(app::LensDifferenceOf(ssa, base).delta.empty());
}

// A run's timeline (app/export/run_curves.h): steps to sparsity from each head's entropy, as the
// Run tab's table and the heads matrix read it (run, compare run, their difference), and a token's
// tau_q against step.
// A run's name in legends: its folder, with what tells it from the other run's, and its role (the
// legends said "run" and "compare run", never which model).
TEST(RunLegendName, TheFolderThatTellsTheRunsApartAndTheRole) {
    EXPECT_EQ(app::RunLegendName("/runs/graph/ssa", "/runs/graph/vanilla", "run"), "ssa (run)");
    EXPECT_EQ(app::RunLegendName("/runs/graph/vanilla/", "/runs/graph/ssa", "compare run"), "vanilla (compare run)");
    EXPECT_EQ(app::RunLegendName("/a/ssa/out", "/b/ssa/out", "run"), "a/ssa/out (run)");
    EXPECT_EQ(app::RunLegendName("/x/a/out", "/x/b/out", "run"), "a/out (run)");
    EXPECT_EQ(app::RunLegendName("out", "", "run"), "out (run)");
    EXPECT_EQ(app::RunLegendName("/x/run", "", "run"), "run");
    EXPECT_EQ(app::RunLegendName("/", "", "run"), "run");
    EXPECT_EQ(app::RunLegendName("/x/a\x1b[2Jb", "", "run"), "a\\x1b[2Jb (run)");
    // At most 14 characters of the name, its end kept, so the role stays in a legend's 40.
    EXPECT_EQ(app::RunLegendName("/r/" + std::string(250, 'L') + "x", "/r/ssa", "compare run"), "\xE2\x80\xA6" + std::string(12, 'L') + "x (compare run)");
    EXPECT_EQ(app::RunLegendName("/r/\xC3\xA9t\xC3\xA9-runs-of-two-thousand", "", "run"), "\xE2\x80\xA6-two-thousand (run)");
    // A bidirectional override is written out, not obeyed.
    EXPECT_EQ(app::RunLegendName("/r/r\xE2\x80\xAEx", "", "run"), "r\\u202ex (run)");
}

// A step that does not fit a run names the step it is set against: the first analysed (the run's
// first step may have failed: it was named "the run's first step" all the same), or the step a
// window shows, set before any step (a step of another shape before it was the run's, and the
// step shown listed as failed).
TEST(RunTimeline, AMisfitNamesTheStepItIsSetAgainst) {
    const app::RunModel two{"gpt2", 2, 2, 32, 512, 64}, one{"gpt2", 1, 2, 32, 512, 64}, wide{"gpt2", 2, 2, 64, 512, 64};
    app::RunTimeline run;
    EXPECT_EQ(run.Fits(one, {1, 2, 3}), "");  // the first analysed: the run's model
    run.Add(50, "checkpoint-50", 1, 2, {}, {}, 3, {});
    EXPECT_EQ(run.Misfit(two, {}), "has 2 layers x 2 heads; the run's first analysed step, 50 (checkpoint-50), has 1 x 2");
    EXPECT_EQ(run.Fits(one, {1, 2, 4}), "tokenises the text otherwise than the run's first analysed step, 50 (checkpoint-50): another tokenizer");
    EXPECT_EQ(run.Fits(one, {1, 2, 3}), "");

    app::RunTimeline shown;
    shown.Expect(two, "the step shown, 200 (checkpoint-200)");
    EXPECT_EQ(shown.Fits(one, {}), "has 1 layers x 2 heads; the step shown, 200 (checkpoint-200), has 2 x 2");
    EXPECT_EQ(shown.Fits(wide, {}), "has a width of 64; the step shown, 200 (checkpoint-200), has 32: another model");
    EXPECT_EQ(shown.Fits(two, {7, 8}), "");
    shown.Add(100, "checkpoint-100", 2, 2, {}, {}, 2, {});
    EXPECT_EQ(shown.Fits(two, {7, 9}), "tokenises the text otherwise than the run's first analysed step, 100 (checkpoint-100): another tokenizer");
}

TEST(RunTimeline, StepsToSparsityAndATokensTauQ) {
    const int L = 1, H = 2, T = 6;
    app::RunTimeline run, compare;
    for (int k = 0; k < 3; ++k) {
        const model::Analysis a = app::MakeSyntheticAnalysis(L, H, T, 3 + k);
        run.Add(10 * k, "checkpoint-" + std::to_string(10 * k), a);
        compare.Add(10 * k, "checkpoint-" + std::to_string(10 * k), a);
    }
    const size_t entropy = static_cast<size_t>(app::FindHeadValue("entropy")->index) * app::kSides;
    auto set = [&](app::RunTimeline& t, int head, std::vector<float> values) {
        for (size_t k = 0; k < values.size(); ++k) t.heads[k][head].values[entropy] = values[k];
    };
    set(run, 0, {2.0f, 1.5f, 0.9f});     // below half of 2.0 at step 20
    set(run, 1, {2.0f, 1.2f, 1.1f});     // never
    set(compare, 0, {2.0f, 0.8f, 0.5f});  // at step 10
    set(compare, 1, {1.0f, 0.4f, 0.3f});  // at step 10
    EXPECT_EQ(app::StepsToSparsity(run), (std::vector<int64_t>{20, -1}));
    // One head's own line beside the layers' means: the one that moved most (head 0, 2.0 to 0.9),
    // or the one asked for (the Run tab's selected head), drawn dashed and named.
    const app::RunCurve most = app::CurveOf(run, "entropy"), chosen = app::CurveOf(run, "entropy", app::HeadRef{0, 1});
    EXPECT_EQ(most.head_name, "L0 H0, moved most");
    EXPECT_EQ(most.head, (std::vector<float>{2.0f, 1.5f, 0.9f}));
    EXPECT_EQ(chosen.head_name, "L0 H1 (selected head)");
    EXPECT_EQ(chosen.head, (std::vector<float>{2.0f, 1.2f, 1.1f}));
    bool dashed = false;
    for (const viz::PlotSeries& s : app::RunCurvesPlot("entropy", {most}).Series) dashed |= s.Dashed && s.Name == "L0 H0, moved most" && s.Y == most.head;
    EXPECT_TRUE(dashed);
    EXPECT_TRUE(app::CurveOf(run, "loss").head.empty()) << "the loss is the model's, no head's";
    const std::vector<float> own = app::StepsToSparsityValues(run, &compare, app::MapMode::Ssa);
    const std::vector<float> other = app::StepsToSparsityValues(run, &compare, app::MapMode::Compare);
    const std::vector<float> diff = app::StepsToSparsityValues(run, &compare, app::MapMode::Difference);
    EXPECT_EQ(own[0], 20.0f);
    EXPECT_TRUE(std::isnan(own[1]));
    EXPECT_EQ(other, (std::vector<float>{10.0f, 10.0f}));
    EXPECT_EQ(diff[0], 10.0f);
    EXPECT_TRUE(std::isnan(diff[1]));
    EXPECT_TRUE(std::isnan(app::StepsToSparsityValues(run, nullptr, app::MapMode::Compare)[0])) << "no compare run";

    // Token 4 in head (0, 1): each step's own tau_q; a token past the text is NaN.
    const app::RunCurve tau = app::TokenTauQCurve(run, 0, 1, 4);
    ASSERT_EQ(tau.all.size(), 3u);
    for (int k = 0; k < 3; ++k) {
        const model::Analysis a = app::MakeSyntheticAnalysis(L, H, T, 3 + k);
        EXPECT_EQ(tau.all[k], a.tau_q[(0 * H + 1) * T + 4]) << "step " << k;
        EXPECT_EQ(tau.steps[k], 10.0f * k);
    }
    EXPECT_TRUE(std::isnan(app::TokenTauQCurve(run, 0, 1, T).all[0]));

    // The loss curve: each step's comparison (tau = 1) beside SSA's, in the comparison's blue, so
    // the step where the two part shows when the temperatures began to matter.
    const app::RunCurve loss = app::CurveOf(run, "loss");
    ASSERT_EQ(loss.compare.size(), 3u);
    for (int k = 0; k < 3; ++k) {
        const model::Analysis a = app::MakeSyntheticAnalysis(L, H, T, 3 + k);
        EXPECT_EQ(loss.all[k], model::MeanLoss(a.loss));
        EXPECT_EQ(loss.compare[k], model::MeanLoss(a.loss_compare));
    }
    const viz::Plot plot = app::RunCurvesPlot("loss", {loss});
    const auto tau1 = std::find_if(plot.Series.begin(), plot.Series.end(), [](const viz::PlotSeries& s) { return s.Name == "tau = 1 (the comparison)"; });
    ASSERT_NE(tau1, plot.Series.end());
    EXPECT_EQ(tau1->Y, loss.compare);
    EXPECT_EQ(tau1->Color.b, viz::kCompareColor.b);
}

// A curve drawn under another is said so in the legend, and one that never moves says its value:
// the graph run's tau = 1 loss lay 1e-4 nats under SSA's, its one layer under the all-heads mean,
// and the vanilla compare run's JS to its own tau = 1 was a flat 0 (each listed, none seen).
TEST(RunCurves, ALegendSaysWhatItsCurvesHide) {
    app::RunCurve ssa, vanilla;
    ssa.label = "ssa (run)", vanilla.label = "vanilla (compare run)";
    ssa.steps = vanilla.steps = {0, 100, 200};
    ssa.all = {2.1f, 1.5f, 1.2f};
    ssa.layers = {ssa.all};
    ssa.compare = {2.1001f, 1.5001f, 1.2001f}, ssa.compare_name = "tau = 1";
    vanilla.all = {0.0f, 0.0f, 0.0f};
    vanilla.layers = {vanilla.all};
    const viz::Plot plot = app::RunCurvesPlot("js_divergence", {ssa, vanilla});
    std::vector<std::string> names;
    for (const viz::PlotSeries& s : plot.Series)
        if (!s.Name.empty()) names.push_back(s.Name);
    EXPECT_EQ(names, (std::vector<std::string>{"tau = 1 (the run's comparison), under the run's line", "ssa (run), all heads (layer 0)",
                                                "vanilla (compare run), all heads (layer 0): 0 at every step"}));
    // JS to the comparison named by it ("JS to comparison" beside a base read as JS to the base).
    EXPECT_EQ(plot.Options.Title, "JS to tau = 1 against training step (mean over heads)");
    EXPECT_EQ(plot.Options.YLabel, "JS to tau = 1 (nats)");
    // Apart by more than a pixel's worth, with two layers, each is drawn and named as it was.
    ssa.compare = {2.0f, 1.4f, 1.0f};
    ssa.layers = {{1.9f, 1.3f, 0.9f}, {2.2f, 1.6f, 1.4f}};
    vanilla.all = {0.0f, 0.1f, 0.0f};
    vanilla.layers = {vanilla.all, vanilla.all};
    names.clear();
    for (const viz::PlotSeries& s : app::RunCurvesPlot("js_divergence", {ssa, vanilla}).Series)
        if (!s.Name.empty()) names.push_back(s.Name);
    EXPECT_EQ(names, (std::vector<std::string>{"layer 0, ssa (run)", "layer 1, ssa (run)", "tau = 1 (the run's comparison)", "ssa (run), all heads",
                                                "vanilla (compare run), all heads"}));
    // The lens: a layer that already predicts as the model does lies under the run's loss (the graph
    // run's "after L0", 0.002 nats from it at every step, was listed and not seen); a base under
    // it is said so too, one apart is not.
    app::RunCurve lens;
    lens.label = "ssa (run)";
    lens.steps = {0, 100, 200};
    lens.all = {2.11f, 2.2f, 2.24f};
    lens.layers = {{2.112f, 2.202f, 2.242f}, {3.0f, 2.9f, 2.8f}};
    // Layers coloured in depth order on one sequential scale (tab10 told no order, repeated from the
    // eleventh layer): each layer's colour its own, none of the side colours.
    lens.layers.resize(12, {3.0f, 2.9f, 2.8f});
    std::vector<viz::Rgba8> colours;
    for (const viz::PlotSeries& s : app::RunCurvesPlot(app::kRunLensCurve, {lens}).Series)
        if (s.Name.rfind("after L", 0) == 0) colours.push_back(s.Color);
    ASSERT_EQ(colours.size(), 12u);
    for (size_t i = 0; i < colours.size(); ++i)
        for (size_t j = i + 1; j < colours.size(); ++j)
            EXPECT_FALSE(colours[i].r == colours[j].r && colours[i].g == colours[j].g && colours[i].b == colours[j].b) << i << " " << j;
    lens.layers.resize(2);
    for (const bool base_under : {false, true}) {
        lens.base = base_under ? lens.all : std::vector<float>{2.5f, 2.5f, 2.5f};
        names.clear();
        for (const viz::PlotSeries& s : app::RunCurvesPlot(app::kRunLensCurve, {lens}).Series)
            if (!s.Name.empty()) names.push_back(s.Name);
        EXPECT_EQ(names, (std::vector<std::string>{"after L0, under the run's line", "after L1",
                                                    base_under ? "base (where fine-tuning began), under the run's line" : "base (where fine-tuning began)",
                                                    "ssa (run), its loss"}));
    }
    // The difference's own line is the loss less the other side's, not a loss.
    lens.compare_name = "tau = 1";
    names.clear();
    for (const viz::PlotSeries& s : app::RunCurvesPlot(app::kRunLensDiffCurve, {lens}).Series)
        if (!s.Name.empty()) names.push_back(s.Name);
    EXPECT_EQ(names.back(), "ssa (run), its loss - tau = 1's");
    // A layer under a deeper layer's line (one layer's entropy lay exactly on another's, unseen).
    app::RunCurve three;
    three.label = "ssa (run)";
    three.steps = {0, 100, 200};
    three.all = {1.0f, 2.0f, 3.0f};
    three.layers = {{2.5f, 2.5f, 2.5f}, {2.5f, 2.5f, 2.5f}, {0.5f, 0.6f, 0.7f}};
    names.clear();
    for (const viz::PlotSeries& s : app::RunCurvesPlot("entropy", {three}).Series)
        if (!s.Name.empty()) names.push_back(s.Name);
    EXPECT_EQ(names, (std::vector<std::string>{"layer 0, under layer 1's line", "layer 1", "layer 2", "ssa (run), all heads"}));
}

// A layer is one colour in every run curve, in the window and in files: the lens's "after L2" as
// "layer 2" (the lens has a line fewer, and its colours were spread over those); a file's from
// viridis's dark end, the window's from its light one (each background loses the other).
TEST(RunCurves, ALayerIsOneColourInEveryCurve) {
    app::RunCurve heads, lens;
    heads.label = lens.label = "ssa (run)";
    heads.steps = lens.steps = {0, 100};
    heads.all = lens.all = {1.0f, 2.0f};
    heads.layers.assign(4, {1.0f, 2.0f});
    for (size_t l = 0; l < heads.layers.size(); ++l) heads.layers[l] = {0.5f * l, 0.5f * l + 0.1f};  // apart: none under another
    lens.layers.assign(3, {});  // after L0, L1, L2; the model's own (after L3) is the run's line
    for (size_t l = 0; l < lens.layers.size(); ++l) lens.layers[l] = {3.0f + l, 3.5f + l};
    auto colour_of = [](const viz::Plot& plot, const std::string& name) {
        for (const viz::PlotSeries& s : plot.Series)
            if (s.Name == name) return s.Color;
        ADD_FAILURE() << "no series " << name;
        return viz::Rgba8{};
    };
    auto same = [](viz::Rgba8 a, viz::Rgba8 b) { return a.r == b.r && a.g == b.g && a.b == b.b; };
    for (const bool points : {true, false}) {  // a file's, the window's
        const viz::Plot entropy = app::RunCurvesPlot("entropy", {heads}, points), by_layer = app::RunCurvesPlot(app::kRunLensCurve, {lens}, points);
        for (int l = 0; l < 3; ++l) {
            const viz::Rgba8 want = app::RunLayerColor(l, 4, points);
            EXPECT_TRUE(same(colour_of(entropy, "layer " + std::to_string(l)), want)) << l;
            EXPECT_TRUE(same(colour_of(by_layer, "after L" + std::to_string(l)), want)) << l;
        }
    }
    EXPECT_FALSE(same(app::RunLayerColor(0, 4, true), app::RunLayerColor(3, 4, true)));
}

// A character split over byte tokens (byte-level BPE, SentencePiece's byte fallback on Chinese and
// emoji) reads whole: in the highlight (the paper's Figure 1) once, on its first token, the others
// narrow chips of their own colours; in the map's labels with each token's part, as the window's
// strip and the lens's labels. The highlight drew one U+FFFD a byte and the maps "\xE4"; a zero-width
// space is named.
TEST_F(ExportFigures, SplitCharactersReadWholeInTheHighlightAndTheMaps) {
    model::Analysis a = app::MakeSyntheticAnalysis(1, 1, 6, 3);
    a.tokens.pieces = {"\xE2\x80\x8B", " \xE4", "\xBD", "\xA0", "\xF0\x9F\x99", "\x82"};  // a zero-width space, " 你" over three tokens, 🙂 over two
    auto texts = [](const viz::Figure& f) {
        std::vector<std::string> out;
        for (const viz::FigItem& item : f.Items)
            if (const auto* t = std::get_if<viz::FigText>(&item)) out.push_back(t->Text);
        return out;
    };
    auto has = [](const std::vector<std::string>& v, const std::string& s) {
        return std::any_of(v.begin(), v.end(), [&](const std::string& t) { return t.find(s) != std::string::npos; });
    };
    app::FigureSettings settings;
    settings.highlight = app::TokenColor::TauQ;
    const viz::Figure figure = app::Highlight(a, "synthetic", settings);
    const std::vector<std::string> highlight = texts(figure);
    auto count = [&](const std::string& s) { return std::count_if(highlight.begin(), highlight.end(), [&](const std::string& t) { return t.find(s) != std::string::npos; }); };
    EXPECT_EQ(count(" \xE4\xBD\xA0"), 1) << "the character once, on its first token, with its space";
    EXPECT_EQ(count("\xF0\x9F\x99\x82"), 1);
    EXPECT_EQ(count("\\u200B"), 1) << "a zero-width space named";
    EXPECT_EQ(count("/3"), 0);
    for (const std::string& t : highlight) EXPECT_EQ(t.find("\xEF\xBF\xBD"), std::string::npos) << "U+FFFD in the highlight: " << t;
    int chips = 0;  // one a token: the three of 你 and the two of 🙂 each coloured
    for (const viz::FigItem& item : figure.Items)
        if (const auto* r = std::get_if<viz::FigRect>(&item); r && r->H > 20 && r->Fill.a == 255) ++chips;
    EXPECT_EQ(chips, 6);
    const std::vector<std::string> map = texts(app::MapFigure(a, "synthetic", {0, 0}, app::MapMode::Ssa, settings));
    for (const char* part : {"\xE4\xBD\xA0 2/3", "\xF0\x9F\x99\x82 1/2"}) EXPECT_TRUE(has(map, part)) << part;
}

// An exported temperature highlight colours its tokens on the model's scale around 1 and shows in
// its legend the part of that scale the temperatures reach: an exp-exp fine-tune's tau_q (every
// one >= 1) read from 1 (white) up, with no tick below 1; with values on both sides, from the
// lowest to the highest.
TEST_F(ExportFigures, ATemperatureHighlightsLegendIsThePartItsValuesReach) {
    model::Analysis a = app::MakeSyntheticAnalysis(2, 2, 12, 3);
    const std::vector<float> mixed = a.tau_q.Flat();
    std::vector<float> sharper = mixed;
    for (float& v : sharper) v = 1.0f + std::abs(v - 1.0f);
    app::FigureSettings settings;
    settings.highlight = app::TokenColor::TauQ;
    settings.highlight_scope = app::TokenScope::Head;
    settings.highlight_head = {1, 0};
    for (const bool all_above : {true, false}) {
        a.tau_q = model::RowArray(all_above ? sharper : mixed, 4, 12);
        const app::TemperatureScale scale = app::TemperatureRange(a, a.tau_q);
        const std::vector<float> values = a.tau_q.Flat();
        ASSERT_EQ(scale.used.min, all_above ? 1.0f : *std::min_element(values.begin(), values.end()));
        ASSERT_EQ(scale.used.max, *std::max_element(values.begin(), values.end()));
        const viz::Figure f = app::Highlight(a, "synthetic", settings);
        std::vector<float> ticks;
        std::vector<viz::Rgba8> gradient, chips;
        for (const viz::FigItem& item : f.Items) {
            if (const auto* t = std::get_if<viz::FigText>(&item); t && t->Size < 18) {  // the legend's ticks and caption
                char* end = nullptr;
                const float v = std::strtof(t->Text.c_str(), &end);
                if (!t->Text.empty() && *end == '\0') ticks.push_back(v);
            } else if (const auto* r = std::get_if<viz::FigRect>(&item); r && r->Fill.a == 255) {
                if (r->H == 14) gradient.push_back(r->Fill);  // the bar's strips (14 px high; the ticks 4, the chips 24)
                else if (r->H > 20) chips.push_back(r->Fill);
            }
        }
        ASSERT_GE(ticks.size(), 2u);
        ASSERT_GT(gradient.size(), 100u);
        // No tick outside what the temperatures reach (none below 1 when none is below 1).
        EXPECT_GE(*std::min_element(ticks.begin(), ticks.end()), scale.used.min);
        EXPECT_LE(*std::max_element(ticks.begin(), ticks.end()), scale.used.max);
        // The bar's ends: the lowest temperature's colour (white, tau = 1, when none is below) and the
        // highest's, in the scale's colours.
        const viz::Rgba8 left = gradient.front(), right = gradient.back();
        const viz::Rgba8 want_left = viz::SampleColormap(viz::Colormap::Diverging, viz::Normalize(scale.used.min, scale.range, false));
        const viz::Rgba8 want_right = viz::SampleColormap(viz::Colormap::Diverging, viz::Normalize(scale.used.max, scale.range, false));
        EXPECT_NEAR(left.r, want_left.r, 3);
        EXPECT_NEAR(left.g, want_left.g, 3);
        EXPECT_NEAR(left.b, want_left.b, 3);
        EXPECT_NEAR(right.r, want_right.r, 3);
        EXPECT_NEAR(right.b, want_right.b, 3);
        // The chips keep the scale's colours, whatever the legend shows.
        const std::vector<float> head = a.tau_q.Row(1 * 2 + 0);
        ASSERT_EQ(chips.size(), 12u);
        for (int i = 0; i < 12; ++i)
            EXPECT_EQ(chips[i].r, viz::SampleColormap(viz::Colormap::Diverging, viz::Normalize(head[i], scale.range, false)).r) << i;
        // The HTML page's legend reads the same ends.
        const std::string html = app::HighlightHtmlPage(a, "synthetic", settings);
        EXPECT_EQ(html.find("<span class=\"lo\">1</span>") != std::string::npos, all_above) << html.substr(html.find("legend"));
    }
}

// --temperature-scale head: the highlighted head's own scale (TemperatureRange of that head), a
// mean's from its own values, as the window's View > Temperature scale per head; the legend and
// its caption say so. The model's scale otherwise (above).
TEST_F(ExportFigures, ATemperatureHighlightOnItsOwnScale) {
    const model::Analysis a = app::MakeSyntheticAnalysis(2, 2, 12, 3);
    app::FigureSettings settings;
    settings.highlight = app::TokenColor::TauQ;
    settings.temperature_per_head = true;
    auto chips_of = [](const viz::Figure& f) {
        std::vector<viz::Rgba8> chips;
        for (const viz::FigItem& item : f.Items)
            if (const auto* r = std::get_if<viz::FigRect>(&item); r && r->Fill.a == 255 && r->H > 20) chips.push_back(r->Fill);
        return chips;
    };
    auto caption_of = [](const viz::Figure& f) {
        std::string caption;
        for (const viz::FigItem& item : f.Items)
            if (const auto* t = std::get_if<viz::FigText>(&item); t && t->Text.find("own scale") != std::string::npos) caption = t->Text;
        return caption;
    };
    for (const app::TokenScope scope : {app::TokenScope::Head, app::TokenScope::ModelMean}) {
        settings.highlight_scope = scope;
        settings.highlight_head = {1, 1};
        std::vector<float> values(12);
        for (int i = 0; i < 12; ++i) values[i] = app::ScopedTokenValue(a, a.tau_q, scope, settings.highlight_head, i);
        float lo = INFINITY, hi = -INFINITY;
        for (float v : values) lo = std::min(lo, v), hi = std::max(hi, v);
        const app::TemperatureScale own = scope == app::TokenScope::Head ? app::TemperatureRange(a, a.tau_q, app::HeadRef{1, 1})
                                                                          : app::TemperatureScaleOver(lo, hi);
        const app::TemperatureScale model_wide = app::TemperatureRange(a, a.tau_q);
        ASSERT_LT(own.range.max, model_wide.range.max) << "the test needs a head with a narrower scale than the model's";
        const viz::Figure f = app::Highlight(a, "synthetic", settings);
        const std::vector<viz::Rgba8> chips = chips_of(f);
        ASSERT_EQ(chips.size(), 12u);
        for (int i = 0; i < 12; ++i) {
            const viz::Rgba8 want = viz::SampleColormap(viz::Colormap::Diverging, viz::Normalize(values[i], own.range, false));
            EXPECT_EQ(chips[i].r, want.r) << i;
            EXPECT_EQ(chips[i].b, want.b) << i;
        }
        EXPECT_NE(caption_of(f).find(scope == app::TokenScope::Head ? "this head's own scale" : "the mean's own scale"), std::string::npos);
        settings.temperature_per_head = false;
        EXPECT_EQ(caption_of(app::Highlight(a, "synthetic", settings)), "");
        settings.temperature_per_head = true;
    }
}
