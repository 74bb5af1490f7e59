// ssaviz_fused_check: the fused row statistics (CompareMaps, CompareThreeMaps) on a device against
// the torch ops they replace run in float64 on the same device, on random causal maps whose sizes
// are not multiples of anything (a thread block's 256 keys, a warp's 32), from a later first row
// too (an edit's), with one-hot and uniform rows. On CUDA the fused pass is metrics_cuda.cu's
// kernel; on the CPU the SIMD pass (tests/model/nn/test_metrics.cpp checks that one in CI too). And
// the attention rows' softmax (on CUDA metrics_cuda.cu's masked softmax) against float64, a
// map's extent (on CUDA its kernel) against the host's, and a head's map in bands against the
// whole map, its texels coloured there against the host's colour pass. And the softmax and the row
// measures in one pass against the two passes, and the predictions' scan against the CPU's. And
// the TF32 products (linear.h's Tf32x3Matmul: on CUDA cuBLAS's TF32 tensor cores) against float64
// on every layout the engine gives them, with their time and float32's at an analysis's shapes.
// And the attention rows fused (fused_attention_torch.h: on CUDA flash_kernels.cuh's kernel, which
// never writes the rows) against float64, with its time and the unfused way's at a 682-row block,
// and a whole layer's time in the blocks the layer pass gives it.
// Prints each quantity's largest difference; exits 1 when one exceeds its tolerance.
//   usage: ssaviz_fused_check [--device cpu|cuda]
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/cuda.h>

#include "app/core/state.h"
#include "bench/median.h"
#include "model/nn/analysis_plan_torch.h"
#include "model/nn/analysis_predictions_torch.h"
#include "model/nn/attention_maps_torch.h"
#include "model/nn/forward.h"
#include "model/nn/fused_attention_torch.h"
#include "model/nn/linear.h"
#include "model/nn/metrics_cuda.h"
#include "model/nn/metrics.h"
#include "model/nn/runtime_torch.h"

