// End to end: the real ssaviz binary opens the default model in a window (under Xvfb), renders
// until the model has answered, writes a screenshot and the views' rectangles, and exits. The
// picture must not be blank, and the heatmap and token strip must hold real colour.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>
#include <stb_image.h>

namespace {
namespace fs = std::filesystem;

struct Picture {
    int width = 0, height = 0;
    std::vector<uint32_t> pixels;  // RGBA packed
};

Picture Load(const std::string& path) {
    Picture p;
    int channels = 0;
    unsigned char* data = stbi_load(path.c_str(), &p.width, &p.height, &channels, 4);
    if (!data) return p;
    p.pixels.resize(static_cast<size_t>(p.width) * p.height);
    std::memcpy(p.pixels.data(), data, p.pixels.size() * 4);
    stbi_image_free(data);
    return p;
}

size_t DistinctColours(const Picture& p, int x0, int y0, int w, int h) {
    std::set<uint32_t> colours;
    for (int y = std::max(0, y0); y < std::min(p.height, y0 + h); ++y)
        for (int x = std::max(0, x0); x < std::min(p.width, x0 + w); ++x) colours.insert(p.pixels[static_cast<size_t>(y) * p.width + x]);
    return colours.size();
}

TEST(EndToEnd, DefaultModelScreenshot) {
    const std::string dir = std::string(SSAVIZ_TEST_OUT) + "/e2e";
    fs::create_directories(dir);
    const std::string png = dir + "/ssaviz.png";
    fs::remove(png);
    const std::string cmd = std::string(SSAVIZ_BINARY) + " --screenshot " + png +
                            " --frames 8 --text 'The lighthouse keeper climbed the stairs. He lit the lamp, and the ships "
                            "passed safely: café, naïve, 你好.' >" + dir + "/log.txt 2>&1";
    const int status = std::system(cmd.c_str());
    std::ifstream log_file(dir + "/log.txt");
    std::string log((std::istreambuf_iterator<char>(log_file)), std::istreambuf_iterator<char>());
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << cmd << "\n" << log;

    Picture p = Load(png);
    ASSERT_GT(p.width, 0) << "no PNG at " << png;
    EXPECT_GT(DistinctColours(p, 0, 0, p.width, p.height), 200u) << "the window looks blank";

    nlohmann::json meta = nlohmann::json::parse(std::ifstream(png + ".json"));
    for (const char* region : {"heatmap", "tokens", "heads"}) {
        ASSERT_TRUE(meta["regions"].contains(region)) << region << " not drawn";
        auto r = meta["regions"][region];
        const int x = r[0].get<int>(), y = r[1].get<int>(), w = r[2].get<int>(), h = r[3].get<int>();
        EXPECT_GT(w, 50) << region;
        EXPECT_GT(h, 20) << region;
        EXPECT_GT(DistinctColours(p, x, y, w, h), 12u) << region << " holds too few colours";
    }
}

}  // namespace
