// ParseConfig / ConfigToJson (SPEC section 3): every field of a valid config, and one test per
// bad input, each checking that the error names the offending key or value.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/io/config.h"

namespace {

using model::Activation;
using model::Combine;
using model::ModelConfig;
using model::ParseConfig;
using model::PositionForm;
using model::TokenForm;

// GPT-2 small's config.json as HF ships it (extra keys are ignored).
const char* kGpt2Config = R"({
  "activation_function": "gelu_new",
  "architectures": ["GPT2LMHeadModel"],
  "attn_pdrop": 0.1,
  "bos_token_id": 50256,
  "embd_pdrop": 0.1,
  "eos_token_id": 50256,
  "initializer_range": 0.02,
  "layer_norm_epsilon": 1e-05,
  "model_type": "gpt2",
  "n_ctx": 1024,
  "n_embd": 768,
  "n_head": 12,
  "n_inner": null,
  "n_layer": 12,
  "n_positions": 1024,
  "resid_pdrop": 0.1,
  "vocab_size": 50257
})";

// A small valid config with `extra` spliced in as further top-level members (`extra` starts
// with a comma or is empty; it must not repeat the five keys already there).
std::string Small(const std::string& extra = "") {
    return R"({"n_layer": 2, "n_head": 2, "n_embd": 16, "n_positions": 32, "vocab_size": 100)" + extra + "}";
}

// A small valid config with the given "ssa" value.
std::string WithSsa(const std::string& ssa) { return Small(R"(, "ssa": )" + ssa); }

// Parses and expects failure; returns the message.
std::string ParseError(const std::string& text) {
    auto r = ParseConfig(text, "cfg.json");
    EXPECT_FALSE(r.ok()) << "accepted: " << text;
    return r.ok() ? std::string() : r.error();
}

bool Has(const std::string& haystack, const std::string& needle) { return haystack.find(needle) != std::string::npos; }

// ---------------------------------------------------------------------------------------------
// Valid configs

TEST(ConfigParse, Gpt2WithoutSsaBlock) {
    auto r = ParseConfig(kGpt2Config, "gpt2/config.json");
    ASSERT_TRUE(r.ok()) << r.error();
    const ModelConfig& c = *r;
    EXPECT_EQ(c.n_layer, 12);
    EXPECT_EQ(c.n_head, 12);
    EXPECT_EQ(c.n_embd, 768);
    EXPECT_EQ(c.n_positions, 1024);
    EXPECT_EQ(c.vocab_size, 50257);
    EXPECT_DOUBLE_EQ(c.layer_norm_epsilon, 1e-5);
    EXPECT_EQ(c.activation, Activation::GeluNew);
    EXPECT_EQ(c.HeadSize(), 64);
    EXPECT_EQ(c.query.position, PositionForm::None);
    EXPECT_EQ(c.query.token, TokenForm::None);
    EXPECT_EQ(c.value.position, PositionForm::None);
    EXPECT_EQ(c.value.token, TokenForm::None);
    EXPECT_FALSE(c.query.Active());
    EXPECT_FALSE(c.value.Active());
    EXPECT_FALSE(c.IsSsa());
}

TEST(ConfigParse, DefaultsWhenOptionalKeysAreAbsent) {
    auto r = ParseConfig(Small(), "cfg.json");
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_DOUBLE_EQ(r->layer_norm_epsilon, 1e-5);
    EXPECT_EQ(r->activation, Activation::GeluNew);
    EXPECT_FALSE(r->IsSsa());
}

TEST(ConfigParse, SsaBothSides) {
    auto r = ParseConfig(Small(R"(, "layer_norm_epsilon": 1e-6, "activation_function": "gelu",
        "ssa": {"query": {"position": "sigmoid", "token": "shared", "combine": "sum"},
                "value": {"position": "exp_exp", "token": "feature", "combine": "product"}})"),
                         "cfg.json");
    ASSERT_TRUE(r.ok()) << r.error();
    const ModelConfig& c = *r;
    EXPECT_EQ(c.n_layer, 2);
    EXPECT_EQ(c.n_head, 2);
    EXPECT_EQ(c.n_embd, 16);
    EXPECT_EQ(c.n_positions, 32);
    EXPECT_EQ(c.vocab_size, 100);
    EXPECT_EQ(c.HeadSize(), 8);
    EXPECT_DOUBLE_EQ(c.layer_norm_epsilon, 1e-6);
    EXPECT_EQ(c.activation, Activation::Gelu);
    EXPECT_EQ(c.query.position, PositionForm::Sigmoid);
    EXPECT_EQ(c.query.token, TokenForm::Shared);
    EXPECT_EQ(c.query.combine, Combine::Sum);
    EXPECT_EQ(c.value.position, PositionForm::ExpExp);
    EXPECT_EQ(c.value.token, TokenForm::Feature);
    EXPECT_EQ(c.value.combine, Combine::Product);
    EXPECT_TRUE(c.IsSsa());
    EXPECT_EQ(model::Describe(c.query), "sigmoid position + shared token (sum)");
    EXPECT_EQ(model::Describe(c.value), "exp_exp position + feature token (product)");
}

