// A fine-tune's three-way comparison with its base (SPEC section 9) as model::Engine keeps it:
// opening a base (and refusing one that does not fit, in one line), a base and a twin excluding
// each other, what an analysis holds with a base and without one, and Decompose as the per-head
// means of the analysis's rows. The numbers against the official code's behaviour are
// test_families.cpp's (FamiliesBase); edits with a base, test_incremental.cpp's.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/nn/analysis.h"
#include "model/nn/forward.h"
#include "model/nn/from_base_torch.h"
#include "model/nn/model_folder_torch.h"

namespace {

namespace fs = std::filesystem;
using model::Comparison;
using model::MapSide;

std::string WriteModel(const std::string& name, model::TemperatureForm query, int heads, uint64_t seed, int positions = 64,
                       model::PositionKind kind = model::PositionKind::Learned) {
    model::ModelConfig c;
    if (kind == model::PositionKind::Rope) {  // lit-gpt's form: RoPE over every head dimension, a head of its own
        c.positions = kind;
        c.rope_n_elem = 16 / heads;
        c.tied_head = false;
    }
    c.n_layer = 2;
    c.n_head = heads;
    c.n_embd = 16;
    c.n_positions = positions;
    c.vocab_size = 1;  // the tokenizer's
    c.query = query;
    const std::string dir = SSAVIZ_TEST_OUT "/base/" + name + "-" + std::to_string(::getpid());
    fs::remove_all(dir);
    const model::Status written = model::WriteRandomModel(c, seed, SSAVIZ_SOURCE_DIR "/assets/tokenizers/gpt2", dir);
    EXPECT_TRUE(written.ok()) << written.error();
    return dir;
}

const model::TemperatureForm kSsa{model::PositionForm::Sigmoid, model::TokenForm::Shared, model::Combine::Sum};

struct Models {
    std::string ssa = WriteModel("ssa", kSsa, 2, 41), base = WriteModel("vanilla", {}, 2, 42);
};
const Models& Folders() {
    static const Models models;
    return models;
}

std::unique_ptr<model::Engine> OpenSsa() {
    auto engine = model::Engine::Open(Folders().ssa, "cpu");
    EXPECT_TRUE(engine.ok()) << engine.error();
    return engine.ok() ? std::move(*engine) : nullptr;
}

model::Tokenization Tokens(const model::Engine& engine) {
    auto tokens = engine.Tokenize("The fine-tune changed its temperatures and every other weight.", false);
    EXPECT_TRUE(tokens.ok());
    return tokens.ok() ? *tokens : model::Tokenization{};
}

TEST(Base, AnAnalysisHasThreeSidesWithABaseAndTwoWithout) {
    auto engine = OpenSsa();
    ASSERT_TRUE(engine);
    const model::Tokenization tokens = Tokens(*engine);
    auto two = engine->Analyze(tokens);
    ASSERT_TRUE(two.ok()) << two.error();
    EXPECT_FALSE(two->HasBase());
    EXPECT_TRUE(two->js_total.empty() && two->js_drift.empty() && two->loss_base.empty() && two->metrics_base.rows.empty());
    EXPECT_FALSE(two->Map(MapSide::Base, 0, 0));
    EXPECT_TRUE(model::Decompose(*two).empty());
    EXPECT_EQ(engine->BaseInfo(), nullptr);

    ASSERT_TRUE(engine->OpenBase(Folders().base).ok());
    EXPECT_EQ(engine->comparison(), Comparison::Base);
    auto three = engine->Analyze(tokens);
    ASSERT_TRUE(three.ok()) << three.error();
    EXPECT_TRUE(three->HasBase());
    EXPECT_EQ(three->compare_label, "vanilla");
    EXPECT_EQ(three->base_label, engine->BaseInfo()->dir);
    EXPECT_EQ(three->base_difference, "");
    const size_t rows = static_cast<size_t>(three->n_layer) * three->n_head * three->n_tokens;
    const model::Analysis& t = *three;
    for (const model::RowArray* v : {&t.js_total, &t.l1_total, &t.js_drift, &t.l1_drift, &t.tau_q_base, &t.tau_v_base, &t.metrics_base.Get("entropy")})
        EXPECT_EQ(v->size(), rows);
    EXPECT_EQ(three->loss_base.size(), tokens.ids.size() - 1);
    EXPECT_EQ(three->top_ids_base.size(), tokens.ids.size() * model::Analysis::kTopK);
    // The SSA side and the comparison (tau = 1) are those of the counterfactual without a base.
    EXPECT_EQ(three->js, two->js);
    EXPECT_EQ(three->loss_compare, two->loss_compare);
    EXPECT_EQ(*three->Map(MapSide::Compare, 1, 1), *two->Map(MapSide::Compare, 1, 1));
    for (float tau : three->tau_q_base) ASSERT_EQ(tau, 1.0f) << "a vanilla base";
    const model::HeadMap base = three->Map(MapSide::Base, 1, 0);
    ASSERT_TRUE(base);
    EXPECT_EQ(base->size(), tokens.ids.size() * tokens.ids.size());

    // Decompose: HeadRowMean of the rows, head by head, and MeanLoss of each side.
    const model::Decomposition d = model::Decompose(*three);
    ASSERT_FALSE(d.empty());
    for (int l = 0; l < d.n_layer; ++l)
        for (int h = 0; h < d.n_head; ++h) {
            const size_t at = static_cast<size_t>(l) * d.n_head + h;
            EXPECT_EQ(d.js_total[at], model::HeadRowMean(three->js_total, *three, l, h));
            EXPECT_EQ(d.js_temperature[at], model::HeadRowMean(three->js, *three, l, h));
            EXPECT_EQ(d.js_drift[at], model::HeadRowMean(three->js_drift, *three, l, h));
            EXPECT_EQ(d.l1_drift[at], model::HeadRowMean(three->l1_drift, *three, l, h));
            EXPECT_GT(d.js_total[at], 0.0f);
            EXPECT_LE(d.js_total[at], std::log(2.0f) + 1e-6f);
        }
    EXPECT_EQ(d.loss_mean, model::MeanLoss(three->loss));
    EXPECT_EQ(d.loss_mean_tau1, model::MeanLoss(three->loss_compare));
    EXPECT_EQ(d.loss_mean_base, model::MeanLoss(three->loss_base));

    engine->CloseBase();
    EXPECT_EQ(engine->comparison(), Comparison::Counterfactual);
    auto after = engine->Analyze(tokens);
    ASSERT_TRUE(after.ok());
    EXPECT_FALSE(after->HasBase());
    EXPECT_EQ(after->js, two->js);
}

// A base that differs in what is no weight (here GELU's erf form against the tanh form; a sliding
// window, RoPE's base) is taken, and the analysis says what, the fine-tune's against the base's:
// the drift holds its effect.
TEST(Base, WhatABaseDiffersInThatIsNoWeightIsSaid) {
    auto engine = OpenSsa();
    ASSERT_TRUE(engine);
    const std::string erf = WriteModel("erf", {}, 2, 42);
    nlohmann::json config;
    std::ifstream(erf + "/config.json") >> config;
    ASSERT_EQ(config.value("activation_function", ""), "gelu_new");
    config["activation_function"] = "gelu";
    std::ofstream(erf + "/config.json") << config.dump();
    ASSERT_TRUE(engine->OpenBase(erf).ok());
    auto a = engine->Analyze(Tokens(*engine));
    ASSERT_TRUE(a.ok()) << a.error();
    EXPECT_EQ(a->base_difference, "activation gelu_new against gelu");
}

// A base whose config alone shows it cannot be set beside is refused before its weights are read
// (a wrong 7 B base took minutes and gigabytes to refuse): here the config says three layers where
// the file holds two, which reading the weights would have said first ("missing tensor").
TEST(Base, ABaseIsRefusedByItsConfigBeforeItsWeightsAreRead) {
    auto engine = OpenSsa();
    ASSERT_TRUE(engine);
    const std::string deeper = WriteModel("config-says-three-layers", {}, 2, 46);
    nlohmann::json config;
    std::ifstream(deeper + "/config.json") >> config;
    config["n_layer"] = 3;
    std::ofstream(deeper + "/config.json") << config.dump();
    const model::Status s = engine->OpenBase(deeper);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error(), "base '" + deeper + "' has 3 layers x 2 heads; the model has 2 x 2");
    EXPECT_EQ(engine->BaseInfo(), nullptr);
}

