// A model's shape and its SSA temperature forms, read from config.json (SPEC section 3).
// HF GPT-2 keys, plus the optional "ssa" block; without it the model is vanilla GPT-2.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "model/io/result.h"

namespace model {

enum class PositionForm { None, Sigmoid, ExpExp, Linear };  // pos(i) = 1 + s * ln(i)
enum class TokenForm { None, Shared, Feature };              // tok(z) = tanh(w . z + b)
enum class Combine { Sum, Product };
enum class Activation { GeluNew, Gelu };                     // tanh approximation, exact erf

// How one side's temperature (query or value) is built.
struct TemperatureForm {
    PositionForm position = PositionForm::None;
    TokenForm token = TokenForm::None;
    Combine combine = Combine::Sum;

    bool Active() const { return position != PositionForm::None || token != TokenForm::None; }
};

struct ModelConfig {
    int n_layer = 0;
    int n_head = 0;
    int n_embd = 0;
    int n_positions = 0;
    int vocab_size = 0;
    double layer_norm_epsilon = 1e-5;
    Activation activation = Activation::GeluNew;
    TemperatureForm query;  // tau_q
    TemperatureForm value;  // tau_v

    int HeadSize() const { return n_embd / n_head; }
    bool IsSsa() const { return query.Active() || value.Active(); }
};

// `source` names the file in error messages.
Result<ModelConfig> ParseConfig(std::string_view json_text, const std::string& source);
Result<ModelConfig> LoadConfig(const std::string& path);
nlohmann::json ConfigToJson(const ModelConfig& config);

const char* ToString(PositionForm form);
const char* ToString(TokenForm form);
const char* ToString(Combine combine);
const char* ToString(Activation activation);
std::string Describe(const TemperatureForm& form);  // "sigmoid position + shared token (sum)"

}  // namespace model