TEST(ConfigParse, SsaLinearPositionAndMissingValueSide) {
    auto r = ParseConfig(WithSsa(R"({"query": {"position": "linear"}})"), "cfg.json");
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(r->query.position, PositionForm::Linear);
    EXPECT_EQ(r->query.token, TokenForm::None);
    EXPECT_EQ(r->query.combine, Combine::Sum);  // absent combine means sum
    EXPECT_TRUE(r->query.Active());
    EXPECT_FALSE(r->value.Active());  // the missing side is tau_v = 1
    EXPECT_EQ(r->value.position, PositionForm::None);
    EXPECT_EQ(r->value.token, TokenForm::None);
    EXPECT_TRUE(r->IsSsa());
}

TEST(ConfigParse, SsaNullFormsAndMissingQuerySide) {
    auto r = ParseConfig(WithSsa(R"({"value": {"position": null, "token": "feature", "combine": null}})"), "cfg.json");
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_FALSE(r->query.Active());
    EXPECT_EQ(r->value.position, PositionForm::None);
    EXPECT_EQ(r->value.token, TokenForm::Feature);
    EXPECT_EQ(r->value.combine, Combine::Sum);
    EXPECT_TRUE(r->IsSsa());
}

TEST(ConfigParse, SsaStringNullTokenAndNullSide) {
    auto r = ParseConfig(WithSsa(R"({"query": {"position": "exp_exp", "token": "null"}, "value": null})"), "cfg.json");
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(r->query.position, PositionForm::ExpExp);
    EXPECT_EQ(r->query.token, TokenForm::None);
    EXPECT_FALSE(r->value.Active());
}

TEST(ConfigParse, SsaBlockNullOrEmptyIsVanilla) {
    for (const char* ssa : {"null", "{}", R"({"query": {}, "value": {}})"}) {
        auto r = ParseConfig(WithSsa(ssa), "cfg.json");
        ASSERT_TRUE(r.ok()) << ssa << ": " << r.error();
        EXPECT_FALSE(r->IsSsa()) << ssa;
    }
}

TEST(ConfigParse, NCtxFallbackWhenNPositionsIsAbsent) {
    auto r = ParseConfig(R"({"n_layer": 1, "n_head": 1, "n_embd": 4, "n_ctx": 512, "vocab_size": 10})", "cfg.json");
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(r->n_positions, 512);
}

TEST(ConfigParse, NPositionsWinsOverNCtx) {
    auto r = ParseConfig(R"({"n_layer": 1, "n_head": 1, "n_embd": 4, "n_ctx": 512, "n_positions": 64, "vocab_size": 10})",
                         "cfg.json");
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(r->n_positions, 64);
}

TEST(ConfigParse, GeluPytorchTanhIsGeluNew) {
    auto r = ParseConfig(Small(R"(, "activation_function": "gelu_pytorch_tanh")"), "cfg.json");
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(r->activation, Activation::GeluNew);
}

