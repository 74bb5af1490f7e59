#include "model/io/config.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include <nlohmann/json.hpp>

#include "model/io/files.h"

namespace model {
namespace {

using nlohmann::json;

Result<int> ReadPositiveInt(const json& root, const char* key, const std::string& source) {
    auto it = root.find(key);
    if (it == root.end()) return Fail(source + ": missing key '" + key + "'");
    // DescribeJson: a number as written (also beyond the int64 range); never a dump of a nested value.
    if (!it->is_number_integer()) return Fail(source + ": '" + key + "' must be an integer, got " + DescribeJson(*it));
    const bool in_range = it->is_number_unsigned() && it->get<uint64_t>() >= 1 && it->get<uint64_t>() <= (1u << 24);
    if (!in_range) return Fail(source + ": '" + key + "' = " + DescribeJson(*it) + " is out of range (1 .. 16777216)");
    return static_cast<int>(it->get<uint64_t>());
}

// Reads one side of the "ssa" block; `side` is "query" or "value".
Result<TemperatureForm> ReadForm(const json& ssa, const char* side, const std::string& source) {
    TemperatureForm form;
    auto it = ssa.find(side);
    if (it == ssa.end() || it->is_null()) return form;
    std::string where = source + ": ssa." + side;
    if (!it->is_object()) return Fail(where + " must be an object, got " + DescribeJson(*it));
    for (auto& [key, _] : it->items()) {
        if (key != "position" && key != "token" && key != "combine")
            return Fail(where + ": unknown key '" + EscapeForMessage(key) + "' (expected position, token, combine)");
    }
    auto text = [&](const char* key) -> Result<std::string> {
        auto v = it->find(key);
        if (v == it->end() || v->is_null()) return std::string("null");
        if (!v->is_string()) return Fail(where + "." + key + " must be a string or null, got " + DescribeJson(*v));
        return v->get<std::string>();
    };
    auto position = text("position");
    if (!position) return Fail(position.error());
    if (*position == "sigmoid") form.position = PositionForm::Sigmoid;
    else if (*position == "exp_exp") form.position = PositionForm::ExpExp;
    else if (*position == "linear") form.position = PositionForm::Linear;
    else if (*position != "null") return Fail(where + ".position: unknown form '" + EscapeForMessage(*position) + "' (expected sigmoid, exp_exp, linear or null)");

    auto token = text("token");
    if (!token) return Fail(token.error());
    if (*token == "shared") form.token = TokenForm::Shared;
    else if (*token == "feature") form.token = TokenForm::Feature;
    else if (*token != "null") return Fail(where + ".token: unknown form '" + EscapeForMessage(*token) + "' (expected shared, feature or null)");

    auto combine = text("combine");
    if (!combine) return Fail(combine.error());
    if (*combine == "product") form.combine = Combine::Product;
    else if (*combine != "sum" && *combine != "null") return Fail(where + ".combine: unknown value '" + EscapeForMessage(*combine) + "' (expected sum or product)");
    return form;
}

// The optional "ssa" block, the same in config.json and lit_config.json.
Status ReadSsaBlock(const json& root, const std::string& source, ModelConfig* c) {
    auto it = root.find("ssa");
    if (it == root.end() || it->is_null()) return Ok{};
    if (!it->is_object()) return Fail(source + ": 'ssa' must be an object, got " + DescribeJson(*it));
    for (auto& [key, _] : it->items())
        if (key != "query" && key != "value") return Fail(source + ": ssa: unknown key '" + EscapeForMessage(key) + "' (expected query, value)");
    auto q = ReadForm(*it, "query", source);
    if (!q) return Fail(q.error());
    auto v = ReadForm(*it, "value", source);
    if (!v) return Fail(v.error());
    c->query = *q;
    c->value = *v;
    return Ok{};
}

// lit-gpt's family from its config name, else from its structure (for info and presets only).
std::string LitFamily(const std::string& name, const ModelConfig& c) {
    std::string n;
    for (char ch : name) n += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (n.find("llama-3") != std::string::npos || n.find("llama3") != std::string::npos) return "llama3";
    if (n.find("mistral") != std::string::npos) return "mistral";
    if (n.find("llama") != std::string::npos) return "llama";
    if (n.find("stablelm") != std::string::npos) return "stablelm";
    if (n.find("pythia") != std::string::npos) return "pythia";
    if (c.norm == NormKind::RmsNorm && c.mlp == MlpKind::SwiGlu) return c.rope_base >= 500000 ? "llama3" : "llama";  // Llama 3's base
    return "pythia";
}

}  // namespace

Result<ModelConfig> ParseConfig(std::string_view json_text, const std::string& source) {
    auto parsed = ParseJsonText(json_text);  // nesting at most kMaxJsonDepth
    if (!parsed) return Fail(source + ": not valid JSON (" + EscapeForMessage(parsed.error()) + ")");
    const json& root = *parsed;
    if (!root.is_object()) return Fail(source + ": expected a JSON object at the top level, got " + DescribeJson(root));

    ModelConfig c;
    struct { const char* key; int* field; } ints[] = {
        {"n_layer", &c.n_layer}, {"n_head", &c.n_head}, {"n_embd", &c.n_embd}, {"vocab_size", &c.vocab_size}};
    for (auto& [key, field] : ints) {
        auto v = ReadPositiveInt(root, key, source);
        if (!v) return Fail(v.error());
        *field = *v;
    }
    // GPT-2 configs name the context n_positions; some older ones only n_ctx.
    const bool old_style = !root.contains("n_positions") && root.contains("n_ctx");
    auto positions = ReadPositiveInt(root, old_style ? "n_ctx" : "n_positions", source);
    if (!positions) return Fail(positions.error());
    c.n_positions = *positions;

    if (c.n_embd % c.n_head != 0)
        return Fail(source + ": n_embd " + std::to_string(c.n_embd) + " is not divisible by n_head " + std::to_string(c.n_head));
    if (c.n_layer > 1024 || c.n_head > 1024)
        return Fail(source + ": n_layer " + std::to_string(c.n_layer) + " / n_head " + std::to_string(c.n_head) + " is implausibly large");

    if (auto it = root.find("layer_norm_epsilon"); it != root.end()) {
        if (!it->is_number() || it->get<double>() <= 0 || it->get<double>() > 1)
            return Fail(source + ": layer_norm_epsilon must be a number in (0, 1], got " + DescribeJson(*it));
        c.layer_norm_epsilon = it->get<double>();
    }
    if (auto it = root.find("activation_function"); it != root.end()) {
        const std::string a = it->is_string() ? it->get<std::string>() : "";
        if (a == "gelu_new" || a == "gelu_pytorch_tanh") c.activation = Activation::GeluNew;
        else if (a == "gelu") c.activation = Activation::Gelu;
        else return Fail(source + ": activation_function " + DescribeJson(*it) + " is not supported (expected gelu_new or gelu)");
    }

    if (Status s = ReadSsaBlock(root, source, &c); !s) return Fail(s.error());
    return c;
}

Result<ModelConfig> LoadConfig(const std::string& path) {
    auto text = ReadFile(path, kMaxJsonFileBytes);  // a regular file of at most 64 MB
    if (!text) return Fail(text.error());
    return ParseConfig(*text, path);
}

Result<ModelConfig> ParseLitConfig(std::string_view json_text, const std::string& source) {
    auto parsed = ParseJsonText(json_text);
    if (!parsed) return Fail(source + ": not valid JSON (" + EscapeForMessage(parsed.error()) + ")");
    const json& root = *parsed;
    if (!root.is_object()) return Fail(source + ": expected a JSON object at the top level, got " + DescribeJson(root));

    // Each key once, with its type; a wrong type names the key and what it got.
    auto wrong = [&](const std::string& key, const char* want, const json& v) {
        return Fail(source + ": '" + EscapeForMessage(key) + "' must be " + want + ", got " + DescribeJson(v));
    };
    auto get_int = [&](const char* key, int64_t fallback, int64_t lo, int64_t hi) -> Result<int64_t> {
        auto it = root.find(key);
        if (it == root.end() || it->is_null()) return fallback;
        if (!it->is_number_integer()) return wrong(key, "an integer", *it);
        if (it->is_number_unsigned() ? it->get<uint64_t>() > static_cast<uint64_t>(hi) || it->get<uint64_t>() < static_cast<uint64_t>(lo)
                                      : it->get<int64_t>() < lo || it->get<int64_t>() > hi)
            return Fail(source + ": '" + key + "' = " + DescribeJson(*it) + " is out of range (" + std::to_string(lo) + " .. " + std::to_string(hi) + ")");
        return it->get<int64_t>();
    };
    auto get_number = [&](const char* key, double fallback, double lo, double hi) -> Result<double> {
        auto it = root.find(key);
        if (it == root.end() || it->is_null()) return fallback;
        if (!it->is_number()) return wrong(key, "a number", *it);
        const double v = it->get<double>();
        if (!(v >= lo && v <= hi)) return Fail(source + ": '" + key + "' = " + DescribeJson(*it) + " is out of range (" + std::to_string(lo) + " .. " + std::to_string(hi) + ")");
        return v;
    };
    auto get_bool = [&](const char* key, bool fallback) -> Result<bool> {
        auto it = root.find(key);
        if (it == root.end() || it->is_null()) return fallback;
        if (!it->is_boolean()) return wrong(key, "true or false", *it);
        return it->get<bool>();
    };
    auto get_string = [&](const char* key, const char* alias, const std::string& fallback) -> Result<std::string> {
        for (const char* k : {key, alias}) {
            if (!k) continue;
            auto it = root.find(k);
            if (it == root.end() || it->is_null()) continue;
            if (!it->is_string()) return wrong(k, "a string", *it);
            return it->get<std::string>();
        }
        return fallback;
    };

    // Keys lit-gpt (and newer litgpt) configs carry: read, ignored (metadata), or accepted only at
    // the value that means "off", since ssaviz does not run what they turn on.
    static const char* const kRead[] = {"name", "block_size", "vocab_size", "padding_multiple", "padded_vocab_size", "n_layer", "n_head",
                                        "n_embd", "head_size", "rotary_percentage", "parallel_residual", "bias", "lm_head_bias",
                                        "n_query_groups", "shared_attention_norm", "_norm_class", "norm_class_name", "norm_eps",
                                        "_mlp_class", "mlp_class_name", "gelu_approximate", "intermediate_size", "rope_condense_ratio",
                                        "condense_ratio", "rope_base", "n_expert", "n_expert_per_token", "ssa", "family",
                                        "hf_config", "org", "dropout"};
    static const char* const kOff[] = {"norm_qk", "sliding_window_size", "rope_adjustments", "post_attention_norm", "post_mlp_norm",
                                       "scale_embeddings", "attention_logit_softcapping", "final_logit_softcapping",
                                       "attention_scores_scalar", "sliding_window_layer_placing"};
    for (const auto& item : root.items()) {
        // Named, not a structured binding: lambdas may capture bindings only from C++20 (clang-14 refuses).
        const std::string& key = item.key();
        const json& value = item.value();
        if (std::find_if(std::begin(kRead), std::end(kRead), [&](const char* k) { return key == k; }) != std::end(kRead)) continue;
        const bool off_key = std::find_if(std::begin(kOff), std::end(kOff), [&](const char* k) { return key == k; }) != std::end(kOff);
        const bool off = value.is_null() || (value.is_boolean() && !value.get<bool>()) || (value.is_number() && value.get<double>() == 0);
        if (off_key && off) continue;
        if (off_key) return Fail(source + ": '" + EscapeForMessage(key) + "' = " + DescribeJson(value) + " is not supported by ssaviz (only null / false)");
        return Fail(source + ": unknown key '" + EscapeForMessage(key) + "' (not a lit-gpt Config field ssaviz knows)");
    }

    ModelConfig c;
    c.bias = true;
    c.tied_head = false;  // lit-gpt's lm_head is its own Linear
    c.positions = PositionKind::Rope;
    c.parallel_residual = true;
    c.activation = Activation::Gelu;  // gelu_approximate "none"
    std::string name;
    int64_t vocab = 0, multiple = 0, padded = 0, head_size = 0;
    double rotary = 0;
    {
        auto n = get_string("name", nullptr, "");
        if (!n) return Fail(n.error());
        name = *n;
        struct { const char* key; int64_t fallback; int64_t* out; } ints[] = {
            {"vocab_size", 50254, &vocab}, {"padding_multiple", 512, &multiple}, {"padded_vocab_size", 0, &padded}, {"head_size", 0, &head_size}};
        for (auto& x : ints) {
            auto v = get_int(x.key, x.fallback, 1, int64_t{1} << 24);
            if (!v) return Fail(v.error());
            *x.out = *v;
        }
        struct { const char* key; int fallback; int* out; } shape[] = {
            {"block_size", 4096, &c.n_positions}, {"n_layer", 16, &c.n_layer}, {"n_head", 32, &c.n_head}, {"n_embd", 4096, &c.n_embd},
            {"n_query_groups", 0, &c.n_query_groups}, {"intermediate_size", 0, &c.intermediate_size}};
        for (auto& x : shape) {
            auto v = get_int(x.key, x.fallback, 1, int64_t{1} << 24);
            if (!v) return Fail(v.error());
            *x.out = static_cast<int>(*v);
        }
        auto condense = get_int(root.contains("rope_condense_ratio") ? "rope_condense_ratio" : "condense_ratio", 1, 1, 1 << 20);
        if (!condense) return Fail(condense.error());
        c.rope_condense_ratio = static_cast<double>(*condense);
        auto base = get_number("rope_base", 10000, 1, 1e12);
        if (!base) return Fail(base.error());
        c.rope_base = *base;
        auto r = get_number("rotary_percentage", 0.25, 0, 1);
        if (!r) return Fail(r.error());
        rotary = *r;
        auto eps = get_number("norm_eps", 1e-5, 1e-12, 1);
        if (!eps) return Fail(eps.error());
        c.layer_norm_epsilon = *eps;
        struct { const char* key; bool fallback; bool* out; } flags[] = {
            {"parallel_residual", true, &c.parallel_residual}, {"bias", true, &c.bias}, {"lm_head_bias", false, &c.lm_head_bias},
            {"shared_attention_norm", false, &c.shared_attention_norm}};
        for (auto& x : flags) {
            auto v = get_bool(x.key, x.fallback);
            if (!v) return Fail(v.error());
            *x.out = *v;
        }
        auto experts = get_int("n_expert", 0, 0, 1 << 20);
        if (!experts) return Fail(experts.error());
        if (*experts != 0) return Fail(source + ": 'n_expert' = " + std::to_string(*experts) + ": mixture-of-experts models (LLaMAMoE) are not supported");
    }
    auto norm = get_string("_norm_class", "norm_class_name", "LayerNorm");
    if (!norm) return Fail(norm.error());
    if (*norm == "RMSNorm") c.norm = NormKind::RmsNorm;
    else if (*norm != "LayerNorm") return Fail(source + ": '_norm_class' '" + EscapeForMessage(*norm) + "' is not supported (expected LayerNorm or RMSNorm)");
    auto mlp = get_string("_mlp_class", "mlp_class_name", "GptNeoxMLP");
    if (!mlp) return Fail(mlp.error());
    if (*mlp == "LLaMAMLP") c.mlp = MlpKind::SwiGlu;
    else if (*mlp != "GptNeoxMLP") return Fail(source + ": '_mlp_class' '" + EscapeForMessage(*mlp) + "' is not supported (expected GptNeoxMLP or LLaMAMLP)");
    if (c.mlp == MlpKind::SwiGlu && c.intermediate_size == 0)
        return Fail(source + ": '_mlp_class' LLaMAMLP needs 'intermediate_size' (lit-gpt refuses it too)");
    auto approx = get_string("gelu_approximate", nullptr, "none");
    if (!approx) return Fail(approx.error());
    if (*approx == "tanh") c.activation = Activation::GeluNew;
    else if (*approx != "none") return Fail(source + ": 'gelu_approximate' '" + EscapeForMessage(*approx) + "' is not supported (expected none or tanh)");

    if (c.n_embd % c.n_head != 0 && head_size == 0)
        return Fail(source + ": n_embd " + std::to_string(c.n_embd) + " is not divisible by n_head " + std::to_string(c.n_head));
    if (head_size != 0 && head_size * c.n_head != c.n_embd)
        return Fail(source + ": head_size " + std::to_string(head_size) + " x n_head " + std::to_string(c.n_head) + " is not n_embd " +
                    std::to_string(c.n_embd) + " (ssaviz needs n_head x head_size = n_embd)");
    c.rope_n_elem = static_cast<int>(rotary * c.HeadSize());
    // padded_vocab_size: given, else vocab_size rounded up to padding_multiple; the tensors have that many rows.
    c.vocab_size = static_cast<int>(padded != 0 ? padded : (vocab + multiple - 1) / multiple * multiple);
    if (Status s = ReadSsaBlock(root, source, &c); !s) return Fail(s.error());
    auto family = get_string("family", nullptr, "");
    if (!family) return Fail(family.error());
    c.family = family->empty() ? LitFamily(name, c) : *family;
    if (Status s = c.Validate(source); !s) return Fail(s.error());
    return c;
}

Result<ModelConfig> LoadLitConfig(const std::string& path) {
    auto text = ReadFile(path, kMaxJsonFileBytes);
    if (!text) return Fail(text.error());
    return ParseLitConfig(*text, path);
}

Status ModelConfig::Validate(const std::string& source) const {
    auto n = [](int64_t v) { return std::to_string(v); };
    if (n_layer < 1 || n_head < 1 || n_embd < 1 || n_positions < 1 || vocab_size < 1)
        return Fail(source + ": n_layer, n_head, n_embd, the context and the vocabulary must all be at least 1");
    if (n_layer > 1024 || n_head > 1024) return Fail(source + ": n_layer " + n(n_layer) + " / n_head " + n(n_head) + " is implausibly large");
    if (n_embd % n_head != 0) return Fail(source + ": n_embd " + n(n_embd) + " is not divisible by n_head " + n(n_head));
    if (n_query_groups < 0 || n_query_groups > n_head || n_head % KvHeads() != 0)
        return Fail(source + ": n_query_groups " + n(n_query_groups) + " does not divide n_head " + n(n_head));
    if (Rope() && (rope_n_elem < 0 || rope_n_elem > HeadSize() || rope_n_elem % 2 != 0))
        return Fail(source + ": the rotary width " + n(rope_n_elem) + " (rotary_percentage x head size " + n(HeadSize()) +
                    ") must be even and at most the head size");
    if (!Rope() && rope_n_elem != 0) return Fail(source + ": a rotary width with learned positions");
    if (!(rope_base > 0) || !(rope_condense_ratio > 0)) return Fail(source + ": rope_base and rope_condense_ratio must be positive");
    if (intermediate_size < 0 || intermediate_size > (1 << 24)) return Fail(source + ": intermediate_size " + n(intermediate_size) + " is out of range");
    if (shared_attention_norm && !parallel_residual)
        return Fail(source + ": shared_attention_norm needs parallel_residual (lit-gpt refuses the sequential form too)");
    if (!Rope() && (n_query_groups != 0 && n_query_groups != n_head))
        return Fail(source + ": grouped-query attention with learned positions is not a family ssaviz knows");
    return Ok{};
}

const char* ToString(PositionForm form) {
    switch (form) {
        case PositionForm::Sigmoid: return "sigmoid";
        case PositionForm::ExpExp: return "exp_exp";
        case PositionForm::Linear: return "linear";
        case PositionForm::None: break;
    }
    return "null";
}

const char* ToString(TokenForm form) {
    switch (form) {
        case TokenForm::Shared: return "shared";
        case TokenForm::Feature: return "feature";
        case TokenForm::None: break;
    }
    return "null";
}

const char* ToString(Combine combine) { return combine == Combine::Product ? "product" : "sum"; }
const char* ToString(Activation activation) { return activation == Activation::Gelu ? "gelu" : "gelu_new"; }
const char* ToString(NormKind norm) { return norm == NormKind::RmsNorm ? "RMSNorm" : "LayerNorm"; }
const char* ToString(MlpKind mlp) { return mlp == MlpKind::SwiGlu ? "LLaMAMLP" : "GptNeoxMLP"; }

std::string Describe(const TemperatureForm& form) {
    if (!form.Active()) return "none (tau = 1)";
    std::string s;
    if (form.position != PositionForm::None) s += std::string(ToString(form.position)) + " position";
    if (form.token != TokenForm::None) s += std::string(s.empty() ? "" : " + ") + ToString(form.token) + " token";
    if (form.position != PositionForm::None && form.token != TokenForm::None) s += std::string(" (") + ToString(form.combine) + ")";
    return s;
}

namespace {
json SsaBlock(const ModelConfig& c) {
    auto side = [](const TemperatureForm& f) {
        auto term = [](const char* s) { return std::string(s) == "null" ? json(nullptr) : json(s); };
        return json{{"position", term(ToString(f.position))}, {"token", term(ToString(f.token))}, {"combine", ToString(f.combine)}};
    };
    json ssa = json::object();
    if (c.query.Active()) ssa["query"] = side(c.query);
    if (c.value.Active()) ssa["value"] = side(c.value);
    return ssa;
}
}  // namespace

nlohmann::json ConfigToJson(const ModelConfig& c) {
    json j = {{"model_type", "gpt2"},
              {"n_layer", c.n_layer},
              {"n_head", c.n_head},
              {"n_embd", c.n_embd},
              {"n_positions", c.n_positions},
              {"vocab_size", c.vocab_size},
              {"layer_norm_epsilon", c.layer_norm_epsilon},
              {"activation_function", ToString(c.activation)}};
    if (c.IsSsa()) j["ssa"] = SsaBlock(c);
    return j;
}

std::string DescribeArchitecture(const ModelConfig& c) {
    auto n = [](double v) {
        std::string s = std::to_string(v);
        s.erase(s.find_last_not_of('0') + 1);
        if (!s.empty() && s.back() == '.') s.pop_back();
        return s;
    };
    std::string s = c.family + ": " + ToString(c.norm);
    s += c.Rope() ? ", RoPE on " + std::to_string(c.rope_n_elem) + " of " + std::to_string(c.HeadSize()) + " dims (base " + n(c.rope_base) +
                        (c.rope_condense_ratio != 1 ? ", condense ratio " + n(c.rope_condense_ratio) : "") + ")"
                  : ", learned positions";
    const int G = c.KvHeads();
    s += G == c.n_head ? ", " + std::to_string(c.n_head) + " heads"
                       : ", " + std::to_string(c.n_head) + " query heads over " + std::to_string(G) + " kv head" + (G == 1 ? " (MQA)" : "s (GQA)");
    s += c.mlp == MlpKind::SwiGlu ? ", SwiGLU MLP " : std::string(", GELU MLP (") + ToString(c.activation) + ") ";
    s += std::to_string(c.MlpWidth());
    s += c.parallel_residual ? (c.shared_attention_norm ? ", parallel residual (shared norm)" : ", parallel residual") : ", sequential residual";
    s += c.tied_head ? ", tied head" : ", untied head";
    if (c.lm_head_bias) s += " with bias";
    if (!c.bias) s += ", no linear biases";
    return s;
}

nlohmann::json LitConfigToJson(const ModelConfig& c) {
    // Every field lit-gpt's Config takes, so the file stands alone (no defaults left to guess).
    json j = json::object();
    j["name"] = j["family"] = c.family;
    j["block_size"] = c.n_positions;
    j["vocab_size"] = j["padded_vocab_size"] = c.vocab_size;
    for (auto [key, value] : {std::pair<const char*, int>{"n_layer", c.n_layer}, {"n_head", c.n_head}, {"n_embd", c.n_embd},
                              {"n_query_groups", c.KvHeads()}, {"intermediate_size", c.MlpWidth()}})
        j[key] = value;
    j["rotary_percentage"] = c.HeadSize() ? static_cast<double>(c.rope_n_elem) / c.HeadSize() : 0.0;
    j["rope_base"] = c.rope_base;
    j["rope_condense_ratio"] = static_cast<int64_t>(c.rope_condense_ratio);
    for (auto [key, value] : {std::pair<const char*, bool>{"parallel_residual", c.parallel_residual},
                              {"shared_attention_norm", c.shared_attention_norm}, {"bias", c.bias}, {"lm_head_bias", c.lm_head_bias}})
        j[key] = value;
    j["_norm_class"] = ToString(c.norm);
    j["norm_eps"] = c.layer_norm_epsilon;
    j["_mlp_class"] = ToString(c.mlp);
    j["gelu_approximate"] = c.activation == Activation::GeluNew ? "tanh" : "none";
    if (c.IsSsa()) j["ssa"] = SsaBlock(c);
    return j;
}

}  // namespace model
