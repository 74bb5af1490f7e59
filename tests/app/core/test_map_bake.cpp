// app::BakeMapWindow (app/core/state.h): the window's heatmap pixels of a head's map. A map kept on
// a GPU is coloured there (MapCells::Texels) and only its texels cross; a host map is baked from
// its cells. The two ways must give the same pixels. No GPU here: a map that says it is on a
// device, whose Texels are the real colouring in torch ops on CPU tensors, takes the first way.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "app/core/state.h"
#include "model/nn/attention_maps.h"

namespace {

// A host map that reports being on a device, so that BakeMapWindow colours it through Texels.
class DeviceSide final : public model::MapCells {
public:
    explicit DeviceSide(model::MapCellsPtr map) : m_map(std::move(map)) {}
    int Tokens() const override { return m_map->Tokens(); }
    std::vector<float> Cells(int level, int row0, int col0, int rows, int cols) const override {
        return m_map->Cells(level, row0, col0, rows, cols);
    }
    std::vector<uint32_t> Texels(int level, int row0, int col0, int rows, int cols, const model::TexelScale& scale) const override {
        ++texels_made;
        return MapCells::Texels(level, row0, col0, rows, cols, scale);  // the colouring in torch ops, on CPU tensors
    }
    float At(int i, int j) const override { return m_map->At(i, j); }
    std::vector<float> Row(int i) const override { return m_map->Row(i); }
    model::MapExtent Extent() const override { return m_map->Extent(); }
    model::MapCellsPtr Minus(const model::MapCells&) const override { return nullptr; }
    bool OnDevice() const override { return true; }
    mutable int texels_made = 0;

private:
    model::MapCellsPtr m_map;
};

model::MapCellsPtr RandomHostMap(int T, unsigned seed) {
    std::mt19937 rng(seed);
    std::exponential_distribution<float> e(1.0f);
    auto map = std::make_shared<std::vector<float>>(static_cast<size_t>(T) * T, 0.0f);
    for (int i = 0; i < T; ++i) {
        float sum = 0.0f;
        for (int j = 0; j <= i; ++j) sum += (*map)[static_cast<size_t>(i) * T + j] = std::pow(e(rng), 4.0f);
        for (int j = 0; j <= i; ++j) (*map)[static_cast<size_t>(i) * T + j] /= sum;
    }
    return model::HostMapCells(map, T);
}

bool SamePixels(const viz::Image& a, const viz::Image& b) {
    return a.width == b.width && a.height == b.height && a.pixels.size() == b.pixels.size() &&
           std::memcmp(a.pixels.data(), b.pixels.data(), a.pixels.size() * sizeof(viz::Rgba8)) == 0;
}

}  // namespace

TEST(BakeMapWindow, ADevicesTexelsAreTheHostsPixels) {
    const int T = 300;
    const model::MapCellsPtr host = RandomHostMap(T, 3);
    const DeviceSide device(host);
    const model::MapExtent extent = host->Extent();
    for (const bool log_scale : {true, false}) {
        viz::HeatmapStyle style;
        style.log_scale = log_scale;
        const viz::Range range = app::SharedMapRange({&extent}, log_scale);
        for (int level = 0, n = T; ; ++level, n = (n + 1) / 2) {
            const viz::Image a = app::BakeMapWindow(device, style, range, level, 0, 0, n, n);
            const viz::Image b = app::BakeMapWindow(*host, style, range, level, 0, 0, n, n);
            EXPECT_EQ(a.width, n);
            EXPECT_TRUE(SamePixels(a, b)) << "level " << level << (log_scale ? ", log scale" : "");
            // A window past the level's edge is clipped to it.
            const viz::Image c = app::BakeMapWindow(device, style, range, level, n / 3, n / 4, n, n / 2 + 2);
            const viz::Image d = app::BakeMapWindow(*host, style, range, level, n / 3, n / 4, n, n / 2 + 2);
            EXPECT_EQ(c.height, n - n / 3);
            EXPECT_TRUE(SamePixels(c, d)) << "level " << level << " window";
            if (n == 1) break;
        }
    }
    EXPECT_GT(device.texels_made, 0);
    // Outside the level: nothing.
    viz::HeatmapStyle style;
    EXPECT_EQ(app::BakeMapWindow(device, style, {0.0f, 1.0f}, 0, T, 0, 4, 4).pixels.size(), 0u);
    EXPECT_EQ(app::BakeMapWindow(device, style, {0.0f, 1.0f}, -1, 0, 0, 4, 4).pixels.size(), 0u);
    EXPECT_EQ(app::BakeMapWindow(device, style, {0.0f, 1.0f}, 40, 0, 0, 4, 4).pixels.size(), 0u);
}

// A range that is not finite has no colour steps: the host bakes the cells, and the colours are
// still the host's.
TEST(BakeMapWindow, ARangeWithoutStepsIsBakedOnTheHost) {
    const model::MapCellsPtr host = RandomHostMap(40, 5);
    const DeviceSide device(host);
    viz::HeatmapStyle style;
    style.log_scale = false;
    const viz::Range range{0.0f, std::numeric_limits<float>::infinity()};
    const int before = device.texels_made;
    EXPECT_TRUE(SamePixels(app::BakeMapWindow(device, style, range, 0, 0, 0, 40, 40), app::BakeMapWindow(*host, style, range, 0, 0, 0, 40, 40)));
    EXPECT_EQ(device.texels_made, before) << "baked from the cells on the host";
}