// GPT2MLP is n_inner wide where it is given (it was read as 4 n_embd, and a real model refused naming
// a key its config lacks); written back as n_inner. GPT2Attention's score switches are refused by
// name where they are not what ssaviz runs (they were ignored: other maps than transformers', unsaid).
TEST(ConfigParse, Gpt2NInnerIsReadAndAttentionSwitchesAreNamed) {
    auto r = ParseConfig(Small(R"(, "n_inner": 40)"), "cfg.json");
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(r->MlpWidth(), 40);
    EXPECT_EQ(model::ConfigToJson(*r)["n_inner"], 40);
    auto usual = ParseConfig(Small(R"(, "n_inner": null, "scale_attn_weights": true, "scale_attn_by_inverse_layer_idx": false)"), "cfg.json");
    ASSERT_TRUE(usual.ok()) << usual.error();
    EXPECT_EQ(usual->MlpWidth(), 64);
    EXPECT_FALSE(model::ConfigToJson(*usual).contains("n_inner"));
    std::string e = ParseError(Small(R"(, "scale_attn_by_inverse_layer_idx": true)"));
    EXPECT_TRUE(Has(e, "cfg.json: scale_attn_by_inverse_layer_idx true is not supported by ssaviz")) << e;
    e = ParseError(Small(R"(, "scale_attn_weights": false)"));
    EXPECT_TRUE(Has(e, "scale_attn_weights false is not supported")) << e;
}

// ---------------------------------------------------------------------------------------------
// Bad inputs: one per test, each error names the file, key and value

TEST(ConfigErrors, NotJson) {
    std::string e = ParseError(R"({"n_layer": 2, "n_head": )");
    EXPECT_TRUE(Has(e, "cfg.json")) << e;
    EXPECT_TRUE(Has(e, "not valid JSON")) << e;
}

TEST(ConfigErrors, EmptyText) {
    std::string e = ParseError("");
    EXPECT_TRUE(Has(e, "cfg.json")) << e;
    EXPECT_TRUE(Has(e, "JSON")) << e;
}

TEST(ConfigErrors, NotAnObject) {
    std::string e = ParseError(R"([{"n_layer": 2}])");
    EXPECT_TRUE(Has(e, "cfg.json")) << e;
    EXPECT_TRUE(Has(e, "object")) << e;
}

TEST(ConfigErrors, MissingNLayer) {
    std::string e = ParseError(R"({"n_head": 2, "n_embd": 16, "n_positions": 32, "vocab_size": 100})");
    EXPECT_TRUE(Has(e, "cfg.json")) << e;
    EXPECT_TRUE(Has(e, "missing")) << e;
    EXPECT_TRUE(Has(e, "'n_layer'")) << e;
}

TEST(ConfigErrors, MissingVocabSize) {
    std::string e = ParseError(R"({"n_layer": 2, "n_head": 2, "n_embd": 16, "n_positions": 32})");
    EXPECT_TRUE(Has(e, "'vocab_size'")) << e;
}

TEST(ConfigErrors, MissingNPositionsAndNCtx) {
    std::string e = ParseError(R"({"n_layer": 2, "n_head": 2, "n_embd": 16, "vocab_size": 100})");
    EXPECT_TRUE(Has(e, "missing")) << e;
    EXPECT_TRUE(Has(e, "n_positions")) << e;
}

TEST(ConfigErrors, NEmbdNotDivisibleByNHead) {
    std::string e = ParseError(R"({"n_layer": 2, "n_head": 12, "n_embd": 100, "n_positions": 32, "vocab_size": 100})");
    EXPECT_TRUE(Has(e, "n_embd 100")) << e;
    EXPECT_TRUE(Has(e, "n_head 12")) << e;
    EXPECT_TRUE(Has(e, "divisible")) << e;
}

TEST(ConfigErrors, NegativeSize) {
    std::string e = ParseError(R"({"n_layer": 2, "n_head": -2, "n_embd": 16, "n_positions": 32, "vocab_size": 100})");
    EXPECT_TRUE(Has(e, "'n_head'")) << e;
    EXPECT_TRUE(Has(e, "-2")) << e;
}

TEST(ConfigErrors, ZeroSize) {
    std::string e = ParseError(R"({"n_layer": 0, "n_head": 2, "n_embd": 16, "n_positions": 32, "vocab_size": 100})");
    EXPECT_TRUE(Has(e, "'n_layer'")) << e;
    EXPECT_TRUE(Has(e, "= 0")) << e;
}

TEST(ConfigErrors, FractionalSize) {
    std::string e = ParseError(R"({"n_layer": 2, "n_head": 2, "n_embd": 16.5, "n_positions": 32, "vocab_size": 100})");
    EXPECT_TRUE(Has(e, "'n_embd'")) << e;
    EXPECT_TRUE(Has(e, "integer")) << e;
    EXPECT_TRUE(Has(e, "16.5")) << e;
}