TEST(Base, ABaseAndATwinExcludeEachOther) {
    auto engine = OpenSsa();
    ASSERT_TRUE(engine);
    ASSERT_TRUE(engine->OpenBase(Folders().base).ok());
    ASSERT_TRUE(engine->OpenTwin(Folders().base).ok());
    EXPECT_EQ(engine->comparison(), Comparison::Twin);
    EXPECT_EQ(engine->BaseInfo(), nullptr);
    ASSERT_TRUE(engine->OpenBase(Folders().base).ok());
    EXPECT_EQ(engine->comparison(), Comparison::Base);
    EXPECT_EQ(engine->TwinInfo(), nullptr);
    auto a = engine->Analyze(Tokens(*engine));
    ASSERT_TRUE(a.ok());
    EXPECT_TRUE(a->HasBase());
    // The comparison is the base's while it is open; without one, Base is not a choice.
    EXPECT_TRUE(engine->SetComparison(Comparison::LayerLocal).ok());
    EXPECT_EQ(engine->comparison(), Comparison::Base);
    engine->CloseBase();
    EXPECT_EQ(engine->comparison(), Comparison::LayerLocal);
    const model::Status refused = engine->SetComparison(Comparison::Base);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error(), "open a base to compare with one");
}

// A base that cannot be compared, refused in one line naming its folder; what was open stays.
TEST(Base, ABaseOfAnotherShapeOrTokenizerIsRefusedInOneLine) {
    auto engine = OpenSsa();
    ASSERT_TRUE(engine);
    ASSERT_TRUE(engine->OpenBase(Folders().base).ok());
    const std::string wide = WriteModel("four-heads", {}, 4, 43);
    model::Status s = engine->OpenBase(wide);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error(), "base '" + wide + "' has 2 layers x 4 heads; the model has 2 x 2");
    // Its shape and tokenizer, another architecture (RoPE for learned positions; a llama of GPT-2's
    // shape was taken and its "drift" printed).
    const std::string other = WriteModel("rope", {}, 2, 44, 64, model::PositionKind::Rope);
    s = engine->OpenBase(other);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().rfind("base '" + other + "' is another architecture (", 0), 0u) << s.error();
    EXPECT_NE(s.error().find("): a base is the model the fine-tuning started from"), std::string::npos) << s.error();
    // Another architecture of another size too: the architecture said first (its sizes' message
    // read as if a resize would do).
    const std::string other_wide = WriteModel("rope-four-heads", {}, 4, 45, 64, model::PositionKind::Rope);
    s = engine->OpenBase(other_wide);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().rfind("base '" + other_wide + "' is another architecture (", 0), 0u) << s.error();

    // The same kind and size of tokenizer, two merges in the other order.
    const std::string permuted = SSAVIZ_TEST_OUT "/base/permuted-" + std::to_string(::getpid());
    fs::remove_all(permuted);
    fs::copy(Folders().base, permuted, fs::copy_options::recursive);
    std::vector<std::string> merges;
    std::ifstream in(permuted + "/merges.txt");
    for (std::string line; std::getline(in, line);) merges.push_back(line);
    in.close();
    ASSERT_GT(merges.size(), 3u);
    std::swap(merges[1], merges[2]);  // after the "#version" line
    std::ofstream out(permuted + "/merges.txt", std::ios::trunc);
    for (const std::string& line : merges) out << line << "\n";
    out.close();
    s = engine->OpenBase(permuted);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error(), "base '" + permuted +
                             "' uses a different tokenizer: the same kind (gpt2-bpe) and size (50257 tokens), but other pieces or merges");
    s = engine->OpenBase(permuted + "/nothing-here");
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().find('\n'), std::string::npos) << s.error();
    EXPECT_EQ(s.error().rfind("the base: model '" + permuted + "/nothing-here' does not exist", 0), 0u) << "names the base: " << s.error();
    EXPECT_EQ(engine->comparison(), Comparison::Base) << "the base opened before stays";
    EXPECT_TRUE(engine->Analyze(Tokens(*engine)).ok());
}