namespace {

// 1e-6 absolute, relative for the unbounded ones (spikiness, effective support); max and sink exact.
constexpr double kTolerance = 1e-6;
int g_failures = 0;

void Check(const at::Tensor& fused, const at::Tensor& reference, const std::string& what, bool relative = false, double tolerance = kTolerance) {
    const at::Tensor f = fused.to(at::kCPU, at::kDouble), r = reference.to(at::kCPU, at::kDouble);
    at::Tensor d = (f - r).abs();
    if (relative) d = d / r.abs().clamp_min(1.0);
    const double worst = d.numel() ? d.max().item<double>() : 0.0;
    const bool ok = std::isfinite(worst) && worst <= tolerance;
    if (!ok) ++g_failures;
    std::printf("  %-34s %.2e%s\n", what.c_str(), worst, ok ? "" : "  FAIL");
}

void CheckRows(const model::RowMetricTensors& f, const model::RowMetricTensors& g, const std::string& map) {
    Check(f.entropy, g.entropy, map + " entropy");
    Check(f.normalized_entropy, g.normalized_entropy, map + " normalized_entropy");
    Check(f.spikiness, g.spikiness, map + " spikiness", true);
    Check(f.max_weight, g.max_weight, map + " max_weight", false, 0.0);
    Check(f.top5_mass, g.top5_mass, map + " top5_mass");
    Check(f.effective_support, g.effective_support, map + " effective_support", true);
    Check(f.sink_mass, g.sink_mass, map + " sink_mass", false, 0.0);
}

// Thumbnail pooling (PoolThumbnails: on CUDA a kernel, on the CPU one pass) against torch's
// max_pool2d on the same device, exactly: maxima, and the difference of largest magnitude.
void CheckPooling(const at::Tensor& p, const at::Tensor& q, int pool, const std::string& at_what) {
    const model::Pooled fused = model::PoolThumbnails(p, q, pool);
    auto block_max = [&](const at::Tensor& m) { return at::max_pool2d(m, {pool, pool}, {pool, pool}, {0, 0}, {1, 1}, true); };
    const at::Tensor d = p - q, up = block_max(d), down = block_max(-d);
    const at::Tensor difference = at::where(up >= down * (1 - 1e-5f), up, -down);
    Check(fused.p, block_max(p), "pool " + std::to_string(pool) + " max of p" + at_what, false, 0.0);
    Check(fused.q, block_max(q), "pool " + std::to_string(pool) + " max of q" + at_what, false, 0.0);
    Check(fused.difference, difference, "pool " + std::to_string(pool) + " difference" + at_what, false, 0.0);
}

// Softmax rows of varied sharpness (scores ~ N(0, scale)), a one-hot and a uniform row.
at::Tensor RandomCausalMaps(int64_t maps, int64_t T, double scale, uint64_t seed) {
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    at::Tensor scores = at::normal(0.0, scale, {maps, T, T}, gen);
    scores.masked_fill_(at::ones({T, T}, at::kBool).triu(1), -INFINITY);
    at::Tensor p = at::softmax(scores, -1);
    if (T > 3) {
        p[0][T - 1].zero_();
        p[0][T - 1][2] = 1.0f;
        p[0][T - 2].narrow(0, 0, T - 1).fill_(1.0f / static_cast<float>(T - 1));
    }
    return p;
}

// The attention rows (forward.h's AttentionRows: on CUDA metrics_cuda.cu's masked softmax, which
// main turns on; on the CPU the torch ops) against float64 on the CPU: scores q k^T / sqrt(D) * tau_q,
// softmax over the keys each row sees, built here from index comparisons. Rows first..T-1 (an
// edit's), with and without a sliding window. Tolerance 1e-5, the maps' against the references
// (tests/model): float32's products round the scores by more than any softmax does.
void CheckSoftmax(const at::Device& device, int64_t T, int64_t first, int64_t window, double scale, uint64_t seed) {
    const int64_t H = 3, D = 16, R = T - first;
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    const at::Tensor q = at::normal(0.0, scale, {1, H, R, D}, gen), k = at::normal(0.0, 1.0, {1, H, T, D}, gen);
    const at::Tensor tau = at::rand({1, H, R}, gen) * 2 + 0.25;
    const at::Tensor got = model::AttentionRows(q.to(device), k.to(device), tau.to(device), first, window);
    const at::Tensor i = at::arange(first, T, at::kLong).unsqueeze(1), j = at::arange(0, T, at::kLong).unsqueeze(0);
    at::Tensor visible = j <= i;
    if (window > 0) visible = visible & (j > i - window);
    const at::Tensor scores = at::matmul(q.to(at::kDouble), k.to(at::kDouble).transpose(-1, -2)) / std::sqrt(static_cast<double>(D)) *
                              tau.to(at::kDouble).unsqueeze(-1);
    const at::Tensor want = at::softmax(scores.masked_fill(visible.logical_not(), -INFINITY), -1);
    Check(got, want, "attention rows T " + std::to_string(T) + " from " + std::to_string(first) + (window ? " window " + std::to_string(window) : ""),
          false, 1e-5);
}

// The softmax and the row measures in one pass (SoftmaxAndCompareStacked: on CUDA metrics_cuda.cu's
// SoftmaxAndCompareRows, which main turns on) against the two it joins on the same device,
// MaskedSoftmax and CompareMapsStacked: the same bits, in the rows it writes and in every measure.
// `maps` score maps as the layer pass has them (the batch rows of one tensor), rows first..T-1,
// some keys -inf inside the mask. On the CPU there is no such pass.
void CheckSoftmaxMeasures(const at::Device& device, int maps, int64_t T, int64_t first, int64_t window, double scale, uint64_t seed) {
    const int64_t H = 3, R = T - first;
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    at::Tensor scores = at::normal(0.0, scale, {maps, H, R, T}, gen);
    if (T > 8) scores.select(2, R - 1).narrow(-1, 0, T - 1).slice(-1, 0, T - 1, 7).fill_(-INFINITY);  // the last row's every 7th key
    const at::Tensor once = scores.to(device), twice = scores.to(device);
    std::vector<at::Tensor> fused, softmaxed;
    for (int m = 0; m < maps; ++m) {
        fused.push_back(once[m]);
        softmaxed.push_back(model::MaskedSoftmax(twice[m], first, window));
    }
    const std::string what = std::to_string(maps) + " maps T " + std::to_string(T) + " from " + std::to_string(first) +
                             (window ? " window " + std::to_string(window) : "");
    const at::Tensor got = model::SoftmaxAndCompareStacked(fused, first, window);
    if (!got.defined()) {
        const bool ok = !device.is_cuda();
        if (!ok) ++g_failures;
        std::printf("  %-44s %s\n", what.c_str(), ok ? "no such pass here" : "not taken: FAIL");
        return;
    }
    const at::Tensor want = model::CompareMapsStacked(softmaxed[0], softmaxed[1], maps == 3 ? softmaxed[2] : at::Tensor(), first);
    auto bits = [](const at::Tensor& t) { return t.to(at::kCPU).contiguous().view(at::kInt); };
    const bool rows_same = at::equal(bits(once), bits(at::stack(softmaxed))), measures_same = got.sizes() == want.sizes() && at::equal(bits(got), bits(want));
    if (!rows_same || !measures_same) ++g_failures;
    std::printf("  %-44s rows %s, measures %s%s\n", what.c_str(), rows_same ? "the same bits" : "DIFFER", measures_same ? "the same bits" : "DIFFER",
                rows_same && measures_same ? "" : "  FAIL");
}

// The time of the softmax and measures in one pass against the two passes it joins, on a block of
// rows as an 8,192-token analysis of GPT-2 small's shape has them (12 heads, 682 rows, two and
// three maps), on CUDA: median of 5, the device synchronised.
void TimeSoftmaxMeasures(const at::Device& device) {
    if (!device.is_cuda()) return;
    auto wait = [&] { torch::cuda::synchronize(device.has_index() ? device.index() : -1); };
    const int64_t H = 12, T = 8192, first = T - 682;
    for (const int maps : {2, 3}) {
        const at::Tensor scores = at::randn({maps, H, T - first, T}, at::TensorOptions(device)) * 3;
        at::Tensor work;
        std::vector<at::Tensor> rows;
        auto fresh = [&] {
            work = scores.clone();
            rows.clear();
            for (int m = 0; m < maps; ++m) rows.push_back(work[m]);
            wait();
        };
        std::vector<double> one, two;
        for (int r = 0; r < 5; ++r) {
            fresh();
            one.push_back(bench::MedianMs(1, [&] { model::SoftmaxAndCompareStacked(rows, first, 0); wait(); }));
            fresh();
            two.push_back(bench::MedianMs(1, [&] {
                for (at::Tensor& m : rows) m = model::MaskedSoftmax(m, first, 0);
                model::CompareMapsStacked(rows[0], rows[1], maps == 3 ? rows[2] : at::Tensor(), first);
                wait();
            }));
        }
        std::sort(one.begin(), one.end());
        std::sort(two.begin(), two.end());
        std::printf("  %d maps of 12 x 682 rows x 8,192 keys: one pass %.2f ms, two passes %.2f ms (%.2fx)\n", maps, one[2], two[2], two[2] / one[2]);
    }
}

// The predictions' scan of rows of logits (PredictRows: on CUDA metrics_cuda.cu's TopLogits, which
// main turns on; on the CPU one scan a row) against the CPU's scan of the same logits: the same
// top ids and logits in the same order, the same target logits and ranks, bit for bit. Rows of
// normal logits, of whole numbers (many ties), with -inf and NaN logits; a vocabulary of 50,257
// (GPT-2's) and one under the top ten.
void CheckPredictions(const at::Device& device, int64_t rows, int64_t V, uint64_t seed) {
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    at::Tensor logits = at::normal(0.0, 3.0, {rows, V}, gen);
    if (rows > 1) logits[1] = at::round(logits[1]);  // ties
    if (rows > 2 && V > 20) {
        logits[2].narrow(0, 0, V / 2).fill_(-INFINITY);
        logits[2][V - 1] = NAN;
        logits[2][V - 3] = 7.0f;
        logits[2][V - 2] = 7.0f;
    }
    if (rows > 3) logits[3].fill_(2.0f);  // every logit the same
    const int64_t m = rows - 1;
    const at::Tensor targets = at::randint(0, V, {m}, gen, at::kLong);
    const model::RowPredictions want = model::PredictRows(logits, targets), got = model::PredictRows(logits.to(device), targets.to(device));
    auto same = [](const at::Tensor& a, const at::Tensor& b) {
        const at::Tensor x = a.to(at::kCPU).contiguous(), y = b.to(at::kCPU).contiguous();
        return x.sizes() == y.sizes() && x.scalar_type() == y.scalar_type() && std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
    };
    const bool ok = same(got.top_ids, want.top_ids) && same(got.top_logits, want.top_logits) && same(got.actual, want.actual) &&
                    same(got.rank, want.rank);
    if (!ok) ++g_failures;
    std::printf("  %-44s %s\n", (std::to_string(rows) + " rows of " + std::to_string(V) + " logits").c_str(),
                ok ? "the same top ids, logits, target logits and ranks" : "DIFFER: FAIL");
}

// A map's extent (the colour scales'; on CUDA metrics_cuda.cu's kernel, elsewhere torch ops)
// against the host's loop, exactly (max and min pick cells): signed values, NaN and infinities on
// and above the diagonal, a map of zeros and -0 and one of negative values only.
void CheckExtent(const at::Device& device, int64_t T, uint64_t seed) {
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    for (int kind = 0; kind < 3; ++kind) {
        at::Tensor map = kind == 0 ? at::normal(0.0, 1.0, {T, T}, gen) : kind == 1 ? at::zeros({T, T}) : -at::rand({T, T}, gen) - 0.5;
        float* cells = map.data_ptr<float>();
        if (kind == 1) for (int64_t i = 0; i < T; i += 2) cells[i * T] = -0.0f;
        if (kind == 0 && T >= 5) {
            cells[4 * T + 1] = NAN;
            cells[3 * T + 3] = INFINITY;
            cells[4 * T + 2] = -INFINITY;
            cells[1 * T + 4] = 50.0f;  // above the diagonal: not counted
        }
        const model::MapExtent want = model::HostMapExtent(cells, static_cast<int>(T)), got = model::TensorMapExtent(map.to(device));
        const double worst = std::max({std::abs(double{got.max} - want.max), std::abs(double{got.min_positive} - want.min_positive),
                                       std::abs(double{got.max_abs} - want.max_abs)});
        const bool ok = worst == 0.0 && std::signbit(got.max) == std::signbit(want.max);
        if (!ok) ++g_failures;
        std::printf("  %-34s %.2e%s\n", ("extent T " + std::to_string(T) + (kind == 0 ? " signed" : kind == 1 ? " zeros" : " negative")).c_str(),
                    worst, ok ? "" : "  FAIL");
        // A band of the map's rows (MapBand): [n, width], row r's causal cells j <= first + r.
        for (const int64_t first : {T / 3, T - 1}) {
            if (first < 0 || T == 0) continue;
            const int64_t n = std::min<int64_t>(T - first, 300), width = first + n;
            const at::Tensor band = map.narrow(0, first, n).narrow(1, 0, width).contiguous();
            const model::MapExtent host = model::HostMapExtent(band.data_ptr<float>(), n, width, first);
            const at::Tensor bits = model::ExtentBits(band.to(device), first).to(at::kCPU).contiguous();
            const model::MapExtent on = model::ExtentFromBits(bits.data_ptr<int32_t>());
            const bool same = on.max == host.max && on.min_positive == host.min_positive && on.max_abs == host.max_abs;
            if (!same) ++g_failures;
            std::printf("  %-34s %s\n", ("  band from " + std::to_string(first)).c_str(), same ? "same" : "differs  FAIL");
        }
    }
}

// A map's texels made where it is (MapCells::Texels: on CUDA searchsorted and a table lookup there)
// against the host's colour pass over the same cells (viz::BakeHeatmapWindow): equal, bit for bit,
// for every level, a window, log and linear scales, and a difference in the diverging colours.
void CheckTexels(const model::MapCells& map, bool difference, const std::string& what) {
    const model::MapExtent extent = map.Extent();
    int wrong = 0, texels = 0;
    for (const bool log_scale : {true, false}) {
        viz::HeatmapStyle style;
        style.colormap = difference ? viz::Colormap::Diverging : viz::Colormap::Viridis;
        style.log_scale = log_scale && !difference;
        const viz::Range range = difference ? viz::Range{-extent.max_abs, extent.max_abs} : app::SharedMapRange({&extent}, style.log_scale);
        const viz::ColourScale colour(style.colormap, range, style.log_scale, SIZE_MAX);
        model::TexelScale scale;
        if (!colour.Steps(&scale.steps)) {
            ++wrong;
            continue;
        }
        std::memcpy(scale.table.data(), colour.Colours().data(), sizeof scale.table);
        std::memcpy(&scale.blank, &style.blank, sizeof scale.blank);
        for (int k = 0, n = map.Tokens(); ; ++k, n = (n + 1) / 2) {
            for (const std::array<int, 4>& w : {std::array<int, 4>{0, 0, n, n}, std::array<int, 4>{n / 3, n / 5, n / 2 + 1, n}}) {
                const std::vector<uint32_t> got = map.Texels(k, w[0], w[1], w[2], w[3], scale);
                const std::vector<float> cells = map.Cells(k, w[0], w[1], w[2], w[3]);
                const int rows = std::min(w[2], n - w[0]), cols = std::min(w[3], n - w[1]);
                const viz::Image want = viz::BakeHeatmapWindow(cells.data(), w[0], w[1], rows, cols, cols, rows, style, range);
                if (got.size() != want.pixels.size() || cells.size() != got.size()) {
                    ++wrong;
                    continue;
                }
                texels += static_cast<int>(got.size());
                wrong += std::memcmp(got.data(), want.pixels.data(), got.size() * sizeof(uint32_t)) != 0;
            }
            if (n == 1) break;
        }
    }
    if (wrong) ++g_failures;
    std::printf("  %-34s %d of %d texels' windows differ%s\n", what.c_str(), wrong, texels, wrong ? "  FAIL" : "");
}

// A head's map in bands (RecomputedMaps on the device: MapBand, BandedMap) against the whole map
// made at once on the same device and pooled whole: every level, windows, rows and the extent,
// and the difference of two sides (its level 0: a level of a difference picks the value of largest
// magnitude, and a near tie of d and -d may go either way); then an edit's map sharing the bands
// above it. Within 1e-5 (the products of a band's keys may take other kernels than the whole map's
// and round differently in the last bit; scores reach ~80 here).
void CheckBands(const at::Device& device, int64_t T, uint64_t seed) {
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    auto layer = [&](int64_t tokens) {
        return model::RecomputedMaps::Layer{(at::normal(0.0, 1.5, {2, T, 16}, gen)).narrow(1, 0, tokens).to(device),
                                            (at::normal(0.0, 1.5, {1, T, 16}, gen)).narrow(1, 0, tokens).to(device),
                                            (at::rand({2, T}, gen) * 2.0 + 0.1).narrow(1, 0, tokens).to(device), 0};
    };
    const model::RecomputedMaps::Layer a = layer(T), b = layer(T);
    auto maps_of = [&](int64_t tokens) {
        auto cut = [&](const model::RecomputedMaps::Layer& x) {
            return model::RecomputedMaps::Layer{x.q.narrow(1, 0, tokens), x.k.narrow(1, 0, tokens), x.tau_q.narrow(1, 0, tokens), 0};
        };
        auto maps = std::make_shared<model::RecomputedMaps>();
        maps->Add(model::MapSide::Ssa, cut(a));
        maps->Add(model::MapSide::Compare, cut(b));
        return maps;
    };
    auto whole = [](const model::RecomputedMaps::Layer& x, int64_t tokens) {
        return model::TensorMapCells(model::AttentionRows(x.q[1].narrow(0, 0, tokens), x.k[0].narrow(0, 0, tokens), x.tau_q[1].narrow(0, 0, tokens), 0),
                                     false);
    };
    auto compare = [&](const model::MapCells& got, const model::MapCells& want, const std::string& what, bool difference = false) {
        double worst = 0.0;
        const int n0 = want.Tokens();
        for (int k = 0, n = n0; !difference || k == 0; ++k, n = (n + 1) / 2) {
            const std::vector<float> x = got.Cells(k, 0, 0, n, n), y = want.Cells(k, 0, 0, n, n);
            if (x.size() != y.size()) worst = INFINITY;
            for (size_t i = 0; i < x.size() && i < y.size(); ++i) worst = std::max(worst, std::abs(double{x[i]} - y[i]));
            const std::vector<float> w = got.Cells(k, n / 3, n / 5, n / 2 + 1, n), v = want.Cells(k, n / 3, n / 5, n / 2 + 1, n);
            if (w.size() != v.size()) worst = INFINITY;
            for (size_t i = 0; i < w.size() && i < v.size(); ++i) worst = std::max(worst, std::abs(double{w[i]} - v[i]));
            if (n == 1) break;
        }
        const std::vector<float> x = got.Row(n0 - 1), y = want.Row(n0 - 1);
        for (size_t i = 0; i < x.size() && i < y.size(); ++i) worst = std::max(worst, std::abs(double{x[i]} - y[i]));
        const model::MapExtent e = got.Extent(), f = want.Extent();
        worst = std::max({worst, std::abs(double{e.max} - f.max), std::abs(double{e.min_positive} - f.min_positive), std::abs(double{e.max_abs} - f.max_abs)});
        const bool ok = std::isfinite(worst) && worst <= 1e-5;
        if (!ok) ++g_failures;
        std::printf("  %-34s %.2e%s\n", what.c_str(), worst, ok ? "" : "  FAIL");
    };
    const int64_t before = T - T / 4;
    const auto old = maps_of(before);
    const model::BandedMapPtr old_a = old->Banded(model::MapSide::Ssa, 0, 1);
    compare(*old_a, *whole(a, before), "bands T " + std::to_string(before));
    compare(*old_a->Minus(*old->Cells(model::MapSide::Compare, 0, 1)), *whole(a, before)->Minus(*whole(b, before)), "  their difference", true);
    CheckTexels(*old_a, false, "  texels coloured there");
    CheckTexels(*old_a->Minus(*old->Cells(model::MapSide::Compare, 0, 1)), true, "  the difference's texels");
    const auto now = maps_of(T);
    now->Reuse(*old, before);
    const model::BandedMapPtr now_a = now->Banded(model::MapSide::Ssa, 0, 1);
    int shared = 0, want_shared = 0;
    for (size_t band = 0; band < now_a->Bands().size(); ++band) {
        shared += band < old_a->Bands().size() && now_a->Bands()[band] == old_a->Bands()[band];
        want_shared += static_cast<int64_t>(band + 1) * model::kMapBandRows <= before;
    }
    if (shared != want_shared) ++g_failures;
    compare(*now_a, *whole(a, T), "  after an edit at " + std::to_string(before) + " (" + std::to_string(shared) + " bands kept" +
                                      (shared == want_shared ? ")" : ", not " + std::to_string(want_shared) + ": FAIL)"));
}

// ToHost (runtime.cpp): from a device in slices through one pinned buffer; the same bits as torch's
// own copy, at a size under one slice, one float past a slice and several slices, from a strided view.
void CheckToHost(const at::Device& device, int64_t n, uint64_t seed) {
    at::Generator gen = at::detail::createCPUGenerator(seed);
    const at::Tensor x = at::randn({2 * n + 1}, gen, at::kFloat).to(device).narrow(0, 1, 2 * n).reshape({n, 2}).select(1, 1);
    const std::vector<float> got = model::ToHost(x);
    const at::Tensor want = x.to(at::kCPU).contiguous();
    const bool ok = static_cast<int64_t>(got.size()) == n && (n == 0 || std::memcmp(got.data(), want.data_ptr<float>(), n * sizeof(float)) == 0);
    std::printf("  %-44s %s\n", (std::to_string(n) + " floats").c_str(), ok ? "the same bits" : "DIFFER: FAIL");
    if (!ok) ++g_failures;
}

}  // namespace