TEST(ConfigErrors, StringSize) {
    std::string e = ParseError(R"({"n_layer": 2, "n_head": 2, "n_embd": 16, "n_positions": 32, "vocab_size": "100"})");
    EXPECT_TRUE(Has(e, "'vocab_size'")) << e;
    EXPECT_TRUE(Has(e, "'100'")) << e;
}

TEST(ConfigErrors, BooleanSize) {
    std::string e = ParseError(R"({"n_layer": true, "n_head": 2, "n_embd": 16, "n_positions": 32, "vocab_size": 100})");
    EXPECT_TRUE(Has(e, "'n_layer'")) << e;
    EXPECT_TRUE(Has(e, "true")) << e;
}

TEST(ConfigErrors, SizeAboveLimit) {
    std::string e = ParseError(R"({"n_layer": 2, "n_head": 2, "n_embd": 16, "n_positions": 32, "vocab_size": 16777217})");
    EXPECT_TRUE(Has(e, "'vocab_size'")) << e;
    EXPECT_TRUE(Has(e, "16777217")) << e;
}

TEST(ConfigErrors, ImplausiblyManyLayers) {
    std::string e = ParseError(R"({"n_layer": 5000, "n_head": 2, "n_embd": 16, "n_positions": 32, "vocab_size": 100})");
    EXPECT_TRUE(Has(e, "n_layer 5000")) << e;
}

// A present but invalid n_positions (no n_ctx) is a range error, not "missing key" (a bug once).
TEST(ConfigErrors, InvalidNPositionsIsNotReportedAsMissing) {
    std::string e = ParseError(R"({"n_layer": 2, "n_head": 2, "n_embd": 16, "n_positions": 0, "vocab_size": 100})");
    EXPECT_TRUE(Has(e, "'n_positions'")) << e;
    EXPECT_FALSE(Has(e, "missing")) << e;
    EXPECT_TRUE(Has(e, "out of range")) << e;
}

TEST(ConfigErrors, InvalidNCtxFallback) {
    std::string e = ParseError(R"({"n_layer": 2, "n_head": 2, "n_embd": 16, "n_ctx": -5, "vocab_size": 100})");
    EXPECT_TRUE(Has(e, "'n_ctx'")) << e;
    EXPECT_TRUE(Has(e, "-5")) << e;
}

// An integer above INT64_MAX is shown as written, not wrapped to -1 (a bug once).
TEST(ConfigErrors, HugeUnsignedSizeIsReportedVerbatim) {
    std::string e =
        ParseError(R"({"n_layer": 18446744073709551615, "n_head": 2, "n_embd": 16, "n_positions": 32, "vocab_size": 100})");
    EXPECT_TRUE(Has(e, "'n_layer'")) << e;
    EXPECT_TRUE(Has(e, "18446744073709551615")) << e;
}

TEST(ConfigErrors, BadLayerNormEpsilon) {
    std::string e = ParseError(Small(R"(, "layer_norm_epsilon": -1)"));
    EXPECT_TRUE(Has(e, "layer_norm_epsilon")) << e;
    EXPECT_TRUE(Has(e, "-1")) << e;
}

TEST(ConfigErrors, UnsupportedActivation) {
    std::string e = ParseError(Small(R"(, "activation_function": "relu")"));
    EXPECT_TRUE(Has(e, "activation_function")) << e;
    EXPECT_TRUE(Has(e, "'relu'")) << e;
}

TEST(ConfigErrors, UnknownPositionForm) {
    std::string e = ParseError(WithSsa(R"({"query": {"position": "cosine", "token": "shared"}})"));
    EXPECT_TRUE(Has(e, "cfg.json")) << e;
    EXPECT_TRUE(Has(e, "ssa.query.position")) << e;
    EXPECT_TRUE(Has(e, "'cosine'")) << e;
}

TEST(ConfigErrors, UnknownTokenForm) {
    std::string e = ParseError(WithSsa(R"({"value": {"token": "attention"}})"));
    EXPECT_TRUE(Has(e, "ssa.value.token")) << e;
    EXPECT_TRUE(Has(e, "'attention'")) << e;
}

TEST(ConfigErrors, UnknownCombine) {
    std::string e = ParseError(WithSsa(R"({"query": {"position": "sigmoid", "token": "shared", "combine": "max"}})"));
    EXPECT_TRUE(Has(e, "ssa.query.combine")) << e;
    EXPECT_TRUE(Has(e, "'max'")) << e;
}

