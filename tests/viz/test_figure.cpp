// viz::Figure and its layouts: golden PNGs compared byte for byte (SSAVIZ_UPDATE_GOLDEN=1 rewrites
// them), determinism, SVG and HTML checked by Python's XML parser, text metrics and placement,
// and degenerate inputs (no tokens, NaN, constant maps, hostile labels, 1,024 tokens).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <stb_image.h>  // the implementation lives in Debian's libstb

#include "viz/figure.h"
#include "viz/figures.h"
#include "model/text/utf8.h"

namespace {

namespace fs = std::filesystem;
using viz::Figure;
using viz::FigText;
using viz::Image;
using viz::Rgba8;

const float kNaN = std::numeric_limits<float>::quiet_NaN();

class FigureTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        std::string error;
        ASSERT_TRUE(viz::LoadFigureFonts(&error)) << error;
    }
};

fs::path OutDir() {
    const fs::path dir = fs::path(SSAVIZ_TEST_OUT) / "viz_figures";
    fs::create_directories(dir);
    return dir;
}

// A scratch file of this test: CTest may run the tests of this binary in parallel processes.
fs::path Scratch(const std::string& name) {
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    return OutDir() / ((info ? std::string(info->name()) + "_" : std::string()) + name);
}

std::vector<uint8_t> ReadFile(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void WriteFile(const fs::path& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

void WriteFile(const fs::path& path, const std::vector<uint8_t>& bytes) {
    WriteFile(path, std::string(bytes.begin(), bytes.end()));
}

std::vector<uint8_t> Png(const Figure& figure) { return viz::EncodePng(viz::RasterizeFigure(figure)); }

// The rendered PNG against tests/viz/golden/<name>.png, byte for byte.
void ExpectGolden(const Figure& figure, const std::string& name) {
    const std::vector<uint8_t> png = Png(figure);
    ASSERT_FALSE(png.empty());
    const fs::path golden = fs::path(SSAVIZ_SOURCE_DIR) / "tests" / "viz" / "golden" / (name + ".png");
    const char* update = std::getenv("SSAVIZ_UPDATE_GOLDEN");
    if (update && std::string(update) == "1") {
        fs::create_directories(golden.parent_path());
        WriteFile(golden, png);
        std::printf("SSAVIZ_UPDATE_GOLDEN=1: rewrote %s (%d x %d)\n", golden.string().c_str(), figure.Width, figure.Height);
        return;
    }
    const std::vector<uint8_t> want = ReadFile(golden);
    if (want == png) return;
    const fs::path actual = OutDir() / (name + ".actual.png");
    WriteFile(actual, png);
    ADD_FAILURE() << "rendered " << actual << " (" << png.size() << " bytes, " << figure.Width << " x " << figure.Height
                  << ") differs from the golden " << golden << " (" << want.size()
                  << " bytes); look at both, and run with SSAVIZ_UPDATE_GOLDEN=1 if the change is intended";
}

// Runs a Python snippet (argv[1] = file) with the tests' interpreter; its stdout.
std::string RunPython(const std::string& name, const std::string& script, const fs::path& file) {
    const fs::path script_path = Scratch(name + ".py");
    WriteFile(script_path, script);
    const std::string cmd = std::string(SSAVIZ_PYTHON) + " '" + script_path.string() + "' '" + file.string() + "' 2>&1";
    std::string out;
    if (FILE* pipe = popen(cmd.c_str(), "r")) {
        char buf[4096];
        size_t n = 0;
        while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
        const int status = pclose(pipe);
        if (status != 0) out = "python failed (" + std::to_string(status) + "): " + out;
    } else {
        out = "popen failed: " + cmd;
    }
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    return out;
}

// Parses an SVG with xml.etree: "<cell rects> <images> <texts>".
const char* const kSvgCounts = R"(import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
ns = '{http://www.w3.org/2000/svg}'
assert root.tag == ns + 'svg', root.tag
cells = sum(1 for e in root.iter(ns + 'rect') if e.get('class') == 'cell')
images = sum(1 for e in root.iter(ns + 'image'))
texts = sum(1 for e in root.iter(ns + 'text'))
for e in root.iter():
    for k, v in e.attrib.items():
        if k.endswith('href'):
            continue
        low = v.lower()
        assert 'nan' not in low and 'inf' not in low, (e.tag, k, v)
print(cells, images, texts)
)";

std::string SvgCounts(const Figure& figure, const std::string& name, int64_t max_cells = 65536) {
    const fs::path path = Scratch(name + ".svg");
    WriteFile(path, viz::FigureToSvg(figure, max_cells));
    return RunPython("svg_counts", kSvgCounts, path);
}

template <typename T>
int Count(const Figure& figure) {
    int n = 0;
    for (const viz::FigItem& item : figure.Items) n += std::holds_alternative<T>(item);
    return n;
}

// A causal map whose rows fall off with distance, rows summing to 1 (deterministic).
std::vector<float> CausalMap(int n) {
    std::vector<float> map(static_cast<size_t>(n) * n, 0.0f);
    for (int i = 0; i < n; ++i) {
        double sum = 0;
        for (int j = 0; j <= i; ++j) sum += std::exp(-0.7 * (i - j)) + (j == 0 ? 0.5 : 0.0);
        for (int j = 0; j <= i; ++j)
            map[static_cast<size_t>(i) * n + j] = static_cast<float>((std::exp(-0.7 * (i - j)) + (j == 0 ? 0.5 : 0.0)) / sum);
    }
    return map;
}

const std::vector<std::string> kSixTokens = {"The", " cat", " sat", " on", " the", " mat"};

viz::HeatmapFigureOptions SixOptions() {
    viz::HeatmapFigureOptions o;
    o.Title = "demo \xC2\xB7 layer 0 \xC2\xB7 head 1 \xC2\xB7 SSA";
    o.RowLabels = kSixTokens;
    o.ColLabels = kSixTokens;
    return o;
}

Figure SixFigure() {
    const std::vector<float> map = CausalMap(6);
    return viz::HeatmapFigure(map.data(), 6, 6, SixOptions());
}

Figure MagmaLogFigure() {
    const std::vector<float> map = {0.9f, 0.0f, 0.0f,  //
                                    0.02f, 0.98f, 0.0f,  //
                                    0.004f, 0.3f, 0.696f};
    viz::HeatmapFigureOptions o;
    o.Title = "magma, log scale";
    o.RowLabels = {"a", " b", "  c"};
    o.ColLabels = o.RowLabels;
    o.Style.colormap = viz::Colormap::Magma;
    o.Style.log_scale = true;
    o.Style.blank = {235, 235, 235, 255};
    return viz::HeatmapFigure(map.data(), 3, 3, o);
}

Figure SmallHighlight() {
    const std::vector<std::string> pieces = {"The", " quick", " brown", " fox", "\n", "jumps", " over", " the", " lazy", " dog", "."};
    const std::vector<float> values = {1.0f, 0.62f, 0.8f, 1.4f, kNaN, 0.55f, 0.9f, 1.1f, 1.7f, 0.7f, 1.25f};
    viz::HighlightOptions o;
    o.Title = "query temperature tau_q";
    o.Width = 260;
    return viz::HighlightFigure(pieces, values, o);
}

Figure SmallPlot() {
    viz::PlotSeries ssa, other;
    ssa.Name = "SSA";
    ssa.Color = viz::SeriesColor(0);
    other.Name = "vanilla";
    other.Color = viz::SeriesColor(1);
    for (int i = 1; i <= 12; ++i) {
        ssa.X.push_back(static_cast<float>(i));
        ssa.Y.push_back(i == 7 ? kNaN : 0.9f - 0.3f * std::exp(-0.3f * i));
        other.X.push_back(static_cast<float>(i));
        other.Y.push_back(1.0f - 0.6f / i);
    }
    viz::PlotOptions o;
    o.Title = "attention dilution";
    o.XLabel = "query position i";
    o.YLabel = "H_i / ln i";
    o.Width = 420;
    o.Height = 280;
    return viz::PlotFigure({ssa, other}, o);
}

// ---------------------------------------------------------------------------------------------

TEST_F(FigureTest, GoldenHeatmapCausal6) { ExpectGolden(SixFigure(), "heatmap_causal6"); }
TEST_F(FigureTest, GoldenHeatmapMagmaLog3) { ExpectGolden(MagmaLogFigure(), "heatmap_magma_log3"); }
TEST_F(FigureTest, GoldenHighlight) { ExpectGolden(SmallHighlight(), "highlight"); }
TEST_F(FigureTest, GoldenPlot) { ExpectGolden(SmallPlot(), "plot"); }

TEST_F(FigureTest, RasterIsDeterministic) {
    for (const Figure& f : {SixFigure(), MagmaLogFigure(), SmallHighlight(), SmallPlot()}) {
        const std::vector<uint8_t> a = Png(f), b = Png(f);
        EXPECT_EQ(a, b);
        EXPECT_EQ(viz::FigureToSvg(f), viz::FigureToSvg(f));
    }
}

TEST_F(FigureTest, HeatmapUsesOnePixelPerCellAndFullCells) {
    const Figure f = SixFigure();
    ASSERT_EQ(Count<viz::FigImage>(f), 1);  // the map (the colour bar is strips)
    const auto& map = std::get<viz::FigImage>(f.Items[0]);
    EXPECT_EQ(map.Cells.width, 6);
    EXPECT_EQ(map.Cells.height, 6);
    EXPECT_FLOAT_EQ(map.W, 6 * 28.0f);  // 720 / 6 clamps to 28 px cells
    EXPECT_GT(f.Width, 0);
    EXPECT_GT(f.Height, 0);
    // Every label is shown, leading spaces as middle dots.
    int dotted = 0;
    for (const viz::FigItem& item : f.Items)
        if (const auto* t = std::get_if<FigText>(&item)) dotted += t->Text == "\xC2\xB7" "cat";
    EXPECT_EQ(dotted, 2);  // row and column
}

TEST_F(FigureTest, SvgHasOneCellRectPerCell) {
    const Figure f = SixFigure();
    EXPECT_EQ(SvgCounts(f, "heatmap6"), "36 0 " + std::to_string(Count<FigText>(f)));
    // Above the cell limit the map is one embedded PNG.
    EXPECT_EQ(SvgCounts(f, "heatmap6_image", 35), "0 1 " + std::to_string(Count<FigText>(f)));
    const std::string svg = viz::FigureToSvg(f, 35);
    EXPECT_NE(svg.find("data:image/png;base64,iVBORw0KGgo"), std::string::npos);
    EXPECT_NE(svg.find("<title>demo \xC2\xB7 layer 0"), std::string::npos);
    EXPECT_NE(svg.find("dominant-baseline=\"central\""), std::string::npos);
    EXPECT_NE(svg.find("transform=\"rotate(-90 "), std::string::npos);
}

TEST_F(FigureTest, SvgSurvivesHostileLabels) {
    const std::vector<float> map = CausalMap(5);
    viz::HeatmapFigureOptions o;
    o.Title = "a < b & \"c\" \xff \x01 end";
    o.RowLabels = {"<script>", "&amp;", "\"q\"", "\xff\xfe bad", "line\nbreak\t\x07"};
    o.ColLabels = {"\xe4\xb8\xad\xe6\x96\x87", "\xF0\x9F\x98\x80 emoji", "", "   ", "\xC0\xAF"};
    o.ValueLabel = "v < 1 & \"w\"";
    const Figure f = viz::HeatmapFigure(map.data(), 5, 5, o);
    const std::string counts = SvgCounts(f, "hostile");
    EXPECT_EQ(counts.substr(0, 3), "25 ") << counts;
    EXPECT_EQ(Png(f), Png(f));
}

// A title wider than its figure and 720 px wraps at its words over the figure's width, at most
// three lines with the last cut, and the content starts below it; a short one is one line.
TEST_F(FigureTest, LongTitlesWrapAboveTheContent) {
    const float title_fs = 15;  // the heatmap's 12 px font * 1.25
    auto title_lines = [&](const Figure& f, float size) {
        std::vector<const FigText*> lines;
        for (const viz::FigItem& item : f.Items)
            if (const auto* t = std::get_if<FigText>(&item); t && t->Size == size && !t->Vertical) lines.push_back(t);
        return lines;
    };
    std::string words, more;
    for (int k = 0; k < 25; ++k) words += (k ? " word" : "word") + std::to_string(k);
    for (int k = 25; k < 40; ++k) more += " word" + std::to_string(k);
    const std::vector<float> lens(5 * 80, 0.5f);
    viz::HeatmapFigureOptions o;
    o.Title = words;
    const Figure f = viz::HeatmapFigure(lens.data(), 5, 80, o);
    const auto lines = title_lines(f, title_fs);
    ASSERT_EQ(lines.size(), 2u) << "25 words of 5 or 6 characters over an 80-token strip";
    EXPECT_EQ(lines[0]->Text + " " + lines[1]->Text, words) << "every word, in order, none cut";
    for (const FigText* t : lines) EXPECT_LE(viz::MeasureText(t->Text, title_fs), static_cast<float>(f.Width) - 24) << t->Text;
    EXPECT_LT(f.Width, 1000) << "the figure is not widened to the title";
    const float first = viz::MeasureText(lines[0]->Text, title_fs), second = viz::MeasureText(lines[1]->Text, title_fs);
    EXPECT_LT(std::abs(first - second), 0.25f * std::max(first, second)) << "balanced lines, no word left alone on the last";
    EXPECT_GT(lines[1]->Y, lines[0]->Y);
    for (const viz::FigItem& item : f.Items) {
        if (const auto* map = std::get_if<viz::FigImage>(&item)) {
            EXPECT_GT(map->Y, lines[1]->Y + title_fs * 0.5f) << "the map below the title";
        }
    }

    std::string endless;
    for (int k = 0; k < 200; ++k) endless += "long" + std::to_string(k) + " ";
    o.Title = endless;
    const Figure endless_figure = viz::HeatmapFigure(lens.data(), 5, 80, o);  // title_lines points into it
    const auto cut = title_lines(endless_figure, title_fs);
    ASSERT_EQ(cut.size(), 3u);
    EXPECT_EQ(cut[2]->Text.substr(cut[2]->Text.size() - 3), "\xE2\x80\xA6") << "the last line ends in an ellipsis";

    o.Title = "short";
    EXPECT_EQ(title_lines(viz::HeatmapFigure(lens.data(), 5, 80, o), title_fs).size(), 1u);

    viz::HeadsGridOptions g;
    g.Title = words + more;
    g.Thumb = 40;
    const std::vector<float> maps(2 * 2 * 4 * 4, 0.25f);
    const Figure grid = viz::HeadsGridFigure(maps.data(), 2, 2, 4, g);
    EXPECT_EQ(title_lines(grid, 15).size(), 3u) << "a small grid's title wraps at 720 px";
    EXPECT_LE(grid.Width, 720 + 24);

    viz::PlotOptions p;
    p.Title = words + more;
    p.Width = 640;
    viz::PlotSeries s;
    s.X = {0, 1};
    s.Y = {0, 1};
    const Figure plot = viz::PlotFigure({s}, p);
    EXPECT_EQ(title_lines(plot, 14).size(), 3u);
    EXPECT_EQ(plot.Width, 640) << "a plot keeps the width asked for";

    // Panels side by side (head_impacts, finetune, the three-way maps): their title wraps the same
    // way over the panels, in bold and larger than the panels' own 15 px titles (it was 13 px: it
    // read as one of them); a 253-character model name made head_impacts.png 4,634 px wide.
    const std::vector<float> small_map(4 * 4, 0.5f);
    const Figure panel = viz::HeatmapFigure(small_map.data(), 4, 4, viz::HeatmapFigureOptions{});
    const Figure beside = viz::Beside({panel, panel}, words + more);
    auto bold_lines = [&](const Figure& f) {
        std::vector<std::string> lines;
        for (const viz::FigItem& item : f.Items)
            if (const auto* t = std::get_if<FigText>(&item); t && t->Bold) {
                EXPECT_GT(t->Size, title_fs) << t->Text;
                EXPECT_LE(viz::MeasureText(t->Text, t->Size, true), 720.0f) << t->Text;
                lines.push_back(t->Text);
            }
        return lines;
    };
    EXPECT_EQ(bold_lines(beside).size(), 3u);
    EXPECT_LE(beside.Width, std::max(2 * panel.Width + 16, 720 + 32));
    // A title breaks between its clauses (" · ") where each fits a line, and not inside a
    // parenthesised group where each fits (finetune.png broke "(base: english/vanilla) / to 3.0224";
    // head_impacts.png "(SSA's / temperatures kept)").
    const std::string dot = " \xC2\xB7 ";
    const std::string clause1 = "licenses/ssa" + dot + "what fine-tuning changed, head by head";
    const std::string clause2 = "mean loss 5.0371 (base: english/vanilla) to 3.0224 (SSA), -2.0146 nats";
    EXPECT_EQ(bold_lines(viz::Beside({panel, panel}, clause1 + dot + clause2)), std::vector<std::string>({clause1, clause2}));
    std::string before;
    for (int k = 0; k < 8; ++k) before += "word" + std::to_string(k) + " ";
    const std::string group = "(SSA's temperatures kept, every weight but those from the base)";
    const std::vector<std::string> grouped = bold_lines(viz::Beside({panel, panel}, before + group + " and after"));
    ASSERT_EQ(grouped.size(), 2u);
    EXPECT_TRUE(grouped[0].find(group) != std::string::npos || grouped[1].find(group) != std::string::npos) << grouped[0] << " / " << grouped[1];
}

// A grid of a few heads (the fine-tune figure) writes each cell's value in it, dark on a light
// colour and light on a dark one; a map whose cells are too small for the text writes none, and
// neither do cells off a causal map or values that are not finite.
TEST_F(FigureTest, CellValuesAreWrittenWhereTheyFit) {
    const std::vector<float> grid = {0.0f, 0.25f, kNaN, 1.0f};
    viz::HeatmapFigureOptions o;
    o.Style.causal = false;
    o.Style.range = viz::Range{0.0f, 1.0f};
    o.CellValues = "%.3f";
    o.MapSize = 96;
    auto written = [](const Figure& f) {
        std::map<std::string, viz::Rgba8> texts;
        for (const viz::FigItem& item : f.Items)
            if (const auto* t = std::get_if<viz::FigText>(&item); t && t->Text.size() == 5 && t->Text[1] == '.') texts[t->Text] = t->Color;  // %.3f
        return texts;
    };
    const auto texts = written(viz::HeatmapFigure(grid.data(), 2, 2, o));
    ASSERT_EQ(texts.size(), 3u);
    EXPECT_GT(texts.at("0.000").r, 200) << "light text on viridis' dark end";
    EXPECT_LT(texts.at("1.000").r, 60) << "dark text on viridis' yellow";
    EXPECT_EQ(texts.count("0.250"), 1u);
    o.Style.causal = true;
    EXPECT_EQ(written(viz::HeatmapFigure(grid.data(), 2, 2, o)).count("0.250"), 0u) << "above the diagonal";
    o.MapSize = 40;  // 20 px cells: "0.000" does not fit
    EXPECT_TRUE(written(viz::HeatmapFigure(grid.data(), 2, 2, o)).empty());
}

TEST_F(FigureTest, HeatmapDegenerateInputs) {
    const std::vector<float> one = {0.7f};
    const std::vector<float> nan(16, kNaN);
    const std::vector<float> constant(16, 0.25f);
    struct Case {
        const char* name;
        const float* values;
        int n;
    } cases[] = {{"zero", nullptr, 0}, {"one", one.data(), 1}, {"nan", nan.data(), 4}, {"constant", constant.data(), 4}};
    for (const Case& c : cases) {
        SCOPED_TRACE(c.name);
        viz::HeatmapFigureOptions o;
        o.Title = c.name;
        const Figure f = viz::HeatmapFigure(c.values, c.n, c.n, o);
        EXPECT_GT(f.Width, 0);
        EXPECT_GT(f.Height, 0);
        const Image image = viz::RasterizeFigure(f);
        EXPECT_EQ(image.pixels.size(), static_cast<size_t>(f.Width) * f.Height);
        const std::string counts = SvgCounts(f, std::string("degenerate_") + c.name);
        EXPECT_EQ(counts.substr(0, counts.find(' ')), std::to_string(c.n * c.n)) << counts;
    }
    // Diverging and log scale on a constant map.
    viz::HeatmapFigureOptions o;
    o.Style.colormap = viz::Colormap::Diverging;
    EXPECT_FALSE(SvgCounts(viz::HeatmapFigure(constant.data(), 4, 4, o), "constant_div").rfind("python failed", 0) == 0);
    o.Style.colormap = viz::Colormap::Viridis;
    o.Style.log_scale = true;
    const std::vector<float> zeros(16, 0.0f);
    EXPECT_FALSE(SvgCounts(viz::HeatmapFigure(zeros.data(), 4, 4, o), "zeros_log").rfind("python failed", 0) == 0);
}

TEST_F(FigureTest, LargeHeatmapThinsLabelsAndPools) {
    const int n = 1024;
    std::vector<float> map(static_cast<size_t>(n) * n, 0.0f);
    for (int i = 0; i < n; ++i)
        for (int j = 0; j <= i; ++j) map[static_cast<size_t>(i) * n + j] = 1.0f / (i + 1);
    viz::HeatmapFigureOptions o;
    for (int i = 0; i < n; ++i) o.RowLabels.push_back(" tok" + std::to_string(i));
    o.ColLabels = o.RowLabels;
    const auto start = std::chrono::steady_clock::now();
    const Figure f = viz::HeatmapFigure(map.data(), n, n, o);
    const double build_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(build_s, 5.0);
    int row_labels = 0, col_labels = 0;
    for (const viz::FigItem& item : f.Items)
        if (const auto* t = std::get_if<FigText>(&item)) {
            if (t->Text.rfind("\xC2\xB7tok", 0) != 0) continue;
            (t->Vertical ? col_labels : row_labels)++;
        }
    EXPECT_GT(row_labels, 10);
    EXPECT_LT(row_labels, 120);  // every 20th at 1 px cells
    EXPECT_EQ(row_labels, col_labels);
    const auto& im = std::get<viz::FigImage>(f.Items[0]);
    EXPECT_EQ(im.Cells.width, n);  // 1 px cells: one pixel per cell
    EXPECT_EQ(SvgCounts(f, "large").substr(0, 4), "0 1 ");
    const Image image = viz::RasterizeFigure(f);
    EXPECT_EQ(image.width, f.Width);

    // A smaller map area pools.
    o.MapSize = 256;
    const Figure pooled = viz::HeatmapFigure(map.data(), n, n, o);
    EXPECT_EQ(std::get<viz::FigImage>(pooled.Items[0]).Cells.width, 256);
}

TEST_F(FigureTest, HighlightHtmlIsWellFormedWithOneSpanPerToken) {
    const std::vector<std::string> pieces = {"The", " <b>", " &amp;", " \"q\"", "\n", "\xff\xfe", " \xe4\xb8\xad", " \xF0\x9F\x98\x80", "",
                                             "a\nb", "\x01\x1f"};
    const std::vector<float> values = {0.1f, 0.2f, kNaN, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f, 0.9f, 1.0f, 1.1f};
    viz::HighlightOptions o;
    o.Title = "tau <q> & \"more\"";
    const std::string html = viz::HighlightHtml(pieces, values, o);
    const fs::path path = Scratch("highlight.html");
    WriteFile(path, html);
    const char* script = R"(import sys, xml.etree.ElementTree as ET
from html.parser import HTMLParser
text = open(sys.argv[1], encoding='utf-8').read()
HTMLParser().feed(text)
root = ET.fromstring(text)
spans = [e for e in root.iter('span') if e.get('class') == 't']
assert all(e.get('title', '').startswith('tau_q = ') for e in spans)
print(len(spans), sum(1 for e in root.iter('br')))
)";
    EXPECT_EQ(RunPython("html_spans", script, path), std::to_string(pieces.size()) + " 2");
    EXPECT_EQ(html.find("<script"), std::string::npos);

    const Figure f = viz::HighlightFigure(pieces, values, o);
    EXPECT_EQ(SvgCounts(f, "highlight_hostile").rfind("python failed", 0), std::string::npos);
}

