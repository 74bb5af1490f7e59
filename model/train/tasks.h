// What `ssaviz train` and `ssaviz eval` train and score models on:
//  - "text":    next-token prediction on English prose read from files (the bundled default model);
//  - "graph":   the paper's Figure 3: one attention layer whose map must equal P*, the
//               row-normalised adjacency of an 8-node graph with nodes of different degree;
//  - "passkey": recall a 5-digit key hidden in filler, trained at one length, tested at longer ones.
// A task is rebuilt from its spec (recorded in each trained model's train.json), so `eval`
// scores a model on exactly the data it was trained and validated on.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "model/io/result.h"
#include "model/nn/model_weights.h"
#include "model/text/tokenizer.h"

namespace model {

struct TaskBatch {
    at::Tensor ids;      // [B, T] int64
    at::Tensor targets;  // [B, T] int64 next-token ids; -1 where the position is not scored
};

class TrainingTask {
public:
    virtual ~TrainingTask() = default;
    virtual TaskBatch Sample(std::mt19937_64& rng) const = 0;
    // Scalar loss for one batch, differentiable when grad mode is on. Default: mean next-token
    // cross-entropy over the scored positions.
    virtual at::Tensor Loss(const SsaGpt& model, const TaskBatch& batch) const;
    // Held-out scores (no grad). "loss" is the headline number, lower is better.
    virtual nlohmann::json Evaluate(const SsaGpt& model) const = 0;
    virtual int64_t TokensPerBatch() const = 0;
    nlohmann::json spec;  // {"task": ..., options}: enough to rebuild the task
    // Set (Ctrl+C, SIGTERM): Evaluate stops between batches, its scores then partial (Train says it
    // was cancelled); a held-out set of 30 MB of text was scored to its end, 16 s.
    const std::atomic<bool>* cancel = nullptr;
    bool Cancelled() const { return cancel && cancel->load(); }
};

// Settings a task's spec may carry; missing keys take these defaults.
struct TaskSpec {
    std::string task = "text";             // text | graph | passkey
    std::vector<std::string> data;         // text: files or folders of UTF-8 text
    int64_t seq_len = 256;                 // tokens per training sequence
    int64_t batch = 16;
    double val_fraction = 0.05;            // text: the last 5% of every file is held out
    int64_t eval_lengths_max = 2048;       // passkey: test lengths are seq_len * 2^k up to this
    int64_t eval_samples = 100;            // passkey: sequences per test length
};
nlohmann::json TaskSpecToJson(const TaskSpec& spec);
Result<TaskSpec> TaskSpecFromJson(const nlohmann::json& json);

// Builds the task; text reads and tokenizes its files with `tokenizer`. `cancel` set: it stops
// between encoding blocks, failing, and the task's Evaluate between batches.
Result<std::unique_ptr<TrainingTask>> MakeTask(const TaskSpec& spec, const Tokenizer& tokenizer, const std::atomic<bool>* cancel = nullptr);

// The text task's corpus: every file named or inside a named folder (sorted; symlinks and files
// that are not UTF-8 are skipped and listed in `skipped`). Lines holding only "%" (fortune-file
// record separators) become blank lines. One string per file.
struct Corpus {
    std::vector<std::string> files;
    std::vector<std::string> texts;
    std::vector<std::string> skipped;
    size_t bytes = 0;
};
Result<Corpus> ReadCorpus(const std::vector<std::string>& paths);

// A corpus file's ids, encoded `block_bytes` of whole lines at a time (the text task's): one Encode
// of a whole file held about 85 bytes a byte of text at once (its pieces, offsets and the
// tokenizer's work), 4 GB for a 47 MB file. A block ends within twice `block_bytes`, at a line end
// between two non-spaces, else (a longer line) before a space between two non-spaces, so a
// byte-level BPE's words and whitespace runs are the same either way; else (no space there) at a
// character's first byte, cutting a word in two. SentencePiece starts each block as a text of its
// own (its first word as after a space). A file within a block is encoded whole, as it always was.
// 1 MB: SentencePiece's encoder holds some 190 bytes a byte of its input (a byte-fallback text), so a
// block of up to twice 4 MB, as it was, peaked at 1.3 GB for any corpus file past 4 MB.
constexpr size_t kEncodeBlockBytes = size_t{1} << 20;
Result<std::vector<int32_t>> EncodeInBlocks(const Tokenizer& tokenizer, const std::string& text, size_t block_bytes = kEncodeBlockBytes,
                                            const std::atomic<bool>* cancel = nullptr);

// Tokenizer files for the synthetic tasks, written into `dir`: graph = eight node letters A..H as a
// byte-level BPE vocabulary; passkey = a SentencePiece word model of the task's words.
Status WriteTaskTokenizer(const std::string& task, const std::string& dir);

// A text that shows the task in the inspector (the graph's 16 tokens; a passkey sequence of
// `tokens` words with its key).
std::string TaskExampleText(const std::string& task, int64_t tokens, uint64_t seed);

// The graph experiment's target: P*, row-normalised adjacency [8 x 8], and node names.
std::vector<std::vector<double>> GraphTarget();
const char* GraphNodes();  // "ABCDEFGH"

// The shortest passkey sequence: the key, its sentence and the question, no filler (train checks
// --seq-len against it).
int64_t PasskeyMinimumLength();

}  // namespace model