// Tf32x3Matmul on the device against float64, within 2e-6 of |a| @ |b| (float32's own error is
// printed beside it), on each layout the engine gives it: rows @ a row-major weight, @ a transposed
// one (an output head), queries @ keys of a longer buffer (transposed, batched, grouped), batched
// row-major, sizes that are multiples of no tile. Operands of widely varied magnitudes.
void CheckTf32x3(const at::Device& device) {
    auto varied = [](std::vector<int64_t> shape, uint64_t seed) {
        at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
        const at::Tensor x = at::normal(0.0, 1.0, shape, gen);
        return x * at::exp(at::normal(0.0, 3.0, {shape.back()}, gen)) * at::exp(at::normal(0.0, 3.0, shape, gen).narrow(-1, 0, 1));
    };
    struct Case {
        const char* name;
        at::Tensor a, b;
    };
    const at::Tensor keys = varied({2, 4, 700, 64}, 3);
    const Case cases[] = {
        {"rows @ a row-major weight", varied({1, 333, 768}, 1), varied({768, 2304}, 2)},
        {"rows @ a transposed weight", varied({1, 129, 768}, 4), varied({5003, 768}, 5).t()},
        {"queries @ a buffer's keys", varied({2, 4, 333, 64}, 6), keys.narrow(2, 0, 517).transpose(-1, -2)},
        {"batched @ batched row-major", varied({2, 3, 130, 96}, 7), varied({2, 3, 96, 77}, 8)},
    };
    for (const Case& c : cases) {
        const at::Tensor got = model::Tf32x3Matmul(c.a.to(device), c.b.to(device)).to(at::kCPU, at::kDouble);
        const at::Tensor float32 = at::matmul(c.a.to(device), c.b.to(device)).to(at::kCPU, at::kDouble);
        const at::Tensor a = c.a.to(at::kDouble), b = c.b.to(at::kDouble);
        const at::Tensor want = at::matmul(a, b), scale = at::matmul(a.abs(), b.abs()) + 1e-300;
        const double own = ((float32 - want).abs() / scale).max().item<double>();
        char what[96];
        std::snprintf(what, sizeof what, "%s (float32 %.2e)", c.name, own);
        Check((got - want) / scale, at::zeros_like(want), what, false, 2e-6);
    }
    // A layer's parts made once (WithTf32Parts) and a block of its rows against the keys up to the
    // block's end (GroupedScoresOf: narrowed parts, batch strides of the whole layer's).
    const bool was = model::Tf32x3Products();
    model::SetTf32x3Products(true);
    const at::Tensor layer_q = varied({2, 4, 900, 64}, 9).narrow(2, 0, 700), grouped_q = varied({2, 8, 700, 64}, 10);
    for (const at::Tensor& q : {layer_q, grouped_q}) {
        const model::ScoreOperands o = model::WithTf32Parts(q.to(device), keys.to(device));
        const at::Tensor got = model::GroupedScoresOf(o, 200, 333, 533).to(at::kCPU, at::kDouble);
        const at::Tensor a = q.narrow(2, 200, 333).to(at::kDouble);
        const at::Tensor b = keys.narrow(2, 0, 533).repeat_interleave(q.size(1) / keys.size(1), 1).transpose(-1, -2).to(at::kDouble);
        const at::Tensor want = at::matmul(a, b), scale = at::matmul(a.abs(), b.abs()) + 1e-300;
        const char* what = q.size(1) == keys.size(1) ? "a block of a layer's parts made once" : "the same, two query heads a key head";
        if (!o.k_parts.defined()) std::printf("  %s: the layer's parts were not made\n", what), ++g_failures;
        Check((got - want) / scale, at::zeros_like(want), what, false, 2e-6);
    }
    model::SetTf32x3Products(was);
    if (!device.is_cuda()) return;
    auto wait = [&] { torch::cuda::synchronize(device.has_index() ? device.index() : -1); };
    struct Shape {
        const char* name;
        int64_t M, K, N;
        bool transposed;
    };
    for (const Shape s : {Shape{"8,192 rows @ GPT-2 small's c_fc", 8192, 768, 3072, false}, Shape{"8,192 rows @ GPT-2's lm_head", 8192, 768, 50257, true},
                          Shape{"8,192 rows @ TinyLlama's gate+up", 8192, 2048, 11264, false}, Shape{"1,024 rows @ GPT-2 small's c_attn", 1024, 768, 2304, false}}) {
        const at::Tensor x = at::randn({1, s.M, s.K}, at::TensorOptions(device));
        const at::Tensor w = s.transposed ? at::randn({s.N, s.K}, at::TensorOptions(device)).t() : at::randn({s.K, s.N}, at::TensorOptions(device));
        at::Tensor y;
        const double f32 = bench::MedianMs(5, [&] { y = at::matmul(x, w); wait(); });
        const double tf32 = bench::MedianMs(5, [&] { y = model::Tf32x3Matmul(x, w); wait(); });
        std::printf("  %-44s float32 %.2f ms, TF32 x3 %.2f ms (%.2fx)\n", s.name, f32, tf32, f32 / tf32);
    }
    const at::Tensor q = at::randn({1, 12, 640, 64}, at::TensorOptions(device)), k = at::randn({1, 12, 8192, 64}, at::TensorOptions(device));
    at::Tensor y;
    const double f32 = bench::MedianMs(5, [&] { y = model::GroupedMatmul(q, k.transpose(-1, -2)); wait(); });
    const double tf32 = bench::MedianMs(5, [&] { y = model::Tf32x3Matmul(q, k.transpose(-1, -2)); wait(); });
    std::printf("  %-44s float32 %.2f ms, TF32 x3 %.2f ms (%.2fx)\n", "scores of 640 rows of 12 heads, 8,192 keys", f32, tf32, f32 / tf32);
    model::SetTf32x3Products(true);
    const model::ScoreOperands o = model::WithTf32Parts(q, k);
    const double parts = bench::MedianMs(5, [&] { y = model::GroupedScoresOf(o, 0, 640, 8192); wait(); });
    model::SetTf32x3Products(was);
    std::printf("  %-44s TF32 x3 from a layer's parts %.2f ms (%.2fx)\n", "the same", parts, f32 / parts);
}

