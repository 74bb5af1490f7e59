// Every family the official SSA code fine-tunes (SPEC section 7), opened from lit-gpt checkpoints
// by model::Engine and checked against the independent PyTorch reference
// (tests/model/family_reference.py): attention maps, tau_q and tau_v, per-token loss, top-10 next
// tokens and the last logits, for SSA, the tau = 1 counterfactual, the layer-local comparison, an
// ablated head and a twin (the base model the fine-tuning started from). Tolerance 1e-4 (float32
// against float64). Top-10 ids may swap where the reference's neighbouring log-probabilities are
// closer than that.
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/io/safetensors.h"
#include "model/nn/analysis.h"

namespace {

constexpr float kTolerance = 1e-4f;

struct FamilyCase {
    std::string dir;
    nlohmann::json meta;  // case.json
    model::SafetensorsFile reference;
    std::vector<int32_t> ids;
    bool ok = false;
    std::string error;

    explicit FamilyCase(const std::string& name) : dir(std::string(SSAVIZ_TEST_OUT) + "/families/" + name) {
        std::ifstream in(dir + "/case.json");
        meta = nlohmann::json::parse(in, nullptr, false);
        if (meta.is_discarded()) { error = dir + "/case.json: not JSON"; return; }
        ids = meta.at("ids").get<std::vector<int32_t>>();
        auto ref = model::SafetensorsFile::Open(dir + "/reference.safetensors");
        if (!ref) { error = ref.error(); return; }
        reference = std::move(*ref);
        ok = true;
    }

    std::vector<float> Ref(const std::string& name) const {
        const model::TensorInfo* info = reference.header.Find(name);
        EXPECT_NE(info, nullptr) << "reference has no tensor " << name;
        if (!info) return {};
        const float* data = reinterpret_cast<const float*>(reference.Data(*info));
        return std::vector<float>(data, data + (info->end - info->begin) / sizeof(float));
    }
    bool Has(const std::string& name) const { return reference.header.Find(name) != nullptr; }

    model::ConfigHints Hints() const {
        model::ConfigHints hints;
        if (meta.value("query_form", "") == "linear") hints.query = model::TemperatureForm{model::PositionForm::Linear};
        return hints;
    }
    std::string Weights() const { return meta.contains("weights") && meta["weights"].is_string() ? dir + "/" + meta["weights"].get<std::string>() : dir; }
};

model::Tokenization Ids(const std::vector<int32_t>& ids) {
    model::Tokenization t;
    t.ids = ids;
    t.pieces.assign(ids.size(), "x");
    t.offsets.assign(ids.size(), {0, 0});
    return t;
}

// The largest |got - want|, and where; infinity when the sizes differ or a value is not finite.
struct Worst {
    float value = 0;
    size_t at = 0;
};
Worst Compare(const float* got, const float* want, size_t n) {
    Worst w;
    for (size_t i = 0; i < n; ++i) {
        const float d = std::isfinite(got[i]) ? std::abs(got[i] - want[i]) : INFINITY;
        if (!(d <= w.value)) w = {d, i};
    }
    return w;
}
void ExpectClose(const std::vector<float>& got, const std::vector<float>& want, float tolerance, const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what << ": sizes differ";
    const Worst w = Compare(got.data(), want.data(), got.size());
    EXPECT_LE(w.value, tolerance) << what << ": max difference " << w.value << " at element " << w.at;
}

// Every head's map on one side against a reference [L, H, T, T].
void ExpectMaps(const model::Analysis& a, model::MapSide side, const std::vector<float>& want, const std::string& what) {
    const size_t T = static_cast<size_t>(a.n_tokens);
    ASSERT_EQ(want.size(), static_cast<size_t>(a.n_layer) * a.n_head * T * T) << what;
    Worst worst;
    int worst_l = 0, worst_h = 0;
    for (int l = 0; l < a.n_layer; ++l)
        for (int h = 0; h < a.n_head; ++h) {
            const model::HeadMap map = a.Map(side, l, h);
            ASSERT_TRUE(map) << what << " L" << l << " H" << h;
            const Worst w = Compare(map->data(), want.data() + (static_cast<size_t>(l) * a.n_head + h) * T * T, T * T);
            if (!(w.value <= worst.value)) { worst = w; worst_l = l; worst_h = h; }
        }
    EXPECT_LE(worst.value, kTolerance) << what << ": max difference " << worst.value << " at L" << worst_l << " H" << worst_h
                                       << " row " << worst.at / T << " key " << worst.at % T;
}

// Top-10 ids equal, but for swaps of neighbours the reference puts within the tolerance.
void ExpectTopIds(const std::vector<int32_t>& got, const std::vector<float>& want, const std::vector<float>& gap, const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    int differ = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        if (static_cast<float>(got[i]) == want[i]) continue;
        const bool near_tie = gap[i] < kTolerance || (i % 10 > 0 && gap[i - 1] < kTolerance);
        EXPECT_TRUE(near_tie) << what << ": position " << i / 10 << " rank " << i % 10 << " id " << got[i] << " against " << want[i];
        ++differ;
    }
    EXPECT_LE(differ, static_cast<int>(got.size() / 20)) << what << ": too many near-tie swaps";
}