TEST(ConfigErrors, NonStringForm) {
    std::string e = ParseError(WithSsa(R"({"query": {"position": 1}})"));
    EXPECT_TRUE(Has(e, "ssa.query.position")) << e;
    EXPECT_TRUE(Has(e, "got 1")) << e;
}

TEST(ConfigErrors, UnknownKeyInsideSsaQuery) {
    std::string e = ParseError(WithSsa(R"({"query": {"position": "sigmoid", "temperature": 2}})"));
    EXPECT_TRUE(Has(e, "ssa.query")) << e;
    EXPECT_TRUE(Has(e, "'temperature'")) << e;
}

TEST(ConfigErrors, UnknownKeyInsideSsa) {
    std::string e = ParseError(WithSsa(R"({"key": {"position": "sigmoid"}})"));
    EXPECT_TRUE(Has(e, "ssa")) << e;
    EXPECT_TRUE(Has(e, "'key'")) << e;
}

TEST(ConfigErrors, SsaNotAnObject) {
    std::string e = ParseError(WithSsa(R"("sigmoid")"));
    EXPECT_TRUE(Has(e, "cfg.json")) << e;
    EXPECT_TRUE(Has(e, "'ssa'")) << e;
    EXPECT_TRUE(Has(e, "object")) << e;
}

TEST(ConfigErrors, SsaSideNotAnObject) {
    std::string e = ParseError(WithSsa(R"({"query": "sigmoid"})"));
    EXPECT_TRUE(Has(e, "ssa.query")) << e;
    EXPECT_TRUE(Has(e, "object")) << e;
}

// ---------------------------------------------------------------------------------------------
// Issue 20: values nested a million deep, nested values in messages, keys with control characters

std::string Deep(size_t levels) { return std::string(levels, '[') + std::string(levels, ']'); }

TEST(ConfigErrors, ValueNestedAMillionDeepWhereAStringOrNumberBelongs) {
    // Each used to reach a recursive dump() in its error message: a stack overflow.
    const std::string deep = Deep(1'000'000);
    const std::string texts[] = {
        R"({"n_layer": )" + deep + R"(, "n_head": 2, "n_embd": 16, "n_positions": 32, "vocab_size": 100})",
        Small(R"(, "activation_function": )" + deep),
        Small(R"(, "layer_norm_epsilon": )" + deep),
        WithSsa(R"({"query": {"position": )" + deep + "}}"),
        WithSsa(R"({"value": {"token": "shared", "combine": )" + deep + "}}"),
        WithSsa(deep),
    };
    for (const std::string& text : texts) {
        std::string e = ParseError(text);
        EXPECT_TRUE(Has(e, "cfg.json")) << e;
        EXPECT_TRUE(Has(e, "nested more than 64 levels deep")) << e;
        EXPECT_LT(e.size(), 300u);
    }
}

TEST(ConfigErrors, NestedValuesAreDescribedNotDumped) {
    std::string e = ParseError(R"({"n_layer": [[2]], "n_head": 2, "n_embd": 16, "n_positions": 32, "vocab_size": 100})");
    EXPECT_TRUE(Has(e, "'n_layer' must be an integer, got an array of 1")) << e;
    e = ParseError(Small(R"(, "activation_function": {"name": ["gelu"]})"));
    EXPECT_TRUE(Has(e, "activation_function an object of 1 keys is not supported")) << e;
    e = ParseError(WithSsa(R"({"query": {"position": [["sigmoid"]]}})"));
    EXPECT_TRUE(Has(e, "ssa.query.position must be a string or null, got an array of 1")) << e;
    e = ParseError(WithSsa(R"([[1, 2]])"));
    EXPECT_TRUE(Has(e, "'ssa' must be an object, got an array of 1")) << e;
}