// A file holding temperature tensors its config does not read (an "ssa" block lost or mistyped)
// was analysed as vanilla, exit 0; refused, naming a tensor.
TEST(Base, TemperaturesTheConfigDoesNotReadAreRefused) {
    const std::string dir = SSAVIZ_TEST_OUT "/base/ssa-block-lost-" + std::to_string(::getpid());
    fs::remove_all(dir);
    fs::copy(Folders().ssa, dir, fs::copy_options::recursive);
    std::ifstream in(dir + "/config.json");
    nlohmann::json config = nlohmann::json::parse(in);
    in.close();
    ASSERT_TRUE(config.contains("ssa"));
    config.erase("ssa");
    std::ofstream(dir + "/config.json", std::ios::trunc) << config.dump();
    auto loaded = model::LoadModel(dir, at::kCPU);
    ASSERT_FALSE(loaded.ok()) << "analysed as " << model::DescribeArchitecture(loaded->info.config);
    EXPECT_NE(loaded.error().find("holds temperature tensors its config does not read ('"), std::string::npos) << loaded.error();
    EXPECT_NE(loaded.error().find(".ssa_"), std::string::npos) << loaded.error();
}

// With a base the thumbnails hold the base's map and SSA - base too, pooled as the others: block
// maxima of pool x pool tokens (the difference: the value of largest magnitude), checked by plain
// loops over the maps the analysis rebuilds. Past 256 tokens (pool 2), after an edit at the end and
// one in the middle that keep rows, they equal a fresh analysis's.
TEST(Base, TheThumbnailsHoldTheBaseAndSsaMinusBase) {
    const std::string ssa = WriteModel("ssa-long", kSsa, 2, 43, 320), vanilla = WriteModel("vanilla-long", {}, 2, 44, 320);
    auto reusing = model::Engine::Open(ssa, "cpu");
    auto fresh = model::Engine::Open(ssa, "cpu");
    ASSERT_TRUE(reusing.ok() && fresh.ok());
    std::string text;
    for (int i = 0; text.size() < 1400; ++i) text += "Fine-tuning moved head " + std::to_string(i % 7) + " towards the first token. ";
    auto tokens = (*reusing)->Tokenize(text, true);
    ASSERT_TRUE(tokens.ok());
    ASSERT_GT(tokens->ids.size(), 300u);
    tokens->ids.resize(302);  // 151 blocks of 2 x 2 tokens

    auto two = (*fresh)->Analyze(*tokens);
    ASSERT_TRUE(two.ok());
    EXPECT_EQ(two->thumbnails.kinds, 3);
    EXPECT_TRUE(two->thumbnails.All(model::ThumbnailKind::Base).empty());
    EXPECT_EQ(two->thumbnails.MaxAbs(model::ThumbnailKind::BaseDifference), 0.0f);
    for (auto* e : {reusing->get(), fresh->get()}) ASSERT_TRUE(e->OpenBase(vanilla).ok());
    auto three = (*reusing)->Analyze(*tokens);
    ASSERT_TRUE(three.ok());
    const model::Thumbnails& t = three->thumbnails;
    ASSERT_EQ(t.kinds, model::kThumbnailKinds);
    ASSERT_EQ(t.pool, 2);
    const int T = three->n_tokens, side = t.side;
    ASSERT_EQ(side, 151);
    for (model::ThumbnailKind kind : {model::ThumbnailKind::Ssa, model::ThumbnailKind::Compare, model::ThumbnailKind::Difference})
        EXPECT_EQ(t.All(kind), two->thumbnails.All(kind)) << "the two sides' thumbnails are those without a base";
    float largest = 0.0f;
    for (int l = 0; l < three->n_layer; ++l)
        for (int h = 0; h < three->n_head; ++h) {
            const model::HeadMap p = three->Map(MapSide::Ssa, l, h), r = three->Map(MapSide::Base, l, h);
            ASSERT_TRUE(p && r);
            const std::vector<float> base = t.Head(model::ThumbnailKind::Base, l, h), diff = t.Head(model::ThumbnailKind::BaseDifference, l, h);
            for (int bi = 0; bi < side; ++bi)
                for (int bj = 0; bj < side; ++bj) {
                    float max_r = -1, up = -2, down = -2;
                    for (int i = 2 * bi; i < std::min(T, 2 * bi + 2); ++i)
                        for (int j = 2 * bj; j < std::min(T, 2 * bj + 2); ++j) {
                            const size_t k = static_cast<size_t>(i) * T + j;
                            max_r = std::max(max_r, (*r)[k]);
                            up = std::max(up, (*p)[k] - (*r)[k]);
                            down = std::max(down, (*r)[k] - (*p)[k]);
                        }
                    const size_t at = static_cast<size_t>(bi) * side + bj;
                    ASSERT_NEAR(base[at], max_r, 1e-6f) << l << "," << h << " block " << bi << "," << bj;
                    const float magnitude = std::max(up, down);
                    ASSERT_NEAR(std::abs(diff[at]), magnitude, 2e-6f) << l << "," << h << " block " << bi << "," << bj;
                    if (std::abs(diff[at]) > 2e-6f) {
                        ASSERT_GE(diff[at] > 0 ? up : down, magnitude - 2e-6f);
                    }
                    largest = std::max(largest, std::abs(diff[at]));
                }
        }
    EXPECT_GT(largest, 0.01f) << "a base with other weights changes the maps";
    EXPECT_EQ(t.MaxAbs(model::ThumbnailKind::BaseDifference), largest);

    // Edits in the second row of a block, which keep its first: at the end (the block pooled again
    // from the last analysis's tail), then in the middle (its kept row rebuilt from q and k).
    for (int at : {301, 151}) {
        tokens->ids[at] = (tokens->ids[at] + 1) % 50000;
        auto kept = (*reusing)->Analyze(*tokens);
        model::AnalyzeOptions full;
        full.reuse = false;
        auto whole = (*fresh)->Analyze(*tokens, full);
        ASSERT_TRUE(kept.ok() && whole.ok());
        EXPECT_GT(kept->reused_rows, 0);
        for (model::ThumbnailKind kind : {model::ThumbnailKind::Base, model::ThumbnailKind::BaseDifference}) {
            const std::vector<float> got = kept->thumbnails.All(kind), want = whole->thumbnails.All(kind);
            ASSERT_EQ(got.size(), want.size());
            for (size_t k = 0; k < got.size(); ++k) ASSERT_NEAR(got[k], want[k], 1e-6f) << "edit at " << at << ", cell " << k;
        }
    }
}

}  // namespace

