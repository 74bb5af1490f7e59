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