TEST(ConfigErrors, KeysAndValuesWithControlCharactersAreEscaped) {
    const std::string cases[] = {
        WithSsa(R"({"query\n\u001b[2J": {}})"),
        WithSsa(R"({"query": {"position\r": "sigmoid"}})"),
        WithSsa(R"({"query": {"position": "sig\nmoid\u001b[31m"}})"),
        Small(R"(, "activation_function": "relu\n\u009b31m")"),
    };
    for (const std::string& text : cases) {
        std::string e = ParseError(text);
        EXPECT_EQ(e.find_first_of("\n\r\x1b"), std::string::npos) << e;
        EXPECT_EQ(e.find("\xc2\x9b"), std::string::npos) << e;
        EXPECT_TRUE(Has(e, "\\")) << e;
    }
}

// ---------------------------------------------------------------------------------------------
// LoadConfig and the ConfigToJson round trip

TEST(ConfigLoad, MissingFileNamesThePath) {
    auto r = model::LoadConfig(SSAVIZ_TEST_OUT "/no_such_dir/config.json");
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(Has(r.error(), "no_such_dir/config.json")) << r.error();
}

void ExpectSameConfig(const ModelConfig& a, const ModelConfig& b) {
    EXPECT_EQ(a.n_layer, b.n_layer);
    EXPECT_EQ(a.n_head, b.n_head);
    EXPECT_EQ(a.n_embd, b.n_embd);
    EXPECT_EQ(a.n_positions, b.n_positions);
    EXPECT_EQ(a.vocab_size, b.vocab_size);
    EXPECT_DOUBLE_EQ(a.layer_norm_epsilon, b.layer_norm_epsilon);
    EXPECT_EQ(a.activation, b.activation);
    EXPECT_EQ(a.query.position, b.query.position);
    EXPECT_EQ(a.query.token, b.query.token);
    EXPECT_EQ(a.value.position, b.value.position);
    EXPECT_EQ(a.value.token, b.value.token);
    // combine only matters (and is only written) for an active side
    if (a.query.Active()) {
        EXPECT_EQ(a.query.combine, b.query.combine);
    }
    if (a.value.Active()) {
        EXPECT_EQ(a.value.combine, b.value.combine);
    }
}

TEST(ConfigRoundTrip, ToJsonThenParse) {
    ModelConfig vanilla;
    vanilla.n_layer = 12;
    vanilla.n_head = 12;
    vanilla.n_embd = 768;
    vanilla.n_positions = 1024;
    vanilla.vocab_size = 50257;

    ModelConfig ssa = vanilla;
    ssa.n_layer = 3;
    ssa.layer_norm_epsilon = 1e-6;
    ssa.activation = Activation::Gelu;
    ssa.query = {PositionForm::Sigmoid, TokenForm::Shared, Combine::Product};
    ssa.value = {PositionForm::None, TokenForm::Feature, Combine::Sum};

    ModelConfig query_only = vanilla;
    query_only.query = {PositionForm::Linear, TokenForm::None, Combine::Sum};

    ModelConfig value_only = vanilla;
    value_only.value = {PositionForm::ExpExp, TokenForm::Shared, Combine::Product};

    for (const ModelConfig* c : {&vanilla, &ssa, &query_only, &value_only}) {
        std::string text = model::ConfigToJson(*c).dump(2);
        SCOPED_TRACE(text);
        auto r = ParseConfig(text, "roundtrip.json");
        ASSERT_TRUE(r.ok()) << r.error();
        ExpectSameConfig(*c, *r);
        // and the written form is stable
        EXPECT_EQ(model::ConfigToJson(*r).dump(2), text);
    }
}

// ---------------------------------------------------------------------------------------------
// lit-gpt configs (SPEC section 7): the official SSA code's configs/*.json are partial

model::ModelConfig ParseLit(const std::string& text) {
    auto r = model::ParseLitConfig(text, "lit_config.json");
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error());
    return r.ok() ? *r : model::ModelConfig{};
}

std::string LitError(const std::string& text) {
    auto r = model::ParseLitConfig(text, "lit_config.json");
    EXPECT_FALSE(r.ok()) << "accepted: " << text;
    return r.ok() ? std::string() : r.error();
}

TEST(LitConfig, OfficialPythia160mTakesLitGptDefaults) {
    // configs/pythia-160m_2048.json, verbatim
    ModelConfig c = ParseLit(R"({"block_size": 2048, "n_layer": 12, "n_embd": 768, "n_head": 12, "padding_multiple": 128})");
    EXPECT_EQ(c.n_positions, 2048);
    EXPECT_EQ(c.n_layer, 12);
    EXPECT_EQ(c.vocab_size, 50304);  // 50254 rounded up to 128
    EXPECT_EQ(c.KvHeads(), 12);
    EXPECT_TRUE(c.Rope());
    EXPECT_EQ(c.rope_n_elem, 16);  // int(0.25 * 64)
    EXPECT_DOUBLE_EQ(c.rope_base, 10000);
    EXPECT_TRUE(c.parallel_residual);
    EXPECT_FALSE(c.shared_attention_norm);
    EXPECT_TRUE(c.bias);
    EXPECT_FALSE(c.lm_head_bias);
    EXPECT_FALSE(c.tied_head);
    EXPECT_EQ(c.norm, model::NormKind::LayerNorm);
    EXPECT_EQ(c.mlp, model::MlpKind::Gelu);
    EXPECT_EQ(c.activation, Activation::Gelu);
    EXPECT_EQ(c.MlpWidth(), 4 * 768);
    EXPECT_EQ(c.family, "pythia");
    EXPECT_FALSE(c.IsSsa());
}

// A range's bounds as they are: norm_eps 0 was refused as out of "(0.000000 .. 1.000000)", its
// lower bound 1e-12 printed in fixed notation.
TEST(LitConfig, ARangeNamesItsBoundsExactly) {
    const std::string e = LitError(R"({"block_size": 64, "n_layer": 2, "n_embd": 32, "n_head": 4, "norm_eps": 0})");
    EXPECT_TRUE(Has(e, "'norm_eps' = 0 is out of range (1e-12 .. 1)")) << e;
}

TEST(LitConfig, AFamilyIsAShortPrintableName) {
    // `info` prints the family first: a terminal's escape sequences in it set the title and cleared
    // the screen, and a 1 MB one filled the terminal.
    const std::string base = R"({"block_size": 64, "n_layer": 2, "n_embd": 32, "n_head": 4, "family": )";
    EXPECT_EQ(ParseLit(base + R"("pythia"})").family, "pythia");
    const std::string control = LitError(base + R"("\u001b]0;pwned\u0007fam"})");
    EXPECT_NE(control.find("'family' '\\x1b]0;pwned\\x07fam' is not a family's name"), std::string::npos) << control;
    EXPECT_NE(LitError(base + "\"" + std::string(100, 'f') + "\"}").find("at most 64 characters"), std::string::npos);
}

