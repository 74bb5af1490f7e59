// A model's shape and its SSA temperature forms: HF's config.json (GPT-2, SPEC section 3, or the
// RoPE families of section 7 by model_type: gpt_neox, llama, mistral, qwen2, qwen3) or a lit-gpt
// lit_config.json (section 7), plus the optional "ssa" block; without it the model is vanilla.
// One decoder covers every family, so a family is data here: norm, positions, attention grouping,
// MLP, residual and head, with GPT-2's choices as the defaults. Each family's defaults and
// switches, and its model_type, are rows of model/arch's family table.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/arch/arch.h"
#include "model/io/result.h"

namespace model {

enum class PositionForm { None, Sigmoid, ExpExp, Linear };  // pos(i) = 1 + s * ln(i)
enum class TokenForm { None, Shared, Feature };              // tok(z) = tanh(w . z + b)
enum class Combine { Sum, Product };
// Activation, NormKind, MlpKind and PositionKind: model/arch/arch.h.

// How one side's temperature (query or value) is built.
struct TemperatureForm {
    PositionForm position = PositionForm::None;
    TokenForm token = TokenForm::None;
    Combine combine = Combine::Sum;

    bool Active() const { return position != PositionForm::None || token != TokenForm::None; }
};

// The paper's recipe, init-random's and train's default: tau_q from position and token, tau_v
// from the token.
constexpr TemperatureForm kPaperQueryForm{PositionForm::Sigmoid, TokenForm::Shared, Combine::Sum};
constexpr TemperatureForm kPaperValueForm{PositionForm::None, TokenForm::Feature, Combine::Sum};

struct ModelConfig {
    int n_layer = 0;
    int n_head = 0;
    int n_embd = 0;
    int n_positions = 0;
    int vocab_size = 0;     // rows of the embedding and the head: lit-gpt's padded_vocab_size
    double layer_norm_epsilon = 1e-5;  // the norm's eps, LayerNorm or RMSNorm
    Activation activation = Activation::GeluNew;
    TemperatureForm query;  // tau_q
    TemperatureForm value;  // tau_v, one per kv head

    // The family (SPEC section 7); the defaults are GPT-2.
    std::string family = "gpt2";  // gpt2, pythia, llama, mistral, llama3, stablelm (lit-gpt), or an HF folder's model_type (gpt_neox, qwen2, ...; llama3 for Llama 3)
    NormKind norm = NormKind::LayerNorm;
    int n_query_groups = 0;   // kv heads; 0: n_head (query head h reads kv head h / (n_head / groups))
    PositionKind positions = PositionKind::Learned;
    int rope_n_elem = 0;      // RoPE: the first q and k dims rotated (even; int(rotary_percentage * head size))
    double rope_base = 10000;
    double rope_condense_ratio = 1;  // positions are divided by it
    MlpKind mlp = MlpKind::Gelu;
    int intermediate_size = 0;       // 0: 4 n_embd
    bool parallel_residual = false;  // x + attn(norm_1 x) + mlp(norm_2 x)
    bool shared_attention_norm = false;  // parallel, with mlp(norm_1 x): no norm_2
    bool bias = true;          // the attention and MLP linear layers have biases (lit-gpt's one switch)
    bool norm_bias = true;     // a LayerNorm's bias (nanoGPT's bias = false drops it with the linear layers')
    // HF families set their biases apart; with `bias` false these turn some back on.
    bool qkv_bias = false;     // the q, k, v projections (Qwen 2; Llama's attention_bias)
    bool out_bias = false;     // the attention's output projection (Llama's attention_bias, GPT-NeoX's)
    bool mlp_bias = false;     // the MLP's layers (Llama's mlp_bias; GPT-NeoX always)
    bool lm_head_bias = false;
    bool tied_head = true;     // lm_head is wte

    // HF-only features (no lit-gpt Config field ssaviz writes holds them).
    std::string hf_model_type;  // config.json's model_type for an HF folder of a RoPE family; "" otherwise
    int head_dim = 0;           // 0: n_embd / n_head; Qwen 3 gives its own (q_proj [H head_dim, E], o_proj [E, H head_dim])
    bool qk_norm = false;       // Qwen 3: RMSNorm (weight [head_dim], eps as the norms') on each head's q and k, before RoPE
    // Llama 3.1's rope_scaling "llama3": each inverse frequency f of wavelength w = 2 pi / f is kept
    // where w < original / high_freq_factor, divided by factor where w > original / low_freq_factor,
    // and between them (1 - s) f / factor + s f, s = (original / w - low) / (high - low).
    // factor 0: none.
    struct RopeLlama3 {
        double factor = 0, low_freq_factor = 1, high_freq_factor = 4;
        int original_max_positions = 8192;
    } rope_llama3;
    // Mistral's sliding window (HF's mask): a query at position i sees keys j with i - j < window;
    // 0: every earlier key. Qwen 2 / 3 window only layers from max_window_layers on.
    int sliding_window = 0;
    int window_first_layer = 0;