TEST_F(FigureTest, HighlightDegenerateInputs) {
    viz::HighlightOptions o;
    const std::vector<std::vector<std::string>> piece_sets = {{}, {" one"}, {"a", "b", "c"}, {"\n", "\n\n"}};
    for (const auto& pieces : piece_sets) {
        for (int mode = 0; mode < 3; ++mode) {  // values: finite ramp, all NaN, constant
            std::vector<float> values;
            for (size_t i = 0; i < pieces.size(); ++i) values.push_back(mode == 0 ? static_cast<float>(i) : mode == 1 ? kNaN : 2.0f);
            const Figure f = viz::HighlightFigure(pieces, values, o);
            EXPECT_GT(f.Width, 0);
            EXPECT_GT(f.Height, 0);
            EXPECT_EQ(viz::RasterizeFigure(f).width, f.Width);
            EXPECT_EQ(SvgCounts(f, "highlight_degenerate").rfind("python failed", 0), std::string::npos);
            const fs::path path = Scratch("highlight_degenerate.html");
            WriteFile(path, viz::HighlightHtml(pieces, values, o));
            EXPECT_EQ(RunPython("html_parse", "import sys, xml.etree.ElementTree as ET\nET.parse(sys.argv[1])\nprint('ok')\n", path), "ok");
        }
    }
    // Fewer values than pieces, and a token wider than the line.
    o.Width = 60;
    const Figure f = viz::HighlightFigure({"short", " averyveryveryverylongtoken", " x"}, {1.0f}, o);
    EXPECT_GT(f.Width, 60 + 24);
}

