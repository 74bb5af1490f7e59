// What ssaviz knows of model families and checkpoint formats, as tables that every reader and
// writer asks (after llama.cpp's llama-arch.cpp, whose LLM_TENSOR_NAMES serve its loader and its
// writer alike): the formats (each tensor role's name, orientation, and how a fused tensor splits)
// and the families (model_type, defaults, feature switches). Plain data without dependencies:
// model/io (the format detector, config.json and lit_config.json, InferConfig), model/nn (the
// loader and the savers), model/train, and the app (init-random's flags, the checkpoint dialog).
//
// Adding a family is a row of kFamilies (arch.cpp); one whose tensors are named in a new way is
// also a row of kFormats. The forward pass changes only for an operation it does not have yet.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace model {

// How a family computes; ModelConfig (model/io/config.h) holds one of each.
enum class Activation { GeluNew, Gelu };                     // tanh approximation, exact erf
enum class NormKind { LayerNorm, RmsNorm };                  // RMSNorm: w * x / sqrt(mean(x^2) + eps)
enum class MlpKind { Gelu, SwiGlu };                         // proj(gelu(fc x)) | proj(silu(fc_1 x) * fc_2 x)
enum class PositionKind { Learned, Rope };                   // wpe added to the embedding | RoPE on q and k

//-------------------------------------------------------------------------------------------------
// Tensor roles: the model as ssaviz holds it
//-------------------------------------------------------------------------------------------------

// One slot of SsaGpt / LayerWeights (model/nn/model_weights.h), in the order the loader reads
// them, the savers write them and training lists them: the roles before the layers, each layer's
// (AttnNorm .. VTok), the roles after. E = n_embd, H query heads, G kv heads, D head size, I the
// MLP's width, V vocabulary, P positions.
enum class Role {
    TokenEmbedding,     // [V, E]
    PositionEmbedding,  // [P, E], learned positions only
    AttnNorm,           // [E] (and a bias with LayerNorm)
    AttnQkv,            // [E, (H + 2G) D]: all queries, then all keys, then all values
    QNorm, KNorm,       // [D]: each head's q and k normed (Qwen 3)
    AttnOut,            // [H D, E]
    MlpNorm,            // [E]; none with shared_attention_norm
    MlpUp,              // [E, I], or [E, 2I] for SwiGLU: gate, then up
    MlpDown,            // [I, E]
    QPos, QTok, VPos, VTok,  // SSA temperatures (SPEC section 3): [] or [N]; [N, D or E] and [N]
    OutputNorm,         // [E]
    Output,             // [V, E], and [V] with lm_head_bias; the token embedding when tied
};
constexpr Role kFirstLayerRole = Role::AttnNorm;
constexpr Role kLastLayerRole = Role::VTok;

// How a role is stored. A Module is NAME.weight (and NAME.bias); a Parameter is NAME alone.
enum class RoleKind {
    Embedding,  // [rows, E], the same in every format
    Matrix,     // held [in, out]; stored in the format's orientation
    Vector,     // a norm's weight (and bias)
    Parameter,  // an SSA position parameter
    Temperature,  // an SSA token term: weight [N, D or E] and bias [N]
};

struct RoleInfo {
    Role role;
    const char* what;  // for messages: "token embedding", "attention output"
    RoleKind kind;
    bool decays;       // training: under weight decay (matrices and embeddings)
    bool beside_root;  // stored beside the format's root, not under it (the output head: lm_head, embed_out)
};
const RoleInfo& GetRole(Role role);
bool IsLayerRole(Role role);

//-------------------------------------------------------------------------------------------------
// Checkpoint formats: the name of each role, its orientation, how a fused tensor splits
//-------------------------------------------------------------------------------------------------

enum class Format {
    Gpt2,     // HF GPT-2: Conv1D [in, out] matrices under "transformer."
    NanoGpt,  // nanoGPT (and the official GPT-2 port): GPT-2's names, torch.nn.Linear [out, in]
    Lit,      // lit-gpt (the official SSA code's checkpoints)
    HfNeox,   // HF model_type gpt_neox (Pythia)
    HfLlama,  // HF model_type llama, mistral, qwen2, qwen3
};

// Which slice of its role a stored tensor holds, along the role's output dimension.
enum class Part {
    Whole,    // all of it
    Grouped,  // all of it, ordered per kv group: [H / G queries | key | value] of D each (lit-gpt's
              // attn.attn, GPT-NeoX's query_key_value with G = H)
    Query,    // the H query heads of AttnQkv: [H D]
    Key,      // the G key heads: [G D]
    Value,    // the G value heads: [G D]
    Gate,     // SwiGLU's gate (fc_1, under silu): the first I of MlpUp
    Up,       // SwiGLU's up (fc_2): the second I
};

// Which models a name applies to (lit-gpt names the MLP by its kind).
enum class ForMlp { Any, Gelu, SwiGlu };

struct TensorName {
    Role role;
    const char* name;  // relative to the format's root; "{l}" is the layer: "h.{l}.attn.c_attn"
    Part part = Part::Whole;
    ForMlp mlp = ForMlp::Any;
};

// The words a format's configs use, for messages that name the key a number came from.
struct ConfigWords {
    const char* config;     // "config.json's", "the config's"
    const char* layers;     // "n_layer", "num_hidden_layers"
    const char* width;      // "n_embd", "hidden_size"
    const char* heads;      // "n_head", "num_attention_heads"
    const char* kv_heads;   // "n_query_groups", "num_key_value_heads"
    const char* head_size;  // "head size", "head_dim"
    const char* untied;     // why the output head must be in the file: "tie_word_embeddings is false"
};