// The attention rows fused (FusedAttentionRows: on CUDA the kernel) against the unfused way in
// float64: each side's map from q k^T, its row measures, its cells along the keys against side 0
// and its outputs. Sides of D = head_size, heads sharing key groups and value groups, rows from a
// later first row, not whole warps or steps, later keys past the block's, a sliding window.
void CheckFusedAttention(const at::Device& device, int sides, int64_t D, int64_t H, int64_t G, int64_t first, int64_t R, int64_t window,
                         int pool, uint64_t seed) {
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    const int64_t keys = first + R, K = keys + 7;
    std::vector<model::FusedSide> on_device;
    std::vector<at::Tensor> maps, y;  // float64, the reference
    for (int m = 0; m < sides; ++m) {
        const at::Tensor q = at::normal(0.0, 0.35, {H, R, D}, gen), k = at::normal(0.0, 0.35, {G, K, D}, gen), v = at::normal(0.0, 1.0, {G, K, D}, gen);
        on_device.push_back({q.to(device), k.to(device), v.to(device)});
        auto per_head = [&](const at::Tensor& x) { return x.narrow(1, 0, keys).to(at::kDouble).repeat_interleave(H / G, 0); };
        maps.push_back(model::MaskedSoftmax(at::matmul(q.to(at::kDouble), per_head(k).transpose(1, 2)), first, window));
        y.push_back(at::matmul(maps.back(), per_head(v)));
    }
    model::FusedRows got;
    const std::string what = std::to_string(sides) + " sides, D " + std::to_string(D) + ", " + std::to_string(H) + "/" + std::to_string(G) +
                             " heads, rows " + std::to_string(first) + ".." + std::to_string(keys - 1) +
                             (window ? ", window " + std::to_string(window) : "") + ", pool " + std::to_string(pool);
    if (!model::FusedAttentionRows(on_device, first, keys, window, pool, &got)) {
        ++g_failures;
        std::printf("  %-34s no fused way  FAIL\n", what.c_str());
        return;
    }
    std::printf("  %s\n", what.c_str());
    std::vector<at::Tensor> single;
    for (const at::Tensor& m : maps) single.push_back(m.to(at::kFloat));
    const at::Tensor want = model::CompareMapsStacked(single[0], single[1], sides > 2 ? single[2] : at::Tensor(), first);
    Check(got.measures, want, "    row measures (relative)", true, 1e-5);
    for (int k = 0; k + 1 < sides; ++k)
        Check(got.cells[k].cells, model::PoolKeys(single[0], single[k + 1], pool).cells, "    cells against side " + std::to_string(k + 1));
    for (int m = 0; m < sides; ++m) Check(got.y[m], y[m], "    outputs of side " + std::to_string(m), false, 1e-5);
}

