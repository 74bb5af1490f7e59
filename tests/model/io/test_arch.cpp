// model/arch's tables and the code that reads them without LibTorch: every format holds a whole
// model (each role named, split parts in order, names unique), every family's preset reads back
// from the HF config.json ssaviz writes for it, what a model_type cannot say is refused by name,
// lit-gpt configs find their family by name and by shape, and the one format detector tells the
// formats (and GPT-2's two orientations) apart.
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/arch/arch.h"
#include "model/io/config.h"
#include "model/io/weights.h"

namespace {

using model::Format;
using model::MlpKind;
using model::Part;
using model::Role;

std::vector<Part> PartsOf(Format format, Role role, MlpKind mlp) {
    std::vector<Part> parts;
    for (const auto& n : model::NamesOf(format, role, mlp)) parts.push_back(n.part);
    return parts;
}

// The MLP kinds each format must hold: those of the families stored in it.
std::set<MlpKind> MlpsOf(Format format) {
    std::set<MlpKind> kinds;
    for (const model::Family& f : model::Families()) {
        if (*f.model_type && f.hf_format == format) kinds.insert(f.mlp);
        if (format == Format::Lit && *f.lit_names) kinds.insert(f.mlp);
        if (format == Format::NanoGpt && f.hf_format == Format::Gpt2) kinds.insert(f.mlp);
    }
    return kinds;
}

TEST(Arch, EveryFormatHoldsAWholeModel) {
    for (const model::FormatInfo& f : model::Formats()) {
        SCOPED_TRACE(f.name);
        const std::set<MlpKind> mlps = MlpsOf(f.format);
        ASSERT_FALSE(mlps.empty()) << "no family is stored in this format";
        for (MlpKind mlp : mlps) {
            for (Role role : {Role::TokenEmbedding, Role::AttnNorm, Role::AttnOut, Role::MlpNorm, Role::MlpDown, Role::OutputNorm, Role::Output})
                EXPECT_EQ(PartsOf(f.format, role, mlp), std::vector<Part>{Part::Whole}) << model::GetRole(role).what;
            const auto qkv = PartsOf(f.format, Role::AttnQkv, mlp);
            EXPECT_TRUE(qkv == std::vector<Part>{Part::Whole} || qkv == std::vector<Part>{Part::Grouped} ||
                        qkv == (std::vector<Part>{Part::Query, Part::Key, Part::Value}));
            const auto up = PartsOf(f.format, Role::MlpUp, mlp);
            EXPECT_TRUE(up == std::vector<Part>{Part::Whole} || (mlp == MlpKind::SwiGlu && up == std::vector<Part>{Part::Gate, Part::Up}));
            // Within one layer and outside them, no two roles share a stored name.
            std::set<std::string> names;
            size_t count = 0;
            for (int r = 0; r <= static_cast<int>(Role::Output); ++r)
                for (const auto& n : model::NamesOf(f.format, static_cast<Role>(r), mlp)) {
                    names.insert(model::LayerName(n.name, 0));
                    ++count;
                }
            EXPECT_EQ(names.size(), count);
        }
        EXPECT_EQ(std::string(f.attention).find("{l}") != std::string::npos, true);
    }
    EXPECT_EQ(model::LayerName("h.{l}.attn.c_attn", 11), "h.11.attn.c_attn");
    EXPECT_EQ(model::HfModelTypes(), "gpt2, gpt_neox, llama, mistral, qwen2, qwen3");
}

model::PresetShape SmallShape() {
    model::PresetShape s;
    s.n_layer = 2;
    s.n_head = 4;
    s.n_embd = 64;
    s.n_positions = 256;
    return s;
}

TEST(Arch, EveryFamilyReadsBackFromTheHfConfigItIsWrittenWith) {
    for (const model::Family& f : model::Families()) {
        if (!f.preset || f.positions != model::PositionKind::Rope) continue;
        SCOPED_TRACE(f.name);
        auto c = model::FamilyPreset(f, SmallShape());
        ASSERT_TRUE(c.ok()) << c.error();
        c->vocab_size = 300;
        c->query = {model::PositionForm::Sigmoid, model::TokenForm::Shared, model::Combine::Sum};
        auto j = model::HfConfigToJson(*c);
        ASSERT_TRUE(j.ok()) << j.error();
        EXPECT_EQ((*j)["model_type"], f.model_type);
        EXPECT_EQ((*j)["architectures"][0], f.hf_architecture);
        auto back = model::ParseConfig(j->dump(), "config.json");
        ASSERT_TRUE(back.ok()) << back.error();
        EXPECT_EQ(model::FormatOf(*back), f.hf_format);
        EXPECT_EQ(model::FamilyOf(*back), &f);
        EXPECT_EQ(model::DescribeArchitecture(*back).substr(back->family.size()), model::DescribeArchitecture(*c).substr(c->family.size()));
        EXPECT_EQ(back->query.position, model::PositionForm::Sigmoid);
    }
}

TEST(Arch, HfConfigRefusesWhatItsModelTypeCannotSay) {
    auto pythia = model::FamilyPreset(*model::FindFamily("pythia"), SmallShape());
    ASSERT_TRUE(pythia.ok()) << pythia.error();
    pythia->vocab_size = 300;
    model::ModelConfig shared = *pythia;
    shared.shared_attention_norm = true;  // lit-gpt can say it, GPT-NeoX's config cannot
    auto j = model::HfConfigToJson(shared);
    ASSERT_FALSE(j.ok());
    EXPECT_NE(j.error().find("cannot be written as HF model_type gpt_neox: its residual (parallel, shared norm) would read back as parallel"),
              std::string::npos)
        << j.error();
    model::ModelConfig head_bias = *pythia;
    head_bias.lm_head_bias = true;
    j = model::HfConfigToJson(head_bias);
    ASSERT_FALSE(j.ok());
    EXPECT_NE(j.error().find("its head bias (yes) would read back as no"), std::string::npos) << j.error();
    auto mistral = model::FamilyPreset(*model::FindFamily("mistral"), SmallShape());
    ASSERT_TRUE(mistral.ok());
    mistral->vocab_size = 300;
    mistral->bias = true;  // Mistral's config has no biases at all
    j = model::HfConfigToJson(*mistral);
    ASSERT_FALSE(j.ok());
    EXPECT_NE(j.error().find("q, k, v bias"), std::string::npos) << j.error();
    model::ModelConfig gpt2;
    gpt2.n_layer = gpt2.n_head = 2;
    gpt2.n_embd = 16;
    gpt2.n_positions = gpt2.vocab_size = 32;
    j = model::HfConfigToJson(gpt2);
    ASSERT_FALSE(j.ok());
    EXPECT_NE(j.error().find("no HF model_type ssaviz writes with RoPE"), std::string::npos) << j.error();
}

TEST(Arch, PresetsAreTheirFamiliesRows) {
    auto llama = model::FamilyPreset(*model::FindFamily("llama"), SmallShape());
    ASSERT_TRUE(llama.ok());
    EXPECT_EQ(llama->KvHeads(), 1);  // 4 heads over 4
    EXPECT_EQ(llama->MlpWidth(), 192);
    EXPECT_EQ(llama->rope_n_elem, 16);
    EXPECT_TRUE(llama->hf_model_type.empty()) << "lit-gpt holds llama";
    auto qwen2 = model::FamilyPreset(*model::FindFamily("qwen2"), SmallShape());
    ASSERT_TRUE(qwen2.ok());
    EXPECT_TRUE(qwen2->qkv_bias);
    EXPECT_EQ(qwen2->hf_model_type, "qwen2") << "q, k, v biases alone: HF's folders only";
    auto qwen3 = model::FamilyPreset(*model::FindFamily("qwen3"), SmallShape());
    ASSERT_TRUE(qwen3.ok());
    EXPECT_TRUE(qwen3->qk_norm);
    model::PresetShape odd = SmallShape();
    odd.kv_heads = 3;
    auto bad = model::FamilyPreset(*model::FindFamily("llama"), odd);
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.error().find("n_query_groups 3 does not divide n_head 4"), std::string::npos) << bad.error();
    EXPECT_EQ(model::PresetFamilies("|"), "gpt2|pythia|llama|mistral|llama3|qwen2|qwen3");
    EXPECT_EQ(model::LayoutNames("|"), "own|lit|hf");
}

