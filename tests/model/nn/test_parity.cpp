// The C++ forward pass against an independent PyTorch implementation of SPEC section 1
// (tests/model/ssa_reference.py, run by CTest as the fixture `reference_pytorch`): attention maps,
// tau_q, tau_v and logits for every SSA form, the tau = 1 counterfactual, and
// torch.nn.MultiheadAttention's per-head weights.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include <cstdio>

#include "model/io/safetensors.h"
#include "model/nn/analysis.h"
#include "model/nn/forward.h"
#include "model/nn/lens.h"
#include "model/nn/runtime_torch.h"
#include "tests/model/reference.h"

namespace {

using model::testing::CheckClose;
using model::testing::ReferenceCase;

// fp32 against fp32 (the reference's forward is float32 too): maps within 1e-5 absolute, and
// temperatures within 1e-5 relative to max(1, their row's largest). Logits come after every layer and the vocabulary projection, where float32 summation
// order alone moves them by ~1.2e-5 relative (measured worst case here; the reference's own
// float32 and float64 versions differ by 1.7e-5), so they get 2e-5 relative to max(1, |logit|).
constexpr double kMapTolerance = 1e-5;
constexpr double kLogitTolerance = 2e-5;

class Parity : public ::testing::TestWithParam<std::string> {};

TEST_P(Parity, SsaForwardMatchesReference) {
    ReferenceCase c(GetParam());
    ASSERT_TRUE(c.ok) << c.error;
    model::testing::ExpectForwardMatchesReference(c, kMapTolerance, kLogitTolerance);
}

TEST_P(Parity, VanillaCounterfactualMatchesReference) {
    ReferenceCase c(GetParam());
    ASSERT_TRUE(c.ok) << c.error;
    model::ForwardOptions options;
    options.vanilla = true;
    auto out = model::Forward(c.gpt, c.ids, options);
    ASSERT_TRUE(out.ok()) << out.error();
    CheckClose(out->attention, c.Ref("attention_vanilla"), kMapTolerance, "attention_vanilla");
    CheckClose(out->logits, c.Ref("logits_vanilla"), kLogitTolerance, "logits_vanilla", /*relative=*/true);
    EXPECT_TRUE(at::all(out->tau_q == 1).item<bool>());
    EXPECT_TRUE(at::all(out->tau_v == 1).item<bool>());
}

TEST_P(Parity, VanillaMapsEqualMultiheadAttentionWeights) {
    ReferenceCase c(GetParam());
    ASSERT_TRUE(c.ok) << c.error;
    model::ForwardOptions options;
    options.vanilla = true;
    auto out = model::Forward(c.gpt, c.ids, options);
    ASSERT_TRUE(out.ok()) << out.error();
    CheckClose(out->attention, c.Ref("attention_mha"), kMapTolerance, "attention vs nn.MultiheadAttention");
}

TEST_P(Parity, RowsAreCausalDistributions) {
    ReferenceCase c(GetParam());
    ASSERT_TRUE(c.ok) << c.error;
    auto out = model::Forward(c.gpt, c.ids);
    ASSERT_TRUE(out.ok()) << out.error();
    const at::Tensor& a = out->attention;  // [L, H, T, T]
    const int64_t T = a.size(-1);
    CheckClose(a.sum(-1), at::ones_like(a.sum(-1)), 1e-6, "row sums");
    at::Tensor above = a.masked_select(at::ones({T, T}, at::kBool).triu(1));
    EXPECT_EQ(at::count_nonzero(above).item<int64_t>(), 0) << "weights above the diagonal";
    EXPECT_TRUE(at::all(a >= 0).item<bool>());
}

std::vector<std::string> AllCases() {
    return {"vanilla", "q_sigmoid_shared_sum_perhead", "q_expexp_feature_sum_layer", "q_linear_none_sum",
            "q_none_shared_sum", "qv_sigmoid_shared_product_perhead", "qv_expexp_feature_product_mixed",
            "v_only_linear_feature_sum", "q_sigmoid_feature_product_gelu_exact", "qv_none_feature_product", "identity",
            "fp16_storage", "bf16_storage", "transformer_prefix", "linear_layout", "compiled_prefix", "ddp_prefix"};
}

// Issue 35: the logit lens and each part's attribution against the reference's (its float32
// forward's residuals, heads and MLPs taken through the final norm and the head in float64): the
// lens's losses within 1e-4, the parts and the logit within 1e-4 of the logits' size.
TEST_P(Parity, LensAndAttributionMatchTheReference) {
    ReferenceCase c(GetParam());
    ASSERT_TRUE(c.ok) << c.error;
    for (const auto& [run, suffix] : {std::pair<model::LensRun, std::string>{model::LensRun::Ssa, ""}, {model::LensRun::Vanilla, "_vanilla"},
                                      {model::LensRun::LayerLocal, "_local"}}) {
        model::LensOptions options;
        options.run = run;
        auto lens = model::RunLens(c.gpt, c.ids, options);
        ASSERT_TRUE(lens.ok()) << lens.error();
        const int64_t L = lens->n_layer, H = lens->n_head, n = lens->n_tokens - 1;
        auto tensor = [](const std::vector<float>& v, std::vector<int64_t> shape) {
            return at::from_blob(const_cast<float*>(v.data()), shape, at::kFloat).clone();
        };
        const double scale = std::max(1.0, c.Ref("target_logit" + suffix).abs().max().item<double>());
        CheckClose(tensor(lens->loss, {L + 1, n}), c.Ref("lens_loss" + suffix), 1e-4, "lens loss" + suffix);
        CheckClose(tensor(lens->logit, {n}), c.Ref("target_logit" + suffix), 1e-4 * scale, "target logit" + suffix);
        CheckClose(tensor(lens->dla, {L, H, n}), c.Ref("dla" + suffix), 1e-4 * scale, "head attribution" + suffix);
        CheckClose(tensor(lens->dla_mlp, {L, n}), c.Ref("dla_mlp" + suffix), 1e-4 * scale, "MLP attribution" + suffix);
        CheckClose(tensor(lens->dla_embed, {n}), c.Ref("dla_embed" + suffix), 1e-4 * scale, "embedding attribution" + suffix);
        CheckClose(tensor(lens->dla_const, {n}), c.Ref("dla_const" + suffix), 1e-4 * scale, "constant attribution" + suffix);
        // The final norm's divisor the parts were read through (layer-local: SSA's), and the constants outside it.
        CheckClose(tensor(lens->dla_divisor, {n}), c.Ref("dla_divisor" + suffix), 1e-4 * c.Ref("dla_divisor" + suffix).abs().max().item<double>(),
                   "final norm's divisor" + suffix);
        CheckClose(tensor(lens->dla_free, {n}), c.Ref("dla_const_free" + suffix), 1e-4 * scale, "constants outside the divisor" + suffix);
    }
}

INSTANTIATE_TEST_SUITE_P(Forms, Parity, ::testing::ValuesIn(AllCases()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

TEST(Identity, TemperaturesOfExactlyOneGiveTheVanillaMaps) {
    ReferenceCase c("identity");
    ASSERT_TRUE(c.ok) << c.error;
    ASSERT_TRUE(c.gpt.config.query.Active() && c.gpt.config.value.Active());
    auto ssa = model::Forward(c.gpt, c.ids);
    model::ForwardOptions options;
    options.vanilla = true;
    auto vanilla = model::Forward(c.gpt, c.ids, options);
    ASSERT_TRUE(ssa.ok() && vanilla.ok());
    EXPECT_TRUE(at::all(ssa->tau_q == 1).item<bool>());
    EXPECT_TRUE(at::all(ssa->tau_v == 1).item<bool>());
    CheckClose(ssa->attention, vanilla->attention, 0.0, "identity SSA vs vanilla");
}

TEST(Layout, LinearLayoutAndPrefixAreDetected) {
    ReferenceCase linear("linear_layout"), prefix("transformer_prefix"), plain("vanilla");
    ASSERT_TRUE(linear.ok && prefix.ok && plain.ok) << linear.error << prefix.error << plain.error;
    EXPECT_EQ(linear.gpt.layout, "linear");
    EXPECT_EQ(prefix.gpt.layout, "conv1d");
    EXPECT_EQ(plain.gpt.layout, "conv1d");
    EXPECT_TRUE(linear.gpt.unused_tensors.empty()) << linear.gpt.unused_tensors.front();
    // Wrappers' prefixes: torch.compile's "_orig_mod." before nanoGPT names, DDP's "module." before HF names.
    ReferenceCase compiled("compiled_prefix"), ddp("ddp_prefix");
    ASSERT_TRUE(compiled.ok && ddp.ok) << compiled.error << ddp.error;
    EXPECT_EQ(compiled.gpt.layout, "linear");
    EXPECT_TRUE(compiled.gpt.unused_tensors.empty()) << compiled.gpt.unused_tensors.front();
    EXPECT_TRUE(ddp.gpt.unused_tensors.empty()) << ddp.gpt.unused_tensors.front();
}

TEST(Forward, RejectsBadIds) {
    ReferenceCase c("vanilla");
    ASSERT_TRUE(c.ok) << c.error;
    auto empty = model::Forward(c.gpt, {});
    EXPECT_FALSE(empty.ok());
    auto out_of_vocab = model::Forward(c.gpt, {1, c.gpt.config.vocab_size});
    ASSERT_FALSE(out_of_vocab.ok());
    EXPECT_NE(out_of_vocab.error().find("outside the vocabulary"), std::string::npos) << out_of_vocab.error();
    std::vector<int32_t> too_long(c.gpt.config.n_positions + 1, 1);
    auto long_run = model::Forward(c.gpt, too_long);
    ASSERT_FALSE(long_run.ok());
    EXPECT_NE(long_run.error().find("context"), std::string::npos) << long_run.error();
}

TEST(Forward, CancelStopsBetweenLayers) {
    ReferenceCase c("vanilla");
    ASSERT_TRUE(c.ok) << c.error;
    std::atomic<bool> cancel{true};
    model::ForwardOptions options;
    options.cancel = &cancel;
    auto out = model::Forward(c.gpt, c.ids, options);
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.error(), "cancelled");
}

TEST(Device, CudaWithoutGpuIsAClearError) {
    auto cuda = model::ResolveDevice("cuda");
    if (cuda.ok()) GTEST_SKIP() << "this machine has a CUDA device";
    EXPECT_NE(cuda.error().find("no CUDA device"), std::string::npos) << cuda.error();
    auto unknown = model::ResolveDevice("tpu");
    ASSERT_FALSE(unknown.ok());
    EXPECT_NE(unknown.error().find("tpu"), std::string::npos);
    auto cpu = model::ResolveDevice("cpu");
    ASSERT_TRUE(cpu.ok());
    EXPECT_TRUE(cpu->is_cpu());
    auto second = model::ResolveDevice("cuda:1");
    ASSERT_FALSE(second.ok());
    EXPECT_EQ(second.error().find("--device cuda:1: no CUDA device"), 0u) << second.error();
}

TEST(Device, NamesAGpuByIndex) {
    EXPECT_FALSE(model::ParseDeviceName("auto")->cuda);
    EXPECT_FALSE(model::ParseDeviceName("cpu")->cuda);
    EXPECT_EQ(model::ParseDeviceName("cuda")->index, -1);
    EXPECT_EQ(model::ParseDeviceName("cuda:0")->index, 0);
    EXPECT_EQ(model::ParseDeviceName("cuda:7")->index, 7);
    EXPECT_EQ(model::ParseDeviceName("cuda:1023")->index, 1023);
    for (const char* bad : {"", "CUDA", "cuda:", "cuda:01", "cuda:-1", "cuda:1x", "cuda:1024", "cuda:99999999999", "cuda 0", "gpu", "cpu:0"})
        EXPECT_FALSE(model::ParseDeviceName(bad)) << bad;
    auto unknown = model::ResolveDevice(std::string("cuda:\x1b[2J", 10));
    ASSERT_FALSE(unknown.ok());
    EXPECT_EQ(unknown.error().find('\x1b'), std::string::npos) << "control characters are escaped";
    if (!model::ResolveDevice("cuda").ok()) return;
    // On a GPU machine: every index it has, and a clear error past the last.
    const auto count = model::ResolveDevice("cuda:0");
    ASSERT_TRUE(count.ok()) << count.error();
    EXPECT_EQ(count->index(), 0);
    auto past = model::ResolveDevice("cuda:1023");
    ASSERT_FALSE(past.ok());
    EXPECT_NE(past.error().find("this machine has"), std::string::npos) << past.error();
}

}  // namespace

namespace {

// The layer-local tau = 1 comparison of model::Engine (what `export --compare local` and the
// window's "tau=1 local" show) against the reference's: at each layer, softmax(q k^T / sqrt(D))
// of the SSA model's own q and k, computed row by row in PyTorch. The case has GPT-2's vocabulary
// and tokenizer files, so the engine opens its folder as a user's model.
TEST(LayerLocal, EngineMapsAndDivergenceEqualTheReference) {
    ReferenceCase c("paper_gpt2_vocab");
    ASSERT_TRUE(c.ok) << c.error;
    auto engine = model::Engine::Open(std::string(SSAVIZ_TEST_OUT) + "/ref/paper_gpt2_vocab", "cpu");
    ASSERT_TRUE(engine.ok()) << engine.error();
    ASSERT_TRUE((*engine)->SetComparison(model::Comparison::LayerLocal).ok());
    model::Tokenization tokens;
    tokens.ids = c.ids;
    tokens.pieces.assign(c.ids.size(), "x");
    tokens.offsets.assign(c.ids.size(), {0, 0});
    auto a = (*engine)->Analyze(tokens);
    ASSERT_TRUE(a.ok()) << a.error();
    EXPECT_EQ(a->comparison, model::Comparison::LayerLocal);
    const at::Tensor want = c.Ref("attention_local"), want_ssa = c.Ref("attention");
    const int T = a->n_tokens;
    float worst = 0;
    for (int l = 0; l < a->n_layer; ++l)
        for (int h = 0; h < a->n_head; ++h) {
            const model::HeadMap local = a->Map(model::MapSide::Compare, l, h), ssa = a->Map(model::MapSide::Ssa, l, h);
            ASSERT_TRUE(local && ssa);
            const at::Tensor got = at::from_blob(const_cast<float*>(local->data()), {T, T}).clone();
            CheckClose(got, want[l][h], kMapTolerance, "attention_local");
            CheckClose(at::from_blob(const_cast<float*>(ssa->data()), {T, T}).clone(), want_ssa[l][h], kMapTolerance, "attention");
            worst = std::max(worst, (got - want[l][h]).abs().max().item<float>());
        }
    // The comparison is not the counterfactual: from layer 1 on the two differ.
    EXPECT_GT((want - c.Ref("attention_vanilla")).abs().max().item<float>(), 1e-3f);
    CheckClose(at::tensor(a->js.Flat()).view({a->n_layer, a->n_head, T}), c.Ref("js_local"), 1e-5, "js_local");
    CheckClose(at::tensor(a->l1.Flat()).view({a->n_layer, a->n_head, T}), c.Ref("l1_local"), 1e-5, "l1_local");
    std::printf("layer-local maps: largest difference from the reference %.3g\n", worst);
}

}  // namespace
