// The loader: a model folder or a checkpoint file -> weights on a device, tokenizer and config.
// It is the one place that decides what a path is (model::FindModelFiles): the engine, the
// trainer and the tests all load through it.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <ATen/ATen.h>

#include "model/io/result.h"
#include "model/io/weights.h"
#include "model/nn/model_folder.h"
#include "model/nn/model_weights.h"
#include "model/text/tokenizer.h"

namespace model {

struct LoadedModel {
    ModelInfo info;
    SsaGpt gpt;
    std::unique_ptr<Tokenizer> tokenizer;
};

// A model folder (config.json + model.safetensors or pytorch_model.bin, or a lone checkpoint) or a
// checkpoint file, with its tokenizer: the folder's own tokenizer files, or GPT-2's bundled one
// for a folder with none and GPT-2's vocab_size. Without config.json the shape is inferred from
// the tensors, with `hints` for what the shapes cannot tell. Errors name the file.
// `keep_bf16`: as LoadSsaGpt's (the engine holds a BF16 file's matrices as stored). `admit`, where
// given, sees the config once it is read and before any weight is: its error stops the load there
// and is returned as it is (a base of another shape refused before gigabytes are read).
using AdmitConfig = std::function<Status(const ModelConfig&)>;
Result<LoadedModel> LoadModel(const std::string& path, at::Device device, const ConfigHints& hints = {},
                              at::ScalarType compute = at::kFloat, bool keep_bf16 = false, const AdmitConfig& admit = {});
// A temperature's tensor by its name (ssaviz's "*.ssa_*", the official code's "*.beta"): a file
// holding one the config does not read is refused (it was analysed as vanilla in silence).
bool IsTemperatureTensor(const std::string& name);
// The same without the tokenizer: the weights alone (the trainer's checkpoints, tests).
Result<SsaGpt> LoadSsaGptFolder(const std::string& path, at::Device device, const ConfigHints& hints = {},
                                at::ScalarType compute = at::kFloat);

}  // namespace model
