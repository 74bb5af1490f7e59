// Model folders as the app sees them: what loading one found (the config, the weights file, the
// tokenizer and what was inferred), and writing a random one for tests and the default model.
// Free of LibTorch types; the loader itself is model_folder_torch.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/io/config.h"
#include "model/io/safetensors.h"
#include "model/io/result.h"
#include "model/io/weights.h"

namespace model {

// One layer's position term of a temperature, 1 + s ln i (i counted from 1): the learned
// parameter (the official code's attn.beta) and the slope it gives, s = exp(-exp(beta)) (exp_exp),
// sigmoid(beta) or beta itself (linear); one value shared by the layer's heads, or one a head.
struct TemperatureSlope {
    std::vector<float> beta, s;
};

struct ModelInfo {
    std::string dir;
    ModelConfig config;
    int64_t parameters = 0;
    std::string layout;          // the format's (model/arch): "conv1d", "linear", "lit-gpt" or "hf"
    std::string device;          // "cpu", "cuda:0"
    std::string compute_dtype = "f32";  // what the forward pass computes in: f32, bf16, f16
    std::string tokenizer_kind;  // "gpt2-bpe"
    size_t tokenizer_vocab = 0;
    std::string tokenizer_source;     // "vocab.json + merges.txt", "tokenizer.json", "tokenizer.model", or GPT-2's and why
    std::vector<std::string> unused_tensors;
    std::string weights_path;         // the file the weights came from
    std::string weights_format;       // "safetensors" or "torch.save"
    std::string stored_dtype;         // "F32", "F16", "F16+F32", ...
    std::vector<std::string> notes;   // what the loader inferred (no config.json, GPT-2 tokenizer, ...)
    std::vector<std::string> settings;  // what the environment changes in how analyses compute (ComputeSettings)
    // tau_q's position term per layer ([L]); empty when tau_q has none. config.query.position says
    // how s comes from beta.
    std::vector<TemperatureSlope> query_slopes;
};

// The hints given for one model as they apply to another opened beside it (a fine-tune's base, a
// twin): the files of its own folder first, `--config` and `--tokenizer` only where it has none
// (the fine-tune's config read its base with the fine-tune's RoPE base or norm eps, unsaid). The
// shape flags stay: they are read only where no config names the shape.
// `model`: the fine-tune's path: a base (or twin) whose folder has no tokenizer files reads the
// fine-tune's (the comparison needs one tokenizer), said in its notes.
ConfigHints HintsBeside(const ConfigHints& given, const std::string& path, const std::string& model = "");

// The other way: the hints for a fine-tune at `path` opened beside its `base` (a folder or
// checkpoint; "" none), where the fine-tune's folder lacks what its base's holds and no flag names
// it: the base's tokenizer files (the official fine-tune scripts write none beside their
// checkpoints; the fine-tune's tokenizer is its base's) and the base's lit_config.json for a
// checkpoint with no config of its own (nor do they write one; its attn.beta is read as the
// official code reads it), each said in `notes`. A base that gives none of what the fine-tune
// lacks (no such folder, or neither file) is said in `beside_gives_none`, for the fine-tune's
// refusal: the fine-tune opens first, so the base's own error would never come.
ConfigHints HintsFromBase(const ConfigHints& given, const std::string& path, const std::string& base);

// Writes a random SSA model folder (fixed seed) with the tokenizer files from `tokenizer_dir`.
// `storage`: the dtype on disk (F32, F16, BF16); `layout`: how (SaveModelFolder). One seed gives
// the same model in every layout.
Status WriteRandomModel(const ModelConfig& config, uint64_t seed, const std::string& tokenizer_dir, const std::string& out_dir,
                        Dtype storage = Dtype::F32, Layout layout = Layout::Own);

}  // namespace model