TEST(Arch, LitConfigsFindTheirFamilyByNameElseByShape) {
    auto family = [](const std::string& fields) {
        auto c = model::ParseLitConfig("{" + fields + "}", "lit_config.json");
        EXPECT_TRUE(c.ok()) << c.error();
        return c.ok() ? c->family : std::string();
    };
    const std::string llama_shape = R"("n_layer": 2, "n_head": 4, "n_embd": 64, "_norm_class": "RMSNorm", "_mlp_class": "LLaMAMLP", "intermediate_size": 96)";
    EXPECT_EQ(family(R"("name": "Llama-3-8B", )" + llama_shape), "llama3");
    EXPECT_EQ(family(R"("name": "tiny-LLaMA-1.1b", )" + llama_shape), "llama");
    EXPECT_EQ(family(R"("name": "Mistral-7B-v0.1", )" + llama_shape), "mistral");
    EXPECT_EQ(family(R"("name": "mine", )" + llama_shape), "llama");
    EXPECT_EQ(family(R"("name": "mine", "rope_base": 500000, )" + llama_shape), "llama3");
    EXPECT_EQ(family(R"("name": "stablelm-base-alpha-3b", "n_layer": 2, "n_head": 4, "n_embd": 64)"), "stablelm");
    EXPECT_EQ(family(R"("name": "mine", "n_layer": 2, "n_head": 4, "n_embd": 64)"), "pythia");
}

