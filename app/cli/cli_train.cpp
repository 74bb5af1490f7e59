// `ssaviz train` and `ssaviz eval`: the command-line side of model/train.
#include <malloc.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "app/cli/cli_common.h"
#include "model/nn/analysis.h"
#include "model/train/train.h"
#include "model/io/weights.h"

namespace app {
namespace {

using nlohmann::json;

double ParseNumber(const Flags& flags, const std::string& name, double fallback, double lo, double hi) {
    if (!flags.Has(name)) return fallback;
    const std::string text = flags.Get(name);  // Get returns a copy: keep it alive for *end
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (*end != '\0' || !(v >= lo && v <= hi))
        throw Failure{kExitUsage, name + " must be a number from " + std::to_string(lo) + " to " + std::to_string(hi)};
    return v;
}

// "sigmoid,shared,sum" -> a temperature form. Training asks for both terms, so a new model's form
// is spelled out in full (opening a checkpoint also takes "exp_exp" alone).
model::TemperatureForm ParseTrainForm(const Flags& flags, const std::string& flag, const std::string& fallback) {
    const std::string spec = flags.Get(flag, fallback);
    const auto commas = std::count(spec.begin(), spec.end(), ',');
    if (commas < 1 || commas > 2) throw Failure{kExitUsage, flag + " '" + spec + "' is not POSITION,TOKEN[,COMBINE]"};
    auto form = model::ParseFormSpec(spec);
    if (!form) throw Failure{kExitUsage, flag + ": " + form.error()};
    return *form;
}

// Training and evaluation allocate and free the same large activations batch after batch; keeping
// them in the heap instead of fresh mmap()s saves a page fault per page each time.
void KeepLargeAllocations() {
    mallopt(M_MMAP_THRESHOLD, 1 << 30);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

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

int CmdTrain(const Flags& flags) {
    if (!flags.Has("--out")) throw Failure{kExitUsage, "train needs --out DIR"};
    model::TrainOptions o;
    o.task.task = flags.Get("--task", "text");
    if (o.task.task != "text" && o.task.task != "graph" && o.task.task != "passkey")
        throw Failure{kExitUsage, "--task '" + o.task.task + "' is not one of text, graph, passkey"};
    const Recipe r = DefaultRecipe(o.task.task);
    if (o.task.task == "text") {
        if (!flags.Has("--data")) throw Failure{kExitUsage, "--task text needs --data PATH[,PATH...] (files or folders of UTF-8 text)"};
        std::stringstream in(flags.Get("--data"));
        for (std::string p; std::getline(in, p, ',');)
            if (!p.empty()) o.task.data.push_back(p);
    }
    json config = {{"n_layer", ParsePositive(flags, "--layers", r.layers)}, {"n_head", ParsePositive(flags, "--heads", r.heads)},
                   {"n_embd", ParsePositive(flags, "--width", r.width)}, {"n_positions", ParsePositive(flags, "--context", r.context)},
                   {"vocab_size", ParsePositive(flags, "--vocab", 4096)}};
    auto parsed = model::ParseConfig(config.dump(), "train flags");
    if (!parsed) throw Failure{kExitUsage, parsed.error()};
    o.config = *parsed;
    o.config.query = ParseTrainForm(flags, "--query-form", "sigmoid,shared,sum");
    o.config.value = ParseTrainForm(flags, "--value-form", "none,feature,sum");
    o.task.seq_len = ParsePositive(flags, "--seq-len", std::min(r.seq_len, o.config.n_positions));
    o.task.batch = ParsePositive(flags, "--batch", r.batch);
    o.out = flags.Get("--out");
    o.tokenizer_dir = flags.Get("--tokenizer");
    o.steps = ParsePositive(flags, "--steps", r.steps);
    o.lr = ParseNumber(flags, "--lr", r.lr, 1e-6, 1.0);
    o.warmup = flags.Has("--warmup") ? static_cast<int64_t>(ParseNumber(flags, "--warmup", 0, 0, 1e7)) : r.warmup;
    o.weight_decay = ParseNumber(flags, "--weight-decay", r.weight_decay, 0, 10);
    o.seed = static_cast<uint64_t>(ParsePositive(flags, "--seed", 1));
    o.eval_every = flags.Has("--eval-every") ? static_cast<int64_t>(ParseNumber(flags, "--eval-every", 0, 0, 1e7)) : std::max<int64_t>(1, o.steps / 8);
    o.checkpoint_every = ParsePositive(flags, "--checkpoint-every", 500);
    o.resume = flags.Has("--resume");
    o.twin = !flags.Has("--no-twin");
    o.freeze_positions = flags.Has("--freeze-positions") || (r.freeze_positions && !flags.Has("--learn-positions"));
    const std::string dtype = flags.Get("--save-dtype", "f32");
    if (dtype != "f32" && dtype != "f16") throw Failure{kExitUsage, "--save-dtype '" + dtype + "' is not f32 or f16"};
    o.storage = dtype == "f16" ? model::Dtype::F16 : model::Dtype::F32;
    // Threads inside each op; the SSA model and its twin already train on a thread each.
    model::SetComputeThreads(ParsePositive(flags, "--threads", o.twin ? 1 : 2));
    KeepLargeAllocations();
    o.command = flags.CommandLine();

    ProgressBar bar("train", 64);
    auto progress = [&](const model::TrainProgress& p) {
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
    auto result = model::Train(o, progress);
    if (!result) throw Failure{kExitBadInput, result.error()};
    for (const char* role : {"ssa", "vanilla"})
        if (result->contains(role)) std::printf("%s/%s: %s\n", o.out.c_str(), role, Describe((*result)[role]).c_str());
    std::fprintf(stderr, "ssaviz: wrote %s/ssa%s\n", o.out.c_str(), o.twin ? (" and " + o.out + "/vanilla").c_str() : "");
    return kExitOk;
}

int CmdEval(const Flags& flags) {
    if (!flags.Has("--model")) throw Failure{kExitUsage, "eval needs --model DIR (a folder ssaviz train wrote)"};
    KeepLargeAllocations();
    model::SetComputeThreads(ParsePositive(flags, "--threads", 2));
    auto result = model::EvaluateModelFolder(flags.Get("--model"), flags.Get("--data"));
    if (!result) throw Failure{kExitBadInput, result.error()};
    if (flags.Has("--json")) std::printf("%s\n", result->dump(1).c_str());
    else std::printf("%s: %s\n", flags.Get("--model").c_str(), Describe(*result).c_str());
    return kExitOk;
}

}  // namespace app