// The test's own mixing of a fine-tune and its base, for the reference below: head h's query
// columns, its kv head's key and value columns (kv head h G / H) and its rows of the output
// projection from the base, picked by index.
model::SsaGpt MixedHead(const model::SsaGpt& ssa, const model::SsaGpt& base, int l, int h) {
    model::SsaGpt m = ssa;
    model::LayerWeights& w = m.layers[l];
    const model::LayerWeights& b = base.layers[l];
    const int64_t H = ssa.config.n_head, G = ssa.config.KvHeads(), D = ssa.config.HeadSize(), kv = h * G / H;
    std::vector<int64_t> columns, rows;
    for (int64_t d = 0; d < D; ++d) {
        columns.push_back(h * D + d);
        columns.push_back(H * D + kv * D + d);
        columns.push_back(H * D + G * D + kv * D + d);
        rows.push_back(h * D + d);
    }
    const at::Tensor c = at::tensor(columns, at::kLong), r = at::tensor(rows, at::kLong);
    w.attn_w = w.attn_w.clone().index_copy_(1, c, b.attn_w.index_select(1, c));
    if (w.attn_b.defined()) w.attn_b = w.attn_b.clone().index_copy_(0, c, b.attn_b.index_select(0, c));
    w.proj_w = w.proj_w.clone().index_copy_(0, r, b.proj_w.index_select(0, r));
    return m;
}

