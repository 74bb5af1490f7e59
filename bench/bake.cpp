// ssaviz_bench_bake: the window's colour pass over a head's map (viz::BakeHeatmap at one pixel a
// cell, the heatmap view's whole level), linear and log scale, on causal rows shaped like
// attention (a few large weights, a long tail of small ones). Not a test: it prints a Markdown
// table. usage: ssaviz_bench_bake [--repeats R]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "bench/median.h"
#include "viz/heatmap.h"

namespace {

// T causal softmax rows of random logits (scale 3: a few keys take most of each row).
std::vector<float> AttentionLike(int T) {
    std::mt19937 rng(7);
    std::normal_distribution<float> logit(0.0f, 3.0f);
    std::vector<float> map(static_cast<size_t>(T) * T, 0.0f);
    for (int i = 0; i < T; ++i) {
        float* row = map.data() + static_cast<size_t>(i) * T;
        double sum = 0;
        for (int j = 0; j <= i; ++j) sum += row[j] = std::exp(logit(rng));
        for (int j = 0; j <= i; ++j) row[j] = static_cast<float>(row[j] / sum);
    }
    return map;
}

}  // namespace

int main(int argc, char** argv) {
    const int repeats = bench::Repeats(argc, argv, 15);
    std::printf("| cells a side | scale | bake ms (median of %d) | ns a causal cell |\n|---:|---|---:|---:|\n", repeats);
    for (int n : {512, 1024}) {
        const std::vector<float> map = AttentionLike(n);
        for (bool log_scale : {false, true}) {
            viz::HeatmapStyle style;
            style.log_scale = log_scale;
            const viz::Range range = viz::ResolveRange(map.data(), n, n, style);
            const double ms = bench::MedianMs(repeats, [&] { viz::BakeHeatmap(map.data(), n, n, 0, 0, n, n, n, n, style, range); });
            const double cells = 0.5 * n * (n + 1.0);
            std::printf("| %d | %s | %.2f | %.1f |\n", n, log_scale ? "log" : "linear", ms, ms * 1e6 / cells);
        }
    }
    // The heads grid: a thumbnail of 256 cells a side (model::kThumbnailCells) max-pooled to 96
    // pixels (the grid's side) for each of GPT-2 small's 144 heads, one colour scale for all.
    const int cells = 256, side = 96, heads = 144;
    const std::vector<float> thumbnail = AttentionLike(cells);
    std::printf("\n| thumbnails | scale | bake ms (median of %d) | ns a causal cell |\n|---:|---|---:|---:|\n", repeats);
    for (bool log_scale : {false, true}) {
        viz::HeatmapStyle style;
        style.log_scale = log_scale;
        style.range = viz::ResolveRange(thumbnail.data(), cells, cells, style);
        const viz::ColourScale colour(style.colormap, *style.range, log_scale, SIZE_MAX);
        const double ms = bench::MedianMs(repeats, [&] {
            for (int h = 0; h < heads; ++h) viz::BakeHeatmap(thumbnail.data(), cells, cells, style, colour, side);
        });
        std::printf("| %d of %d -> %d | %s | %.2f | %.1f |\n", heads, cells, side, log_scale ? "log" : "linear", ms,
                    ms * 1e6 / (heads * 0.5 * cells * (cells + 1.0)));
    }
    return 0;
}
