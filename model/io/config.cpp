#include "model/io/config.h"

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

    if (auto it = root.find("ssa"); it != root.end() && !it->is_null()) {
        if (!it->is_object()) return Fail(source + ": 'ssa' must be an object, got " + DescribeJson(*it));
        for (auto& [key, _] : it->items())
            if (key != "query" && key != "value") return Fail(source + ": ssa: unknown key '" + EscapeForMessage(key) + "' (expected query, value)");
        auto q = ReadForm(*it, "query", source);
        if (!q) return Fail(q.error());
        auto v = ReadForm(*it, "value", source);
        if (!v) return Fail(v.error());
        c.query = *q;
        c.value = *v;
    }
    return c;
}

Result<ModelConfig> LoadConfig(const std::string& path) {
    auto text = ReadFile(path, kMaxJsonFileBytes);  // a regular file of at most 64 MB
    if (!text) return Fail(text.error());
    return ParseConfig(*text, path);
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

std::string Describe(const TemperatureForm& form) {
    if (!form.Active()) return "none (tau = 1)";
    std::string s;
    if (form.position != PositionForm::None) s += std::string(ToString(form.position)) + " position";
    if (form.token != TokenForm::None) s += std::string(s.empty() ? "" : " + ") + ToString(form.token) + " token";
    if (form.position != PositionForm::None && form.token != TokenForm::None) s += std::string(" (") + ToString(form.combine) + ")";
    return s;
}

nlohmann::json ConfigToJson(const ModelConfig& c) {
    json j = {{"model_type", "gpt2"},
              {"n_layer", c.n_layer},
              {"n_head", c.n_head},
              {"n_embd", c.n_embd},
              {"n_positions", c.n_positions},
              {"vocab_size", c.vocab_size},
              {"layer_norm_epsilon", c.layer_norm_epsilon},
              {"activation_function", ToString(c.activation)}};
    auto side = [](const TemperatureForm& f) {
        auto term = [](const char* s) { return std::string(s) == "null" ? json(nullptr) : json(s); };
        return json{{"position", term(ToString(f.position))}, {"token", term(ToString(f.token))}, {"combine", ToString(f.combine)}};
    };
    if (c.IsSsa()) {
        json ssa = json::object();
        if (c.query.Active()) ssa["query"] = side(c.query);
        if (c.value.Active()) ssa["value"] = side(c.value);
        j["ssa"] = ssa;
    }
    return j;
}

}  // namespace model
