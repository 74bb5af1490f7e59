// Metrics of SPEC section 2 against the PyTorch reference (float64 there). The C++ metrics get
// the reference's own attention maps, so this isolates the metric code from the forward pass.
#include <gtest/gtest.h>

#include <cmath>

#include <ATen/CPUGeneratorImpl.h>

#include "model/nn/metrics.h"
#include "tests/model/reference.h"

namespace {

using model::testing::CheckClose;
using model::testing::ReferenceCase;

// float32 sums over <= 24 keys against float64.
constexpr double kTolerance = 2e-5;

class Metrics : public ::testing::TestWithParam<std::string> {};

TEST_P(Metrics, RowMetricsMatchReference) {
    ReferenceCase c(GetParam());
    ASSERT_TRUE(c.ok) << c.error;
    for (const std::string suffix : {"", "_vanilla"}) {
        model::RowMetricTensors r = model::ComputeRowMetrics(c.Ref("attention" + suffix));
        CheckClose(r.entropy, c.Ref("entropy" + suffix), kTolerance, "entropy" + suffix);
        CheckClose(r.normalized_entropy, c.Ref("normalized_entropy" + suffix), kTolerance, "normalized_entropy" + suffix);
        CheckClose(r.spikiness, c.Ref("spikiness" + suffix), kTolerance, "spikiness" + suffix, /*relative=*/true);
        CheckClose(r.max_weight, c.Ref("max_weight" + suffix), kTolerance, "max_weight" + suffix);
        CheckClose(r.top5_mass, c.Ref("top5_mass" + suffix), kTolerance, "top5_mass" + suffix);
        CheckClose(r.sink_mass, c.Ref("sink_mass" + suffix), kTolerance, "sink_mass" + suffix);
        CheckClose(r.effective_support, at::exp(c.Ref("entropy" + suffix)), kTolerance, "effective_support" + suffix, true);
    }
}

TEST_P(Metrics, DivergenceMatchesReference) {
    ReferenceCase c(GetParam());
    ASSERT_TRUE(c.ok) << c.error;
    CheckClose(model::JsDivergence(c.Ref("attention"), c.Ref("attention_vanilla")), c.Ref("js"), kTolerance, "js");
    CheckClose(model::L1Distance(c.Ref("attention"), c.Ref("attention_vanilla")), c.Ref("l1"), kTolerance, "l1");
}

TEST_P(Metrics, QkSpectrumMatchesReference) {
    ReferenceCase c(GetParam());
    ASSERT_TRUE(c.ok) << c.error;
    model::QkSpectrum s = model::ComputeQkSpectrum(c.gpt);
    CheckClose(s.opnorm, c.Ref("qk_opnorm"), 1e-5, "qk_opnorm", /*relative=*/true);
    CheckClose(s.eig_mean, c.Ref("qk_eig_mean"), 1e-5, "qk_eig_mean", true);
    CheckClose(s.eig_var, c.Ref("qk_eig_var"), 1e-5, "qk_eig_var", true);
}

// How far a fine-tune's weights moved from its base's: 0 from itself; a change of 10% of one kv
// head's value weights reads 0.1 on the query heads that share it and 0 everywhere else; a base of
// another vocabulary gives no embeddings' figure (NaN), not an error.
TEST_P(Metrics, WeightDriftIsTheRelativeChangeOfEachSlice) {
    ReferenceCase c(GetParam());
    ASSERT_TRUE(c.ok) << c.error;
    const model::ModelConfig& config = c.gpt.config;
    const int64_t H = config.n_head, G = config.KvHeads(), D = config.HeadSize();
    model::WeightDrift same = model::ComputeWeightDrift(c.gpt, c.gpt);
    for (const at::Tensor& t : {same.q, same.k, same.v, same.o, same.mlp, same.norm_attention}) EXPECT_EQ(t.abs().max().item<float>(), 0.0f);
    EXPECT_EQ(same.embeddings, 0.0);
    EXPECT_EQ(same.norm_final, 0.0);
    model::SsaGpt moved = c.gpt;
    moved.layers[0].attn_w = c.gpt.layers[0].attn_w.clone();
    at::Tensor v0 = moved.layers[0].attn_w.narrow(1, (H + G) * D, D);  // kv head 0's value weights, and its bias
    v0.add_(v0 * 0.1);
    if (c.gpt.layers[0].attn_b.defined()) {
        moved.layers[0].attn_b = c.gpt.layers[0].attn_b.clone();
        at::Tensor b0 = moved.layers[0].attn_b.narrow(0, (H + G) * D, D);
        b0.add_(b0 * 0.1);
    }
    const model::WeightDrift d = model::ComputeWeightDrift(moved, c.gpt);
    for (int64_t h = 0; h < H; ++h) EXPECT_NEAR(d.v[0][h].item<float>(), h < H / G ? 0.1f : 0.0f, 1e-6f) << h;
    for (const at::Tensor& t : {d.q, d.k, d.o, d.mlp, d.norm_attention}) EXPECT_EQ(t.abs().max().item<float>(), 0.0f);
    EXPECT_EQ(d.v.narrow(0, 1, d.v.size(0) - 1).abs().max().item<float>(), 0.0f);
    // A norm's scale x 1.5 in the last layer, before its attention: 0.5 there (its bias, where it
    // has one, unmoved: less), nothing in any head's slices; the MLP's own norm apart (NaN where
    // the attention's is shared with it).
    model::SsaGpt scaled = c.gpt;
    const size_t last = c.gpt.layers.size() - 1;
    scaled.layers[last].ln1_w = c.gpt.layers[last].ln1_w * 1.5;
    const model::WeightDrift n = model::ComputeWeightDrift(scaled, c.gpt);
    const at::Tensor& g = c.gpt.layers[last].ln1_w;
    const at::Tensor& bias = c.gpt.layers[last].ln1_b;
    const double gain = g.square().sum().item<double>(), all = gain + (bias.defined() ? bias.square().sum().item<double>() : 0.0);
    EXPECT_NEAR(n.norm_attention[last].item<float>(), 0.5 * std::sqrt(gain / all), 1e-6);
    EXPECT_EQ(n.norm_attention.narrow(0, 0, last).abs().max().item<float>(), 0.0f);
    for (const at::Tensor& t : {n.q, n.k, n.v, n.o, n.mlp}) EXPECT_EQ(t.abs().max().item<float>(), 0.0f);
    EXPECT_EQ(n.norm_final, 0.0);
    if (c.gpt.layers[last].ln2_w.defined()) {
        EXPECT_EQ(n.norm_mlp.abs().max().item<float>(), 0.0f);
    } else {
        EXPECT_TRUE(std::isnan(n.norm_mlp[last].item<float>()));
    }
    model::SsaGpt final_norm = c.gpt;
    final_norm.ln_f_w = c.gpt.ln_f_w * 0.9;
    final_norm.ln_f_b = at::Tensor();  // a bias the base has and the model not: left out
    EXPECT_NEAR(model::ComputeWeightDrift(final_norm, c.gpt).norm_final, 0.1, 1e-6);
    model::SsaGpt wider = c.gpt;
    wider.wte = at::cat({c.gpt.wte, c.gpt.wte.narrow(0, 0, 1)});
    EXPECT_TRUE(std::isnan(model::ComputeWeightDrift(wider, c.gpt).embeddings));
    // An output head of its own, moved 10%: said apart from the embeddings (NaN while tied to them).
    model::SsaGpt head = c.gpt;
    head.lm_head = c.gpt.lm_head * 1.1;
    const model::WeightDrift h = model::ComputeWeightDrift(head, c.gpt);
    EXPECT_NEAR(h.head, 0.1, 1e-6);
    EXPECT_EQ(h.embeddings, 0.0);
    if (c.gpt.lm_head.is_same(c.gpt.wte)) {
        EXPECT_TRUE(std::isnan(same.head));
    }
    // Weights rounded to the compute dtype (--dtype bf16 of float32 files) are said to be.
    EXPECT_EQ(same.rounded_to, "");
    model::SsaGpt rounded = c.gpt;
    rounded.wte = c.gpt.wte.to(at::kBFloat16);
    rounded.stored_dtype = "F32";
    EXPECT_EQ(model::ComputeWeightDrift(rounded, c.gpt).rounded_to, "BFloat16");
}

// The fused CPU pass the analysis uses, on the same reference maps.
TEST_P(Metrics, CompareMapsMatchesReference) {
    ReferenceCase c(GetParam());
    ASSERT_TRUE(c.ok) << c.error;
    model::MapComparison m = model::CompareMaps(c.Ref("attention"), c.Ref("attention_vanilla"));
    const std::pair<const model::RowMetricTensors*, std::string> sides[] = {{&m.p, ""}, {&m.q, "_vanilla"}};
    for (const auto& [r, suffix] : sides) {
        CheckClose(r->entropy, c.Ref("entropy" + suffix), kTolerance, "fused entropy" + suffix);
        CheckClose(r->normalized_entropy, c.Ref("normalized_entropy" + suffix), kTolerance, "fused normalized_entropy" + suffix);
        CheckClose(r->spikiness, c.Ref("spikiness" + suffix), kTolerance, "fused spikiness" + suffix, /*relative=*/true);
        CheckClose(r->max_weight, c.Ref("max_weight" + suffix), kTolerance, "fused max_weight" + suffix);
        CheckClose(r->top5_mass, c.Ref("top5_mass" + suffix), kTolerance, "fused top5_mass" + suffix);
        CheckClose(r->sink_mass, c.Ref("sink_mass" + suffix), kTolerance, "fused sink_mass" + suffix);
        CheckClose(r->effective_support, at::exp(c.Ref("entropy" + suffix)), kTolerance, "fused effective_support" + suffix, true);
    }
    CheckClose(m.js, c.Ref("js"), kTolerance, "fused js");
    CheckClose(m.l1, c.Ref("l1"), kTolerance, "fused l1");
}

INSTANTIATE_TEST_SUITE_P(Cases, Metrics,
                         ::testing::Values("vanilla", "q_sigmoid_shared_sum_perhead", "qv_expexp_feature_product_mixed",
                                           "bf16_storage", "linear_layout"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// Random causal maps: softmax rows of varied sharpness, including one-hot and uniform rows.
at::Tensor RandomCausalMaps(int64_t maps, int64_t T, uint64_t seed) {
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    at::Tensor scores = at::normal(0.0, 3.0, {maps, T, T}, gen);
    scores.masked_fill_(at::ones({T, T}, at::kBool).triu(1), -INFINITY);
    at::Tensor p = at::softmax(scores, -1);
    if (T > 3) {
        p[0][T - 1].zero_();
        p[0][T - 1][2] = 1.0f;                                        // one-hot
        p[0][T - 2].narrow(0, 0, T - 1).fill_(1.0f / static_cast<float>(T - 1));  // uniform
    }
    return p;
}

// The fused pass against the generic torch ops it replaces on the CPU (which CUDA still uses), run
// in float64 on the same maps: the float32 generic path's own sums are off by up to ~1.5e-6 in JS
// at T = 300, more than the fused pass (double accumulators) is.
constexpr double kFusedTolerance = 1e-6;

void CheckRowMetrics(const model::RowMetricTensors& f, const model::RowMetricTensors& g, const std::string& at_t) {
    CheckClose(f.entropy, g.entropy, kFusedTolerance, "entropy" + at_t);
    CheckClose(f.normalized_entropy, g.normalized_entropy, kFusedTolerance, "normalized_entropy" + at_t);
    CheckClose(f.spikiness, g.spikiness, kFusedTolerance, "spikiness" + at_t, /*relative=*/true);
    CheckClose(f.max_weight, g.max_weight, 0.0, "max_weight" + at_t);
    CheckClose(f.top5_mass, g.top5_mass, kFusedTolerance, "top5_mass" + at_t);
    CheckClose(f.effective_support, g.effective_support, kFusedTolerance, "effective_support" + at_t, true);
    CheckClose(f.sink_mass, g.sink_mass, 0.0, "sink_mass" + at_t);
}

TEST(CompareMaps, FusedEqualsGenericTorchOps) {
    for (int64_t T : {1, 2, 5, 300}) {
        const at::Tensor p = RandomCausalMaps(3, T, 11 + T), q = RandomCausalMaps(3, T, 97 + T);
        const model::MapComparison fused = model::CompareMaps(p, q);
        const model::MapComparison generic = model::CompareMapsGeneric(p.to(at::kDouble), q.to(at::kDouble));
        const std::string at_t = " (T = " + std::to_string(T) + ")";
        CheckRowMetrics(fused.p, generic.p, at_t);
        CheckRowMetrics(fused.q, generic.q, at_t);
        CheckClose(fused.js, generic.js, kFusedTolerance, "js" + at_t);
        CheckClose(fused.l1, generic.l1, kFusedTolerance, "l1" + at_t);
    }
}

// The three-way pass (a fine-tune, its tau = 1 side, its base) likewise, rows from a later first
// row too (an edit's); its p-q part is CompareMaps's to the bit.
TEST(CompareMaps, ThreeWayFusedEqualsGenericTorchOps) {
    for (int64_t T : {1, 2, 5, 300}) {
        const at::Tensor p = RandomCausalMaps(3, T, 11 + T), q = RandomCausalMaps(3, T, 97 + T), r = RandomCausalMaps(3, T, 5 + T);
        for (int64_t first : {int64_t{0}, T / 2}) {
            auto rows = [&](const at::Tensor& m) { return m.narrow(1, first, T - first); };
            const model::ThreeWayComparison fused = model::CompareThreeMaps(rows(p), rows(q), rows(r), first);
            const model::ThreeWayComparison generic =
                model::CompareThreeMapsGeneric(rows(p).to(at::kDouble), rows(q).to(at::kDouble), rows(r).to(at::kDouble), first);
            const std::string at_t = " (T = " + std::to_string(T) + ", from " + std::to_string(first) + ")";
            CheckRowMetrics(fused.pq.p, generic.pq.p, at_t);
            CheckRowMetrics(fused.pq.q, generic.pq.q, at_t);
            CheckRowMetrics(fused.r, generic.r, at_t);
            CheckClose(fused.pq.js, generic.pq.js, kFusedTolerance, "js" + at_t);
            CheckClose(fused.pq.l1, generic.pq.l1, kFusedTolerance, "l1" + at_t);
            CheckClose(fused.js_pr, generic.js_pr, kFusedTolerance, "js p-r" + at_t);
            CheckClose(fused.l1_pr, generic.l1_pr, kFusedTolerance, "l1 p-r" + at_t);
            CheckClose(fused.js_qr, generic.js_qr, kFusedTolerance, "js q-r" + at_t);
            CheckClose(fused.l1_qr, generic.l1_qr, kFusedTolerance, "l1 q-r" + at_t);
            const model::MapComparison two = model::CompareMaps(rows(p), rows(q), first);
            EXPECT_TRUE(at::equal(two.js, fused.pq.js) && at::equal(two.l1, fused.pq.l1) && at::equal(two.p.entropy, fused.pq.p.entropy))
                << at_t;
        }
    }
}

// Hand-checkable rows: uniform and one-hot, the two ends of every scale.
TEST(MetricsByHand, UniformAndOneHotRows) {
    const int64_t T = 4;
    at::Tensor uniform = at::tril(at::ones({T, T})) / at::arange(1, T + 1).unsqueeze(1);
    at::Tensor onehot = at::zeros({T, T});
    onehot.select(1, 0).fill_(1.0);  // every row on the first token: a sink
    model::RowMetricTensors u = model::ComputeRowMetrics(uniform), o = model::ComputeRowMetrics(onehot);
    for (int64_t i = 0; i < T; ++i) {
        EXPECT_NEAR(u.entropy[i].item<double>(), std::log(i + 1.0), 1e-6);
        EXPECT_NEAR(u.spikiness[i].item<double>(), 1.0, 1e-6);
        EXPECT_NEAR(u.effective_support[i].item<double>(), i + 1.0, 1e-5);
        EXPECT_NEAR(o.entropy[i].item<double>(), 0.0, 1e-7);
        EXPECT_NEAR(o.spikiness[i].item<double>(), 1.0 / (i + 1.0), 1e-6);
        EXPECT_NEAR(o.sink_mass[i].item<double>(), 1.0, 0);
        if (i > 0) { EXPECT_NEAR(u.normalized_entropy[i].item<double>(), 1.0, 1e-6); }
    }
    EXPECT_EQ(u.normalized_entropy[0].item<double>(), 0.0);
    EXPECT_NEAR(model::JsDivergence(uniform, uniform).abs().max().item<double>(), 0.0, 1e-7);
    // JS of disjoint rows is ln 2.
    at::Tensor last = at::zeros({1, T});
    last[0][T - 1] = 1;
    EXPECT_NEAR(model::JsDivergence(onehot.narrow(0, T - 1, 1), last)[0].item<double>(), std::log(2.0), 1e-6);
    EXPECT_NEAR(model::RowMean(o.sink_mass).item<double>(), 1.0, 1e-7);
    EXPECT_TRUE(std::isnan(model::RowMean(at::ones({1})).item<double>()));
}

}  // namespace