void ExpectPredictions(const model::Analysis& a, bool compare, const FamilyCase& c, const std::string& suffix, const std::string& what) {
    ExpectClose(compare ? a.loss_compare : a.loss, c.Ref("loss" + suffix), kTolerance, what + " loss");
    if (!c.Has("top_ids" + suffix)) return;
    ExpectTopIds(compare ? a.top_ids_compare : a.top_ids, c.Ref("top_ids" + suffix), c.Ref("top_gap" + suffix), what + " top ids");
    ExpectClose(compare ? a.top_probs_compare : a.top_probs, c.Ref("top_probs" + suffix), kTolerance, what + " top probabilities");
}

std::unique_ptr<model::Engine> Open(const FamilyCase& c) {
    auto engine = model::Engine::Open(c.Weights(), "cpu", c.Hints());
    EXPECT_TRUE(engine.ok()) << c.dir << ": " << (engine.ok() ? "" : engine.error());
    return engine.ok() ? std::move(*engine) : nullptr;
}

class Families : public ::testing::TestWithParam<std::string> {};

TEST_P(Families, SsaAndTheCounterfactualMatchTheReference) {
    FamilyCase c(GetParam());
    ASSERT_TRUE(c.ok) << c.error;
    auto engine = Open(c);
    ASSERT_TRUE(engine);
    auto a = engine->Analyze(Ids(c.ids));
    ASSERT_TRUE(a.ok()) << a.error();
    ExpectMaps(*a, model::MapSide::Ssa, c.Ref("attention"), "SSA maps");
    ExpectClose(a->tau_q, c.Ref("tau_q"), kTolerance, "tau_q");
    ExpectClose(a->tau_v, c.Ref("tau_v"), kTolerance, "tau_v");
    ExpectPredictions(*a, false, c, "", "SSA");
    ExpectMaps(*a, model::MapSide::Compare, c.Ref("attention_vanilla"), "counterfactual maps");
    ExpectPredictions(*a, true, c, "_vanilla", "counterfactual");
    // The last position's logits, over the padded vocabulary, relative to their size.
    const std::vector<float> want = c.Ref("last_logits");
    ASSERT_EQ(a->next_logits.size(), want.size());
    float scale = 1;
    for (float v : want) scale = std::max(scale, std::abs(v));
    ExpectClose(a->next_logits, want, kTolerance * scale, "last logits");
}

