// The exported analysis figures against golden files, byte for byte (SSAVIZ_UPDATE_GOLDEN=1
// rewrites them): the Sparsity plots of a synthetic analysis against the tau = 1 comparison, and
// the tau_q histogram against a twin (whose temperatures are overlaid), as PNG and SVG.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "app/export/export_figures.h"
#include "tests/app/gui/synthetic.h"
#include "viz/figure.h"

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
        const viz::Figure f = app::SparsityFigure(a, "synthetic", name, 0.3f);
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
    for (size_t k = 0; k < a.tau_q_compare.size(); ++k) a.tau_q_compare[k] = 0.8f + 0.05f * static_cast<float>(k % 9);
    ExpectSparsityGoldens(a, {"tau_q_histogram"}, "_twin");  // the others differ from tau = 1's in a legend entry alone
}

}  // namespace
