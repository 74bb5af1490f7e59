// ssaviz_bench_summary: every head's summary of an analysis (app::SummarizeHeads: the heads grid's
// badges, the Matrix, the Table, exports), which the window's worker makes with each analysis, on
// GPT-2 small's shape (12 x 12 heads) with every [L, H, T] array filled (both sides' seven row
// metrics, tau_q and tau_v, JS and L1, tau_q's terms); beside it the temperature scale of the
// window's strips and chips (app::TemperatureRange over every head's tau_q), and what the running
// figures those read cost an edit at the end: one band of each of the 22 arrays sealed
// (model::RowArray::Seal). Not a test: it prints a Markdown table.
// usage: ssaviz_bench_summary [--repeats R]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "app/core/state.h"
#include "app/export/head_summary.h"
#include "bench/median.h"
#include "model/nn/analysis.h"

namespace {

model::Analysis Filled(int L, int H, int T) {
    model::Analysis a;
    a.n_layer = L, a.n_head = H, a.n_tokens = T;
    const size_t n = static_cast<size_t>(L) * H * T;
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    auto array = [&] {
        std::vector<float> v(n);
        for (float& x : v) x = u(rng);
        return model::RowArray(v, static_cast<int64_t>(L) * H, T);
    };
    for (model::MapMetrics* m : {&a.metrics, &a.metrics_compare})
        for (const char* name : {"entropy", "normalized_entropy", "spikiness", "max_weight", "top5_mass", "effective_support", "sink_mass"})
            m->rows.push_back({name, array()});
    for (model::RowArray* v : {&a.tau_q, &a.tau_v, &a.tau_q_compare, &a.tau_v_compare, &a.js, &a.l1, &a.tau_q_position, &a.tau_q_token,
                                  &a.effective_qk_norm})
        *v = array();
    a.qk_opnorm.assign(static_cast<size_t>(L) * H, 1.0f);
    return a;
}

}  // namespace

int main(int argc, char** argv) {
    const int repeats = bench::Repeats(argc, argv, 9);
    std::printf("| tokens | SummarizeHeads ms | TemperatureRange ms | 22 bands sealed ms |\n|---:|---:|---:|---:|\n");
    for (int T : {1024, 8192}) {
        const model::Analysis a = Filled(12, 12, T);
        const double summary = bench::MedianMs(repeats, [&] { app::SummarizeHeads(a); });
        const double scale = bench::MedianMs(repeats, [&] { app::TemperatureRange(a, a.tau_q); });
        // An edit at the end: the last band of each array made again and sealed, continuing the one before.
        const auto& bands = a.tau_q.bands();
        const model::RowArray::Band* before = bands.size() > 1 ? bands[bands.size() - 2].get() : nullptr;
        const int64_t filled = T - static_cast<int64_t>(bands.size() - 1) * model::RowArray::kBand;
        std::vector<model::RowArray::Band> last(22, *bands.back());
        const double seal = bench::MedianMs(repeats, [&] {
            for (model::RowArray::Band& band : last) model::RowArray::Seal(&band, filled, before);
        });
        std::printf("| %d | %.3f | %.3f | %.3f |\n", T, summary, scale, seal);
    }
    std::printf("(medians of %d)\n", repeats);
    return 0;
}