// The mean loss of tokens 1.. by the plain forward pass (model::Forward), summed in double.
// Token t's loss at entry t - 1 (as Analysis::loss), in float64 from the plain forward pass's logits.
std::vector<double> ReferenceLosses(const model::SsaGpt& m, const std::vector<int32_t>& ids) {
    auto out = model::Forward(m, ids);
    EXPECT_TRUE(out.ok()) << out.error();
    if (!out.ok()) return {};
    const at::Tensor logp = at::log_softmax(out->logits.to(at::kDouble), -1);
    std::vector<double> losses;
    for (size_t t = 0; t + 1 < ids.size(); ++t) losses.push_back(-logp[static_cast<int64_t>(t)][ids[t + 1]].item<double>());
    return losses;
}

double ReferenceLoss(const model::SsaGpt& m, const std::vector<int32_t>& ids) {
    const std::vector<double> losses = ReferenceLosses(m, ids);
    double sum = 0;
    for (double loss : losses) sum += loss;
    return losses.empty() ? NAN : sum / static_cast<double>(losses.size());
}

// The loss with some weights taken back from the base (from_base.h), against the plain forward
// pass of a model the test mixes itself: with no part it is the analysis's loss (what-ifs on);
// each head's (q, k, v and o), each MLP and the embeddings moves it as the mixed model's does;
// and every weight from a vanilla base with every head at tau = 1 is the base's own loss.
// Tolerance 2e-5 nats: float32 forward passes of other shapes against each other.
TEST(Base, TheLossWithWeightsFromTheBaseIsThatOfTheMixedModel) {
    auto engine = OpenSsa();
    ASSERT_TRUE(engine);
    const model::Tokenization tokens = Tokens(*engine);
    auto refused = engine->MeanLossFromBase(tokens.ids, {{model::BasePart::Kind::Mlp, 0}});
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.error(), "no base model is open");
    ASSERT_TRUE(engine->OpenBase(Folders().base).ok());
    auto ssa = model::LoadModel(Folders().ssa, at::kCPU), base = model::LoadModel(Folders().base, at::kCPU);
    ASSERT_TRUE(ssa.ok() && base.ok());
    const model::SsaGpt &s = ssa->gpt, &b = base->gpt;

    auto analysed = engine->Analyze(tokens);
    ASSERT_TRUE(analysed.ok());
    auto none = engine->MeanLossFromBase(tokens.ids, {});
    ASSERT_TRUE(none.ok()) << none.error();
    EXPECT_NEAR(*none, model::MeanLoss(analysed->loss), 2e-5);
    EXPECT_NEAR(*none, ReferenceLoss(s, tokens.ids), 2e-5);
    auto by_token = engine->LossFromBase(tokens.ids, {});  // token by token, as the analysis's loss
    ASSERT_TRUE(by_token.ok());
    ASSERT_EQ(by_token->size(), analysed->loss.size());
    for (size_t t = 0; t < by_token->size(); ++t) EXPECT_NEAR((*by_token)[t], analysed->loss[t], 2e-5) << "token " << t + 1;
    using Kind = model::BasePart::Kind;
    std::vector<double> heads;
    for (int l = 0; l < 2; ++l)
        for (int h = 0; h < 2; ++h) {
            auto loss = engine->MeanLossFromBase(tokens.ids, {{Kind::Head, l, h}});
            ASSERT_TRUE(loss.ok()) << loss.error();
            const double expected = ReferenceLoss(MixedHead(s, b, l, h), tokens.ids);
            EXPECT_NEAR(*loss, expected, 2e-5) << "L" << l << " H" << h;
            EXPECT_GT(std::abs(*loss - *none), 1e-4) << "L" << l << " H" << h << " moved the loss";
            heads.push_back(expected);
        }
    EXPECT_NE(heads[0], heads[1]) << "each head its own columns";
    model::SsaGpt mlp = s;
    mlp.layers[1].ln2_w = b.layers[1].ln2_w, mlp.layers[1].ln2_b = b.layers[1].ln2_b, mlp.layers[1].fc_w = b.layers[1].fc_w;
    mlp.layers[1].fc_b = b.layers[1].fc_b, mlp.layers[1].mlp_proj_w = b.layers[1].mlp_proj_w, mlp.layers[1].mlp_proj_b = b.layers[1].mlp_proj_b;
    auto mlp_loss = engine->MeanLossFromBase(tokens.ids, {{Kind::Mlp, 1}});
    ASSERT_TRUE(mlp_loss.ok());
    EXPECT_NEAR(*mlp_loss, ReferenceLoss(mlp, tokens.ids), 2e-5);
    model::SsaGpt attention = s;
    model::LayerWeights& aw = attention.layers[0];
    const model::LayerWeights& ab = b.layers[0];
    aw.ln1_w = ab.ln1_w, aw.ln1_b = ab.ln1_b, aw.attn_w = ab.attn_w, aw.attn_b = ab.attn_b, aw.proj_w = ab.proj_w, aw.proj_b = ab.proj_b;
    auto attention_loss = engine->MeanLossFromBase(tokens.ids, {{Kind::Attention, 0}});
    ASSERT_TRUE(attention_loss.ok());
    EXPECT_NEAR(*attention_loss, ReferenceLoss(attention, tokens.ids), 2e-5);
    // Heads beside a layer's whole attention, in any order.
    auto after = engine->MeanLossFromBase(tokens.ids, {{Kind::Attention, 0}, {Kind::Head, 0, 1}, {Kind::Head, 1, 0}});
    ASSERT_TRUE(after.ok());
    EXPECT_NEAR(*after, ReferenceLoss(MixedHead(attention, b, 1, 0), tokens.ids), 2e-5);
    model::SsaGpt embeddings = s;
    embeddings.wte = b.wte, embeddings.wpe = b.wpe, embeddings.ln_f_w = b.ln_f_w, embeddings.ln_f_b = b.ln_f_b, embeddings.lm_head = b.lm_head;
    auto embeddings_loss = engine->MeanLossFromBase(tokens.ids, {{Kind::Embeddings}});
    ASSERT_TRUE(embeddings_loss.ok());
    EXPECT_NEAR(*embeddings_loss, ReferenceLoss(embeddings, tokens.ids), 2e-5);

    // Every weight from the vanilla base, every head at tau = 1: the base's own loss.
    ASSERT_TRUE(engine->SetInterventions(*model::ParseInterventions("0:*,1:*", 2, 2)).ok());
    auto what_ifs = engine->Analyze(tokens);
    ASSERT_TRUE(what_ifs.ok());
    auto none_on_what_ifs = engine->MeanLossFromBase(tokens.ids, {});
    ASSERT_TRUE(none_on_what_ifs.ok());
    EXPECT_NEAR(*none_on_what_ifs, model::MeanLoss(what_ifs->loss), 2e-5) << "the what-ifs apply";
    EXPECT_GT(std::abs(*none_on_what_ifs - *none), 1e-4);
    auto all = engine->MeanLossFromBase(tokens.ids, {{Kind::All}});
    ASSERT_TRUE(all.ok());
    EXPECT_NEAR(*all, model::MeanLoss(what_ifs->loss_base), 2e-5);
}