// How a format's config file is written (model/io/config.h: ConfigToJson, LitConfigToJson,
// HfConfigToJson).
enum class ConfigKind { Gpt2Json, LitJson, HfJson };

struct FormatInfo {
    Format format;
    const char* name;        // "lit-gpt", "HF GPT-NeoX": for messages
    const char* layout;      // SsaGpt::layout: "conv1d", "linear", "lit-gpt", "hf"
    bool linear;             // matrices are torch.nn.Linear's [out, in] (transposed on load), else HF Conv1D's [in, out]
    bool kv_groups;          // can hold fewer kv heads than query heads
    bool zero_biases;        // a file without any bias is a bias-free model: zeros (nanoGPT's bias=False)
    bool official_beta;      // tau_q's one position parameter a layer is written as the official code's attn.beta
    const char* root;        // what its names sit under in a full state dict ("transformer."); the head sits beside it
    bool saved_under_root;   // ssaviz writes its names under `root` (HF GPT-2's model.safetensors has none)
    const char* attention;   // the layer's attention module, where the SSA parameters sit: "h.{l}.attn"
    ConfigKind config;
    const char* config_file; // "config.json", "lit_config.json"
    ConfigWords words;
    std::vector<TensorName> names;
};
const FormatInfo& GetFormat(Format format);
const std::vector<FormatInfo>& Formats();

// The stored tensors that hold `role` in `format`, for a model whose MLP is `mlp`: one, or the
// parts of a split role in the order they join; none where the format has no such tensor.
std::vector<TensorName> NamesOf(Format format, Role role, MlpKind mlp);
// A name pattern for layer `layer`: "h.{l}.ln_1" -> "h.3.ln_1".
std::string LayerName(const char* pattern, int layer);
// The SSA parameters' names under the attention module (SPEC section 3), and the official code's
// name for tau_q's position parameter.
const char* SsaName(Role role);  // "ssa_q_pos", "ssa_q_tok", "ssa_v_pos", "ssa_v_tok"
constexpr const char* kOfficialBeta = "beta";
// Suffixes of buffers that checkpoints carry beside their parameters (causal masks, RoPE
// frequencies): never reported as unused.
const std::vector<const char*>& BufferSuffixes();

//-------------------------------------------------------------------------------------------------
// Families: model_type, defaults, feature switches
//-------------------------------------------------------------------------------------------------

// Where an HF config of the family has linear biases.
enum class HfBiases {
    Neox,       // the MLP always; the attention (q, k, v and o) as attention_bias says (default true)
    Keys,       // the attention as attention_bias says, the MLP as mlp_bias (default false)
    Attention,  // the attention as attention_bias says; the MLP never
    Qkv,        // q, k and v always; nothing else
    None,
};

struct Family {
    const char* name;             // ModelConfig::family, init-random's --family, lit_config.json's "family"
    const char* model_type;       // HF's model_type ("" where ssaviz reads no HF form); several families may share one
    const char* hf_architecture;  // config.json's "architectures" entry
    Format hf_format;             // the tensor names of its HF folders
    const char* lit_names;        // lowercase pieces of a lit-gpt config name that say the family ("llama-3|llama3"); "" none
    const char* about;            // a line for --family's help
    bool preset;                  // init-random writes it

    // The architecture: init-random's preset, and HF's defaults where config.json says nothing.
    PositionKind positions;
    NormKind norm;
    MlpKind mlp;
    Activation activation;
    bool parallel_residual;
    bool bias;                    // every linear layer has one (GPT-2, Pythia)
    double rotary;                // the fraction of each head RoPE turns
    double rope_base;             // a model_type several families share is the one with the largest base its config reaches
    int kv_divisor;               // init-random: n_head / this kv heads where it divides (1: none grouped)

    // HF config.json: defaults and feature switches (model/io/config.cpp reads them).
    int hf_max_positions;         // max_position_embeddings
    int hf_head_dim;              // head_dim; 0: hidden_size / num_attention_heads
    const char* hf_rotary_key;    // "rotary_pct" (GPT-NeoX) or "partial_rotary_factor"
    const char* hf_old_base_key;  // the RoPE base's name before rope_theta ("rotary_emb_base"), or ""
    HfBiases hf_biases;
    bool qk_norm;                 // q and k RMSNorm-ed per head (Qwen 3)
    bool window_opt_in;           // sliding window only with use_sliding_window, from max_window_layers on (Qwen)
    bool rope_llama3;             // HF's rope_scaling "llama3" says this family
};
const std::vector<Family>& Families();
const Family* FindFamily(std::string_view name);
// The families of an HF model_type, in table order (llama: llama, llama3).
std::vector<const Family*> FamiliesOfModelType(std::string_view model_type);
// "gpt2, gpt_neox, llama, mistral, qwen2, qwen3": every HF model_type read, once each, for messages.
std::string HfModelTypes();
// init-random's families joined by `separator`: "gpt2|pythia|llama|mistral|llama3".
std::string PresetFamilies(const char* separator);

//-------------------------------------------------------------------------------------------------
// Folder layouts a model is written in
//-------------------------------------------------------------------------------------------------

enum class Layout {
    Own,  // GPT-2 as HF GPT-2, the RoPE families in lit-gpt's names; model.safetensors
    Lit,  // lit-gpt's names in lit_model.pth (torch.save), as lit-gpt saves a checkpoint
    Hf,   // the family's HF folder: config.json with its model_type, HF's names in model.safetensors
};
struct LayoutInfo {
    Layout layout;
    const char* name;  // init-random's --layout
    const char* about;
};
const std::vector<LayoutInfo>& Layouts();
const LayoutInfo* FindLayout(std::string_view name);
std::string LayoutNames(const char* separator);  // "own|lit|hf"

}  // namespace model