TEST_F(FigureTest, HighlightWrapsBetweenTokens) {
    viz::HighlightOptions o;
    o.Width = 200;
    std::vector<std::string> pieces;
    std::vector<float> values;
    for (int i = 0; i < 40; ++i) {
        pieces.push_back(" word");
        values.push_back(static_cast<float>(i));
    }
    const Figure f = viz::HighlightFigure(pieces, values, o);
    float max_right = 0;
    std::vector<float> ys;
    for (const viz::FigItem& item : f.Items)
        if (const auto* r = std::get_if<viz::FigRect>(&item); r && r->H > 20 && r->W > 2 && r->Fill.a == 255) {  // chips, not the legend
            max_right = std::max(max_right, r->X + r->W);
            if (ys.empty() || ys.back() != r->Y) ys.push_back(r->Y);
        }
    EXPECT_GT(ys.size(), 3u);                 // several lines
    EXPECT_LE(max_right, 12 + 4 + 200 + 0.5f);  // none past the wrap width
}

// A word's tokens stay on one line, as text is set: " con|tin|ued" meeting the edge moves down
// whole; a word wider than the line (or text without spaces) still breaks between its tokens.
TEST_F(FigureTest, HighlightWrapsBetweenWords) {
    viz::HighlightOptions o;
    o.Width = 230;
    std::vector<std::string> pieces;
    std::vector<float> values;
    for (int i = 0; i < 12; ++i)
        for (const char* part : {" con", "tin", "ued"}) pieces.push_back(part), values.push_back(static_cast<float>(i));
    auto lines_of = [&](const Figure& f, size_t n) {  // each piece's text's y, in order (the legend's come after)
        std::vector<float> ys;
        for (const viz::FigItem& item : f.Items)
            if (const auto* t = std::get_if<FigText>(&item); t && t->Size == o.FontSize && ys.size() < n) ys.push_back(t->Y);
        return ys;
    };
    const std::vector<float> ys = lines_of(viz::HighlightFigure(pieces, values, o), pieces.size());
    ASSERT_EQ(ys.size(), pieces.size());
    std::set<float> lines(ys.begin(), ys.end());
    EXPECT_GT(lines.size(), 3u) << "several lines";
    for (size_t k = 0; k < ys.size(); k += 3) {
        EXPECT_EQ(ys[k + 1], ys[k]) << "word " << k / 3 << " split over two lines";
        EXPECT_EQ(ys[k + 2], ys[k]) << "word " << k / 3 << " split over two lines";
    }
    // No spaces: the tokens break where the line ends, none past it.
    const std::vector<std::string> run(40, "abc");
    const Figure f = viz::HighlightFigure(run, std::vector<float>(run.size(), 1.0f), o);
    const std::vector<float> run_ys = lines_of(f, run.size());
    EXPECT_GT(std::set<float>(run_ys.begin(), run_ys.end()).size(), 3u);
    for (const viz::FigItem& item : f.Items) {
        if (const auto* r = std::get_if<viz::FigRect>(&item); r && r->H > 20 && r->Fill.a == 255) {
            EXPECT_LE(r->X + r->W, 12 + 4 + 230 + 0.5f);
        }
    }
}