// A part the fine-tune left as it was (a base holding the same weights) is said to be unchanged, and
// its pass not run; one it changed is run.
TEST(Base, APartTheFineTuneLeftAsItWasIsNotRunAgain) {
    auto engine = OpenSsa();
    ASSERT_TRUE(engine);
    const std::string same = SSAVIZ_TEST_OUT "/base/same-" + std::to_string(::getpid());
    fs::remove_all(same);
    fs::copy(Folders().ssa, same, fs::copy_options::recursive);
    ASSERT_TRUE(engine->OpenBase(same).ok());
    const model::Tokenization tokens = Tokens(*engine);
    using Kind = model::BasePart::Kind;
    for (model::BasePart part : {model::BasePart{Kind::Head, 1, 1}, {Kind::Attention, 0}, {Kind::Mlp, 1}, {Kind::Embeddings}, {Kind::All}}) {
        bool unchanged = false;
        auto loss = engine->MeanLossFromBase(tokens.ids, {part}, nullptr, &unchanged);
        ASSERT_TRUE(loss.ok()) << loss.error();
        EXPECT_TRUE(unchanged) << model::Describe(part);
    }
    ASSERT_TRUE(engine->OpenBase(Folders().base).ok());
    bool unchanged = true;
    auto loss = engine->MeanLossFromBase(tokens.ids, {{Kind::Head, 1, 1}}, nullptr, &unchanged);
    ASSERT_TRUE(loss.ok());
    EXPECT_FALSE(unchanged);
    EXPECT_TRUE(std::isfinite(*loss));
}

