// An SSA decoder's weights in LibTorch, for every family of SPEC section 7 (GPT-2, Pythia / GPT-NeoX,
// Llama, Mistral, Llama 3, Qwen 2 and 3): the tensors of each layer in one layout whatever the
// file's, read role by role under the names of the file's format (model/arch: HF GPT-2, nanoGPT,
// lit-gpt, HF's RoPE families; checked against the config), drawn at random, or written back as a
// model folder in a layout. What runs them is forward.h; finding a model's files on disk is
// model_folder_torch.h. Tensors are row-major; shapes are given as [dims] comments.
// E = n_embd, D = head size, H = query heads, G = kv heads, I = MLP width, V = vocabulary,
// P = positions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "model/io/config.h"
#include "model/io/result.h"
#include "model/io/safetensors.h"

namespace model {

// Parameters of one side's temperature; an undefined tensor is an absent term. N is the side's
// heads: H for the query, G (the kv heads) for the value.
struct TemperatureParams {
    at::Tensor pos;    // p: [] shared by the layer's heads, or [N]
    at::Tensor tok_w;  // w: [D] or [N, D] (token "shared"), [E] or [N, E] (token "feature")
    at::Tensor tok_b;  // b: [] or [N]
};

// Matrices are [in, out] (y = x @ W, HF Conv1D's layout; Linear layouts are transposed on load).
// An undefined bias is none; norm 1 and 2 are LayerNorm or RMSNorm (no bias) as config.norm says.
struct LayerWeights {
    at::Tensor ln1_w, ln1_b;      // norm 1: [E]
    at::Tensor attn_w, attn_b;    // [E, (H + 2G) D]: the H query heads, then the G key heads, then the G value heads
    at::Tensor proj_w, proj_b;    // [H D, E], [E]
    at::Tensor ln2_w, ln2_b;      // norm 2: [E]; undefined with shared_attention_norm
    at::Tensor fc_w, fc_b;        // [E, I] (GELU MLP) or [E, 2I] (SwiGLU: fc_1 then fc_2), [I] or [2I]
    at::Tensor mlp_proj_w, mlp_proj_b;  // [I, E], [E]
    at::Tensor q_norm_w, k_norm_w;  // [D]: Qwen 3's RMSNorm of each head's q and k; undefined: none
    TemperatureParams q, v;       // v: one per kv head
    int window = 0;               // config.AttentionWindow of this layer: keys j with i - j < window; 0: all
};

struct SsaGpt {
    ModelConfig config;
    at::Tensor wte;            // [V, E]
    at::Tensor wpe;            // [P, E]; undefined with RoPE
    at::Tensor ln_f_w, ln_f_b; // [E]; no bias with RMSNorm
    at::Tensor lm_head;        // [V, E]; the same tensor as wte when tied
    at::Tensor lm_head_b;      // [V] with lm_head_bias, else undefined
    std::vector<LayerWeights> layers;
    std::string layout;        // "conv1d" (HF GPT-2), "linear" (nanoGPT / official GPT-2, transposed on load), "lit-gpt" or "hf" (HF's RoPE families)
    std::vector<std::string> unused_tensors;  // names in the file the model did not use
    std::string weights_path;    // the file the weights came from
    std::string weights_format;  // "safetensors" or "torch.save"
    std::string stored_dtype;    // the file's dtypes, e.g. "F16" or "F16+F32"
    std::vector<std::string> notes;  // what the loader inferred or assumed, for info and the GUI

    int64_t ParameterCount() const;
    at::Device device() const { return wte.device(); }
    at::ScalarType dtype() const { return wte.scalar_type(); }  // the compute dtype
};

// Every tensor of the model by its role (model/arch), in the roles' order: the weight and the bias
// (null where the role has none). `layer` is -1 outside the layers; an absent role's tensors are
// undefined. The loader fills them, the savers, training and ParameterCount read them.
struct RoleTensors {
    Role role;
    int layer;
    at::Tensor* weight;
    at::Tensor* bias;
};
std::vector<RoleTensors> TensorsByRole(SsaGpt& model);

// Builds the model from a config and an opened weights file (safetensors or torch.save), checking
// every shape against the config. Weights are converted to float32 on `device`.
struct WeightFile;
// `compute` is the dtype the weights are held and the forward pass computes in (float32 by
// default); a file already in that dtype is read in place on the CPU, without a copy.
// `keep_bf16` (the engine's choice; not for training): with float32 compute on the CPU, the layer
// matrices a file stores as BF16 are held as bfloat16, half the memory, and widened exactly as
// they are used (model/nn/linear.h); the results are those of float32 weights.
Result<SsaGpt> LoadSsaGpt(const ModelConfig& config, const WeightFile& file, at::Device device, at::ScalarType compute = at::kFloat,
                          bool keep_bf16 = false);

// Random weights with a fixed seed (std 0.02 like GPT-2's init; larger for Q/K and the SSA
// parameters so maps and temperatures vary), of any family. Used for the build's default model,
// tests and benchmarks.
SsaGpt RandomSsaGpt(const ModelConfig& config, uint64_t seed);
// Writes the weights into `dir` in `layout` (model/arch): Own, GPT-2 as model.safetensors in HF
// names and layout plus config.json, the other families as model.safetensors in lit-gpt's names
// plus a complete lit_config.json; Lit, lit_model.pth (torch.save) as lit-gpt saves it; Hf, the
// family's HF folder (config.json with its model_type, HF's names). A model with HF-only features
// (ModelConfig::HfOnly) is written as an HF folder only. `storage` F16 or BF16 halves the file
// (weights are float32 again once loaded).
Status SaveModelFolder(const SsaGpt& model, const std::string& dir);
Status SaveModelFolder(const SsaGpt& model, const std::string& dir, Dtype storage);
Status SaveModelFolder(const SsaGpt& model, const std::string& dir, Dtype storage, Layout layout);

}  // namespace model
