// The CUDA kernels (model/nn/metrics_kernels.cuh) run on the CPU, thread by thread
// (cuda_on_cpu.h), so that every session checks them, with a GPU or without (issue 37: most have
// none; bench/gpu.sh's ssaviz_fused_check checks them again on a device). The emulation is checked
// first: the row statistics', softmax's and pooling's kernels against the CPU's own code, within
// float32's rounding where the host's expf and logf stand in for the device's. Then the kernels
// that no device has run yet against what they replace, bit for bit: the softmax and row
// statistics in one against the two kernels it joins, and the predictions' scan against the CPU's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "model/nn/analysis_predictions_torch.h"
#include "model/nn/attention_maps_torch.h"
#include "model/nn/forward.h"
#include "model/nn/metrics.h"
// After every other header: it defines CUDA's words as macros.
#include "tests/model/nn/cuda_on_cpu.h"
#include "model/nn/metrics_kernels.cuh"

namespace {

namespace cuda = model::cuda;

// Fewer blocks than rows, so each block takes several (the kernels' grid-stride loops).
constexpr unsigned kBlocks = 5;

bool SameBits(const at::Tensor& a, const at::Tensor& b) {
    const at::Tensor x = a.contiguous(), y = b.contiguous();
    return x.sizes() == y.sizes() && x.scalar_type() == y.scalar_type() && std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
}

double Largest(const at::Tensor& a, const at::Tensor& b) {
    return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

// Score maps [maps, H, R, T] for rows first..first + R - 1 (T = first + R) of varied sharpness;
// the last row has every 7th key -inf.
at::Tensor Scores(int maps, int64_t H, int64_t first, int64_t R, double scale, uint64_t seed) {
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    const int64_t T = first + R;
    at::Tensor s = at::normal(0.0, scale, {maps, H, R, T}, gen);
    if (T > 8) s.select(2, R - 1).slice(-1, 0, T - 1, 7).fill_(-INFINITY);
    return s;
}

// A CompareMapsStacked tensor for `maps` maps [rows, T] and the kernels' pointers into it.
template <int N>
struct Stacked {
    at::Tensor all;
    cuda::Outputs<N> o;
    Stacked(int64_t rows, const std::vector<int64_t>& shape) {
        std::vector<int64_t> sizes = shape;
        sizes.insert(sizes.begin(), model::RowMeasureCount(N));
        all = at::zeros(sizes, at::kFloat);
        float* f = all.data_ptr<float>();
        for (int m = 0; m < N; ++m) {
            float* at = f + model::RowMeasureMetric(m, 0) * rows;
            o.out[m] = {at, at + rows, at + 2 * rows, at + 3 * rows, at + 4 * rows, at + 5 * rows, at + 6 * rows};
        }
        for (int k = 0; k < cuda::kPairs<N>; ++k) {
            o.js[k] = f + model::RowMeasureJs(N, k) * rows;
            o.l1[k] = f + model::RowMeasureL1(N, k) * rows;
        }
    }
};

// The two kernels the analysis ran until the fused one: MaskedSoftmaxKernel on each map in place,
// then CompareRowsKernel on them all.
template <int N>
at::Tensor SoftmaxThenCompare(at::Tensor scores, int64_t first, int64_t window) {
    const int64_t H = scores.size(1), R = scores.size(2), T = scores.size(3), rows = H * R;
    for (int m = 0; m < N; ++m) {
        float* x = scores[m].data_ptr<float>();
        cuda_on_cpu::Launch({kBlocks}, {cuda::kThreads}, [&] { cuda::MaskedSoftmaxKernel(x, rows, R, T, first, window); });
    }
    Stacked<N> out(rows, {H, R});
    cuda::Args<N> a;
    for (int m = 0; m < N; ++m) a.maps[m] = scores[m].data_ptr<float>();
    a.o = out.o;
    cuda_on_cpu::Launch({kBlocks}, {cuda::kThreads}, [&] { cuda::CompareRowsKernel<N>(a, rows, R, T, first); });
    return out.all;
}

template <int N>
at::Tensor SoftmaxAndCompare(at::Tensor scores, int64_t first, int64_t window) {
    const int64_t H = scores.size(1), R = scores.size(2), T = scores.size(3), rows = H * R;
    Stacked<N> out(rows, {H, R});
    cuda::SoftmaxArgs<N> a;
    for (int m = 0; m < N; ++m) a.scores[m] = scores[m].data_ptr<float>();
    a.o = out.o;
    cuda_on_cpu::Launch({kBlocks}, {cuda::kThreads}, [&] { cuda::SoftmaxCompareKernel<N>(a, rows, R, T, first, window); });
    return out.all;
}

// The emulation against the CPU's code: the softmax kernel against MaskedSoftmax and the row
// statistics' kernel against the CPU's fused pass (CompareMapsStacked), over rows that need more
// than one pass of a block's threads (T > 1,024 keys) and from a later first row.
TEST(CudaKernelsOnCpu, TheSoftmaxAndRowStatisticsKernelsGiveTheCpusFigures) {
    for (const int64_t window : {int64_t{0}, int64_t{64}}) {
        const int64_t first = 1000, R = 37;
        const at::Tensor scores = Scores(2, 2, first, R, 2.0, 3 + window);
        const at::Tensor on_device = scores.clone();
        const at::Tensor measures = SoftmaxThenCompare<2>(on_device, first, window);
        const at::Tensor p = model::MaskedSoftmax(scores[0].clone(), first, window), q = model::MaskedSoftmax(scores[1].clone(), first, window);
        EXPECT_LT(Largest(on_device[0], p), 1e-6) << "window " << window;
        EXPECT_LT(Largest(on_device[1], q), 1e-6) << "window " << window;
        const at::Tensor want = model::CompareMapsStacked(on_device[0], on_device[1], at::Tensor(), first);
        ASSERT_EQ(measures.sizes(), want.sizes());
        // Entropies and sums to float32's rounding of ~1,000 terms; effective support and
        // spikiness relative (they are of the keys' count's size).
        const at::Tensor scale = want.abs().clamp_min(1.0);
        EXPECT_LT(((measures.to(at::kDouble) - want.to(at::kDouble)).abs() / scale).max().item<double>(), 2e-6) << "window " << window;
    }
}

// The thumbnails' pooling, both kernels (a block a row of cells for pools up to a block's threads,
// a thread a cell for any pool), against the CPU's, exactly (maxima pick values).
TEST(CudaKernelsOnCpu, ThePoolingKernelsAreTheCpusPooling) {
    const int64_t first = 0, R = 300, maps = 3;
    const at::Tensor scores = Scores(2, maps, first, R, 3.0, 11);
    const at::Tensor p = model::MaskedSoftmax(scores[0].clone(), 0, 0), q = model::MaskedSoftmax(scores[1].clone(), 0, 0);
    const float keep = 1 - 1e-5f;  // attention_maps.cpp's tie tolerance
    for (const int pool : {3, 7, 290}) {
        const model::Pooled want = model::PoolThumbnails(p, q, pool);
        const int64_t rows = (R + pool - 1) / pool, cols = rows;
        for (const bool by_rows : {true, false}) {
            if (by_rows && pool > cuda::kThreads) continue;
            at::Tensor out_p = at::empty({maps, rows, cols}), out_q = at::empty({maps, rows, cols}), out_d = at::empty({maps, rows, cols});
            if (by_rows) {
                const int chunk = cuda::kThreads / pool * pool;
                const dim3 grid{static_cast<unsigned>((R + chunk - 1) / chunk), static_cast<unsigned>(maps * rows)};
                cuda_on_cpu::Launch(grid, {cuda::kThreads}, [&] {
                    cuda::PoolRowsKernel(p.data_ptr<float>(), q.data_ptr<float>(), R, R, pool, rows, cols, chunk, keep, out_p.data_ptr<float>(),
                                         out_q.data_ptr<float>(), out_d.data_ptr<float>());
                });
            } else {
                const unsigned threads = 128, cells = static_cast<unsigned>(maps * rows * cols);
                cuda_on_cpu::Launch({(cells + threads - 1) / threads}, {threads}, [&] {
                    cuda::PoolKernel(p.data_ptr<float>(), q.data_ptr<float>(), maps, R, R, pool, rows, cols, keep, out_p.data_ptr<float>(),
                                     out_q.data_ptr<float>(), out_d.data_ptr<float>());
                });
            }
            const std::string what = "pool " + std::to_string(pool) + (by_rows ? ", a block a row of cells" : ", a thread a cell");
            EXPECT_TRUE(SameBits(out_p, want.p)) << what;
            EXPECT_TRUE(SameBits(out_q, want.q)) << what;
            EXPECT_TRUE(SameBits(out_d, want.difference)) << what;
        }
    }
}

// A map's extent (the colour scales') against the host's loop, exactly: signed values, NaN and
// infinities on and below the diagonal, a large value above it (not counted), rows from later.
TEST(CudaKernelsOnCpu, TheExtentKernelIsTheHosts) {
    const int64_t T = 700;
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(5);
    at::Tensor map = at::normal(0.0, 1.0, {T, T}, gen);
    float* cells = map.data_ptr<float>();
    cells[4 * T + 1] = NAN;
    cells[3 * T + 3] = INFINITY;
    cells[4 * T + 2] = -INFINITY;
    cells[1 * T + 400] = 50.0f;
    for (const int64_t first : {int64_t{0}, int64_t{350}}) {
        const int64_t rows = T - first;
        const model::MapExtent want = model::HostMapExtent(cells + first * T, rows, T, first);
        unsigned out[3] = {__float_as_uint(0.0f), __float_as_uint(1.0f), __float_as_uint(0.0f)};
        cuda_on_cpu::Launch({kBlocks}, {cuda::kThreads}, [&] { cuda::MapExtentKernel(cells + first * T, rows, T, first, out); });
        float got[3];
        std::memcpy(got, out, sizeof got);
        EXPECT_EQ(got[0], want.max) << "from " << first;
        EXPECT_EQ(got[1], want.min_positive) << "from " << first;
        EXPECT_EQ(got[2], want.max_abs) << "from " << first;
    }
}

// The kernel no device has run yet: SoftmaxCompareKernel writes the rows MaskedSoftmaxKernel
// writes and the figures CompareRowsKernel makes of them, bit for bit, for two maps and three,
// rows from the start and from later, with a sliding window, keys at -inf, a NaN score, rows of
// fewer keys than a block has threads and of more than it takes in one pass.
TEST(CudaKernelsOnCpu, TheSoftmaxAndStatisticsKernelIsTheTwoKernelsBitForBit) {
    struct Case {
        int maps;
        int64_t first, R, window;
    };
    for (const Case c : {Case{2, 0, 40, 0}, Case{2, 1100, 9, 0}, Case{3, 290, 11, 0}, Case{2, 300, 7, 64}, Case{3, 1030, 5, 100}}) {
        at::Tensor scores = Scores(c.maps, 2, c.first, c.R, 3.0, 7 + c.first);
        scores[c.maps - 1][1][0][0] = NAN;  // a row of NaN weights and figures
        at::Tensor fused = scores.clone(), twice = scores.clone();
        const at::Tensor got = c.maps == 2 ? SoftmaxAndCompare<2>(fused, c.first, c.window) : SoftmaxAndCompare<3>(fused, c.first, c.window);
        const at::Tensor want = c.maps == 2 ? SoftmaxThenCompare<2>(twice, c.first, c.window) : SoftmaxThenCompare<3>(twice, c.first, c.window);
        const std::string what = std::to_string(c.maps) + " maps, rows from " + std::to_string(c.first) + ", window " + std::to_string(c.window);
        EXPECT_TRUE(SameBits(fused, twice)) << what << ": the rows written differ by " << Largest(fused, twice);
        EXPECT_TRUE(SameBits(got, want)) << what << ": the figures differ by " << Largest(got, want);
        EXPECT_GT(at::nansum(got.abs()).item<double>(), 0.0) << what;  // the figures were written
    }
}

// The predictions' scan (TopLogitsKernel) against the CPU's (PredictRows on the CPU): the same top
// ids and logits in the same order, target logits and ranks, bit for bit: normal logits, whole
// numbers (ties everywhere), -inf and NaN logits, a row of one value, a vocabulary under ten.
TEST(CudaKernelsOnCpu, ThePredictionsKernelIsTheCpuScanBitForBit) {
    for (const int64_t V : {int64_t{7}, int64_t{300}, int64_t{5000}}) {
        const int64_t rows = 9, m = rows - 2;
        at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(V);
        at::Tensor logits = at::normal(0.0, 3.0, {rows, V}, gen);
        logits[1] = at::round(logits[1]);
        logits[2].narrow(0, 0, V / 2).fill_(-INFINITY);
        logits[2][V - 1] = NAN;
        logits[3].fill_(2.0f);
        logits[4] = at::round(logits[4] / 4);
        const at::Tensor targets = at::randint(0, V, {m}, gen, at::kLong);
        const model::RowPredictions want = model::PredictRows(logits, targets);
        const int K = static_cast<int>(std::min<int64_t>(model::Analysis::kTopK, V));
        at::Tensor top = at::empty({rows, K}), actual = at::empty({m}), ids = at::empty({rows, K}, at::kLong), rank = at::empty({m}, at::kLong);
        cuda_on_cpu::Launch({kBlocks}, {cuda::kThreads}, [&] {
            cuda::TopLogitsKernel(logits.data_ptr<float>(), rows, V, K, targets.data_ptr<int64_t>(), m, top.data_ptr<float>(),
                                  ids.data_ptr<int64_t>(), actual.data_ptr<float>(), rank.data_ptr<int64_t>());
        });
        EXPECT_TRUE(at::equal(ids, want.top_ids)) << "V " << V << "\n" << ids << "\n" << want.top_ids;
        EXPECT_TRUE(SameBits(top, want.top_logits)) << "V " << V;
        EXPECT_TRUE(SameBits(actual, want.actual)) << "V " << V;
        EXPECT_TRUE(at::equal(rank, want.rank)) << "V " << V;
    }
}

}  // namespace