// The tensor cores' work FlashRows launches for H heads of R rows from `first` against their keys,
// D a head: each warp of kFlashRows rows goes over its keys kFlashKeys a step, twice; a step makes
// each side's scores in three TF32 products a pass and its outputs in three more (16 x 16 x 8
// each); a head of D > 64 takes D / 64 launches, each making the scores again for 64 outputs.
double FusedTensorFlops(int64_t H, int64_t R, int64_t first, int64_t D, int sides) {
    const int64_t rows = model::cuda::kFlashRows, keys = model::cuda::kFlashKeys, outputs = std::min<int64_t>(D, 64);
    int64_t steps = 0;
    for (int64_t r0 = 0; r0 < R; r0 += rows) steps += (first + std::min(r0 + rows, R) - 1) / keys + 1;
    const double mma = 2.0 * 16 * 16 * 8, launches = static_cast<double>(D / outputs);
    const double scores = static_cast<double>(D / 8 * (keys / 16) * 3), weighed = static_cast<double>(keys / 8 * (outputs / 16) * 3);
    return static_cast<double>(H * steps) * sides * launches * (2 * scores + weighed) * mma;
}

// Its time at an analysis's shape (the last block of 682 rows at 8,192 tokens: GPT-2 small's heads
// with two and three sides, and Llama 2 7B's, 32 of 128, with two) against the unfused way's on the
// same device: the scores' product, the softmax and measures (SoftmaxAndCompareStacked where it
// runs, else the two passes), the pooling along the keys and the outputs' product.
void TimeFusedAttention(const at::Device& device) {
    if (!device.is_cuda()) return;
    auto wait = [&] { torch::cuda::synchronize(device.has_index() ? device.index() : -1); };
    struct Shape {
        int64_t H, D;
        int sides;
    };
    for (const Shape shape : {Shape{12, 64, 2}, Shape{12, 64, 3}, Shape{32, 128, 2}}) {
        const int64_t H = shape.H, D = shape.D, T = 8192, first = T - 682, R = T - first;
        const int sides = shape.sides;
        std::vector<model::FusedSide> s;
        for (int m = 0; m < sides; ++m)
            s.push_back({at::randn({H, R, D}, at::TensorOptions(device)) * 0.35, at::randn({H, T, D}, at::TensorOptions(device)) * 0.35,
                         at::randn({H, T, D}, at::TensorOptions(device))});
        std::vector<double> fused, unfused;
        for (int r = 0; r < 5; ++r) {
            model::FusedRows out;
            wait();
            fused.push_back(bench::MedianMs(1, [&] { model::FusedAttentionRows(s, first, T, 0, 32, &out); wait(); }));
            unfused.push_back(bench::MedianMs(1, [&] {
                std::vector<at::Tensor> rows;
                for (const model::FusedSide& x : s) rows.push_back(at::matmul(x.q, x.k.transpose(1, 2)));
                if (!model::SoftmaxAndCompareStacked(rows, first, 0).defined()) {
                    for (at::Tensor& m : rows) m = model::MaskedSoftmax(m, first, 0);
                    model::CompareMapsStacked(rows[0], rows[1], sides == 3 ? rows[2] : at::Tensor(), first);
                }
                for (int m = 1; m < sides; ++m) model::PoolKeys(rows[0], rows[m], 32);
                for (int m = 0; m < sides; ++m) at::matmul(rows[m], s[m].v);
                wait();
            }));
        }
        std::sort(fused.begin(), fused.end());
        std::sort(unfused.begin(), unfused.end());
        // Its rate on the tensor cores: near the device's TF32 peak, the products bound it; far
        // under, the per-key work or the loads of keys and values do.
        const double flops = FusedTensorFlops(H, R, first, D, sides);
        std::printf("  %d sides of %lld heads x 682 rows x 8,192 keys, D %lld: fused %.2f ms, unfused %.2f ms (%.2fx); "
                    "%.2f TFLOP of TF32 products in the fused, %.0f TFLOP/s\n",
                    sides, static_cast<long long>(H), static_cast<long long>(D), fused[2], unfused[2], unfused[2] / fused[2], flops * 1e-12,
                    flops / (fused[2] * 1e-3) * 1e-12);
    }
}