// --no-titles and --text-scale: every layout drops its title (and the room it took; the SVG's
// <title> keeps it) and sets every text at the scale, the layout making room for it.
TEST_F(FigureTest, FigureTextDropsTitlesAndScalesEveryText) {
    auto texts = [](const Figure& f) {
        std::vector<const FigText*> out;
        for (const viz::FigItem& item : f.Items)
            if (const auto* t = std::get_if<FigText>(&item)) out.push_back(t);
        return out;
    };
    auto smallest = [&](const Figure& f) {
        float s = 1e9f;
        for (const FigText* t : texts(f)) s = std::min(s, t->Size);
        return s;
    };
    auto holds = [&](const Figure& f, const std::string& words) {
        for (const FigText* t : texts(f))
            if (t->Text.find(words) != std::string::npos) return true;
        return false;
    };
    const std::vector<float> six = CausalMap(6), grid = [] {
        std::vector<float> m;
        for (int k = 0; k < 4; ++k) {
            const std::vector<float> one = CausalMap(5);
            m.insert(m.end(), one.begin(), one.end());
        }
        return m;
    }();
    // Each layout, at the default text and with none's title and twice its size.
    auto layouts = [&](const viz::FigureText& text) {
        std::vector<Figure> out;
        viz::HeatmapFigureOptions h = SixOptions();
        h.Title = "heatmap title words";
        h.Text = text;
        out.push_back(viz::HeatmapFigure(six.data(), 6, 6, h));
        viz::HighlightOptions l;
        l.Title = "highlight title words";
        l.Text = text;
        out.push_back(viz::HighlightFigure({"The", " cat", " sat"}, {0.5f, 1.0f, 1.5f}, l));
        viz::HeadsGridOptions g;
        g.Title = "grid title words";
        g.Thumb = 60;
        g.Text = text;
        out.push_back(viz::HeadsGridFigure(grid.data(), 2, 2, 5, g));
        viz::PlotSeries s;
        s.Y = {1, 3, 2};
        viz::PlotOptions p;
        p.Title = "plot title words";
        p.XLabel = "x";
        p.YLabel = "a long caption of the y axis that a short plot must make room for";
        p.Height = 200;
        p.Text = text;
        out.push_back(viz::PlotFigure({s}, p));
        out.push_back(viz::Beside({out[0], out[3]}, "beside title words", text));
        return out;
    };
    const std::vector<Figure> plain = layouts({}), paper = layouts({false, 2.0f});
    const char* titles[] = {"heatmap title words", "highlight title words", "grid title words", "plot title words", "beside title words"};
    for (size_t k = 0; k < plain.size(); ++k) {
        SCOPED_TRACE(titles[k]);
        EXPECT_TRUE(holds(plain[k], titles[k]));
        EXPECT_FALSE(holds(paper[k], titles[k])) << "no title drawn";
        EXPECT_EQ(paper[k].Title, titles[k]) << "the SVG's <title> keeps it";
        EXPECT_NEAR(smallest(paper[k]), 2 * smallest(plain[k]), 1.0f) << "every text twice its size";
        EXPECT_TRUE(viz::FigureFits(paper[k]));
        for (const FigText* t : texts(paper[k])) {  // inside the figure, the y axis's caption of a short plot too
            const float half = viz::MeasureText(t->Text, t->Size) * 0.5f;
            if (t->Vertical && t->Align == viz::TextAlign::Center) {
                EXPECT_GE(t->Y - half, -0.5f) << t->Text;
                EXPECT_LE(t->Y + half, paper[k].Height + 0.5f) << t->Text;
            }
        }
    }
    // A title off takes no room: the heatmap's map moves up by what the title took.
    viz::HeatmapFigureOptions h = SixOptions();
    const Figure with = viz::HeatmapFigure(six.data(), 6, 6, h);
    h.Text.Titles = false;
    const Figure without = viz::HeatmapFigure(six.data(), 6, 6, h);
    EXPECT_LT(without.Height, with.Height - 10);
    // Out-of-range scales are clamped, not drawn at 100x or 0.
    auto size_at = [](float scale) { return viz::FigureText{true, scale}.Size(10); };
    EXPECT_EQ(size_at(100.0f), 10 * viz::kMaxTextScale);
    EXPECT_EQ(size_at(0.0f), 10 * viz::kMinTextScale);
    EXPECT_EQ(size_at(kNaN), 10.0f);
}

