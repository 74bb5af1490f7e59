// The weights of a model as its files store them, before LibTorch sees them: each tensor's name,
// dtype, shape and strides, with its bytes still in the memory-mapped file. One interface over
// safetensors and torch.save checkpoints (a ZIP with a pickled state dict), single or sharded
// across several files by an HF index, so the loader and the shape inference do not care which
// one a researcher has.
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
    // Bytes from `data` to the end of the last element the view reaches (0 for an empty view).
    uint64_t Extent() const;
};

struct WeightFile {
    std::string path;                    // the weights file, or a sharded model's index (model.safetensors.index.json)
    // "safetensors" or "torch.save"; sharded weights add their files: "safetensors, 3 shards
    // model-0000k-of-00003.safetensors" (what `info` shows).
    std::string format;
    std::vector<std::string> shards;     // sharded: the shard files' names as the index gives them, sorted; else empty
    std::vector<std::shared_ptr<MappedFile>> files;  // every mapping, one per shard (one when not sharded)
    std::vector<StoredTensor> tensors;   // in file order (sharded: shard by shard)
    std::string state_dict_path;         // torch.save: where the state dict was found, e.g. "['model']"
    std::map<std::string, int64_t> model_args;  // torch.save: integer entries of a nanoGPT "model_args" dict
    // The state dict's roots, from its token embedding, whose name is one of the formats' (arch.h):
    // "wte.weight" (GPT-2, nanoGPT, lit-gpt), "embed_tokens.weight" (HF llama, mistral, qwen2,
    // qwen3) or "embed_in.weight" (HF gpt_neox). `prefix` is what precedes it (the shortest, when several
    // match): "", "transformer.", "_orig_mod.transformer.", "model.", "gpt_neox.", ... and
    // `outer_prefix` the same without a last "transformer.", "model." or "gpt_neox.": what precedes
    // the whole model, and so also the tensors outside that root (lm_head.weight, embed_out.weight):
    // "", "_orig_mod.", "module.", ...
    std::string prefix;
    std::string outer_prefix;
    // The token embeddings' full names, one a prefix. Two ("transformer.wte.weight" and
    // "gpt_neox.embed_in.weight"): a file holding two layouts, read by the one its config names
    // (UseRoot); `prefix` is the shortest's until then.
    std::vector<std::string> embeddings;
    // Reads the names under the embedding whose prefix ends in `root` ("transformer.", "gpt_neox.",
    // "model."); false (and nothing changed) when none does.
    bool UseRoot(const std::string& root);

    // By model-relative name ("h.0.ln_1.weight", "layers.0.self_attn.q_proj.weight",
    // "lm_head.weight"): prefix + name, else outer_prefix + name, else the name itself.
    const StoredTensor* Find(const std::string& name) const;
    // torch.save: the state dict's keys whose values are not tensors, with what they hold ("a
    // 'posix.system' object"), so that a missing tensor can be told from one replaced by something else.
    std::map<std::string, std::string> not_tensors;
    // Why `name` (model-relative, as Find) is not a tensor: "no tensor 'transformer.h.0.ln_1.weight'",
    // or "'transformer.h.0.ln_1.weight' holds a 'posix.system' object, not a tensor".
    std::string Missing(const std::string& name) const;
    std::map<std::string, size_t> index;  // name -> position in tensors

    // The mapping (its shard's) that `t`'s bytes are in: what a tensor reading them in place keeps
    // alive. Null for a tensor not in `files`.
    std::shared_ptr<MappedFile> FileOf(const StoredTensor& t) const;
    // Once `t` has been converted (to float32, to a device), hands its pages of the mapping back,
    // so resident memory holds the converted weights and not the file as well. The bytes stay
    // readable: a later read faults them in from the file again.
    void DropPages(const StoredTensor& t) const;
};

