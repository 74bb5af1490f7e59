// The SSA GPT-2's weights in LibTorch: the tensors of each layer, built from a weights file by
// their HF names (checked against the config), drawn at random, or written back as a model
// folder. What runs them is forward.h; finding a model's files on disk is model_folder_torch.h.
// Tensors are row-major; shapes are given as [dims] comments. E = n_embd, D = head size,
// H = heads, V = vocabulary, P = positions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "model/io/config.h"
#include "model/io/result.h"
#include "model/io/safetensors.h"

namespace model {

// Parameters of one side's temperature; an undefined tensor is an absent term.
struct TemperatureParams {
    at::Tensor pos;    // p: [] shared by the layer's heads, or [H]
    at::Tensor tok_w;  // w: [D] or [H, D] (token "shared"), [E] or [H, E] (token "feature")
    at::Tensor tok_b;  // b: [] or [H]
};

struct LayerWeights {
    at::Tensor ln1_w, ln1_b;      // [E]
    at::Tensor attn_w, attn_b;    // [E, 3E] (x @ W, HF Conv1D layout), [3E]
    at::Tensor proj_w, proj_b;    // [E, E], [E]
    at::Tensor ln2_w, ln2_b;      // [E]
    at::Tensor fc_w, fc_b;        // [E, 4E], [4E]
    at::Tensor mlp_proj_w, mlp_proj_b;  // [4E, E], [E]
    TemperatureParams q, v;
};

struct SsaGpt {
    ModelConfig config;
    at::Tensor wte;            // [V, E]
    at::Tensor wpe;            // [P, E]
    at::Tensor ln_f_w, ln_f_b; // [E]
    at::Tensor lm_head;        // [V, E]; the same tensor as wte when tied
    std::vector<LayerWeights> layers;
    std::string layout;        // "conv1d" (HF) or "linear" (nanoGPT / official code, transposed on load)
    std::vector<std::string> unused_tensors;  // names in the file the model did not use
    std::string weights_path;    // the file the weights came from
    std::string weights_format;  // "safetensors" or "torch.save"
    std::string stored_dtype;    // the file's dtypes, e.g. "F16" or "F16+F32"
    std::vector<std::string> notes;  // what the loader inferred or assumed, for info and the GUI

    int64_t ParameterCount() const;
    at::Device device() const { return wte.device(); }
    at::ScalarType dtype() const { return wte.scalar_type(); }  // the compute dtype
};

// Builds the model from a config and an opened weights file (safetensors or torch.save), checking
// every shape against the config. Weights are converted to float32 on `device`.
struct WeightFile;
// `compute` is the dtype the weights are held and the forward pass computes in (float32 by
// default); a file already in that dtype is read in place on the CPU, without a copy.
Result<SsaGpt> LoadSsaGpt(const ModelConfig& config, const WeightFile& file, at::Device device, at::ScalarType compute = at::kFloat);

// Random weights with a fixed seed (std 0.02 like GPT-2's init; larger for Q/K and the SSA
// parameters so maps and temperatures vary). Used for the build's default model and for tests.
SsaGpt RandomSsaGpt(const ModelConfig& config, uint64_t seed);
// Writes the weights as model.safetensors (HF names and layout) plus config.json into `dir`;
// `storage` F16 halves the file (weights are float32 again once loaded).
Status SaveModelFolder(const SsaGpt& model, const std::string& dir, Dtype storage);
Status SaveModelFolder(const SsaGpt& model, const std::string& dir);

}  // namespace model