// A few rows over many tokens (the lens's layers, a ranking's parts) keep every row's label at any
// text scale: rows of MinRowHeight at scale 1 kept one label in five at --text-scale 3.
TEST_F(FigureTest, AFewRowsKeepEveryLabelAtEveryTextScale) {
    const int rows = 5, cols = 300;
    const std::vector<float> values(static_cast<size_t>(rows) * cols, 0.5f);
    for (const float scale : {1.0f, 2.0f, 3.0f}) {
        SCOPED_TRACE(scale);
        viz::HeatmapFigureOptions o;
        o.RowLabels = {"embeddings", "after L0", "after L1", "after L2", "after L3"};
        o.MinRowHeight = 15;
        o.MapSize = 900;
        o.Text.Scale = scale;
        const Figure f = viz::HeatmapFigure(values.data(), rows, cols, o);
        for (const std::string& label : o.RowLabels) {
            int found = 0;
            for (const viz::FigItem& item : f.Items)
                if (const auto* t = std::get_if<FigText>(&item); t && t->Text == label) ++found;
            EXPECT_EQ(found, 1) << label;
        }
        EXPECT_TRUE(viz::FigureFits(f));
    }
    // A colour bar's caption much longer than a small map's bar wraps over as many lines as it takes
    // (two lines at most ran 3.5 times a 4-row map's height down a blank figure at text scale 3).
    const std::vector<float> four(16, 0.25f);
    viz::HeatmapFigureOptions o;
    o.MapSize = 192;
    o.ValueLabel = "direct logit attribution (logits), mean over positions";
    o.Text.Scale = 3;
    const Figure f = viz::HeatmapFigure(four.data(), 4, 4, o);
    std::string caption;
    for (const viz::FigItem& item : f.Items)
        if (const auto* t = std::get_if<FigText>(&item); t && t->Vertical && t->Align == viz::TextAlign::Center && t->Text != o.RowAxis) {
            EXPECT_LE(viz::MeasureText(t->Text, t->Size) + 8, 1.5f * 192 + 0.5f) << t->Text;
            caption += (caption.empty() ? "" : " ") + t->Text;
        }
    EXPECT_EQ(caption, o.ValueLabel) << "every word, in order";
    EXPECT_LT(f.Height, 192 + 500) << "no blank band under the map for a caption running down";
    EXPECT_TRUE(viz::FigureFits(f));
}

TEST_F(FigureTest, HeadsGrid) {
    const int layers = 2, heads = 3, tokens = 5;
    std::vector<float> maps;
    for (int k = 0; k < layers * heads; ++k) {
        std::vector<float> m = CausalMap(tokens);
        for (float& v : m) v *= 1.0f + 0.1f * k;
        maps.insert(maps.end(), m.begin(), m.end());
    }
    viz::HeadsGridOptions o;
    o.Title = "all heads";
    o.Thumb = 60;
    const Figure f = viz::HeadsGridFigure(maps.data(), layers, heads, tokens, o);
    EXPECT_EQ(Count<viz::FigImage>(f), layers * heads);
    int captions = 0;
    for (const viz::FigItem& item : f.Items)
        if (const auto* t = std::get_if<FigText>(&item)) captions += t->Text == "L1 H2";
    EXPECT_EQ(captions, 1);
    EXPECT_EQ(SvgCounts(f, "heads"), std::to_string(layers * heads * tokens * tokens) + " 0 " + std::to_string(Count<FigText>(f)));
    EXPECT_EQ(Png(f), Png(f));
    // Degenerate grids.
    for (int l : {0, 1})
        for (int t : {0, 1}) {
            const Figure g = viz::HeadsGridFigure(t ? maps.data() : nullptr, l, l ? 2 : 0, t, o);
            EXPECT_GT(g.Width, 0);
            EXPECT_EQ(SvgCounts(g, "heads_degenerate").rfind("python failed", 0), std::string::npos);
        }
}