TEST(LitConfig, OfficialTinyLlamaAndMistral) {
    ModelConfig t = ParseLit(R"({"block_size": 2048, "vocab_size": 32000, "padding_multiple": 64, "n_layer": 22, "n_head": 32,
        "n_embd": 2048, "rotary_percentage": 1.0, "parallel_residual": false, "bias": false, "_norm_class": "RMSNorm",
        "norm_eps": 1e-5, "_mlp_class": "LLaMAMLP", "intermediate_size": 5632, "n_query_groups": 4})");
    EXPECT_EQ(t.vocab_size, 32000);
    EXPECT_EQ(t.KvHeads(), 4);
    EXPECT_EQ(t.rope_n_elem, 64);
    EXPECT_EQ(t.QkvWidth(), (32 + 2 * 4) * 64);
    EXPECT_EQ(t.norm, model::NormKind::RmsNorm);
    EXPECT_EQ(t.mlp, model::MlpKind::SwiGlu);
    EXPECT_EQ(t.MlpWidth(), 5632);
    EXPECT_FALSE(t.parallel_residual);
    EXPECT_FALSE(t.bias);
    EXPECT_EQ(t.family, "llama");
    // configs/Mistral-7B.json gives padded_vocab_size and leaves the shape to the defaults
    ModelConfig m = ParseLit(R"({"padded_vocab_size": 32000, "block_size": 4096, "n_layer": 32, "n_query_groups": 8,
        "rotary_percentage": 1.0, "parallel_residual": false, "bias": false, "_norm_class": "RMSNorm", "norm_eps": 1e-05,
        "_mlp_class": "LLaMAMLP", "intermediate_size": 14336, "name": "Mistral-7B-v0.1"})");
    EXPECT_EQ(m.vocab_size, 32000);
    EXPECT_EQ(m.n_embd, 4096);
    EXPECT_EQ(m.KvHeads(), 8);
    EXPECT_EQ(m.family, "mistral");
    // gpt_2_124M_original.json carries a dropout, which means nothing at inference
    EXPECT_EQ(ParseLit(R"({"block_size": 1024, "vocab_size": 50257, "n_layer": 12, "n_head": 12, "n_embd": 768, "dropout": 0.0})")
                  .vocab_size, 50688);
}