TEST_P(Families, LayerLocalComparisonMatchesTheReference) {
    FamilyCase c(GetParam());
    ASSERT_TRUE(c.ok) << c.error;
    auto engine = Open(c);
    ASSERT_TRUE(engine);
    ASSERT_TRUE(engine->SetComparison(model::Comparison::LayerLocal).ok());
    auto a = engine->Analyze(Ids(c.ids));
    ASSERT_TRUE(a.ok()) << a.error();
    ExpectMaps(*a, model::MapSide::Compare, c.Ref("attention_local"), "layer-local maps");
}

TEST_P(Families, AnAblatedHeadMatchesTheReference) {
    FamilyCase c(GetParam());
    ASSERT_TRUE(c.ok) << c.error;
    auto engine = Open(c);
    ASSERT_TRUE(engine);
    const model::ModelConfig& config = engine->Info().config;
    auto edits = model::ParseInterventions(c.meta.at("ablate").get<std::string>(), config.n_layer, config.n_head);
    ASSERT_TRUE(edits.ok()) << edits.error();
    ASSERT_TRUE(engine->SetInterventions(*edits).ok());
    ASSERT_TRUE(engine->SetComparison(model::Comparison::Unedited).ok());
    auto a = engine->Analyze(Ids(c.ids));
    ASSERT_TRUE(a.ok()) << a.error();
    ExpectMaps(*a, model::MapSide::Ssa, c.Ref("attention_ablated"), "ablated maps");
    ExpectClose(a->loss, c.Ref("loss_ablated"), kTolerance, "ablated loss");
    ExpectClose(a->loss_compare, c.Ref("loss"), kTolerance, "the unedited model's loss");
}

INSTANTIATE_TEST_SUITE_P(Lit, Families, ::testing::Values("pythia", "llama", "mistral", "llama3", "mqa"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// The official fine-tuning starts from the base model's lit_model.pth: that base, as a twin.
TEST(FamiliesTwin, FineTunedSsaAgainstItsBase) {
    FamilyCase c("pythia");
    ASSERT_TRUE(c.ok) << c.error;
    ASSERT_TRUE(c.meta.at("twin").is_string());
    auto engine = Open(c);
    ASSERT_TRUE(engine);
    ASSERT_TRUE(engine->OpenTwin(std::string(SSAVIZ_TEST_OUT) + "/families/" + c.meta["twin"].get<std::string>()).ok());
    auto a = engine->Analyze(Ids(c.ids));
    ASSERT_TRUE(a.ok()) << a.error();
    ExpectMaps(*a, model::MapSide::Compare, c.Ref("attention_twin"), "twin maps");
    ExpectClose(a->loss_compare, c.Ref("loss_twin"), kTolerance, "twin loss");
}

// What `info` and the Model panel show: the family, the checkpoint taken, the form beta was read as.
TEST(FamiliesInfo, SaysWhatWasOpenedAndHow) {
    FamilyCase llama3("llama3"), mistral("mistral"), pythia("pythia");
    ASSERT_TRUE(llama3.ok && mistral.ok && pythia.ok);
    auto e3 = Open(llama3);
    ASSERT_TRUE(e3);
    EXPECT_EQ(e3->Info().config.family, "llama3");
    EXPECT_EQ(e3->Info().config.query.position, model::PositionForm::Linear);
    auto em = model::Engine::Open(mistral.dir, "cpu");  // the folder: the fine-tuned file is preferred
    ASSERT_TRUE(em.ok()) << em.error();
    EXPECT_NE((*em)->Info().weights_path.find("lit_model_finetuned.pth"), std::string::npos);
    bool said = false;
    for (const std::string& note : (*em)->Info().notes) said = said || note.find("took lit_model_finetuned.pth") != std::string::npos;
    EXPECT_TRUE(said) << "a folder with several checkpoints says which one it took";
    auto ep = Open(pythia);
    ASSERT_TRUE(ep);
    EXPECT_EQ(ep->Info().config.query.position, model::PositionForm::ExpExp) << "attn.beta reads as exp_exp by default";
    EXPECT_EQ(ep->Info().config.KvHeads(), ep->Info().config.n_head);
}

}  // namespace