    int HeadSize() const { return head_dim > 0 ? head_dim : n_embd / n_head; }
    bool QkvBias() const { return bias || qkv_bias; }
    bool OutBias() const { return bias || out_bias; }
    bool MlpBias() const { return bias || mlp_bias; }
    int AttentionWindow(int layer) const { return layer >= window_first_layer ? sliding_window : 0; }  // 0: none
    bool HfOnly() const;  // uses a feature lit-gpt's Config as ssaviz writes it cannot hold
    int KvHeads() const { return n_query_groups > 0 ? n_query_groups : n_head; }
    int QkvWidth() const { return (n_head + 2 * KvHeads()) * HeadSize(); }
    int MlpWidth() const { return intermediate_size > 0 ? intermediate_size : 4 * n_embd; }
    bool Rope() const { return positions == PositionKind::Rope; }
    bool IsSsa() const { return query.Active() || value.Active(); }
    // Which tensor roles (model/arch) the model has, and which of them have a bias: what a loader
    // must find in a file and a saver writes.
    bool Has(Role role) const;
    bool HasBias(Role role) const;
    // The shape of a role's weight as the model holds it (matrices [in, out]; the SSA parameters
    // one per head), whether or not the config has the role; its bias is [last dim].
    std::vector<int64_t> Shape(Role role) const;
    // The parameters from the shape alone, before any tensor exists (init-random's memory check):
    // every role the config has, biases included, a tied head once.
    int64_t ParameterCount() const;
    // Checks what the fields must satisfy together (heads dividing, an even rotary width, ...);
    // the error names the fields and numbers.
    Status Validate(const std::string& source) const;
};

// `source` names the file in error messages.
// config.json: HF GPT-2 (no model_type, or "gpt2"), or a RoPE family by model_type (gpt_neox,
// llama, mistral, qwen2, qwen3) in HF's key names, HF's defaults where a key is missing; or a
// nanoGPT GPTConfig (block_size, vocab_size, n_layer, n_head, n_embd, dropout, bias: the official
// SSA code's configs/gpt_2_124M_*.json), GPT-2 with exact GELU, its `bias` switching every bias.
Result<ModelConfig> ParseConfig(std::string_view json_text, const std::string& source);
Result<ModelConfig> LoadConfig(const std::string& path);
// lit-gpt's Config as a lit_config.json stores it (the official SSA code's configs/*.json are
// partial): missing fields take lit-gpt's defaults (block_size 4096, vocab_size 50254 padded to a
// multiple of 512, rotary_percentage 0.25, parallel residual, biases, LayerNorm, GptNeoxMLP, ...).
Result<ModelConfig> ParseLitConfig(std::string_view json_text, const std::string& source);
Result<ModelConfig> LoadLitConfig(const std::string& path);
nlohmann::json ConfigToJson(const ModelConfig& config);     // HF GPT-2 config.json (learned positions only)
nlohmann::json LitConfigToJson(const ModelConfig& config);  // a complete lit_config.json (every field)
// An HF config.json of a RoPE family (its model_type, HF's keys) that ParseConfig reads back as
// `config`; refused, naming what would change, where HF's keys for that model_type cannot say it.
Result<nlohmann::json> HfConfigToJson(const ModelConfig& config);

// The first way model `a` and `b` compute differently, "norm rmsnorm against layernorm", leaving out
// what a fine-tune may change beside its base (the temperatures, the context, a padded vocabulary,
// the positions' scaling and windows) and what two readings of one model may differ in (GELU's tanh
// or erf form, a tied or stored head); empty where they are one architecture. Without `shape`, the
// sizes (layers, heads, widths) are left out too: how they compute, whatever their size.
std::string ArchitectureDifference(const ModelConfig& a, const ModelConfig& b, bool shape = true);
// Of what ArchitectureDifference leaves out, what changes how a text runs and is no weight (the
// positions' scaling, the sliding windows, the activation's form): "sliding windows 4,4 against
// 8,8"; empty where none differs. A fine-tune's drift holds them, and no weight taken back undoes them.
std::string SettingsDifference(const ModelConfig& a, const ModelConfig& b);
// The config file `format` keeps its shape in (ConfigKind), as that format's writer above makes it.
Result<nlohmann::json> ConfigJsonFor(Format format, const ModelConfig& config);

// The family row of a config: by its HF model_type, else by its family name; null for a family
// the table does not have.
const Family* FamilyOf(const ModelConfig& config);
// The format a config's own files name their tensors in: its HF model_type's, lit-gpt's for
// another RoPE family, else GPT-2's.
Format FormatOf(const ModelConfig& config);
// init-random's model of a family: its preset over this shape. Unset: the family's choice. The
// error names the field.
struct PresetShape {
    int n_layer = 4, n_head = 4, n_embd = 128, n_positions = 1024;
    std::optional<int> kv_heads, intermediate_size;
    std::optional<double> rotary, rope_base;
};
Result<ModelConfig> FamilyPreset(const Family& family, const PresetShape& shape);

const char* ToString(PositionForm form);
const char* ToString(TokenForm form);
const char* ToString(Combine combine);
const char* ToString(Activation activation);
const char* ToString(NormKind norm);  // "LayerNorm", "RMSNorm"
const char* ToString(MlpKind mlp);    // "GptNeoxMLP", "LLaMAMLP" (lit-gpt's names)
// The MLP's activation as a reader names it: "silu (SwiGLU)" for the gated MLP, whose activation
// field is unused; else ToString(config.activation).
const char* ActivationName(const ModelConfig& config);
std::string Describe(const TemperatureForm& form);  // "sigmoid position + shared token (sum)"
// The family in a line: "llama: RMSNorm, RoPE on 64 of 64 dims (base 10000), 32 query heads over 4 kv
// heads (GQA), SwiGLU MLP 5632, sequential residual, untied head"
std::string DescribeArchitecture(const ModelConfig& config);

}  // namespace model