// A weights file of names and shapes only: what the detector reads.
model::WeightFile Names(const std::vector<std::pair<std::string, std::vector<int64_t>>>& tensors) {
    model::WeightFile w;
    for (const auto& [name, shape] : tensors) {
        w.index[name] = w.tensors.size();
        w.tensors.push_back({name, model::Dtype::F32, shape, {}, nullptr});
    }
    return w;
}

TEST(Arch, OneDetectorTellsTheFormats) {
    EXPECT_EQ(model::DetectFormat(Names({{"wte.weight", {50, 8}}, {"h.0.attn.c_attn.weight", {8, 24}}})), Format::Gpt2);
    EXPECT_EQ(model::DetectFormat(Names({{"wte.weight", {50, 8}}, {"h.0.attn.c_attn.weight", {24, 8}}})), Format::NanoGpt);
    EXPECT_EQ(model::DetectFormat(Names({{"wte.weight", {50, 8}}, {"h.0.attn.attn.weight", {24, 8}}})), Format::Lit);
    EXPECT_EQ(model::DetectFormat(Names({{"embed_in.weight", {50, 8}}, {"layers.0.attention.query_key_value.weight", {24, 8}}})), Format::HfNeox);
    EXPECT_EQ(model::DetectFormat(Names({{"embed_tokens.weight", {50, 8}}, {"layers.0.self_attn.q_proj.weight", {8, 8}}})), Format::HfLlama);
    EXPECT_EQ(model::DetectFormat(Names({{"wte.weight", {50, 8}}})), std::nullopt);

    model::ModelFiles files;
    const auto lit = Names({{"wte.weight", {50, 8}}, {"h.0.attn.attn.weight", {24, 8}}});
    const auto gpt2 = Names({{"wte.weight", {50, 8}}, {"h.0.attn.c_attn.weight", {8, 24}}});
    EXPECT_EQ(model::ShapeSourceOf(files, gpt2, {}), model::ShapeSource::Tensors);
    EXPECT_EQ(model::ShapeSourceOf(files, lit, {}), model::ShapeSource::LitConfig);
    model::ConfigHints given;
    given.config_file = "config.json";
    EXPECT_EQ(model::ShapeSourceOf(files, gpt2, given), model::ShapeSource::ConfigJson);
    files.config = "dir/config.json";
    EXPECT_EQ(model::ShapeSourceOf(files, gpt2, {}), model::ShapeSource::ConfigJson);
    EXPECT_EQ(model::ShapeSourceOf(files, lit, {}), model::ShapeSource::LitConfig) << "lit-gpt names take their lit_config.json";
}

}  // namespace
