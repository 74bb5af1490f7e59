// `ssaviz train`: trains an SSA model and its vanilla twin side by side with LibTorch autograd and
// AdamW. Both see the same batches in the same order, start from the same weights (the twin
// lacks only the temperature parameters) and follow the same learning-rate schedule, so their
// losses compare like for like. Deterministic for a seed on CPU at a fixed thread count;
// checkpoints resume bit for bit.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/io/config.h"
#include "model/io/result.h"
#include "model/io/safetensors.h"
#include "model/nn/model_weights.h"
#include "model/train/tasks.h"

namespace model {

struct TrainOptions {
    ModelConfig config;          // the SSA model's shape and forms; the twin is the same without "ssa"
    TaskSpec task;
    std::string out;             // writes out/ssa, out/vanilla (model folders) and out/checkpoint
    std::string tokenizer_dir;   // tokenizer files to copy into both folders
    // A fine-tune: a vanilla model folder (LoadFineTuneBase) both models start from, its weights
    // and tokenizer (the folder's, or tokenizer_dir where given; train takes its shape over config's); the SSA model's temperatures start
    // near one, as the official code's fine-tunes do (a slope of exp(-exp(2)), token terms zero).
    // Written as out/base (f32, exactly the weights started from), so that out/ssa --compare base
    // finds it beside. Empty: both start from InitSsaGpt.
    std::string from;
    std::shared_ptr<const SsaGpt> from_opened;  // `from` already opened (LoadFineTuneBase) by a caller that needed its shape; null: Train opens it
    int64_t steps = 1000;
    double lr = 3e-3;
    double min_lr_ratio = 0.1;   // cosine decay to lr * this
    int64_t warmup = 50;
    double weight_decay = 0.1;   // on matrices and embeddings; not on norms, biases or temperatures
    double grad_clip = 1.0;
    uint64_t seed = 1;
    int64_t eval_every = 250;    // validation of both models; 0 = only at the end
    int64_t checkpoint_every = 500;
    bool keep_checkpoints = false;  // also out/run/{ssa,vanilla}/checkpoint-N/ at step 0 and every checkpoint: a run
    bool resume = false;         // continue from out/checkpoint
    bool twin = true;
    bool freeze_positions = false;  // wpe fixed at zero (position-free models for length tests)
    Dtype storage = Dtype::F32;  // of the final model files
    std::string command;         // recorded in train.json
};

struct TrainProgress {
    int64_t step = 0, steps = 0;
    double loss_ssa = 0, loss_vanilla = 0;   // training loss of the last step
    double tokens_per_second = 0;
    double seconds = 0;
    const nlohmann::json* eval = nullptr;     // set on evaluation steps: {"ssa": {...}, "vanilla": {...}}
    const std::string* note = nullptr;        // what the run should say: --data's files skipped (before the first step), the
                                              // models written being scored (after the last, which can take minutes)
};

// GPT-2-style initial weights for training (std 0.02; residual projections scaled by
// 1/sqrt(2 n_layer); temperatures start mild: s = sigmoid(-1), token terms near 0). Shared
// weights do not depend on the SSA forms, so a model and its vanilla twin start identical.
SsaGpt InitSsaGpt(const ModelConfig& config, uint64_t seed, bool zero_positions = false);

// A fine-tune's base (--from): a model folder the trainer can train, GPT-2-shaped (learned
// positions, LayerNorm, a tied head, as InitSsaGpt's) and without temperatures; the error names
// the folder and what it is instead.
Result<SsaGpt> LoadFineTuneBase(const std::string& dir);

// What train writes in options.out: ssa/, vanilla/ (each a model folder), checkpoint/, with from base/, and with
// keep_checkpoints run/ (run/ssa/checkpoint-N/ and run/vanilla/checkpoint-N/, model folders a
// run's timeline opens: `ssaviz --run out/run/ssa --compare-run out/run/vanilla`; a new run keeps
// them in run.new/ until it ends, a resumed one where they are). Each is
// written under a temporary name and renamed into place, and must be absent or a folder train
// wrote (its own files only, with train.json's "role" or state.json's "identity"; an empty folder
// too): a link, a file, or a folder holding anything else is refused, naming it, and never
// deleted. Train checks this first; the command line asks before it starts.
Status CheckTrainOutput(const TrainOptions& options);

// With options.resume: that DIR/checkpoint/state.json is there and JSON, else "--resume: nothing
// to resume (...)" saying what it is instead. Asked before CheckTrainOutput, which would call a
// checkpoint whose state.json is broken a folder train did not write.
Status CheckResumeCheckpoint(const TrainOptions& options);

// Whether `--resume` finds something to continue in options.out: a checkpoint, and with
// keep_checkpoints an unfinished new run's kept steps (run.new/) that are its run's.
bool Resumable(const TrainOptions& options);

// The bytes a training run may hold at its peak (an estimate on the high side): each model's
// weights, gradients and AdamW state, and what autograd keeps of one batch.
size_t EstimateTrainingBytes(const TrainOptions& options);

// Runs the training; `progress` is called after every step. Returns the final evaluation
// {"ssa": {...}, "vanilla": {...}} of the models as saved (reloaded from their files).
Result<nlohmann::json> Train(const TrainOptions& options, const std::function<void(const TrainProgress&)>& progress,
                             const std::atomic<bool>* cancel = nullptr);

// `ssaviz eval`: rebuilds a trained model's task from its train.json and scores it.
Result<nlohmann::json> EvaluateModelFolder(const std::string& dir, const std::vector<std::string>& data_override = {});

}  // namespace model