// A base of a shorter context (a fine-tune may lengthen it): the embeddings' part takes the base's
// learned positions where it has them, the model's past them (it gave NaN).
TEST(Base, TheEmbeddingsOfABaseOfAnotherContextTakeThePositionsItHas) {
    auto engine = OpenSsa();
    ASSERT_TRUE(engine);
    const std::string shorter = WriteModel("vanilla-short", {}, 2, 45, 32);
    ASSERT_TRUE(engine->OpenBase(shorter).ok());
    auto ssa = model::LoadModel(Folders().ssa, at::kCPU), base = model::LoadModel(shorter, at::kCPU);
    ASSERT_TRUE(ssa.ok() && base.ok());
    model::SsaGpt mixed = ssa->gpt;
    const model::SsaGpt& b = base->gpt;
    mixed.wte = b.wte, mixed.ln_f_w = b.ln_f_w, mixed.ln_f_b = b.ln_f_b, mixed.lm_head = b.lm_head;
    mixed.wpe = at::cat({b.wpe, ssa->gpt.wpe.narrow(0, 32, 32)});
    const model::Tokenization tokens = Tokens(*engine);
    ASSERT_LE(tokens.ids.size(), 32u);
    auto loss = engine->MeanLossFromBase(tokens.ids, {{model::BasePart::Kind::Embeddings}});
    ASSERT_TRUE(loss.ok()) << loss.error();
    EXPECT_NEAR(*loss, ReferenceLoss(mixed, tokens.ids), 2e-5);
    auto all = engine->MeanLossFromBase(tokens.ids, {{model::BasePart::Kind::All}});
    EXPECT_TRUE(all.ok() && std::isfinite(*all)) << (all.ok() ? "" : all.error());
}

