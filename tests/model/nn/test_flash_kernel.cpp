// The fused attention rows' kernel (model/nn/flash_kernels.cuh, issue 37's item 2) on the CPU,
// thread by thread (cuda_on_cpu.h) with the tensor cores' fragments emulated (wmma_on_cpu.h), so
// that every session checks it, with a GPU or without (bench/gpu.sh's fused_check checks it again
// on a device). Against a float64 reference of what it replaces: each side's scores q k^T, its
// masked softmax, the row statistics of those maps (CompareMapsStacked), their cells along the
// keys (PoolKeys) and the outputs weights @ v.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "model/nn/attention_maps_torch.h"
#include "model/nn/forward.h"
#include "model/nn/metrics.h"
#include "tests/model/nn/flash_on_cpu.h"
// After every other header: they define CUDA's words as macros.
#include "tests/model/nn/cuda_on_cpu.h"
#include "tests/model/nn/wmma_on_cpu.h"
#include "model/nn/flash_kernels.cuh"

namespace {

namespace cuda = model::cuda;

int64_t RoundUp(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

// The kernel's launches for `a`, as flash_launch.cuh makes them on a device.
template <int N, int D>
const char* LaunchOnCpu(const cuda::FlashArgs& a) {
    dim3 grid;
    if (const char* error = cuda::FlashGrid(a, &grid)) return error;
    for (int y_first = 0; y_first < D; y_first += cuda::kFlashOutputs<D>)  // the first measures the rows too
        cuda_on_cpu::Launch(grid, {cuda::kFlashWarps * 32}, [&] { cuda::FlashKernel<N, D>(a, y_first, y_first == 0); });
    return nullptr;
}

template <int N>
const char* LaunchSidesOnCpu(const cuda::FlashArgs& a) {
    switch (a.head_size) {
        case 16: return LaunchOnCpu<N, 16>(a);
        case 32: return LaunchOnCpu<N, 32>(a);
        case 64: return LaunchOnCpu<N, 64>(a);
        case 128: return LaunchOnCpu<N, 128>(a);
        default: return "a head size the kernel is not built for";
    }
}

struct Case {
    int64_t head_size = 64;  // Check's D
    int64_t heads = 2, key_groups = 2, value_groups = 2, first = 0, rows = 37, window = 0;
    int pool = 1;
    int64_t later_keys = 5;  // real keys past the block's (a later block's), which no row may see
    double spread = 0.3;     // of q and k: scores of about spread^2 sqrt(D) apart
};

std::string Describe(int sides, const Case& c) {
    return std::to_string(sides) + " sides, D " + std::to_string(c.head_size) + ", heads " + std::to_string(c.heads) + "/" +
           std::to_string(c.key_groups) + "/" + std::to_string(c.value_groups) + ", first " + std::to_string(c.first) + ", rows " +
           std::to_string(c.rows) + ", window " + std::to_string(c.window) + ", pool " + std::to_string(c.pool);
}

struct Side {
    at::Tensor q, k, v;  // float32 [H, Rp, D], [G, Tk, D], [Gv, Tk, D] as the kernel reads them
};

struct Result {
    at::Tensor measures;  // [RowMeasureCount(N), H, R]
    std::vector<at::Tensor> pooled, y;
};

template <int N, int D>
Result RunKernel(const std::vector<Side>& sides, const Case& c) {
    const int64_t H = c.heads, R = c.rows, Rp = RoundUp(R, cuda::kFlashRows), keys = c.first + R, cells = (keys + c.pool - 1) / c.pool;
    Result r;
    r.measures = at::full({model::RowMeasureCount(N), H, R}, NAN, at::kFloat);
    cuda::FlashArgs a;
    a.maps = N;
    a.heads = H, a.rows = R, a.keys = keys, a.first = c.first, a.window = c.window, a.head_size = D, a.padded_rows = Rp;
    a.pool = c.pool, a.cells = cells;
    for (int m = 0; m < N; ++m) {
        a.q[m] = sides[m].q.data_ptr<float>();
        a.k[m] = sides[m].k.data_ptr<float>();
        a.v[m] = sides[m].v.data_ptr<float>();
        a.k_stride[m] = sides[m].k.stride(0);
        a.v_stride[m] = sides[m].v.stride(0);
        a.heads_per_k[m] = static_cast<int>(H / sides[m].k.size(0));
        a.heads_per_v[m] = static_cast<int>(H / sides[m].v.size(0));
        r.y.push_back(at::full({H, Rp, D}, NAN, at::kFloat));
        a.y[m] = r.y.back().data_ptr<float>();
        float* f = r.measures.data_ptr<float>();
        const int64_t rows = H * R;
        float* at = f + model::RowMeasureMetric(m, 0) * rows;
        a.out[m] = {at, at + rows, at + 2 * rows, at + 3 * rows, at + 4 * rows, at + 5 * rows, at + 6 * rows};
    }
    for (int k = 0; k < cuda::kPairs<N>; ++k) {
        a.js[k] = r.measures.data_ptr<float>() + model::RowMeasureJs(N, k) * H * R;
        a.l1[k] = r.measures.data_ptr<float>() + model::RowMeasureL1(N, k) * H * R;
    }
    for (int k = 0; k < N - 1; ++k) {
        r.pooled.push_back(at::full({4, H, R, cells}, NAN, at::kFloat));
        a.pooled[k] = r.pooled.back().data_ptr<float>();
    }
    LaunchOnCpu<N, D>(a);
    for (at::Tensor& y : r.y) y = y.narrow(1, 0, R);
    return r;
}

// Random sides as the layer pass hands them over: queries padded to whole warps with zeros, keys
// and values with later real keys after the block's and zeros to a whole step.
std::vector<Side> RandomSides(int n, const Case& c, uint64_t seed) {
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    const int64_t D = c.head_size, R = c.rows, keys = c.first + R, Tk = RoundUp(keys + c.later_keys, cuda::kFlashKeys);
    std::vector<Side> sides;
    for (int m = 0; m < n; ++m) {
        Side s;
        s.q = at::zeros({c.heads, RoundUp(R, cuda::kFlashRows), D});
        s.q.narrow(1, 0, R).copy_(at::normal(0.0, c.spread, {c.heads, R, D}, gen));
        s.k = at::zeros({c.key_groups, Tk, D});
        s.k.narrow(1, 0, keys + c.later_keys).copy_(at::normal(0.0, c.spread, {c.key_groups, keys + c.later_keys, D}, gen));
        s.v = at::zeros({c.value_groups, Tk, D});
        s.v.narrow(1, 0, keys + c.later_keys).copy_(at::normal(0.0, 1.0, {c.value_groups, keys + c.later_keys, D}, gen));
        sides.push_back(s);
    }
    return sides;
}

// What the kernel replaces, in float64: each side's map [H, R, keys] and outputs [H, R, D].
struct Reference {
    std::vector<at::Tensor> maps, y;
};
Reference Expected(const std::vector<Side>& sides, const Case& c) {
    const int64_t H = c.heads, R = c.rows, keys = c.first + R;
    Reference ref;
    for (const Side& s : sides) {
        auto per_head = [&](const at::Tensor& x) {  // [G, Tk, D] -> each head's group, the block's keys
            return x.narrow(1, 0, keys).to(at::kDouble).repeat_interleave(H / x.size(0), 0);
        };
        const at::Tensor scores = at::matmul(s.q.narrow(1, 0, R).to(at::kDouble), per_head(s.k).transpose(1, 2));
        const at::Tensor map = model::MaskedSoftmax(scores, c.first, c.window);
        ref.maps.push_back(map);
        ref.y.push_back(at::matmul(map, per_head(s.v)));
    }
    return ref;
}

double Largest(const at::Tensor& a, const at::Tensor& b) { return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>(); }

template <int N, int D>
void Check(Case c, uint64_t seed) {
    c.head_size = D;
    const std::string what = Describe(N, c);
    const std::vector<Side> sides = RandomSides(N, c, seed);
    const Result got = RunKernel<N, D>(sides, c);
    const Reference ref = Expected(sides, c);
    std::vector<at::Tensor> maps;  // float32, as the unfused way measures them
    for (const at::Tensor& m : ref.maps) maps.push_back(m.to(at::kFloat));
    const at::Tensor want = model::CompareMapsStacked(maps[0], maps[1], N > 2 ? maps[2] : at::Tensor(), c.first);
    ASSERT_EQ(got.measures.sizes(), want.sizes()) << what;
    // Entropies and sums within float32's rounding of each weight; effective support and
    // spikiness relative (they are of the keys' count's size).
    const at::Tensor scale = want.abs().clamp_min(1.0);
    EXPECT_LT(((got.measures.to(at::kDouble) - want.to(at::kDouble)).abs() / scale).max().item<double>(), 1e-5) << what;
    for (int k = 0; k < N - 1; ++k) {
        const model::KeyPooled cells = model::PoolKeys(maps[0], maps[k + 1], c.pool);
        ASSERT_EQ(got.pooled[k].sizes(), cells.cells.sizes()) << what;
        EXPECT_LT(Largest(got.pooled[k], cells.cells), 1e-6) << what << ", pair " << k;
    }
    for (int m = 0; m < N; ++m) EXPECT_LT(Largest(got.y[m], ref.y[m]), 1e-5) << what << ", side " << m;
}

// The emulated fragments: a product of values exact in TF32 is exact, and what is not TF32 in an
// operand is not read (so a kernel that forgot to split its operands would fail the checks below).
TEST(CudaKernelsOnCpu, TheEmulatedFragmentsMultiplyAsTensorCoresDo) {
    namespace wmma = nvcuda::wmma;
    alignas(32) float a[16 * 8], b[8 * 16], c[16 * 16];  // a fragment's memory: 32-byte aligned, as on a device
    for (int i = 0; i < 16 * 8; ++i) a[i] = static_cast<float>(i % 13 - 6) * 0.25f;
    for (int i = 0; i < 8 * 16; ++i) b[i] = static_cast<float>(i % 7 - 3) * 0.5f;
    wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc;
    wmma::load_matrix_sync(fa, a, 8);  // a: 16 x 8, row by row
    wmma::load_matrix_sync(fb, b, 8);  // b: 8 x 16, column by column
    wmma::fill_fragment(acc, 1.0f);
    wmma::mma_sync(acc, fa, fb, acc);
    wmma::store_matrix_sync(c, acc, 16, wmma::mem_col_major);
    for (int i = 0; i < 16; ++i)
        for (int j = 0; j < 16; ++j) {
            double want = 1.0;
            for (int k = 0; k < 8; ++k) want += static_cast<double>(a[i * 8 + k]) * b[j * 8 + k];
            ASSERT_EQ(c[j * 16 + i], static_cast<float>(want)) << i << ", " << j;
        }
    fa.x[0] = 1.0f + 0x1p-20f;  // not a TF32 value: its last bits are dropped
    wmma::fill_fragment(acc, 0.0f);
    wmma::mma_sync(acc, fa, fb, acc);
    double want = 1.0 * b[0];
    for (int k = 1; k < 8; ++k) want += static_cast<double>(a[k]) * b[k];
    EXPECT_EQ(acc.x[0], static_cast<float>(want));
}

// Plain and grouped heads, every head size the kernel is built for, two and three sides, rows not
// a whole number of warps from a later first row, keys not a whole step, a sliding window, pools
// of one key, of a few and of more than a step, and later real keys past the block.
TEST(CudaKernelsOnCpu, TheFusedAttentionKernelGivesWhatItReplaces) {
    Case c;
    Check<2, 64>(c, 1);
    c.first = 40, c.pool = 3;
    Check<2, 64>(c, 2);
    Check<3, 64>(c, 3);
    c.window = 9, c.pool = 40;
    Check<2, 32>(c, 4);
    // A warp's last query the last key of a step, whose cell goes on past the keys gone through:
    // the keys past them weigh 0 in that cell too (first warp, row 63: cell 62..92 from key 62).
    c.first = 48, c.window = 0, c.pool = 31;
    Check<3, 32>(c, 8);
    // A sliding window whose first row's window starts a step: the steps before it skipped, its
    // first cell going back past it (row 41 sees keys 32..41; cell 0..32).
    c.first = 41, c.rows = 20, c.window = 10, c.pool = 33;
    Check<2, 32>(c, 10);
    Case grouped;
    grouped.heads = 4, grouped.key_groups = 1, grouped.value_groups = 2, grouped.first = 3, grouped.rows = 70;
    grouped.pool = 7, grouped.spread = 0.8;
    Check<2, 16>(grouped, 5);
    Check<3, 16>(grouped, 6);
    Case wide;  // a head of 128: two launches, each with 64 of the outputs (the first measures)
    wide.rows = 20, wide.first = 13, wide.spread = 0.25, wide.key_groups = wide.value_groups = 1, wide.pool = 5;
    Check<3, 128>(wide, 9);
    Case sharp;  // rows with one weight near 1 and the rest under float32's resolution
    sharp.spread = 1.2, sharp.rows = 20, sharp.first = 1;
    Check<3, 32>(sharp, 7);
    // Rows of 16,384 keys, scores some 3 apart: a row's softmax sum in one float chain a lane put
    // the entropies 3.5e-5 off, the cells 1.5e-5 and the outputs 3.5e-5 (1e-4, 1.8e-5 and 3.4e-5 at
    // 32,768 keys); summed a step at a time into a double, within float32's rounding.
    Case long_rows;
    long_rows.heads = long_rows.key_groups = long_rows.value_groups = 1, long_rows.first = 16384 - 16, long_rows.rows = 16;
    long_rows.spread = 0.9, long_rows.later_keys = 0, long_rows.pool = 1024;
    Check<2, 16>(long_rows, 11);
}

}  // namespace

namespace model::test {

const char* FlashRowsOnCpu(const cuda::FlashArgs& a) { return a.maps == 3 ? LaunchSidesOnCpu<3>(a) : LaunchSidesOnCpu<2>(a); }

}  // namespace model::test