TEST_F(FigureTest, PlotDegenerateInputs) {
    viz::PlotOptions o;
    o.Title = "empty";
    viz::PlotSeries nan_series;
    nan_series.Name = "nan";
    nan_series.X = {kNaN, 1.0f};
    nan_series.Y = {kNaN, kNaN};
    viz::PlotSeries single;
    single.Kind = viz::SeriesKind::Points;
    single.X = {3.0f};
    single.Y = {3.0f};
    viz::PlotSeries bars;
    bars.Kind = viz::SeriesKind::Bars;
    bars.Name = "bars";
    bars.X = {0, 1, 2};
    bars.Y = {0.5f, -0.2f, 0.0f};
    const std::vector<std::vector<viz::PlotSeries>> sets = {{}, {nan_series}, {single}, {bars}, {nan_series, single, bars}};
    for (const auto& set : sets) {
        const Figure f = viz::PlotFigure(set, o);
        EXPECT_EQ(f.Width, 640);
        EXPECT_EQ(f.Height, 400);
        EXPECT_EQ(SvgCounts(f, "plot_degenerate").rfind("python failed", 0), std::string::npos);
        EXPECT_EQ(viz::RasterizeFigure(f).height, 400);
    }
    // Given degenerate ranges, categories that must turn.
    o.XRange = viz::Range{2.0f, 2.0f};
    o.YRange = viz::Range{kNaN, 1.0f};
    EXPECT_EQ(SvgCounts(viz::PlotFigure({single}, o), "plot_ranges").rfind("python failed", 0), std::string::npos);
    o.XRange.reset();
    o.YRange.reset();
    for (int i = 0; i < 30; ++i) o.XCategories.push_back("category number " + std::to_string(i));
    const Figure f = viz::PlotFigure({bars}, o);
    int vertical = 0;
    for (const viz::FigItem& item : f.Items)
        if (const auto* t = std::get_if<FigText>(&item)) vertical += t->Vertical && t->Text.rfind("category", 0) == 0;
    EXPECT_GT(vertical, 5);
    EXPECT_EQ(SvgCounts(f, "plot_categories").rfind("python failed", 0), std::string::npos);
}

TEST_F(FigureTest, PlotClipsToGivenRanges) {
    viz::PlotSeries line;
    line.X = {-10, 0, 10};
    line.Y = {-10, 0.5f, 10};
    viz::PlotOptions o;
    o.XRange = viz::Range{-1, 1};
    o.YRange = viz::Range{0, 1};
    const Figure f = viz::PlotFigure({line}, o);
    for (const viz::FigItem& item : f.Items)
        if (const auto* l = std::get_if<viz::FigPolyline>(&item))
            for (size_t k = 0; k + 1 < l->Points.size(); k += 2) {
                EXPECT_GE(l->Points[k], 0.0f);
                EXPECT_LE(l->Points[k], f.Width);
                EXPECT_GE(l->Points[k + 1], 0.0f);
                EXPECT_LE(l->Points[k + 1], f.Height);
            }
}

// A legend sits in the corner that hides no data; where every corner would (lines through all
// four), right of the axes, the figure wider by it (a run's curves had one hidden under it).
TEST_F(FigureTest, ALegendThatWouldHideDataGoesBesideTheAxes) {
    auto series = [](const char* name, std::vector<float> y) {
        viz::PlotSeries s;
        s.Name = name;
        s.X = {0, 0.25f, 0.5f, 0.75f, 1};
        s.Y = std::move(y);
        return s;
    };
    viz::PlotOptions o;
    o.Width = 600;
    o.Height = 400;
    const Figure low = viz::PlotFigure({series("low", {0, 0.01f, 0.02f, 0.01f, 0}), series("also low", {0, 0.02f, 0.01f, 0.02f, 0.01f}),
                                        series("high", {1, 0.99f, 1, 0.99f, 1})}, o);
    EXPECT_EQ(low.Width, 600) << "a corner between the lines";
    const Figure crossing = viz::PlotFigure({series("up", {0, 0.25f, 0.5f, 0.75f, 1}), series("down", {1, 0.75f, 0.5f, 0.25f, 0})}, o);
    EXPECT_GT(crossing.Width, 600);
    float right_of_lines = 0, legend_x = -1;
    for (const viz::FigItem& item : crossing.Items) {
        if (const auto* l = std::get_if<viz::FigPolyline>(&item); l && l->Points.size() >= 10)  // the data's (a legend's sample is 2 points)
            for (size_t k = 0; k < l->Points.size(); k += 2) right_of_lines = std::max(right_of_lines, l->Points[k]);
        if (const auto* r = std::get_if<viz::FigRect>(&item); r && r->Fill.a == 230) legend_x = r->X;
    }
    EXPECT_GT(legend_x, right_of_lines);
}

TEST_F(FigureTest, MeasureText) {
    const float abc = viz::MeasureText("abc", 12);
    EXPECT_GT(abc, 0.0f);
    EXPECT_GT(viz::MeasureText("abcd", 12), abc);
    EXPECT_GT(viz::MeasureText("abcabcabc", 12), 2.5f * abc);
    EXPECT_NEAR(viz::MeasureText("abc", 24), 2 * abc, 0.01f);
    EXPECT_GE(viz::MeasureText("abc", 12, true), abc);
    EXPECT_EQ(viz::MeasureText("", 12), 0.0f);
    EXPECT_GT(viz::MeasureText("\xe4\xb8\xad\xe6\x96\x87", 12), 12.0f);  // CJK from the fallback font
    EXPECT_GT(viz::MeasureText("\xff", 12), 0.0f);                         // U+FFFD
}

// Emoji and symbols DejaVu lacks draw from Symbola (.ci/setup-debian installs it): a token's 🙂
// drew as U+FFFD in PNGs. Two emoji draw apart from each other and from U+FFFD.
TEST_F(FigureTest, EmojiDrawAsThemselves) {
    ASSERT_TRUE(fs::exists("/usr/share/fonts/truetype/ancient-scripts/Symbola_hint.ttf")) << "fonts-symbola";
    auto drawn = [](const std::string& text) {
        Figure f;
        f.Width = 40, f.Height = 30;
        FigText t;
        t.X = 5, t.Y = 15, t.Text = text, t.Size = 20;
        f.Add(t);
        return viz::EncodePng(viz::RasterizeFigure(f));
    };
    const auto smile = drawn("\xF0\x9F\x99\x82"), fire = drawn("\xF0\x9F\x94\xA5"), replacement = drawn("\xEF\xBF\xBD");
    EXPECT_NE(smile, replacement);
    EXPECT_NE(fire, replacement);
    EXPECT_NE(smile, fire);
    EXPECT_GT(viz::MeasureText("\xF0\x9F\x99\x82", 20), 10.0f);
}

// Bounding box of the pixels that differ from white.
struct Ink {
    int x0 = 1 << 30, y0 = 1 << 30, x1 = -1, y1 = -1;
};
Ink InkOf(const Image& image) {
    Ink ink;
    for (int y = 0; y < image.height; ++y)
        for (int x = 0; x < image.width; ++x) {
            const Rgba8 p = image.pixels[static_cast<size_t>(y) * image.width + x];
            if (p.r == 255 && p.g == 255 && p.b == 255) continue;
            ink.x0 = std::min(ink.x0, x), ink.y0 = std::min(ink.y0, y), ink.x1 = std::max(ink.x1, x), ink.y1 = std::max(ink.y1, y);
        }
    return ink;
}

TEST_F(FigureTest, TextPlacement) {
    Figure f;
    f.Width = 200;
    f.Height = 200;
    FigText t;
    t.X = 100;
    t.Y = 50;
    t.Text = "Hello";
    t.Size = 20;
    f.Add(t);
    Ink ink = InkOf(viz::RasterizeFigure(f));
    const float w = viz::MeasureText("Hello", 20);
    EXPECT_GE(ink.x0, 100);
    EXPECT_NEAR(ink.x1 - 100, w, 3.0f);
    EXPECT_NEAR((ink.y0 + ink.y1) * 0.5f, 50, 4.0f);  // vertically about the middle

    f.Items.clear();
    t.Align = viz::TextAlign::Right;
    f.Add(t);
    ink = InkOf(viz::RasterizeFigure(f));
    EXPECT_LE(ink.x1, 100);
    EXPECT_NEAR(100 - ink.x0, w, 3.0f);

    // Vertical, Align::Right: hangs down from the anchor, reading bottom to top.
    f.Items.clear();
    t.Vertical = true;
    f.Add(t);
    ink = InkOf(viz::RasterizeFigure(f));
    EXPECT_GE(ink.y0, 50);
    EXPECT_NEAR(ink.y1 - 50, w, 3.0f);
    EXPECT_NEAR((ink.x0 + ink.x1) * 0.5f, 100, 4.0f);

    // Vertical, Align::Left: rises above the anchor.
    f.Items.clear();
    t.Y = 150;
    t.Align = viz::TextAlign::Left;
    f.Add(t);
    ink = InkOf(viz::RasterizeFigure(f));
    EXPECT_LE(ink.y1, 150);
    EXPECT_GT(ink.y0, 150 - w - 3);
}

