// The few-rows product of model/nn/linear.h against float64 products, on every layout it takes,
// shapes that leave remainders in each of its loops, 1 and 2 threads; and an engine holding a BF16
// file's matrices as bfloat16 against one holding the same values in float32 (full analyses and
// edits, every array of the analysis). Tolerances: 1e-5 of sum |x w| for the products, 1e-5 on the analyses as the
// incremental tests'. The TF32 products (tf32.h, Tf32x3Matmul) on the CPU: the parts' rounding
// against a float64 reference, the products against float64 within 2e-6 of |a| @ |b| (float32's own
// error is alike), and which products take them.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include "model/nn/analysis.h"
#include "model/nn/linear.h"
#include "model/nn/model_folder_torch.h"
#include "model/nn/runtime_torch.h"
#include "model/nn/tf32.h"
#include "tests/model/nn/compare_analyses.h"

namespace {

namespace fs = std::filesystem;

// |got - x @ w| / (|x| @ |w|), largest over the output: rounding relative to the sum's magnitude.
double RelativeError(const at::Tensor& got, const at::Tensor& x, const at::Tensor& w) {
    const at::Tensor xd = x.to(at::kDouble), wd = w.to(at::kDouble);
    const at::Tensor want = at::matmul(xd, wd), scale = at::matmul(xd.abs(), wd.abs()) + 1e-30;
    return ((got.to(at::kDouble) - want).abs() / scale).max().item<double>();
}

struct Layout {
    const char* name;
    at::Tensor (*make)(int64_t K, int64_t N);
};

const Layout kLayouts[] = {
    {"row-major", [](int64_t K, int64_t N) { return at::randn({K, N}); }},
    {"transposed", [](int64_t K, int64_t N) { return at::randn({N, K}).t(); }},
    {"bf16", [](int64_t K, int64_t N) { return at::randn({K, N}).to(at::kBFloat16); }},
    {"columns of a wider matrix", [](int64_t K, int64_t N) { return at::randn({K, N + 7}).narrow(1, 3, N); }},
};

TEST(MatmulRows, EqualsTheFloat64ProductOnEveryLayoutAndShape) {
    at::manual_seed(7);
    for (const Layout& layout : kLayouts)
        for (int64_t K : {1, 5, 64, 130, 259})          // one row piece, remainders of 4, several pieces
            for (int64_t N : {1, 17, 300})               // below, off and across the kernels' widths
                for (int64_t M : {1, 2, 3, 5, 8, 13}) {  // blocks of 1..5, a group and a rest
                    const at::Tensor w = layout.make(K, N), x = at::randn({1, M, K});
                    const at::Tensor got = model::MatmulRows(x, w);
                    ASSERT_EQ(got.sizes(), (std::vector<int64_t>{1, M, N})) << layout.name;
                    EXPECT_LE(RelativeError(got, x, w.to(at::kFloat)), 1e-5)
                        << layout.name << " K " << K << " N " << N << " M " << M;
                }
}

TEST(MatmulRows, DoesNotDependOnTheThreadCount) {
    at::manual_seed(8);
    const int before = at::get_num_threads();
    for (const Layout& layout : kLayouts) {
        const at::Tensor w = layout.make(1000, 700), x = at::randn({2, 1000});
        model::SetComputeThreads(1);
        const at::Tensor one = model::MatmulRows(x, w);
        model::SetComputeThreads(2);
        const at::Tensor two = model::MatmulRows(x, w);
        EXPECT_TRUE(at::equal(one, two)) << layout.name;
    }
    model::SetComputeThreads(before);
}

TEST(MatmulRows, LeavesManyRowsAndAutogradToMatmul) {
    at::manual_seed(9);
    const at::Tensor w = at::randn({64, 40}), many = at::randn({model::kFewRows + 1, 64});
    EXPECT_TRUE(at::equal(model::MatmulRows(many, w), at::matmul(many, w)));
    const at::Tensor wide = at::randn({64, 40}).to(at::kBFloat16);  // widened first
    EXPECT_TRUE(at::equal(model::MatmulRows(many, wide), at::matmul(many, wide.to(at::kFloat))));
    const at::Tensor trained = at::randn({64, 40}).requires_grad_(true), x = at::randn({1, 64});
    const at::Tensor y = model::MatmulRows(x, trained);
    ASSERT_TRUE(y.requires_grad());
    y.sum().backward();
    EXPECT_TRUE(at::allclose(trained.grad(), x.t().expand({64, 40})));
}

// Attention's products on the few-rows path: q @ k^T and weights @ v where k and v are views of
// larger buffers (the rows so far of RowBuffers' capacity), with grouped kv heads; against the
// float64 product of each query head with its group's keys or values.
TEST(GroupedMatmul, FewRowsOverBufferViewsEqualTheFloat64Product) {
    at::manual_seed(10);
    for (int64_t G : {1, 2, 6})
        for (int64_t T : {1, 7, 130})
            for (int64_t R : {1, 3, 8}) {
                const int64_t B = 2, H = 6, D = 20;
                const at::Tensor keys = at::randn({B, G, T + 9, D}).narrow(2, 0, T);  // a buffer's first T rows
                const at::Tensor q = at::randn({B, H, R, D}), weights = at::randn({B, H, R, T});
                const at::Tensor scores = model::GroupedMatmul(q, keys.transpose(-1, -2));
                const at::Tensor sums = model::GroupedMatmul(weights, keys);
                ASSERT_EQ(scores.sizes(), (std::vector<int64_t>{B, H, R, T}));
                ASSERT_EQ(sums.sizes(), (std::vector<int64_t>{B, H, R, D}));
                for (int64_t h = 0; h < H; ++h) {
                    const at::Tensor k = keys.select(1, h / (H / G));  // [B, T, D]
                    EXPECT_LE(RelativeError(scores.select(1, h), q.select(1, h), k.transpose(-1, -2)), 1e-5)
                        << "scores G " << G << " T " << T << " R " << R << " head " << h;
                    EXPECT_LE(RelativeError(sums.select(1, h), weights.select(1, h), k), 1e-5)
                        << "sums G " << G << " T " << T << " R " << R << " head " << h;
                }
            }
}

TEST(GroupedMatmul, FewRowsDoNotDependOnTheThreadCountAndManyRowsGoToMatmul) {
    at::manual_seed(11);
    const int before = at::get_num_threads();
    const at::Tensor keys = at::randn({2, 2, 300, 16}), q = at::randn({2, 4, 2, 16});
    model::SetComputeThreads(1);
    const at::Tensor one = model::GroupedMatmul(q, keys.transpose(-1, -2));
    model::SetComputeThreads(2);
    EXPECT_TRUE(at::equal(one, model::GroupedMatmul(q, keys.transpose(-1, -2))));
    model::SetComputeThreads(before);
    const at::Tensor many = at::randn({2, 4, model::kFewRows + 1, 16});
    const at::Tensor want = at::matmul(many.reshape({2, 2, 2 * (model::kFewRows + 1), 16}), keys.transpose(-1, -2)).view({2, 4, model::kFewRows + 1, 300});
    EXPECT_TRUE(at::equal(model::GroupedMatmul(many, keys.transpose(-1, -2)), want));
}

uint32_t BitsOf(float x) {
    uint32_t u;
    std::memcpy(&u, &x, sizeof u);
    return u;
}

// x rounded to TF32 in float64: to the nearest multiple of its TF32 step (2^(e - 11) for x in
// [2^(e - 1), 2^e), 2^-136 below FLT_MIN, where float32's steps are fixed), ties away from zero.
double Tf32Reference(float x) {
    int e = 0;
    std::frexp(static_cast<double>(x), &e);
    const double step = std::ldexp(1.0, std::max(e - 11, -136));
    const double r = std::copysign(std::floor(std::fabs(x) / step + 0.5) * step, x);
    return std::fabs(r) > FLT_MAX ? std::copysign(std::floor(std::fabs(x) / step) * step, x) : r;  // cut where it would overflow
}

TEST(Tf32, RoundsToNearestAndSplitsIntoTwoExactParts) {
    std::vector<float> xs = {0.0f, -0.0f, 1.0f, -1.0f, FLT_MIN, -FLT_MIN, 1e-40f, -3e-42f, FLT_MAX, -FLT_MAX, 3.0e38f, 1.0e-30f};
    for (uint32_t base : {0x3F800000u, 0xC1200000u, 0x00400000u, 0x7F7FE000u})  // ties, and one step either side of them
        for (uint32_t low : {0x0FFFu, 0x1000u, 0x1001u, 0x3000u, 0x1FFFu}) {
            const uint32_t u = base | low;
            float x;
            std::memcpy(&x, &u, sizeof x);
            xs.push_back(x);
        }
    uint64_t state = 12345;
    for (int i = 0; i < 200000; ++i) {  // bits across every finite exponent
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        const uint32_t u = static_cast<uint32_t>(state >> 32);
        float x;
        std::memcpy(&x, &u, sizeof x);
        if (std::isfinite(x)) xs.push_back(x);
    }
    int checked = 0;
    for (float x : xs) {
        const float r = model::tf32::Round(x);
        ASSERT_EQ(BitsOf(r) & 0x1FFFu, 0u) << x << " rounds to a value with bits below TF32's";
        ASSERT_EQ(static_cast<double>(r), Tf32Reference(x)) << "x = " << x << " (bits " << std::hex << BitsOf(x) << ")";
        const model::tf32::Parts p = model::tf32::Split(x);
        ASSERT_EQ(BitsOf(p.hi), BitsOf(r));
        ASSERT_EQ(BitsOf(p.lo) & 0x1FFFu, 0u) << x;
        const double left = std::fabs(static_cast<double>(x) - p.hi - p.lo);
        ASSERT_LE(left, std::ldexp(std::fabs(static_cast<double>(x)), -22) + std::ldexp(1.0, -137)) << "x = " << x;
        ++checked;
    }
    EXPECT_GT(checked, 190000);
    for (float x : {INFINITY, -INFINITY, NAN}) {
        const model::tf32::Parts p = model::tf32::Split(x);
        EXPECT_EQ(BitsOf(p.hi), BitsOf(x));
        EXPECT_EQ(p.lo, 0.0f);
    }
}

// Operands of widely varied magnitudes (each row and column its own scale over 2^+-10).
at::Tensor Varied(std::vector<int64_t> shape, uint64_t seed) {
    at::manual_seed(seed);
    const at::Tensor x = at::randn(shape);
    return x * at::exp(at::randn({shape.back()}) * 3.0) * at::exp(at::randn(shape).narrow(-1, 0, 1) * 3.0);
}

// hi @ hi alone (one TF32 product, what TF32 mode would give) to show the checks can fail.
double OnePartError(const at::Tensor& a, const at::Tensor& b) {
    auto round = [](const at::Tensor& t) {
        at::Tensor r = t.contiguous().clone();
        float* p = r.data_ptr<float>();
        for (int64_t i = 0; i < r.numel(); ++i) p[i] = model::tf32::Round(p[i]);
        return r;
    };
    return RelativeError(at::matmul(round(a), round(b)), a, b);
}

TEST(Tf32x3Matmul, EqualsTheFloat64ProductAsFloat32sDoes) {
    struct Case {
        const char* name;
        at::Tensor a, b;
    };
    const at::Tensor keys = Varied({2, 4, 200, 64}, 3);
    const Case cases[] = {
        {"rows @ a row-major weight", Varied({300, 96}, 1), Varied({96, 70}, 2)},
        {"batched rows @ a transposed weight", Varied({2, 150, 96}, 4), Varied({70, 96}, 5).t()},
        {"scores: queries @ keys of a buffer, transposed", Varied({2, 4, 130, 64}, 6), keys.narrow(2, 0, 170).transpose(-1, -2)},
        {"batched @ batched row-major", Varied({2, 4, 33, 64}, 7), Varied({2, 4, 64, 50}, 8)},
        {"columns of a wider matrix", Varied({129, 40}, 9), Varied({40, 90}, 10).narrow(1, 5, 77)},
    };
    double worst = 0, worst_float32 = 0, best_one_part = INFINITY;
    for (const Case& c : cases) {
        const at::Tensor got = model::Tf32x3Matmul(c.a, c.b);
        const at::Tensor float32 = at::matmul(c.a, c.b);
        ASSERT_EQ(got.sizes(), float32.sizes()) << c.name;
        const double error = RelativeError(got, c.a, c.b), error_float32 = RelativeError(float32, c.a, c.b);
        EXPECT_LE(error, 2e-6) << c.name << " (float32's own: " << error_float32 << ")";
        worst = std::max(worst, error);
        worst_float32 = std::max(worst_float32, error_float32);
        best_one_part = std::min(best_one_part, OnePartError(c.a, c.b));
    }
    EXPECT_GT(best_one_part, 50 * 2e-6) << "one TF32 product passes too: the bound does not tell three parts from one";
    std::printf("TF32 x3 products against float64: %.3g of |a| @ |b| (float32's own %.3g; one TF32 product's %.3g)\n", worst, worst_float32,
                best_one_part);

    at::Tensor a = Varied({140, 16}, 11), b = Varied({16, 9}, 12);
    a[3][5] = INFINITY;
    const at::Tensor got = model::Tf32x3Matmul(a, b);
    EXPECT_FALSE(at::isfinite(got[3]).any().item<bool>()) << "an infinite operand gave a finite row";
    EXPECT_TRUE(at::isfinite(got.narrow(0, 4, 100)).all().item<bool>());
    EXPECT_EQ(model::Tf32x3Matmul(at::zeros({0, 4}), at::ones({4, 3})).sizes(), (std::vector<int64_t>{0, 3}));
}

// Restores the products' setting when a test ends.
struct Tf32x3On {
    Tf32x3On() : was(model::Tf32x3Products()) { model::SetTf32x3Products(true); }
    ~Tf32x3On() { model::SetTf32x3Products(was); }
    bool was;
};

TEST(Tf32x3Matmul, TakesTheWeightsAndScoresProductsOfManyRowsWhereOn) {
    const at::Tensor x = Varied({1, model::kTf32x3Rows, 48}, 13), few = x.narrow(1, 0, model::kTf32x3Rows - 1);
    const at::Tensor w = Varied({48, 30}, 14), bias = at::randn({30});
    const at::Tensor q = Varied({1, 8, model::kTf32x3Rows, 16}, 15), k = Varied({1, 2, 150, 16}, 16), weights = at::rand({1, 8, 20, 150});
    ASSERT_FALSE(at::equal(model::Tf32x3Matmul(x, w), at::matmul(x, w))) << "the two products should differ in their rounding";
    {
        Tf32x3On on;
        EXPECT_TRUE(at::equal(model::MatmulRows(x, w), model::Tf32x3Matmul(x, w)));
        EXPECT_TRUE(at::equal(model::AffineRows(x, w, bias), model::Tf32x3Matmul(x, w) + bias));
        EXPECT_TRUE(at::equal(model::MatmulRows(x, w.t().contiguous().t()), model::Tf32x3Matmul(x, w.t().contiguous().t())));
        EXPECT_TRUE(at::equal(model::MatmulRows(few, w), at::matmul(few, w))) << "fewer rows than kTf32x3Rows stay float32";
        // Grouped query heads: each kv head's query heads are one product's rows.
        const at::Tensor scores = model::GroupedScores(q, k.transpose(-1, -2));
        const at::Tensor grouped = model::Tf32x3Matmul(q.reshape({1, 2, 4 * model::kTf32x3Rows, 16}), k.transpose(-1, -2));
        EXPECT_TRUE(at::equal(scores, grouped.view({1, 8, model::kTf32x3Rows, 150})));
        EXPECT_TRUE(at::equal(model::GroupedMatmul(weights, k), at::matmul(weights.view({1, 2, 80, 150}), k).view({1, 8, 20, 16})))
            << "attention's weights @ values stay float32";
        const at::Tensor one = Varied({1, 2, model::kTf32x3Rows, 16}, 17), three = Varied({3, 2, 40, 16}, 18);
        EXPECT_TRUE(at::equal(model::GroupedScores(one, three.transpose(-1, -2)), at::matmul(one, three.transpose(-1, -2))))
            << "operands whose leading sizes broadcast stay float32";
        const at::Tensor trained = w.clone().requires_grad_(true);
        EXPECT_TRUE(at::equal(model::MatmulRows(x, trained).detach(), at::matmul(x, w))) << "autograd's products stay float32";
    }
    EXPECT_TRUE(at::equal(model::MatmulRows(x, w), at::matmul(x, w)));
    EXPECT_TRUE(at::equal(model::GroupedScores(q, k.transpose(-1, -2)),
                          at::matmul(q.reshape({1, 2, 4 * model::kTf32x3Rows, 16}), k.transpose(-1, -2)).view({1, 8, model::kTf32x3Rows, 150})));
}

TEST(Tf32x3Matmul, ALayersPartsMadeOnceGiveEachBlocksScoresBitForBit) {
    // A layer's scaled queries (rows 300..) and keys in buffers with room beyond them, as the
    // layer pass holds them; blocks of its rows against the keys up to each block's end.
    const int64_t R = 2 * model::kTf32x3Rows + 40, T = 300 + R;
    const at::Tensor q = Varied({2, 4, R + 8, 16}, 21).narrow(2, 0, R), k = Varied({2, 4, T + 20, 16}, 22).narrow(2, 0, T);
    const at::Tensor grouped_k = Varied({2, 2, T + 20, 16}, 23).narrow(2, 0, T);
    struct Block {
        int64_t first, rows;
    };
    const Block blocks[] = {{0, model::kTf32x3Rows}, {model::kTf32x3Rows, model::kTf32x3Rows + 40}, {0, R}, {R - 30, 30}, {R - 5, 5}};
    for (bool on : {true, false}) {
        const bool was = model::Tf32x3Products();
        model::SetTf32x3Products(on);
        for (const at::Tensor& keys : {k, grouped_k}) {
            const model::ScoreOperands o = model::WithTf32Parts(q, keys);
            EXPECT_EQ(o.k_parts.defined(), on);
            EXPECT_EQ(o.q_parts.defined(), on && keys.size(1) == q.size(1)) << "a group's heads are stacked a block at a time";
            for (const Block& b : blocks) {
                const int64_t n = 300 + b.first + b.rows;  // keys up to the block's last row
                const at::Tensor got = model::GroupedScoresOf(o, b.first, b.rows, n);
                const at::Tensor want = model::GroupedScores(q.narrow(2, b.first, b.rows), keys.narrow(2, 0, n).transpose(-1, -2));
                EXPECT_TRUE(at::equal(got, want)) << "rows " << b.first << "+" << b.rows << ", " << keys.size(1) << " kv heads, TF32 " << on;
                if (on && b.rows * (q.size(1) / keys.size(1)) >= model::kTf32x3Rows && b.rows > model::kFewRows) {
                    const at::Tensor float32 = model::GroupedMatmul(q.narrow(2, b.first, b.rows), keys.narrow(2, 0, n).transpose(-1, -2));
                    EXPECT_FALSE(at::equal(got, float32)) << "the TF32 products should be taken (and round otherwise than float32's)";
                }
            }
        }
        model::SetTf32x3Products(was);
    }
}

TEST(Bf16Matrices, AnEngineHoldingThemGivesTheNumbersOfTheirFloat32Copy) {
    // Llama-shaped (grouped kv heads, SwiGLU, untied head) with widths that leave remainders.
    model::ModelConfig c;
    c.family = "llama";
    c.n_layer = 2;
    c.n_head = 4;
    c.n_query_groups = 2;
    c.n_embd = 36;
    c.intermediate_size = 50;
    c.n_positions = 128;
    c.vocab_size = 1;  // the tokenizer's
    c.positions = model::PositionKind::Rope;
    c.rope_n_elem = 8;
    c.rope_base = 100;
    c.norm = model::NormKind::RmsNorm;
    c.mlp = model::MlpKind::SwiGlu;
    c.bias = false;
    c.tied_head = false;
    c.query = {model::PositionForm::Sigmoid, model::TokenForm::Shared, model::Combine::Sum};
    c.value = {model::PositionForm::Sigmoid, model::TokenForm::None, model::Combine::Sum};
    const std::string root = SSAVIZ_TEST_OUT "/bf16-matrices-" + std::to_string(::getpid());
    fs::remove_all(root);
    const std::string bf16 = root + "/bf16", f32 = root + "/f32", tokenizer = SSAVIZ_SOURCE_DIR "/assets/tokenizers/gpt2";
    auto written = model::WriteRandomModel(c, 5, tokenizer, bf16, model::Dtype::BF16);
    ASSERT_TRUE(written.ok()) << written.error();
    // The same values in float32: the loader for training widens everything, and saves F32.
    auto widened = model::LoadSsaGptFolder(bf16, at::kCPU);
    ASSERT_TRUE(widened.ok()) << widened.error();
    EXPECT_EQ(widened->layers[0].fc_w.scalar_type(), at::kFloat);
    fs::create_directories(f32);
    const model::Status saved = model::SaveModelFolder(*widened, f32, model::Dtype::F32);
    ASSERT_TRUE(saved.ok()) << saved.error();
    for (const char* file : {"vocab.json", "merges.txt"}) fs::copy_file(fs::path(bf16) / file, fs::path(f32) / file);

    auto held = model::LoadModel(bf16, at::kCPU, {}, at::kFloat, true);
    ASSERT_TRUE(held.ok()) << held.error();
    EXPECT_EQ(held->gpt.layers[0].fc_w.scalar_type(), at::kBFloat16);
    EXPECT_EQ(held->gpt.layers[1].attn_w.scalar_type(), at::kBFloat16);
    EXPECT_EQ(held->gpt.wte.scalar_type(), at::kFloat);  // the compute dtype: embeddings and norms

    auto a = model::Engine::Open(bf16, "cpu"), b = model::Engine::Open(f32, "cpu");
    ASSERT_TRUE(a.ok() && b.ok()) << (a.ok() ? b.error() : a.error());
    const auto& notes = (*a)->Info().notes;
    EXPECT_TRUE(std::any_of(notes.begin(), notes.end(), [](const std::string& n) { return n.find("held in BF16") != std::string::npos; }));
    std::string text = "Selective attention lets each query choose how sharp its attention is.";
    model::AnalyzeOptions full;
    full.reuse = false;
    float worst = 0;
    for (const char* typed : {"", " A", "nd", " it", " reads", "."}) {  // a full analysis, then edits at the end
        text += typed;
        auto tokens = (*a)->Tokenize(text, true);
        ASSERT_TRUE(tokens.ok()) << tokens.error();
        auto got = (*a)->Analyze(*tokens);
        auto want = (*b)->Analyze(*tokens, full);
        ASSERT_TRUE(got.ok() && want.ok());
        EXPECT_GT(got->reused_rows + (typed[0] == '\0'), 0) << "typed '" << typed << "' should reuse rows";
        std::string what;
        const float differ = analysis_test::CompareAnalyses(*got, *want, &what);
        EXPECT_LE(differ, 1e-5f) << "typed '" << typed << "': " << what << " differs by " << differ;
        worst = std::max(worst, differ);
    }
    std::printf("bf16-held matrices against their float32 copy: largest difference %.3g\n", worst);
    fs::remove_all(root);
}

}  // namespace