TEST(LitConfig, LegacyAndNewerNames) {
    ModelConfig c = ParseLit(R"({"n_layer": 2, "n_head": 4, "n_embd": 64, "condense_ratio": 4, "norm_class_name": "RMSNorm",
        "mlp_class_name": "LLaMAMLP", "intermediate_size": 96, "gelu_approximate": "tanh", "norm_qk": false, "sliding_window_size": null})");
    EXPECT_DOUBLE_EQ(c.rope_condense_ratio, 4);
    EXPECT_EQ(c.norm, model::NormKind::RmsNorm);
    EXPECT_EQ(c.activation, Activation::GeluNew);
}

TEST(LitConfig, SsaBlockAndRoundTrip) {
    ModelConfig c = ParseLit(R"({"n_layer": 3, "n_head": 8, "n_embd": 64, "n_query_groups": 2, "rotary_percentage": 0.5,
        "rope_base": 500000, "_norm_class": "RMSNorm", "_mlp_class": "LLaMAMLP", "intermediate_size": 128, "bias": false,
        "parallel_residual": false, "name": "Llama-3-8B", "vocab_size": 1000, "padding_multiple": 64,
        "ssa": {"query": {"position": "sigmoid", "token": "shared", "combine": "sum"}, "value": {"position": "linear"}}})");
    EXPECT_EQ(c.family, "llama3");
    EXPECT_EQ(c.vocab_size, 1024);
    EXPECT_EQ(c.query.position, PositionForm::Sigmoid);
    EXPECT_EQ(c.value.position, PositionForm::Linear);
    const std::string written = model::LitConfigToJson(c).dump(2);
    ModelConfig again = ParseLit(written);
    EXPECT_EQ(model::LitConfigToJson(again).dump(2), written);
    EXPECT_EQ(again.rope_n_elem, 4);
    EXPECT_DOUBLE_EQ(again.rope_base, 500000);
    EXPECT_EQ(again.KvHeads(), 2);
}

TEST(LitConfig, ErrorsNameTheFieldAndNumbers) {
    EXPECT_TRUE(Has(LitError(R"({"n_head": "12"})"), "'n_head' must be an integer, got '12'"));
    EXPECT_TRUE(Has(LitError(R"({"parallel_residual": 1})"), "'parallel_residual' must be true or false"));
    EXPECT_TRUE(Has(LitError(R"({"rotary_percentage": "all"})"), "'rotary_percentage' must be a number"));
    EXPECT_TRUE(Has(LitError(R"({"rotary_percentage": 1.5})"), "'rotary_percentage' = 1.5 is out of range"));
    EXPECT_TRUE(Has(LitError(R"({"n_head": 12, "n_query_groups": 5, "n_embd": 768})"), "n_query_groups 5 does not divide n_head 12"));
    EXPECT_TRUE(Has(LitError(R"({"n_head": 5, "n_embd": 768})"), "n_embd 768 is not divisible by n_head 5"));
    EXPECT_TRUE(Has(LitError(R"({"n_head": 12, "n_embd": 36, "rotary_percentage": 0.5})"), "rotary width 1"));
    EXPECT_TRUE(Has(LitError(R"({"_mlp_class": "LLaMAMoE"})"), "'_mlp_class' 'LLaMAMoE' is not supported"));
    EXPECT_TRUE(Has(LitError(R"({"_mlp_class": "LLaMAMLP"})"), "needs 'intermediate_size'"));
    EXPECT_TRUE(Has(LitError(R"({"_norm_class": "GroupNorm"})"), "'_norm_class' 'GroupNorm' is not supported"));
    EXPECT_TRUE(Has(LitError(R"({"n_expert": 8})"), "mixture-of-experts"));
    EXPECT_TRUE(Has(LitError(R"({"norm_qk": true})"), "'norm_qk' = true is not supported"));
    EXPECT_TRUE(Has(LitError(R"({"flash": true})"), "unknown key 'flash'"));
    EXPECT_TRUE(Has(LitError(R"({"parallel_residual": false, "shared_attention_norm": true})"), "shared_attention_norm needs parallel_residual"));
    EXPECT_TRUE(Has(LitError("[1, 2]"), "expected a JSON object"));
    EXPECT_TRUE(Has(LitError(R"({"block_size": 0})"), "'block_size' = 0 is out of range"));
}

}  // namespace