TEST_F(FigureTest, PrimitivesAreCrispAndAntialiased) {
    Figure f;
    f.Width = 40;
    f.Height = 40;
    viz::FigRect r;
    r.X = 4.4f;
    r.Y = 4.6f;
    r.W = 10;
    r.H = 10;
    r.Fill = {0, 0, 0, 255};
    f.Add(r);
    viz::FigCircle c;
    c.X = 30;
    c.Y = 30;
    c.R = 5;
    c.Fill = {0, 0, 255, 255};
    f.Add(c);
    const Image image = viz::RasterizeFigure(f);
    auto at = [&](int x, int y) { return image.pixels[static_cast<size_t>(y) * image.width + x]; };
    EXPECT_EQ(at(4, 5).r, 0);    // snapped: [4, 14) x [5, 15)
    EXPECT_EQ(at(3, 5).r, 255);
    EXPECT_EQ(at(13, 14).r, 0);
    EXPECT_EQ(at(14, 14).r, 255);
    EXPECT_EQ(at(4, 4).r, 255);
    EXPECT_EQ(at(30, 30).b, 255);
    EXPECT_EQ(at(30, 30).r, 0);
    const Rgba8 edge = at(34, 30);  // partly covered
    EXPECT_GT(edge.r, 0);
    EXPECT_LT(edge.r, 255);
}

// A linear colour bar whose top lies far above its last round value says where it ends (the
// fine-tune's JS, on a scale to the whole change's largest, ended unlabelled above 0.1); one whose
// top is a round value, or a log scale's, is as it was.
TEST_F(FigureTest, AColourBarSaysItsTopWhereNoRoundValueIsNearIt) {
    auto labels = [](std::optional<viz::Range> range, bool log_scale) {
        viz::HeatmapFigureOptions o = SixOptions();
        o.Style.range = range;
        o.Style.log_scale = log_scale;
        const std::vector<float> map = CausalMap(6);
        std::vector<std::string> texts;
        for (const viz::FigItem& item : viz::HeatmapFigure(map.data(), 6, 6, o).Items)
            if (const auto* t = std::get_if<viz::FigText>(&item)) texts.push_back(t->Text);
        return texts;
    };
    auto has = [](const std::vector<std::string>& texts, const std::string& s) { return std::find(texts.begin(), texts.end(), s) != texts.end(); };
    const std::vector<std::string> far = labels(viz::Range{0.0f, 0.139f}, false);
    EXPECT_TRUE(has(far, "0.1") && has(far, "0.139")) << ::testing::PrintToString(far);
    const std::vector<std::string> round = labels(viz::Range{0.0f, 1.0f}, false);
    EXPECT_TRUE(has(round, "1") && !has(round, "0.139"));
    const std::vector<std::string> near = labels(viz::Range{0.0f, 0.105f}, false);
    EXPECT_FALSE(has(near, "0.105")) << "the top within a label of 0.1: " << ::testing::PrintToString(near);
    const std::vector<std::string> log = labels(viz::Range{1e-4f, 0.139f}, true);
    EXPECT_FALSE(has(log, "0.139")) << ::testing::PrintToString(log);
    // A diverging bar's two ends, far past +-0.5 in their halves (dla_heads' +-0.68 ended unlabelled).
    const std::vector<std::string> both = labels(viz::Range{-0.68f, 0.68f}, false);
    EXPECT_TRUE(has(both, "0.68") && has(both, "-0.68")) << ::testing::PrintToString(both);
}

// A dashed line (a plot's reference line): dashes Dash long, Gap apart, from the line's start, in
// the PNG as the SVG's stroke-dasharray draws them, and as many at a PNG scale, scaled.
TEST_F(FigureTest, ADashedLineIsDrawnInDashes) {
    Figure f;
    f.Width = 60;
    f.Height = 10;
    viz::FigPolyline l;
    l.Points = {2, 5.5f, 22, 5.5f, 42, 5.5f, NAN, NAN, 44, 5.5f, 58, 5.5f};
    l.Width = 1;
    l.Dash = 6, l.Gap = 4;
    f.Add(l);
    for (int scale : {1, 2}) {
        const Image image = viz::RasterizeFigure(f, scale);
        auto ink = [&](float x) { return image.pixels[static_cast<size_t>(5.5f * scale) * image.width + static_cast<size_t>(x * scale)].r < 128; };
        // Dashes at 2-8, 12-18, 22-28 (across the joint at 22), 32-38; the pattern starts again at 44.
        for (float x : {4.0f, 14.0f, 22.5f, 26.0f, 35.0f, 46.0f, 55.0f}) EXPECT_TRUE(ink(x)) << x << " at scale " << scale;
        for (float x : {10.0f, 20.0f, 30.0f, 40.0f, 51.0f}) EXPECT_FALSE(ink(x)) << x << " at scale " << scale;
    }
    EXPECT_NE(viz::FigureToSvg(f).find(" stroke-dasharray=\"6 4\""), std::string::npos);
    l.Dash = 0;  // solid
    Figure solid = f;
    solid.Items = {l};
    const Image image = viz::RasterizeFigure(solid);
    EXPECT_LT(image.pixels[5 * image.width + 10].r, 128);
    EXPECT_EQ(viz::FigureToSvg(solid).find("stroke-dasharray"), std::string::npos);
}