// A whole layer's rows as the layer pass now hands them to the kernel (the plan's fused_block: as
// many rows as a pair's cells along the keys fit in a device's 256 MB; at 8,192 tokens 5,440 rows
// then 2,752 of GPT-2 small's 12 heads, four blocks of 2,048 of Llama 2 7B's 32), each block a
// launch: the kernel's rate where its launches fill the device, against the 682-row block above.
void TimeFusedLayer(const at::Device& device, int64_t T) {
    if (!device.is_cuda()) return;
    auto wait = [&] { torch::cuda::synchronize(device.has_index() ? device.index() : -1); };
    struct Shape {
        int64_t H, D;
        int sides;
    };
    const int pool = model::ThumbnailPool(static_cast<int>(T));
    const int64_t cells = (T + pool - 1) / pool;
    for (const Shape shape : {Shape{12, 64, 2}, Shape{12, 64, 3}, Shape{32, 128, 2}}) {
        const int64_t H = shape.H, D = shape.D;
        const int sides = shape.sides;
        const int64_t rows_fit = static_cast<int64_t>(model::kDeviceBlockBytes / (sizeof(float) * H * T)) / pool * pool;  // the plan's block
        const int64_t cells_fit = static_cast<int64_t>(model::kDeviceBlockBytes / (sizeof(float) * 4 * H * cells)) / pool * pool;
        const int64_t block = std::max<int64_t>({pool, rows_fit, cells_fit});  // its fused_block
        std::vector<model::FusedSide> s;
        for (int m = 0; m < sides; ++m)
            s.push_back({at::randn({H, T, D}, at::TensorOptions(device)) * 0.35, at::randn({H, T, D}, at::TensorOptions(device)) * 0.35,
                         at::randn({H, T, D}, at::TensorOptions(device))});
        double flops = 0;
        int launches = 0;
        for (int64_t a = 0; a < T; a += block) flops += FusedTensorFlops(H, std::min(T, a + block) - a, a, D, sides), ++launches;
        std::vector<double> times;
        for (int r = 0; r < 5; ++r) {
            wait();
            times.push_back(bench::MedianMs(1, [&] {
                for (int64_t a = 0; a < T; a += block) {
                    std::vector<model::FusedSide> rows = s;
                    for (model::FusedSide& x : rows) x.q = x.q.narrow(1, a, std::min(T, a + block) - a);
                    model::FusedRows out;
                    if (!model::FusedAttentionRows(rows, a, std::min(T, a + block), 0, pool, &out)) std::printf("  the fused way refused\n");
                }
                wait();
            }));
        }
        std::sort(times.begin(), times.end());
        std::printf("  %d sides of %lld heads x %lld rows, D %lld, a layer in %d blocks of up to %lld rows: fused %.2f ms, "
                    "%.2f TFLOP of TF32 products, %.0f TFLOP/s\n",
                    sides, static_cast<long long>(H), static_cast<long long>(T), static_cast<long long>(D), launches,
                    static_cast<long long>(block), times[2], flops * 1e-12, flops / (times[2] * 1e-3) * 1e-12);
    }
}