// Grouped queries (a Llama of 4 heads, 2 kv heads): head h takes its kv head's keys and values,
// which its group shares; a head's query alone is its own.
TEST(Base, AHeadFromTheBaseTakesItsKvHeadWithGroupedQueries) {
    auto config = model::ParseConfig(R"({"model_type": "llama", "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "intermediate_size": 48, "vocab_size": 300, "max_position_embeddings": 64})", "llama.json");
    ASSERT_TRUE(config.ok()) << config.error();
    config->query = kSsa;
    const model::SsaGpt ssa = model::RandomSsaGpt(*config, 7), base = model::RandomSsaGpt(*config, 8);
    std::vector<int32_t> ids(40);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 37 + 11) % 300);
    using Kind = model::BasePart::Kind;
    for (int h : {0, 1, 3}) {
        auto mixed = model::WithBaseWeights(ssa, base, {{Kind::Head, 1, h}});
        ASSERT_TRUE(mixed.ok()) << mixed.error();
        auto loss = model::LossOfIds(*mixed, ids, {});  // token by token
        ASSERT_TRUE(loss.ok()) << loss.error();
        const std::vector<double> expected = ReferenceLosses(MixedHead(ssa, base, 1, h), ids);
        ASSERT_EQ(loss->size(), expected.size());
        for (size_t t = 0; t < expected.size(); ++t) EXPECT_NEAR((*loss)[t], expected[t], 2e-5) << "H" << h << " token " << t + 1;
    }
    EXPECT_TRUE(at::equal(ssa.layers[1].attn_w, model::RandomSsaGpt(*config, 7).layers[1].attn_w)) << "the model's own weights untouched";
    auto outside = model::WithBaseWeights(ssa, base, {{Kind::Head, 1, 4}});
    ASSERT_FALSE(outside.ok());
    EXPECT_EQ(outside.error(), "L1 H4 is not a head of the model");
    // A base whose embedding rows differ (a vocabulary padded otherwise, as lit-gpt pads it): its
    // embeddings cannot be taken, named with both shapes (the ranking's not_measured), its heads can.
    model::ModelConfig padded = *config;
    padded.vocab_size = 320;
    const model::SsaGpt other_rows = model::RandomSsaGpt(padded, 8);
    auto embeddings = model::WithBaseWeights(ssa, other_rows, {{Kind::Embeddings}});
    ASSERT_FALSE(embeddings.ok());
    EXPECT_NE(embeddings.error().find("embeddings from the base: "), std::string::npos) << embeddings.error();
    EXPECT_NE(embeddings.error().find("in the model and [320,"), std::string::npos) << embeddings.error();
    EXPECT_TRUE(model::WithBaseWeights(ssa, other_rows, {{Kind::Head, 0, 1}}).ok());
}