// --png-scale: every item drawn `scale` times larger, so a scaled raster is the plain one's at
// scale's size: a heatmap's cells (nearest sampled) and whole-pixel rects pixel for pixel, text's
// ink as large; a scale out of range, or one that would pass the size limits, draws nothing.
TEST_F(FigureTest, APngScaleDrawsEveryItemLarger) {
    const Figure map = SixFigure();
    const Image one = viz::RasterizeFigure(map), two = viz::RasterizeFigure(map, 2);
    ASSERT_EQ(two.width, 2 * one.width);
    ASSERT_EQ(two.height, 2 * one.height);
    const auto& cells = std::get<viz::FigImage>(map.Items[0]);
    int same = 0, cells_checked = 0;
    for (int v = 0; v < cells.Cells.height; ++v)
        for (int u = 0; u < cells.Cells.width; ++u) {  // each cell's centre, at both scales
            const int x = static_cast<int>(cells.X + (u + 0.5f) * cells.W / cells.Cells.width), y = static_cast<int>(cells.Y + (v + 0.5f) * cells.H / cells.Cells.height);
            const Rgba8 a = one.pixels[static_cast<size_t>(y) * one.width + x], b = two.pixels[static_cast<size_t>(2 * y) * two.width + 2 * x];
            same += a.r == b.r && a.g == b.g && a.b == b.b;
            ++cells_checked;
        }
    EXPECT_EQ(same, cells_checked);
    Figure text;
    text.Width = 200, text.Height = 100;
    FigText t;
    t.X = 20, t.Y = 50, t.Text = "Hello", t.Size = 20;
    text.Add(t);
    viz::FigRect r;
    r.X = 150, r.Y = 10, r.W = 20, r.H = 10, r.Fill = {0, 0, 0, 255};
    text.Add(r);
    const Image plain = viz::RasterizeFigure(text), scaled = viz::RasterizeFigure(text, 3);
    ASSERT_EQ(scaled.width, 600);
    auto at = [](const Image& im, int x, int y) { return im.pixels[static_cast<size_t>(y) * im.width + x]; };
    EXPECT_EQ(at(scaled, 450, 30).r, 0);  // the rect, [450, 510) x [30, 60)
    EXPECT_EQ(at(scaled, 509, 59).r, 0);
    EXPECT_EQ(at(scaled, 510, 59).r, 255);
    EXPECT_EQ(at(scaled, 449, 30).r, 255);
    {  // text: its ink three times as wide and tall, where it was times three
        Figure words = text;
        words.Items.pop_back();
        const Ink small = InkOf(viz::RasterizeFigure(words)), large = InkOf(viz::RasterizeFigure(words, 3));
        EXPECT_NEAR(large.x1 - large.x0, 3 * (small.x1 - small.x0), 4.0f);
        EXPECT_NEAR(large.y1 - large.y0, 3 * (small.y1 - small.y0), 4.0f);
        EXPECT_NEAR(large.x0, 3 * small.x0, 4.0f);
    }
    EXPECT_TRUE(viz::RasterizeFigure(text, 0).pixels.empty());
    EXPECT_TRUE(viz::RasterizeFigure(text, viz::kMaxPngScale + 1).pixels.empty());
    Figure wide;
    wide.Width = viz::kMaxFigureSide / 2 + 1, wide.Height = 10;
    EXPECT_TRUE(viz::FigureFits(wide));
    EXPECT_FALSE(viz::FigureFits(wide, 2));
    EXPECT_TRUE(viz::RasterizeFigure(wide, 2).pixels.empty());
    EXPECT_EQ(plain.width, 200);
}

TEST(FigureEncoding, Base64) {
    auto b64 = [](const std::string& s) { return viz::EncodeBase64(std::vector<uint8_t>(s.begin(), s.end())); };
    EXPECT_EQ(b64(""), "");
    EXPECT_EQ(b64("f"), "Zg==");
    EXPECT_EQ(b64("fo"), "Zm8=");
    EXPECT_EQ(b64("foo"), "Zm9v");
    EXPECT_EQ(b64("foobar"), "Zm9vYmFy");
    EXPECT_EQ(b64("\xff\xfe\xfd"), "//79");
}

TEST(FigureEncoding, Png) {
    Image image;
    EXPECT_TRUE(viz::EncodePng(image).empty());
    image.width = 3;
    image.height = 2;
    image.pixels.assign(6, Rgba8{10, 20, 30, 255});
    const std::vector<uint8_t> png = viz::EncodePng(image);
    ASSERT_GT(png.size(), 8u);
    EXPECT_EQ(std::string(png.begin(), png.begin() + 8), "\x89PNG\r\n\x1a\n");
    EXPECT_EQ(png, viz::EncodePng(image));
    EXPECT_EQ(std::string(png.begin(), png.end()).find("pHYs"), std::string::npos);
    // With a density, a pHYs chunk after IHDR: a figure at --png-scale 2 prints at its SVG's size
    // (192 an inch: 7559 a metre, both axes, the unit the metre).
    const std::vector<uint8_t> dense = viz::EncodePng(image, viz::FigurePixelsPerInch(2));
    const std::string bytes(dense.begin(), dense.end());
    ASSERT_EQ(bytes.find("pHYs"), 8u + 25u + 4u);  // signature, IHDR (length, type, 13 bytes, CRC), this chunk's length
    EXPECT_EQ(bytes.substr(8 + 25, 17), std::string("\0\0\0\x09pHYs\0\0\x1d\x87\0\0\x1d\x87\x01", 17));
}

// What EncodePng writes decodes, by another decoder (stb_image), to the pixels it was given: odd
// sizes, a single pixel, noise (which deflate cannot shrink), runs, and a row that differs from the
// row above by wrapping bytes (the Up filter's arithmetic is modulo 256).
TEST(FigureEncoding, PngDecodesToThePixelsItWasGiven) {
    uint32_t state = 99;
    auto next = [&] { return static_cast<uint8_t>((state = state * 1664525u + 1013904223u) >> 24); };
    struct Case {
        int width, height;
        bool noise;
    };
    for (const Case& c : {Case{1, 1, true}, Case{3, 2, false}, Case{17, 9, true}, Case{640, 400, false}, Case{301, 257, true}}) {
        Image image;
        image.width = c.width;
        image.height = c.height;
        image.pixels.resize(static_cast<size_t>(c.width) * c.height);
        for (size_t i = 0; i < image.pixels.size(); ++i) {
            const size_t y = i / c.width;
            image.pixels[i] = c.noise ? Rgba8{next(), next(), next(), next()}
                                      : Rgba8{static_cast<uint8_t>(y % 2 ? 250 : 5), static_cast<uint8_t>(i % 7 * 40), 128, 255};
        }
        const std::vector<uint8_t> png = viz::EncodePng(image);
        int w = 0, h = 0, channels = 0;
        unsigned char* decoded = stbi_load_from_memory(png.data(), static_cast<int>(png.size()), &w, &h, &channels, 4);
        ASSERT_NE(decoded, nullptr) << c.width << "x" << c.height << ": " << stbi_failure_reason();
        EXPECT_EQ(w, c.width);
        EXPECT_EQ(h, c.height);
        EXPECT_EQ(channels, 4);
        EXPECT_EQ(std::memcmp(decoded, image.pixels.data(), image.pixels.size() * 4), 0) << c.width << "x" << c.height;
        stbi_image_free(decoded);
    }
}

TEST(FigureEncoding, Utf8AndXml) {
    auto decode = [](const std::string& s) {
        std::vector<char32_t> out;
        for (size_t pos = 0; pos < s.size();) out.push_back(model::NextCodePoint(s, &pos));
        return out;
    };
    EXPECT_EQ(decode("a\xC3\xA9"), (std::vector<char32_t>{'a', 0xE9}));
    EXPECT_EQ(decode("\xff"), (std::vector<char32_t>{0xFFFD}));
    EXPECT_EQ(decode("\xC0\xAF"), (std::vector<char32_t>{0xFFFD, 0xFFFD}));                // overlong
    EXPECT_EQ(decode("\xED\xA0\x80"), (std::vector<char32_t>{0xFFFD, 0xFFFD, 0xFFFD}));    // surrogate
    EXPECT_EQ(decode("\xE4\xB8"), (std::vector<char32_t>{0xFFFD, 0xFFFD}));                // truncated
    EXPECT_EQ(decode("\xF0\x9F\x98\x80"), (std::vector<char32_t>{0x1F600}));
    EXPECT_EQ(viz::EscapeXml("<a href=\"x\">&'</a>"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;");
    EXPECT_EQ(viz::EscapeXml("a\x01" "b\tc\nd\xff"), "ab\tc\nd\xEF\xBF\xBD");
    // DEL, C1 and the bidirectional controls draw nothing: an SVG viewer would obey U+202E (RIGHT-TO-LEFT
    // OVERRIDE) and show "model-evil" as "live-ledom"; U+200F (a mark, no override) and U+00A0 stay.
    EXPECT_EQ(viz::EscapeXml("model\x7F-\xC2\x85\xE2\x80\xAE" "evil\xE2\x80\xAC\xE2\x81\xA6x\xE2\x81\xA9"), "model-evilx");
    EXPECT_EQ(viz::EscapeXml("a\xE2\x80\x8F" "b\xC2\xA0" "c"), "a\xE2\x80\x8F" "b\xC2\xA0" "c");
}

}  // namespace