int main(int argc, char** argv) {
    // The attention rows' CUDA softmax is on unless SSAVIZ_CUDA_SOFTMAX=0 (forward.cpp): this checks it even then.
    setenv("SSAVIZ_CUDA_SOFTMAX", "1", 1);
    setenv("SSAVIZ_CUDA_SOFTMAX_MEASURES", "1", 1);  // off by default until checked: this checks them
    setenv("SSAVIZ_CUDA_PREDICTIONS", "1", 1);
    std::string device_name = "cpu";
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--device") == 0 && i + 1 < argc) device_name = argv[++i];
        else {
            std::fprintf(stderr, "ssaviz_fused_check: unknown argument '%s' (usage: ssaviz_fused_check [--device cpu|cuda])\n", argv[i]);
            return 2;
        }
    }
    if (device_name == "cuda" && !at::hasCUDA()) {
        std::fprintf(stderr, "ssaviz_fused_check: no CUDA device (or this LibTorch has no CUDA)\n");
        return 2;
    }
    const at::Device device(device_name == "cuda" ? at::kCUDA : at::kCPU);
#if defined(__GLIBC__)
    // The float64 references' blocks (three maps of 2,077 rows: 100 MB) are over glibc's mmap
    // threshold: each would be mapped anew and faulted in a page at a time, which was most of this
    // check's time on the CPU (94 s -> 24 s on CI's 2 cores). The heap serves and keeps them.
    if (!device.is_cuda()) {
        mallopt(M_MMAP_MAX, 0);
        mallopt(M_TRIM_THRESHOLD, 1 << 30);
    }
