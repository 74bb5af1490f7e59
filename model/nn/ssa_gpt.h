// The SSA GPT-2 model in LibTorch: weights, loading from a model folder, and the forward pass
// of SPEC section 1 that captures every layer's attention maps and temperatures.
// Tensors are row-major; shapes are given as [dims] comments. L = layers, H = heads, T = tokens,
// E = n_embd, D = head size, V = vocabulary.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "model/io/config.h"
#include "model/io/result.h"
#include "model/io/safetensors.h"
#include "model/io/weights.h"

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
// A model folder (config.json + model.safetensors or pytorch_model.bin, or a lone checkpoint) or a
// checkpoint file. Without config.json the shape is inferred from the tensors, with `hints` for
// what the shapes cannot tell. Errors name the file.
Result<SsaGpt> LoadSsaGptFolder(const std::string& path, at::Device device, const ConfigHints& hints = {},
                                at::ScalarType compute = at::kFloat);

struct ForwardOptions {
    bool vanilla = false;        // the counterfactual: tau_q = tau_v = 1 everywhere
    bool want_logits = true;
    const std::atomic<bool>* cancel = nullptr;  // checked between layers
};

struct ForwardOutput {
    at::Tensor logits;     // [T, V] (undefined unless want_logits)
    at::Tensor attention;  // [L, H, T, T], zero above the diagonal
    at::Tensor tau_q;      // [L, H, T]
    at::Tensor tau_v;      // [L, H, T]
};

// Token ids a model with this config can run: at least one, at most n_positions, each below
// vocab_size; the error names the first that is not.
Status CheckIds(const ModelConfig& config, const std::vector<int32_t>& ids);
// Runs token ids (checked by CheckIds) under InferenceMode.
Result<ForwardOutput> Forward(const SsaGpt& model, const std::vector<int32_t>& ids, const ForwardOptions& options = {});

// tau for one side and layer: [..., H, T]. `z_heads` is q or v split into heads [..., H, T, D];
// `x` is the LayerNorm-1 output [..., T, E]. Leading (batch) dimensions are optional. The rows are
// positions first..first+T-1 (the position term counts i = first + 1, ...).
at::Tensor Temperature(const TemperatureForm& form, const TemperatureParams& params,
                       const at::Tensor& z_heads, const at::Tensor& x, int64_t first = 0);

// The two terms tau combines, [..., H, T] each, for the legend of what a temperature is made of:
// the position term (1 + s ln i, or ones without one) and the token term (tanh(w . z + b), or
// zeros without one). tau = position + token (Combine::Sum) or position * (1 + token).
struct TemperatureTerms {
    at::Tensor position, token;
};
TemperatureTerms TemperatureParts(const TemperatureForm& form, const TemperatureParams& params, const at::Tensor& z_heads,
                                  const at::Tensor& x, int64_t first = 0);
at::Tensor CombineTemperature(const TemperatureForm& form, const TemperatureTerms& terms);  // contiguous

// The pieces of the forward pass on a batch, shared by Forward (inference, with capture) and the
// trainer (autograd). None of them sets a grad mode; callers choose.
//
// A block can run only rows first..first+R-1 of a longer text against the keys and values the
// earlier rows left behind (the model is causal: nothing of a row depends on later rows), which is
// how the analysis recomputes only what an edit changed.
struct KeyValues {
    at::Tensor k;   // [B, H, P, D]: the keys of positions 0..P-1
    at::Tensor vs;  // [B, H, P, D]: their values times tau_v, as attention sums them
};
struct BlockCapture {
    at::Tensor attention;  // [B, H, R, T]: the rows run, over every key
    at::Tensor q;          // [B, H, R, D], the rows run; with k, what AttentionRows rebuilds a map from
    at::Tensor k, vs;      // [B, H, T, D], every position: the prefix's and the rows'
    at::Tensor tau_q;      // [B, H, R] (ones when the side is off or vanilla)
    at::Tensor tau_v;      // [B, H, R]
    TemperatureTerms tau_q_terms;  // [B, H, R] each: ones and zeros when the side is off or vanilla
};
// The causal attention weights softmax(tau_q (q k^T) / sqrt(D)) of SPEC section 1 for rows
// first..first+R-1: q [..., R, D], k [..., T, D] with T >= first + R, tau_q [..., R] (undefined:
// 1) -> [..., R, T], zero right of each row's own position. Block uses it, and so does the
// analysis that rebuilds one head's map (or its changed rows) from the captured q and k.
at::Tensor AttentionRows(const at::Tensor& q, const at::Tensor& k, const at::Tensor& tau_q, int64_t first);
inline at::Tensor AttentionWeights(const at::Tensor& q, const at::Tensor& k, const at::Tensor& tau_q) {
    return AttentionRows(q, k, tau_q, 0);  // every row: [..., T, T]
}
// Per-head changes to one layer's temperatures (the what-ifs of model::Intervention), [H] each on
// the model's device: the query temperature keeps or drops each term (a dropped position term is
// 1, a dropped token term 0), then tau_q = 1 + scale (tau_q - 1); value_off sets tau_v = 1.
struct TemperatureEdit {
    at::Tensor keep_position, keep_token, value_off;  // bool [H, 1]
    at::Tensor scale;                                 // [H, 1]
    at::Tensor scaled;                                // bool [H, 1]: scale != 1
};
at::Tensor Embed(const SsaGpt& model, const at::Tensor& ids, int64_t first = 0);  // ids [B, R] int64 at positions first.. -> [B, R, E]
// One pre-LayerNorm block: x [B, R, E] (positions first..first+R-1) -> [B, R, E]; `vanilla` sets
// tau_q = tau_v = 1. `prefix` holds positions 0..first-1's keys and values (null when first is 0).
// `edit` (null: none) changes the temperatures of some heads.
at::Tensor Block(const ModelConfig& config, const LayerWeights& weights, const at::Tensor& x, bool vanilla,
                 BlockCapture* capture = nullptr, int64_t first = 0, const KeyValues* prefix = nullptr,
                 const TemperatureEdit* edit = nullptr);
at::Tensor Logits(const SsaGpt& model, const at::Tensor& x);  // final LayerNorm and tied head: [B, T, V]

// "f32", "bf16" or "f16" (CUDA only) -> the compute dtype; captures are float32 whatever it is.
Result<at::ScalarType> ResolveComputeDtype(const std::string& name, at::Device device);

// Which device to run on. "auto" picks CUDA when available; "cuda" without a GPU is an error.
Result<at::Device> ResolveDevice(const std::string& name);

// Makes `device` the calling thread's current device, with its CUDA context current too; nothing
// on the CPU. A thread LibTorch did not start has no CUDA context until a runtime call makes one,
// so without this cuBLAS warns ("no current CUDA context") the first time such a thread
// multiplies. Cheap after the first call on a thread: every entry point that runs device work on
// whatever thread called it (loading, analysing, rebuilding a map) calls it.
void BindThreadToDevice(at::Device device);

}  // namespace model
