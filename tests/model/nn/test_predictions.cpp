// Predictions and what-ifs (issue 17) of model::Engine against the PyTorch reference
// (tests/model/ssa_reference.py): every position's loss, rank and top-10 next tokens from
// log_softmax of the reference's logits, on every SSA form with the tau = 1 counterfactual and on
// a twin; a head ablated by an intervention against the reference's model whose parameters for
// that head give tau = 1; greedy decoding against the reference's argmax chain. Tolerance 1e-4 on
// losses and probabilities (float32 against float64 log_softmax of float32 logits).
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/nn/analysis.h"
#include "tests/model/reference.h"

namespace {

namespace fs = std::filesystem;
using model::testing::ReferenceCase;

constexpr float kTolerance = 1e-4f;

// The reference writes weights and config, not a tokenizer (its vocabularies are 50 to 100 ids):
// a copy of the case's folder with a vocabulary of that many placeholder tokens opens as a model.
std::string EngineFolder(const std::string& name, const std::string& weights = "model.safetensors") {
    const fs::path from = fs::path(SSAVIZ_TEST_OUT) / "ref" / name;
    const fs::path dir = fs::path(SSAVIZ_TEST_OUT) / "predictions" / (name + "-" + weights + "-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    fs::copy_file(from / "config.json", dir / "config.json");
    fs::copy_file(from / weights, dir / "model.safetensors");
    std::ifstream config(from / "config.json");
    const int vocab = nlohmann::json::parse(config).at("vocab_size").get<int>();
    nlohmann::json tokens = nlohmann::json::object();
    for (int i = 0; i < vocab; ++i) tokens["t" + std::to_string(i)] = i;
    std::ofstream(dir / "vocab.json") << tokens.dump();
    std::ofstream(dir / "merges.txt") << "#version: 0.2\n";
    return dir.string();
}

model::Tokenization Ids(const std::vector<int32_t>& ids) {
    model::Tokenization t;
    t.ids = ids;
    t.pieces.assign(ids.size(), "x");
    t.offsets.assign(ids.size(), {0, 0});
    return t;
}

std::vector<float> RefVector(const ReferenceCase& c, const std::string& name) {
    const at::Tensor t = c.Ref(name).to(at::kFloat).contiguous();
    return std::vector<float>(t.data_ptr<float>(), t.data_ptr<float>() + t.numel());
}

float Worst(const std::vector<float>& got, const std::vector<float>& want) {
    if (got.size() != want.size()) return INFINITY;
    float worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
    return worst;
}

std::vector<float> AsFloats(const std::vector<int32_t>& v) { return std::vector<float>(v.begin(), v.end()); }

// Loss, rank and top-10 of one side against the reference's arrays named with `suffix`.
void ExpectPredictions(const model::Analysis& a, bool compare, const ReferenceCase& c, const std::string& suffix, const std::string& what) {
    const std::vector<float>& loss = compare ? a.loss_compare : a.loss;
    EXPECT_LE(Worst(loss, RefVector(c, "loss" + suffix)), kTolerance) << what << ": loss";
    EXPECT_EQ(AsFloats(compare ? a.rank_compare : a.rank), RefVector(c, "rank" + suffix)) << what << ": rank";
    EXPECT_EQ(AsFloats(compare ? a.top_ids_compare : a.top_ids), RefVector(c, "top_ids" + suffix)) << what << ": top ids";
    EXPECT_LE(Worst(compare ? a.top_probs_compare : a.top_probs, RefVector(c, "top_probs" + suffix)), kTolerance) << what << ": top probabilities";
}

class Predictions : public ::testing::TestWithParam<std::string> {};

TEST_P(Predictions, LossRankAndTopTokensMatchTheReference) {
    ReferenceCase c(GetParam());
    ASSERT_TRUE(c.ok) << c.error;
    auto engine = model::Engine::Open(EngineFolder(GetParam()), "cpu");
    ASSERT_TRUE(engine.ok()) << engine.error();
    auto a = (*engine)->Analyze(Ids(c.ids));
    ASSERT_TRUE(a.ok()) << a.error();
    ASSERT_EQ(a->loss.size(), c.ids.size() - 1);
    ExpectPredictions(*a, false, c, "", GetParam() + " SSA");
    ExpectPredictions(*a, true, c, "_vanilla", GetParam() + " counterfactual");
}

INSTANTIATE_TEST_SUITE_P(Forms, Predictions,
                         ::testing::Values("vanilla", "q_sigmoid_shared_sum_perhead", "q_expexp_feature_sum_layer", "q_linear_none_sum",
                                           "q_none_shared_sum", "qv_sigmoid_shared_product_perhead", "qv_expexp_feature_product_mixed",
                                           "v_only_linear_feature_sum", "q_sigmoid_feature_product_gelu_exact", "qv_none_feature_product",
                                           "identity", "fp16_storage", "bf16_storage", "linear_layout"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// The comparison's predictions with a twin are the twin's own.
TEST(PredictionsTwin, TheComparisonsLossIsTheTwins) {
    ReferenceCase ssa("q_none_shared_sum"), twin("vanilla");
    ASSERT_TRUE(ssa.ok && twin.ok);
    auto engine = model::Engine::Open(EngineFolder("q_none_shared_sum"), "cpu");
    ASSERT_TRUE(engine.ok()) << engine.error();
    ASSERT_TRUE((*engine)->OpenTwin(EngineFolder("vanilla")).ok());
    // The twin's reference ran its own ids: run those.
    auto a = (*engine)->Analyze(Ids(twin.ids));
    ASSERT_TRUE(a.ok()) << a.error();
    ExpectPredictions(*a, true, twin, "", "twin");
}

// One head without SSA, by intervention, equals the model whose parameters make that head's
// temperatures exactly 1 (written and run by the reference).
class Ablation : public ::testing::TestWithParam<std::string> {};

TEST_P(Ablation, AnAblatedHeadEqualsTheModelWithTauOneThere) {
    ReferenceCase c(GetParam());
    ASSERT_TRUE(c.ok) << c.error;
    const int L = c.gpt.config.n_layer, H = c.gpt.config.n_head;
    auto engine = model::Engine::Open(EngineFolder(GetParam()), "cpu");
    ASSERT_TRUE(engine.ok()) << engine.error();
    auto edits = model::ParseInterventions(std::to_string(L - 1) + ":" + std::to_string(H - 1), L, H);
    ASSERT_TRUE(edits.ok()) << edits.error();
    ASSERT_TRUE((*engine)->SetInterventions(*edits).ok());
    ASSERT_TRUE((*engine)->SetComparison(model::Comparison::Unedited).ok());
    auto a = (*engine)->Analyze(Ids(c.ids));
    ASSERT_TRUE(a.ok()) << a.error();
    EXPECT_LE(Worst(a->loss, RefVector(c, "loss_ablated")), kTolerance) << "loss";
    EXPECT_LE(Worst(a->loss_compare, RefVector(c, "loss")), kTolerance) << "the unedited model's loss";
    const at::Tensor want = c.Ref("attention_ablated");
    for (int h = 0; h < H; ++h) {
        const model::HeadMap map = a->Map(model::MapSide::Ssa, L - 1, h);
        ASSERT_TRUE(map);
        const at::Tensor w = want[L - 1][h].contiguous();
        EXPECT_LE(Worst(*map, std::vector<float>(w.data_ptr<float>(), w.data_ptr<float>() + w.numel())), 1e-5f) << "head " << h;
    }
    // And the ablated file, opened as a model, predicts what the intervention predicts.
    auto file = model::Engine::Open(EngineFolder(GetParam(), "ablated.safetensors"), "cpu");
    ASSERT_TRUE(file.ok()) << file.error();
    auto b = (*file)->Analyze(Ids(c.ids));
    ASSERT_TRUE(b.ok()) << b.error();
    EXPECT_LE(Worst(a->loss, b->loss), 1e-5f);
}

// A head's two temperatures one at a time (=q, =v): tau_q = 1 alone is the scale x0 of tau_q - 1,
// both together are the plain ablation, and tau_v = 1 alone changes a model with value
// temperatures and nothing in one without; each spelling reads back as written.
TEST_P(Ablation, TauQAloneAndTauVAloneMakeTheAblationTogether) {
    ReferenceCase c(GetParam());
    ASSERT_TRUE(c.ok) << c.error;
    const int L = c.gpt.config.n_layer, H = c.gpt.config.n_head;
    auto engine = model::Engine::Open(EngineFolder(GetParam()), "cpu");
    ASSERT_TRUE(engine.ok()) << engine.error();
    const std::string head = std::to_string(L - 1) + ":" + std::to_string(H - 1);
    auto loss_with = [&](const std::string& spec) {  // "": none
        auto edits = spec.empty() ? model::Result<std::vector<model::Intervention>>(std::vector<model::Intervention>{})
                                  : model::ParseInterventions(spec, L, H);
        EXPECT_TRUE(edits.ok()) << edits.error();
        EXPECT_EQ(model::FormatInterventions(*edits), spec);
        EXPECT_TRUE((*engine)->SetInterventions(*edits).ok());
        auto a = (*engine)->Analyze(Ids(c.ids));
        EXPECT_TRUE(a.ok()) << a.error();
        return a->loss;
    };
    const std::vector<float> none = loss_with(""), both = loss_with(head), q = loss_with(head + "=q"), v = loss_with(head + "=v");
    EXPECT_LE(Worst(q, loss_with(head + "=x0")), 1e-6f) << "tau_q = 1 alone";
    EXPECT_LE(Worst(both, loss_with(head + "=q," + head + "=v")), 1e-6f) << "both one at a time";
    const bool value_temperatures = c.gpt.config.value.Active();
    EXPECT_EQ(Worst(v, none) > 1e-6f, value_temperatures) << "tau_v = 1 alone: " << Worst(v, none);
    EXPECT_EQ(model::Describe(model::ParseInterventions(head + "=v", L, H)->front()),
              "L" + std::to_string(L - 1) + " H" + std::to_string(H - 1) + ": tau_v = 1");
}

INSTANTIATE_TEST_SUITE_P(Forms, Ablation,
                         ::testing::Values("q_sigmoid_shared_sum_perhead", "q_linear_none_sum", "qv_sigmoid_shared_product_perhead",
                                           "qv_none_feature_product", "linear_layout"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// What-if scales multiply on a head: each within its bound, together past float range (NaN maps
// and losses before). The combined factor is bounded where the list is parsed and where the engine
// takes it; at the bound the analysis stays finite.
TEST(Interventions, StackedScalesAreBoundedTogether) {
    ReferenceCase c("q_sigmoid_shared_sum_perhead");
    ASSERT_TRUE(c.ok) << c.error;
    const int L = c.gpt.config.n_layer, H = c.gpt.config.n_head;
    auto parsed = model::ParseInterventions("0:0=x1000,0:0=x1000,0:*=x10", L, H);
    ASSERT_FALSE(parsed);
    EXPECT_NE(parsed.error().find("the what-ifs on L0 H0 scale tau_q - 1 by up to 1e+07 together"), std::string::npos) << parsed.error();
    // Factors below 1 in size do not buy room: no partial product may leave the bound either.
    EXPECT_FALSE(model::ParseInterventions("0:0=x1e6,0:0=x1e-6,0:0=x2", L, H));
    EXPECT_TRUE(model::ParseInterventions("0:0=x1e6,0:0=x-1,0:0=x0.5,1:*=x1e6", L, H));
    // Thousands of factors: the check itself does not overflow.
    std::string many;
    for (int k = 0; k < 5000; ++k) many += (k ? "," : "") + std::string("0:*=x1e6");
    EXPECT_FALSE(model::ParseInterventions(many, L, H));

    auto engine = model::Engine::Open(EngineFolder("q_sigmoid_shared_sum_perhead"), "cpu");
    ASSERT_TRUE(engine.ok()) << engine.error();
    model::Intervention x;
    x.kind = model::Intervention::Kind::Scale;
    x.scale = 1e6f;
    std::vector<model::Intervention> list(7, x);
    EXPECT_FALSE((*engine)->SetInterventions(list).ok());
    const std::vector<model::Intervention> too_many(model::kMaxInterventions + 1);  // a list from Python is bounded as --ablate is
    auto refused = (*engine)->SetInterventions(too_many);
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.error().find("65537 what-ifs; at most 65536"), std::string::npos) << refused.error();
    list.resize(1);
    ASSERT_TRUE((*engine)->SetInterventions(list).ok());
    auto a = (*engine)->Analyze(Ids(c.ids));
    ASSERT_TRUE(a.ok()) << a.error();
    for (float v : a->loss) EXPECT_TRUE(std::isfinite(v));
    for (float v : a->tau_q) EXPECT_TRUE(std::isfinite(v));
}

// A scale what-if sets tau_q = 1 + x (tau_q - 1) on its heads and leaves every other head's
// tau_q as it was, to the bit; a what-if that scales nothing (x1) changes nothing. (The engine skips
// the scale's ops in layers no what-if scales: this fails if it skips them where one does.)
TEST(Interventions, AScaleScalesTauQMinusOneOnItsHeadsOnly) {
    ReferenceCase c("q_sigmoid_shared_sum_perhead");
    ASSERT_TRUE(c.ok) << c.error;
    const int L = c.gpt.config.n_layer, H = c.gpt.config.n_head;
    ASSERT_GE(L, 2);
    ASSERT_GE(H, 2);
    auto engine = model::Engine::Open(EngineFolder("q_sigmoid_shared_sum_perhead"), "cpu");
    ASSERT_TRUE(engine.ok()) << engine.error();
    auto plain = (*engine)->Analyze(Ids(c.ids));
    ASSERT_TRUE(plain.ok()) << plain.error();
    auto scaled_list = model::ParseInterventions("1:1=x0.25", L, H);
    ASSERT_TRUE(scaled_list) << scaled_list.error();
    ASSERT_TRUE((*engine)->SetInterventions(*scaled_list).ok());
    auto scaled = (*engine)->Analyze(Ids(c.ids));
    ASSERT_TRUE(scaled.ok()) << scaled.error();
    const int64_t T = plain->tau_q.tokens();
    int moved = 0;
    for (int l = 0; l < L; ++l)
        for (int h = 0; h < H; ++h)
            for (int64_t t = 0; t < T; ++t) {
                const float was = plain->tau_q.At(l * H + h, t), now = scaled->tau_q.At(l * H + h, t);
                if (l == 1 && h == 1) {
                    EXPECT_NEAR(now, 1 + 0.25 * (was - 1), 1e-6) << "t " << t;
                    moved += std::fabs(was - 1) > 1e-3;
                } else {
                    EXPECT_EQ(now, was) << "L" << l << " H" << h << " t " << t;
                }
            }
    EXPECT_GT(moved, 0);  // the head's tau_q is not 1 already
    auto unit = model::ParseInterventions("1:1=x1", L, H);
    ASSERT_TRUE(unit) << unit.error();
    ASSERT_TRUE((*engine)->SetInterventions(*unit).ok());
    auto same = (*engine)->Analyze(Ids(c.ids));
    ASSERT_TRUE(same.ok()) << same.error();
    EXPECT_EQ(same->tau_q.Flat(), plain->tau_q.Flat());
}

// Greedy decoding, one incremental analysis a token, equals the reference's argmax chain.
TEST(Generation, GreedyDecodingEqualsTheReference) {
    ReferenceCase c("q_sigmoid_shared_sum_perhead");
    ASSERT_TRUE(c.ok) << c.error;
    auto engine = model::Engine::Open(EngineFolder("q_sigmoid_shared_sum_perhead"), "cpu");
    ASSERT_TRUE(engine.ok()) << engine.error();
    model::Tokenization tokens = Ids(c.ids);
    std::vector<float> generated;
    uint64_t rng = 1;
    for (int n = 0; n < 8; ++n) {
        auto a = (*engine)->Analyze(tokens);
        ASSERT_TRUE(a.ok()) << a.error();
        if (n > 0) {
            EXPECT_EQ(a->reused_rows, a->n_tokens - 1) << "one new row a step";
        }
        const int32_t next = model::NextToken(a->next_logits, (*engine)->tokenizer().VocabSize(), 0.0f, 0, &rng);
        generated.push_back(static_cast<float>(next));
        tokens.ids.push_back(next);
        tokens.pieces.push_back("x");
        tokens.offsets.push_back({0, 0});
    }
    EXPECT_EQ(generated, RefVector(c, "greedy_ids"));
}

// Sampling: the same seed draws the same tokens; the draw follows the top-k limit.
TEST(Generation, SamplingIsSeededAndKeepsToTheTopK) {
    std::vector<float> logits = {0.0f, 3.0f, 2.9f, -1.0f, 2.8f};
    std::vector<int32_t> first, second;
    uint64_t a = 42, b = 42;
    for (int n = 0; n < 200; ++n) {
        first.push_back(model::NextToken(logits, logits.size(), 1.0f, 2, &a));
        second.push_back(model::NextToken(logits, logits.size(), 1.0f, 2, &b));
    }
    EXPECT_EQ(first, second);
    for (int32_t id : first) EXPECT_TRUE(id == 1 || id == 2) << id;
    EXPECT_NE(std::count(first.begin(), first.end(), 1), 200) << "both of the top 2 are drawn";
    uint64_t c = 0;
    EXPECT_EQ(model::NextToken(logits, logits.size(), 0.0f, 0, &c), 1) << "greedy";
    EXPECT_EQ(model::NextToken(logits, 1, 0.0f, 0, &c), 0) << "only ids below the tokenizer's size";
}

// The "append a token" step of generate and Continue: each token's piece is the bytes it adds to
// the decoded text, and its offsets continue from the last token's.
TEST(Generation, AppendTokenContinuesPiecesAndOffsets) {
    auto tokenizer = model::LoadTokenizer(SSAVIZ_SOURCE_DIR "/assets/tokenizers/gpt2");
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.error();
    std::string text = "The cat";
    auto tokens = (*tokenizer)->Encode(text);
    ASSERT_TRUE(tokens.ok()) << tokens.error();
    auto more = (*tokenizer)->Encode(" sat on the mat");
    ASSERT_TRUE(more.ok()) << more.error();
    for (int32_t id : more->ids) {
        auto piece = model::AppendToken(**tokenizer, id, &*tokens);
        ASSERT_TRUE(piece) << piece.error();
        text += *piece;
    }
    EXPECT_EQ(text, "The cat sat on the mat");
    auto decoded = (*tokenizer)->Decode(tokens->ids);
    ASSERT_TRUE(decoded) << decoded.error();
    EXPECT_EQ(text, *decoded);
    for (size_t i = 0; i < tokens->ids.size(); ++i) {
        const auto [begin, end] = tokens->offsets[i];
        EXPECT_EQ(text.substr(begin, end - begin), tokens->pieces[i]) << "token " << i;
    }
}

}  // namespace
