// `ssaviz train` and `ssaviz eval`: the command-line side of model/train.
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <utility>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>

#include "app/cli/cli_common.h"
#include "app/cli/interrupts.h"
#include "model/nn/analysis.h"
#include "model/train/tasks.h"
#include "model/train/train.h"
#include "model/io/files.h"
#include "model/io/weights.h"

namespace app {
namespace {

using nlohmann::json;

// Training and evaluation allocate and free the same large activations batch after batch; keeping
// them in the heap instead of fresh mmap()s saves a page fault per page each time. Set once the
// corpus is read and encoded (train: at its first step), with what that left given back: set
// before, a corpus's growing strings and ids stayed in the heap, fragmented and never returned (a
// 50 MB corpus held 1.3 GB).
void KeepLargeAllocations() {
    malloc_trim(0);
    mallopt(M_MMAP_THRESHOLD, 1 << 30);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

// Ctrl+C during training: the run stops at its next step and cleans up after itself (its
// temporary folders; the last checkpoint stays for --resume). Interrupts (interrupts.h) does the rest.
std::atomic<bool> g_interrupted{false};

// Each task's defaults: the experiments' recipes, overridable flag by flag.
struct Recipe {
    int layers, heads, width, context, seq_len, batch, steps, warmup;
    double lr, weight_decay;
    bool freeze_positions;
};
Recipe DefaultRecipe(const std::string& task) {
    if (task == "graph") return {1, 1, 8, 16, 16, 1, 3000, 0, 1e-2, 0.1, false};
    if (task == "passkey") return {2, 2, 64, 2048, 128, 32, 1500, 50, 3e-3, 0.1, true};
    return {4, 4, 128, 256, 256, 16, 2000, 100, 3e-3, 0.1, false};
}

// More threads than cores only wait on each other: a 0.6 s run took a minute with 64 on 2 cores.
void CheckThreads(int threads) {
    const int cores = model::UsableCores();
    if (threads > cores)
        throw Failure{kExitUsage, "--threads " + std::to_string(threads) + " is more than the " + std::to_string(cores) +
                                      " cores this process may use"};
}

// --data's files and folders (train's and eval's alike: eval took "a,b" for one path), an empty
// entry refused (" ,a" was looked for as '').
std::vector<std::string> DataPaths(const std::string& data) {
    const auto paths = SplitList(data);
    if (!paths) throw Failure{kExitUsage, "--data is empty: give a path"};
    if (data.back() == ',' || std::any_of(paths->begin(), paths->end(), [](const std::string& p) { return p.empty(); }))
        throw Failure{kExitUsage, "--data " + QuoteForMessage(data) + " has an empty entry (a comma too many?)"};
    return *paths;
}

std::string Describe(const json& eval) {
    char buf[160];
    if (eval.contains("l1"))
        std::snprintf(buf, sizeof buf, "CE %.4f, KL %.4f, L1 %.3f", eval["loss"].get<double>(), eval["kl"].get<double>(),
                      eval["l1"].get<double>());
    else if (eval.contains("lengths")) {
        std::string s = "accuracy";
        for (const auto& l : eval["lengths"])
            s += " " + std::to_string(l["length"].get<int>()) + ":" + std::to_string(static_cast<int>(std::lround(100 * l["accuracy"].get<double>()))) + "%";
        return s;
    } else
        std::snprintf(buf, sizeof buf, "val loss %.4f", eval["loss"].get<double>());
    return buf;
}

}  // namespace

int CmdTrain(const CommandOptions& options, const std::string& typed) {
    const NewModelOptions& m = options.new_model;
    model::TrainOptions o;
    o.task.task = m.task;
    const Recipe r = DefaultRecipe(o.task.task);
    if (o.task.task == "text") {
        if (options.data.empty()) throw Failure{kExitUsage, "--task text needs --data PATH[,PATH...] (files or folders of UTF-8 text)"};
        o.task.data = DataPaths(options.data);
    }
    if (auto s = CheckExportFolder(options.out, /*weights=*/true); !s) throw Failure{kExitUsage, "--out: " + s.error()};
    if (!m.from.empty()) {  // a fine-tune: the base's shape and tokenizer
        for (const auto& [given, flag] : {std::pair<bool, const char*>(m.layers.has_value(), "--layers"), {m.heads.has_value(), "--heads"},
                                          {m.width.has_value(), "--width"}, {m.context.has_value(), "--context"}, {m.vocab.has_value(), "--vocab"}})
            if (given) throw Failure{kExitUsage, std::string("--from takes the base's shape and tokenizer: not with ") + flag};
        auto base = model::LoadFineTuneBase(m.from);
        if (!base) throw Failure{kExitBadInput, base.error()};
        o.config = base->config;
        o.from = m.from;
        o.from_opened = std::make_shared<const model::SsaGpt>(std::move(*base));  // not opened a second time
    } else {
        json config = {{"n_layer", m.layers.value_or(r.layers)}, {"n_head", m.heads.value_or(r.heads)}, {"n_embd", m.width.value_or(r.width)},
                       {"n_positions", m.context.value_or(r.context)}, {"vocab_size", m.vocab.value_or(4096)}};
        auto parsed = model::ParseConfig(config.dump(), "train flags");
        if (!parsed) throw Failure{kExitUsage, parsed.error()};
        o.config = *parsed;
    }
    if (o.task.task != "text") {  // a synthetic task brings its own text and tokenizer: a flag for them would be ignored
        if (!options.data.empty()) throw Failure{kExitUsage, "--data is for --task text: the " + o.task.task + " task makes its own sequences"};
        if (m.vocab) throw Failure{kExitUsage, "--vocab is for --task text: the " + o.task.task + " task has its own tokenizer"};
    }
    if (m.freeze_positions && m.learn_positions) throw Failure{kExitUsage, "--freeze-positions and --learn-positions exclude each other: give one"};
    o.config.query = m.query_form.value_or(model::kPaperQueryForm);
    o.config.value = m.value_form.value_or(model::kPaperValueForm);
    o.task.seq_len = m.seq_len.value_or(std::min(r.seq_len, o.config.n_positions));
    o.task.batch = m.batch.value_or(r.batch);
    o.out = options.out;
    o.tokenizer_dir = m.tokenizer.value_or("");
    o.steps = m.steps.value_or(r.steps);
    o.lr = m.lr.value_or(r.lr);
    o.warmup = m.warmup.value_or(r.warmup);
    o.weight_decay = m.weight_decay.value_or(r.weight_decay);
    o.seed = m.seed.value_or(1);
    o.eval_every = m.eval_every.value_or(std::max<int64_t>(1, o.steps / 8));
    o.checkpoint_every = m.checkpoint_every;
    o.keep_checkpoints = m.keep_checkpoints;
    o.resume = m.resume;
    o.twin = !m.no_twin;
    o.freeze_positions = m.freeze_positions || (r.freeze_positions && !m.learn_positions);
    o.storage = m.save_dtype;
    // Every count against the others and against the machine, before anything is written.
    if (o.task.seq_len < 2 || o.task.seq_len > o.config.n_positions)
        throw Failure{kExitUsage, "--seq-len " + std::to_string(o.task.seq_len) + " must be from 2 to the context (--context " +
                                      std::to_string(o.config.n_positions) + ")"};
    if (o.task.task == "passkey" && o.task.seq_len < model::PasskeyMinimumLength())
        throw Failure{kExitUsage, (m.seq_len ? "--seq-len " + std::to_string(o.task.seq_len) : "--context " + std::to_string(o.config.n_positions)) +
                                      " is too short for the passkey task: its sequences hold at least " + std::to_string(model::PasskeyMinimumLength()) +
                                      " tokens (the key, its sentence and the question)"};
    const int threads = m.threads.value_or(o.twin ? 1 : 2);
    CheckThreads(threads);
    const size_t memory = model::PhysicalMemoryBytes(), needs = model::EstimateTrainingBytes(o);
    if (memory > 0 && needs > memory)
        throw Failure{kExitUsage, "this training would hold about " + model::FormatBytes(needs) + " (--batch " + std::to_string(o.task.batch) +
                                      " x --seq-len " + std::to_string(o.task.seq_len) + " with the model's sizes), more than the " +
                                      model::FormatBytes(memory) + " of memory here"};
    if (auto s = model::CheckResumeCheckpoint(o); !s) throw Failure{kExitBadInput, s.error()};
    if (auto s = model::CheckTrainOutput(o); !s) throw Failure{kExitUsage, "--out: " + s.error()};
    // Threads inside each op; the SSA model and its twin already train on a thread each.
    model::SetComputeThreads(threads);
    o.command = typed;

    ProgressBar bar("train", 64);
    bool kept_allocations = false;
    auto progress = [&](const model::TrainProgress& p) {
        if (!std::exchange(kept_allocations, true)) KeepLargeAllocations();  // the corpus is encoded by the first step's
        if (p.note) {
            std::fprintf(stderr, "ssaviz: %s\n", p.note->c_str());
            return;
        }
        char label[128];
        std::snprintf(label, sizeof label, "ssa %.3f%s | %.0f tok/s | %.0f s", p.loss_ssa,
                      o.twin ? (" vanilla " + std::to_string(p.loss_vanilla).substr(0, 5)).c_str() : "", p.tokens_per_second, p.seconds);
        bar.Update(static_cast<size_t>(p.step), static_cast<size_t>(p.steps), label);
        if (p.eval) {
            std::string line = "step " + std::to_string(p.step) + ": ssa " + Describe((*p.eval)["ssa"]);
            if (o.twin) line += "; vanilla " + Describe((*p.eval)["vanilla"]);
            std::fprintf(stderr, "%s%s\n", isatty(fileno(stderr)) ? "\n" : "", line.c_str());
        }
    };
    std::error_code ec;
    const bool out_existed = std::filesystem::exists(std::filesystem::symlink_status(o.out, ec));
    auto result = [&] {
        StopAtNextStep stop(&g_interrupted);
        return model::Train(o, progress, &g_interrupted);
    }();
    if (!result && !out_existed) ::rmdir(o.out.c_str());  // --out as it was: the folder made for a run that failed goes, if empty
    if (!result && g_interrupted.load()) {
        const bool checkpoint = model::Resumable(o);
        const bool staged = o.keep_checkpoints && std::filesystem::is_directory(std::filesystem::symlink_status(o.out + "/run.new", ec));
        throw Failure{130, "train interrupted (" + result.error() + "): nothing half-written is left" +
                               (checkpoint ? "; --resume continues from the last checkpoint" : "; no checkpoint was written yet") +
                               (staged ? "; the steps kept so far are in " + model::EscapeForMessage(o.out, 4096) + "/run.new (run/ as it was)" : "")};
    }
    if (!result) throw Failure{kExitBadInput, result.error()};
    const std::string out = model::EscapeForMessage(o.out, 4096);  // a name with an escape sequence stays inert
    for (const char* role : {"ssa", "vanilla", "base"})
        if (result->contains(role)) std::printf("%s/%s: %s\n", out.c_str(), role, Describe((*result)[role]).c_str());
    std::fprintf(stderr, "ssaviz: wrote %s/ssa%s\n", out.c_str(), o.twin ? (" and " + out + "/vanilla").c_str() : "");
    if (!o.from.empty())
        std::fprintf(stderr, "ssaviz: the base they started from is %s/base (ssaviz --model %s/ssa --compare base)\n", out.c_str(), out.c_str());
    if (o.keep_checkpoints)
        std::fprintf(stderr, "ssaviz: kept the run in %s/run (ssaviz --run %s/run/ssa%s)\n", out.c_str(), out.c_str(),
                     o.twin ? (" --compare-run " + out + "/run/vanilla").c_str() : "");
    return kExitOk;
}

int CmdEval(const CommandOptions& options) {
    const std::string& dir = *options.model_dir;  // required by the table
    KeepLargeAllocations();
    const int threads = options.new_model.threads.value_or(std::min(2, model::UsableCores()));
    CheckThreads(threads);
    model::SetComputeThreads(threads);
    auto result = model::EvaluateModelFolder(dir, options.data.empty() ? std::vector<std::string>{} : DataPaths(options.data));
    if (!result) throw Failure{kExitBadInput, result.error()};
    if (options.json) std::printf("%s\n", result->dump(1).c_str());
    else std::printf("%s: %s\n", model::EscapeForMessage(dir, 4096).c_str(), Describe(*result).c_str());
    return kExitOk;
}

}  // namespace app