// Opens safetensors or a torch.save ZIP checkpoint (.pt / .pth / .bin / .ckpt), by content, not
// by extension. Checkpoints: the state dict is the top-level dict or the first nested dict (under
// "model", "state_dict", ...) holding one of the embedding names above; other entries (optimizer
// state, training metadata, numpy scalars) are skipped. Every tensor's view must lie inside its
// storage.
// A path ending in ".index.json" is an HF shard index ({"metadata": {...}, "weight_map": {"tensor
// name": "model-00001-of-00002.safetensors", ...}}, at most kMaxShardIndexBytes): the shards it
// names, each safetensors or a torch.save whose top level is the state dict, all of one format,
// make one WeightFile. A shard must be a regular file inside the index's folder (a relative name
// without "..", no link leading out, except an HF hub cache snapshot's links into its blobs/), at
// most kMaxShards of them; every tensor must be in exactly one shard, the one the index names.
Result<WeightFile> OpenWeights(const std::string& path);

constexpr size_t kMaxShards = 1024;
constexpr size_t kMaxShardIndexBytes = size_t{64} << 20;

// Where a model's files are. `path` is a folder (config.json and lit_config.json if present;
// weights from model.safetensors, else model.safetensors.index.json and its shards, else
// pytorch_model.bin, else pytorch_model.bin.index.json and its shards (safetensors first, as
// transformers prefers them), else a lit-gpt checkpoint:
// lit_model_finetuned.pth, else the newest iter-NNNNNN-ckpt.pth, else lit_model.pth; else its one
// .safetensors / .pt / .pth / .bin / .ckpt file) or a weights file itself (with the configs beside
// it, if any).
struct ModelFiles {
    std::string dir;         // the folder, where tokenizer files are looked for
    std::string config;      // config.json; empty when there is none
    std::string lit_config;  // lit_config.json; empty when there is none
    std::string weights;     // a weights file, or a shard index (OpenWeights reads both)
    std::string choice;      // when several lit-gpt checkpoints were there, which one was taken and why
};
Result<ModelFiles> FindModelFiles(const std::string& path);

// The one format detector: whose names (model/arch's formats) the tensors have, by the first
// layer's attention projection; GPT-2's two orientations (HF Conv1D, nanoGPT's Linear) told apart
// by its shape. nullopt: none of them.
std::optional<Format> DetectFormat(const WeightFile& weights);
// A role's first stored name in `format` at layer 0, without ".weight": "h.0.attn.c_attn".
std::string FirstLayerName(Format format, Role role);

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
    // The model read without its config's SSA forms (tau = 1): a fine-tune's base beside it,
    // sharing its config but holding none of the temperatures' tensors (Engine::OpenBase).
    bool without_temperatures = false;
    // What chose the hints above where the user did not (HintsFromBase: the base's tokenizer or
    // lit_config.json), said among the model's notes.
    std::vector<std::string> notes;
    // Where a model opened beside another (its base, or the fine-tune beside a base) lacks a config
    // or tokenizer that the other did not give either, why: said in the refusal instead of the advice
    // to name that other model.
    std::string beside_gives_none;
};
// The files the hints name, before any model opens: --tokenizer a folder that is there, --config a
// regular file of a config's size; the error names the flag (a run's steps failed one by one on it).
Status CheckHintFiles(const ConfigHints& hints);
struct InferredConfig {
    ModelConfig config;
    std::vector<std::string> notes;  // what was assumed, for info and the GUI ("n_head 12: head size 64 assumed")
};
Result<InferredConfig> InferConfig(const WeightFile& weights, const ConfigHints& hints);

// Where the shape of a model comes from, which the loader and the window's checkpoint dialog both
// ask: a lit-gpt checkpoint's lit_config.json (or --config), a config.json (or --config, or a
// lit_config.json beside nanoGPT's names: the official GPT-2 code's GPTConfig), or the
// tensors themselves (InferConfig, asking for what they cannot tell).
enum class ShapeSource { LitConfig, ConfigJson, Tensors };
ShapeSource ShapeSourceOf(const ModelFiles& files, const WeightFile& weights, const ConfigHints& hints);

// "sigmoid,shared,sum", "exp_exp,none", "none": POSITION[,TOKEN[,COMBINE]] -> a form.
Result<TemperatureForm> ParseFormSpec(const std::string& spec);
std::string FormSpec(const TemperatureForm& form);  // the inverse

}  // namespace model
