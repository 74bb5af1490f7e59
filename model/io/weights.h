// The weights of a model as its file stores them, before LibTorch sees them: each tensor's name,
// dtype, shape and strides, with its bytes still in the memory-mapped file. One interface over
// safetensors and torch.save checkpoints (a ZIP with a pickled state dict), so the loader and the
// shape inference do not care which one a researcher has.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/io/config.h"
#include "model/io/result.h"
#include "model/io/safetensors.h"

namespace model {

struct StoredTensor {
    std::string name;             // as in the file, prefix included
    Dtype dtype = Dtype::F32;
    std::vector<int64_t> shape;
    std::vector<int64_t> strides;  // in elements; row-major contiguous for safetensors
    const uint8_t* data = nullptr; // the first element; every strided element is inside the file (checked)

    bool Contiguous() const;
};

struct WeightFile {
    std::string path;
    std::string format;                  // "safetensors" or "torch.save"
    std::shared_ptr<MappedFile> file;    // keeps `data` pointers valid
    std::vector<StoredTensor> tensors;   // in file order
    std::string state_dict_path;         // torch.save: where the state dict was found, e.g. "['model']"
    std::map<std::string, int64_t> model_args;  // torch.save: integer entries of a nanoGPT "model_args" dict
    std::string prefix;                  // what precedes "wte.weight": "", "transformer.", "_orig_mod.transformer.", ...
    std::string outer_prefix;            // the wrapper alone ("_orig_mod."), which also prefixes lm_head.weight

    // By model-relative name ("h.0.ln_1.weight"), trying the prefixes.
    const StoredTensor* Find(const std::string& name) const;
    std::map<std::string, size_t> index;  // name -> position in tensors
};

// Opens safetensors or a torch.save ZIP checkpoint (.pt / .pth / .bin / .ckpt), by content, not
// by extension. Checkpoints: the state dict is the top-level dict or the first nested dict (under
// "model", "state_dict", ...) holding "...wte.weight"; other entries (optimizer state, training
// metadata, numpy scalars) are skipped. Every tensor's view must lie inside its storage.
Result<WeightFile> OpenWeights(const std::string& path);

// Where a model's files are. `path` is a folder (config.json and lit_config.json if present;
// weights from model.safetensors, else pytorch_model.bin, else a lit-gpt checkpoint:
// lit_model_finetuned.pth, else the newest iter-NNNNNN-ckpt.pth, else lit_model.pth; else its one
// .safetensors / .pt / .pth / .bin / .ckpt file) or a weights file itself (with the configs beside
// it, if any).
struct ModelFiles {
    std::string dir;         // the folder, where tokenizer files are looked for
    std::string config;      // config.json; empty when there is none
    std::string lit_config;  // lit_config.json; empty when there is none
    std::string weights;
    std::string choice;      // when several lit-gpt checkpoints were there, which one was taken and why
};
Result<ModelFiles> FindModelFiles(const std::string& path);

// Builds a config from tensor shapes for a checkpoint that comes without config.json.
struct ConfigHints {
    int n_head = 0;                         // 0: from model_args, per-head SSA tensors, or head size 64
    std::optional<TemperatureForm> query;   // the SSA forms; needed where shapes cannot tell them
    std::optional<TemperatureForm> value;
    std::optional<Activation> activation;   // default: gelu_new for HF layout, gelu for nanoGPT's Linear layout
    // For lit-gpt checkpoints: the query form is how attn.beta is read (exp_exp unless given);
    // `config_file` a lit_config.json (or an official configs/*.json) used instead of the one
    // beside the weights, `tokenizer_dir` where the tokenizer files are instead of beside them.
    std::string config_file;
    std::string tokenizer_dir;
};
struct InferredConfig {
    ModelConfig config;
    std::vector<std::string> notes;  // what was assumed, for info and the GUI ("n_head 12: head size 64 assumed")
};
Result<InferredConfig> InferConfig(const WeightFile& weights, const ConfigHints& hints);

// "sigmoid,shared,sum", "exp_exp,none", "none": POSITION[,TOKEN[,COMBINE]] -> a form.
Result<TemperatureForm> ParseFormSpec(const std::string& spec);
std::string FormSpec(const TemperatureForm& form);  // the inverse

}  // namespace model
