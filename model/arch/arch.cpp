// The tables of arch.h. Index:
//   [SECTION] Roles
//   [SECTION] Formats (kFormats): each role's stored names
//   [SECTION] Families (kFamilies)
//   [SECTION] Layouts
#include "model/arch/arch.h"

#include <cassert>

namespace model {

//-------------------------------------------------------------------------------------------------
// [SECTION] Roles
//-------------------------------------------------------------------------------------------------

namespace {

const RoleInfo kRoles[] = {
    {Role::TokenEmbedding, "token embedding", RoleKind::Embedding, true, false},
    {Role::PositionEmbedding, "position embedding", RoleKind::Embedding, true, false},
    {Role::AttnNorm, "attention norm", RoleKind::Vector, false, false},
    {Role::AttnQkv, "query, key and value projection", RoleKind::Matrix, true, false},
    {Role::QNorm, "query heads' norm", RoleKind::Vector, false, false},
    {Role::KNorm, "key heads' norm", RoleKind::Vector, false, false},
    {Role::AttnOut, "attention output", RoleKind::Matrix, true, false},
    {Role::MlpNorm, "MLP norm", RoleKind::Vector, false, false},
    {Role::MlpUp, "MLP input", RoleKind::Matrix, true, false},
    {Role::MlpDown, "MLP output", RoleKind::Matrix, true, false},
    {Role::QPos, "tau_q position term", RoleKind::Parameter, false, false},
    {Role::QTok, "tau_q token term", RoleKind::Temperature, false, false},
    {Role::VPos, "tau_v position term", RoleKind::Parameter, false, false},
    {Role::VTok, "tau_v token term", RoleKind::Temperature, false, false},
    {Role::OutputNorm, "final norm", RoleKind::Vector, false, false},
    {Role::Output, "output head", RoleKind::Embedding, false, true},  // tied to the embedding in training
};

}  // namespace

const RoleInfo& GetRole(Role role) {
    const RoleInfo& info = kRoles[static_cast<int>(role)];
    assert(info.role == role);
    return info;
}

bool IsLayerRole(Role role) { return role >= kFirstLayerRole && role <= kLastLayerRole; }

const char* SsaName(Role role) {
    switch (role) {
        case Role::QPos: return "ssa_q_pos";
        case Role::QTok: return "ssa_q_tok";
        case Role::VPos: return "ssa_v_pos";
        case Role::VTok: return "ssa_v_tok";
        default: break;
    }
    assert(false && "not an SSA role");
    return "";
}

const std::vector<const char*>& BufferSuffixes() {
    // GPT-2's and GPT-NeoX's causal masks, HF's RoPE frequencies.
    static const std::vector<const char*> suffixes = {".attn.bias", ".attn.masked_bias", ".attention.bias", ".attention.masked_bias",
                                                      ".rotary_emb.inv_freq"};
    return suffixes;
}

//-------------------------------------------------------------------------------------------------
// [SECTION] Formats (kFormats): each role's stored names
//-------------------------------------------------------------------------------------------------
// A role missing from a format's list is one the format cannot hold. The SSA parameters are not
// listed: they sit under each format's attention module by SsaName. HF's and lit-gpt's RoPE both
// turn rotate-half pairs, so no format permutes q and k.

namespace {

const ConfigWords kGpt2Words = {"config.json's", "n_layer", "n_embd", "n_head", "n_head", "head size", "the head is untied"};
const ConfigWords kHfWords = {"config.json's", "num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads",
                               "head_dim", "tie_word_embeddings is false"};
// Each list a line per part of the model: embeddings; attention; MLP; the final norm and head.
const std::vector<TensorName> kGpt2Names = {
    {Role::TokenEmbedding, "wte"}, {Role::PositionEmbedding, "wpe"},
    {Role::AttnNorm, "h.{l}.ln_1"}, {Role::AttnQkv, "h.{l}.attn.c_attn"}, {Role::AttnOut, "h.{l}.attn.c_proj"},
    {Role::MlpNorm, "h.{l}.ln_2"}, {Role::MlpUp, "h.{l}.mlp.c_fc"}, {Role::MlpDown, "h.{l}.mlp.c_proj"},
    {Role::OutputNorm, "ln_f"}, {Role::Output, "lm_head"},
};

const std::vector<FormatInfo> kFormats = {
    // format, name, layout, linear, kv_groups, zero_biases, official_beta, root, saved_under_root, attention, config, config_file,
    //   words, names (FormatInfo's fields in order)
    {Format::Gpt2, "GPT-2", "conv1d", false, false, true, false, "transformer.", false, "h.{l}.attn", ConfigKind::Gpt2Json, "config.json",
     kGpt2Words, kGpt2Names},
    {Format::NanoGpt, "nanoGPT", "linear", true, false, true, false, "transformer.", false, "h.{l}.attn", ConfigKind::Gpt2Json, "config.json",
     kGpt2Words, kGpt2Names},
    // lit-gpt's model.py: attn.attn's rows per kv group [queries | key | value]; the MLP by its kind.
    {Format::Lit, "lit-gpt", "lit-gpt", true, true, false, true, "transformer.", true, "h.{l}.attn", ConfigKind::LitJson, "lit_config.json",
     {"the config's", "n_layer", "n_embd", "n_head", "n_query_groups", "head size", "lit-gpt's head is a Linear of its own"},
     {{Role::TokenEmbedding, "wte"},
      {Role::AttnNorm, "h.{l}.norm_1"}, {Role::AttnQkv, "h.{l}.attn.attn", Part::Grouped}, {Role::AttnOut, "h.{l}.attn.proj"},
      {Role::MlpNorm, "h.{l}.norm_2"}, {Role::MlpUp, "h.{l}.mlp.fc", Part::Whole, ForMlp::Gelu},
      {Role::MlpUp, "h.{l}.mlp.fc_1", Part::Gate, ForMlp::SwiGlu}, {Role::MlpUp, "h.{l}.mlp.fc_2", Part::Up, ForMlp::SwiGlu},
      {Role::MlpDown, "h.{l}.mlp.proj"},
      {Role::OutputNorm, "ln_f"}, {Role::Output, "lm_head"}}},
    // transformers' modeling_gpt_neox: query_key_value's rows per head [q | k | v].
    {Format::HfNeox, "GPT-NeoX", "hf", true, false, false, true, "gpt_neox.", true, "layers.{l}.attention", ConfigKind::HfJson, "config.json",
     kHfWords,
     {{Role::TokenEmbedding, "embed_in"},
      {Role::AttnNorm, "layers.{l}.input_layernorm"}, {Role::AttnQkv, "layers.{l}.attention.query_key_value", Part::Grouped},
      {Role::AttnOut, "layers.{l}.attention.dense"},
      {Role::MlpNorm, "layers.{l}.post_attention_layernorm"}, {Role::MlpUp, "layers.{l}.mlp.dense_h_to_4h"},
      {Role::MlpDown, "layers.{l}.mlp.dense_4h_to_h"},
      {Role::OutputNorm, "final_layer_norm"}, {Role::Output, "embed_out"}}},
    // transformers' modeling_llama, _mistral, _qwen2, _qwen3: q, k and v apart, the SwiGLU's two halves apart.
    {Format::HfLlama, "Llama", "hf", true, true, false, true, "model.", true, "layers.{l}.self_attn", ConfigKind::HfJson, "config.json",
     kHfWords,
     {{Role::TokenEmbedding, "embed_tokens"},
      {Role::AttnNorm, "layers.{l}.input_layernorm"}, {Role::AttnQkv, "layers.{l}.self_attn.q_proj", Part::Query},
      {Role::AttnQkv, "layers.{l}.self_attn.k_proj", Part::Key}, {Role::AttnQkv, "layers.{l}.self_attn.v_proj", Part::Value},
      {Role::QNorm, "layers.{l}.self_attn.q_norm"}, {Role::KNorm, "layers.{l}.self_attn.k_norm"}, {Role::AttnOut, "layers.{l}.self_attn.o_proj"},
      {Role::MlpNorm, "layers.{l}.post_attention_layernorm"}, {Role::MlpUp, "layers.{l}.mlp.gate_proj", Part::Gate},
      {Role::MlpUp, "layers.{l}.mlp.up_proj", Part::Up}, {Role::MlpDown, "layers.{l}.mlp.down_proj"},
      {Role::OutputNorm, "norm"}, {Role::Output, "lm_head"}}},
};

}  // namespace

const FormatInfo& GetFormat(Format format) {
    const FormatInfo& info = kFormats[static_cast<int>(format)];
    assert(info.format == format);
    return info;
}

const std::vector<FormatInfo>& Formats() { return kFormats; }

std::vector<TensorName> NamesOf(Format format, Role role, MlpKind mlp) {
    std::vector<TensorName> out;
    for (const TensorName& n : GetFormat(format).names)
        if (n.role == role && (n.mlp == ForMlp::Any || (n.mlp == ForMlp::SwiGlu) == (mlp == MlpKind::SwiGlu))) out.push_back(n);
    return out;
}

std::string LayerName(const char* pattern, int layer) {
    std::string s = pattern;
    if (const size_t at = s.find("{l}"); at != std::string::npos) s.replace(at, 3, std::to_string(layer));
    return s;
}

//-------------------------------------------------------------------------------------------------
// [SECTION] Families (kFamilies)
//-------------------------------------------------------------------------------------------------
// GPT-2's config.json has keys of its own (ParseConfig): its HF columns are unused. An HF folder
// names its family by model_type, or where families share one (llama), by the family's row.

namespace {

const std::vector<Family> kFamilies = {
    // name, model_type, hf_architecture, hf_format, lit_names, about,
    //   preset, positions, norm, mlp, activation, parallel_residual, bias, rotary, rope_base, kv_divisor,
    //   hf_max_positions, hf_head_dim, hf_rotary_key, hf_old_base_key, hf_biases, qk_norm, window_opt_in, rope_llama3
    {"gpt2", "gpt2", "GPT2LMHeadModel", Format::Gpt2, "", "GPT-2: LayerNorm, learned positions, GELU (tanh) MLP, tied head",
     true, PositionKind::Learned, NormKind::LayerNorm, MlpKind::Gelu, Activation::GeluNew, false, true, 0.0, 10000, 1,
     1024, 0, "", "", HfBiases::None, false, false, false},
    {"pythia", "gpt_neox", "GPTNeoXForCausalLM", Format::HfNeox, "pythia",
     "GPT-NeoX: LayerNorm, parallel residual, a quarter of each head rotated, biases",
     true, PositionKind::Rope, NormKind::LayerNorm, MlpKind::Gelu, Activation::Gelu, true, true, 0.25, 10000, 1,
     2048, 0, "rotary_pct", "rotary_emb_base", HfBiases::Neox, false, false, false},
    {"llama", "llama", "LlamaForCausalLM", Format::HfLlama, "llama", "RMSNorm, SwiGLU, RoPE on the whole head, grouped kv heads",
     true, PositionKind::Rope, NormKind::RmsNorm, MlpKind::SwiGlu, Activation::Gelu, false, false, 1.0, 10000, 4,
     2048, 0, "partial_rotary_factor", "", HfBiases::Keys, false, false, false},
    {"mistral", "mistral", "MistralForCausalLM", Format::HfLlama, "mistral", "as llama (HF folders: a sliding window on every layer)",
     true, PositionKind::Rope, NormKind::RmsNorm, MlpKind::SwiGlu, Activation::Gelu, false, false, 1.0, 10000, 4,
     4096 * 32, 0, "partial_rotary_factor", "", HfBiases::None, false, false, false},
    {"llama3", "llama", "LlamaForCausalLM", Format::HfLlama, "llama-3|llama3", "as llama, RoPE base 500000 (HF: llama3 RoPE scaling)",
     true, PositionKind::Rope, NormKind::RmsNorm, MlpKind::SwiGlu, Activation::Gelu, false, false, 1.0, 500000, 4,
     2048, 0, "partial_rotary_factor", "", HfBiases::Keys, false, false, true},
    {"qwen2", "qwen2", "Qwen2ForCausalLM", Format::HfLlama, "", "as llama with q, k and v biases (HF layout only)",
     true, PositionKind::Rope, NormKind::RmsNorm, MlpKind::SwiGlu, Activation::Gelu, false, false, 1.0, 10000, 4,
     32768, 0, "partial_rotary_factor", "", HfBiases::Qkv, false, true, false},
    {"qwen3", "qwen3", "Qwen3ForCausalLM", Format::HfLlama, "", "as llama with each head's q and k RMSNorm-ed (HF layout only)",
     true, PositionKind::Rope, NormKind::RmsNorm, MlpKind::SwiGlu, Activation::Gelu, false, false, 1.0, 10000, 4,
     32768, 128, "partial_rotary_factor", "", HfBiases::Attention, true, true, false},
    // lit-gpt's StableLM configs: Pythia's architecture under another name, read from lit_config.json only.
    {"stablelm", "", "", Format::Lit, "stablelm", "GPT-NeoX's architecture (lit-gpt configs only)",
     false, PositionKind::Rope, NormKind::LayerNorm, MlpKind::Gelu, Activation::Gelu, true, true, 0.25, 10000, 1,
     0, 0, "", "", HfBiases::Neox, false, false, false},
};

// The row of a table whose `name` is `name`, or null.
template <typename Row>
const Row* ByName(const std::vector<Row>& table, std::string_view name) {
    for (const Row& row : table)
        if (name == row.name) return &row;
    return nullptr;
}

// The names of a table's rows that `keep` keeps, joined by `separator`.
template <typename Row, typename Keep>
std::string Names(const std::vector<Row>& table, const char* separator, Keep keep) {
    std::string s;
    for (const Row& row : table)
        if (keep(row)) s += std::string(s.empty() ? "" : separator) + row.name;
    return s;
}

}  // namespace

const std::vector<Family>& Families() { return kFamilies; }

const Family* FindFamily(std::string_view name) { return ByName(kFamilies, name); }

std::vector<const Family*> FamiliesOfModelType(std::string_view model_type) {
    std::vector<const Family*> out;
    for (const Family& f : kFamilies)
        if (!model_type.empty() && model_type == f.model_type) out.push_back(&f);
    return out;
}

std::string HfModelTypes() {
    std::string types;
    for (const Family& f : kFamilies)
        if (*f.model_type && FamiliesOfModelType(f.model_type).front() == &f) types += std::string(types.empty() ? "" : ", ") + f.model_type;
    return types;
}

std::string PresetFamilies(const char* separator) {
    return Names(kFamilies, separator, [](const Family& f) { return f.preset; });
}

//-------------------------------------------------------------------------------------------------
// [SECTION] Layouts
//-------------------------------------------------------------------------------------------------

namespace {

const std::vector<LayoutInfo> kLayouts = {
    {Layout::Own, "own", "model.safetensors: GPT-2 in HF's names, the RoPE families in lit-gpt's beside a lit_config.json"},
    {Layout::Lit, "lit", "lit_model.pth as lit-gpt saves it (torch.save) beside a lit_config.json (the families lit-gpt holds)"},
    {Layout::Hf, "hf", "a Hugging Face folder: config.json with the family's model_type, HF's names in model.safetensors"},
};

}  // namespace

const std::vector<LayoutInfo>& Layouts() { return kLayouts; }

const LayoutInfo* FindLayout(std::string_view name) { return ByName(kLayouts, name); }

std::string LayoutNames(const char* separator) {
    return Names(kLayouts, separator, [](const LayoutInfo&) { return true; });
}

}  // namespace model