#endif
    if (device.is_cuda() && !model::HasCudaKernels()) {
        std::fprintf(stderr, "ssaviz_fused_check: this build has no CUDA kernel (its LibTorch has CUDA, but CMake did not build metrics_cuda.cu)\n");
        return 1;
    }
    struct Case {
        int64_t T;
        double scale;
    };
    for (const Case c : {Case{1, 3}, Case{2, 3}, Case{5, 3}, Case{33, 30}, Case{300, 3}, Case{1000, 10}, Case{2077, 1}}) {
        const at::Tensor p = RandomCausalMaps(3, c.T, c.scale, 11 + c.T).to(device), q = RandomCausalMaps(3, c.T, c.scale, 97 + c.T).to(device),
                         r = RandomCausalMaps(3, c.T, 3 * c.scale, 5 + c.T).to(device);
        for (int64_t first : {int64_t{0}, c.T / 2 + 1}) {
            if (first >= c.T && c.T > 0) continue;
            auto rows = [&](const at::Tensor& m) { return m.narrow(1, first, c.T - first); };
            auto wide = [&](const at::Tensor& m) { return rows(m).to(at::kDouble); };
            std::printf("T = %lld, scores ~ N(0, %g), rows from %lld, %s\n", static_cast<long long>(c.T), c.scale, static_cast<long long>(first),
                        device.str().c_str());
            const model::MapComparison two = model::CompareMaps(rows(p), rows(q), first);
            const model::MapComparison two_ref = model::CompareMapsGeneric(wide(p), wide(q), first);
            CheckRows(two.p, two_ref.p, "p");
            CheckRows(two.q, two_ref.q, "q");
            Check(two.js, two_ref.js, "js p-q");
            Check(two.l1, two_ref.l1, "l1 p-q");
            const model::ThreeWayComparison three = model::CompareThreeMaps(rows(p), rows(q), rows(r), first);
            const model::ThreeWayComparison three_ref = model::CompareThreeMapsGeneric(wide(p), wide(q), wide(r), first);
            CheckRows(three.r, three_ref.r, "r (three maps)");
            Check(three.pq.js, two_ref.js, "js p-q (three maps)");
            Check(three.js_pr, three_ref.js_pr, "js p-r");
            Check(three.l1_pr, three_ref.l1_pr, "l1 p-r");
            Check(three.js_qr, three_ref.js_qr, "js q-r");
            Check(three.l1_qr, three_ref.l1_qr, "l1 q-r");
        }
        for (int pool : {2, 3, 7, 32})
            if (pool < c.T) CheckPooling(p, q, pool, "");
    }
    std::printf("attention rows, %s\n", device.str().c_str());
    for (const int64_t T : {int64_t{1}, int64_t{5}, int64_t{300}, int64_t{1000}, int64_t{2077}})
        for (const int64_t first : {int64_t{0}, T / 2})
            for (const int64_t window : {int64_t{0}, int64_t{64}}) CheckSoftmax(device, T, first, window, T == 300 ? 8.0 : 1.0, 7 + T + first);
    std::printf("the softmax and the row measures in one pass, %s\n", device.str().c_str());
    for (const int maps : {2, 3})
        for (const int64_t T : {int64_t{1}, int64_t{5}, int64_t{300}, int64_t{1000}, int64_t{2077}})
            for (const int64_t first : {int64_t{0}, T / 2})
                for (const int64_t window : {int64_t{0}, int64_t{64}})
                    CheckSoftmaxMeasures(device, maps, T, first, window, T == 300 ? 8.0 : 1.0, 17 + maps + T + first + window);
    TimeSoftmaxMeasures(device);
    std::printf("the predictions' scan, %s\n", device.str().c_str());
    for (const int64_t V : {int64_t{7}, int64_t{300}, int64_t{50257}}) CheckPredictions(device, 37, V, 29 + V);
    std::printf("TF32 x3 products against float64, %s\n", device.str().c_str());
    CheckTf32x3(device);
    std::printf("attention rows fused, %s\n", device.str().c_str());
    CheckFusedAttention(device, 2, 64, 2, 2, 0, 37, 0, 1, 41);
    CheckFusedAttention(device, 3, 64, 4, 2, 40, 77, 0, 3, 42);
    CheckFusedAttention(device, 2, 32, 2, 1, 48, 37, 0, 31, 43);
    CheckFusedAttention(device, 3, 16, 4, 1, 3, 300, 9, 7, 44);
    CheckFusedAttention(device, 2, 64, 12, 12, 1000, 1077, 0, 8, 45);
    CheckFusedAttention(device, 2, 128, 4, 2, 500, 300, 100, 5, 46);  // two launches; steps before the window skipped
    CheckFusedAttention(device, 3, 128, 2, 1, 70, 45, 0, 33, 47);
    TimeFusedAttention(device);
    TimeFusedLayer(device, 8192);
    std::printf("map extent, %s\n", device.str().c_str());
    for (const int64_t T : {int64_t{1}, int64_t{5}, int64_t{300}, int64_t{2077}}) CheckExtent(device, T, 3 + T);
    std::printf("maps in bands, %s\n", device.str().c_str());
    for (const int64_t T : {int64_t{4}, int64_t{700}, int64_t{2077}}) CheckBands(device, T, 5 + T);
    std::printf("to the host, %s\n", device.str().c_str());
    for (const int64_t n : {int64_t{0}, int64_t{7}, (int64_t{4} << 20) + 3, int64_t{9} << 20}) CheckToHost(device, n, 13 + n);
    std::printf(g_failures ? "%d checks FAILED\n" : "every check passed\n", g_failures);
    return g_failures ? 1 : 0;
}
