#include "model/train/train.h"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <random>
#include <sstream>
#include <string_view>
#include <thread>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <torch/types.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adamw.h>
#include <torch/serialize.h>

#include "model/io/files.h"
#include "model/nn/model_folder_torch.h"
#include "model/text/sentencepiece.h"

namespace model {
namespace fs = std::filesystem;
namespace {

constexpr const char* kTokenizerFiles[] = {"vocab.json", "merges.txt", "tokenizer.json", "tokenizer.model"};

struct Param {
    at::Tensor* tensor;
    bool decay;
};

// Every trainable tensor of the model in the roles' order (model/arch; the optimizer's state
// follows it), under weight decay where the role says (matrices and embeddings, not their
// biases). The head is the token embedding (tied), so it is not listed again.
std::vector<Param> Parameters(SsaGpt& m, bool freeze_positions) {
    std::vector<Param> p;
    for (const RoleTensors& t : TensorsByRole(m)) {
        if (t.role == Role::Output || (freeze_positions && t.role == Role::PositionEmbedding)) continue;
        if (t.weight->defined()) p.push_back({t.weight, GetRole(t.role).decays});
        if (t.bias && t.bias->defined()) p.push_back({t.bias, false});
    }
    return p;
}

// One model being trained: its weights (autograd leaves) and its optimizer.
struct Run {
    std::string role;  // "ssa" | "vanilla"
    SsaGpt model;
    std::unique_ptr<torch::optim::AdamW> optimizer;
    std::vector<at::Tensor> params;
    double last_loss = 0;
    nlohmann::json eval;
};

// Runs `fn` on every run at once, one thread each: the SSA model and its twin train side by side,
// each on one core (faster on small CPUs than two threads inside every op, and deterministic).
void ForEachRun(std::vector<Run>& runs, const std::function<void(Run&)>& fn) {
    std::vector<std::thread> threads;
    std::vector<std::exception_ptr> errors(runs.size());
    for (size_t i = 1; i < runs.size(); ++i)
        threads.emplace_back([&, i] {
            try {
                fn(runs[i]);
            } catch (...) {
                errors[i] = std::current_exception();
            }
        });
    try {
        fn(runs[0]);
    } catch (...) {
        errors[0] = std::current_exception();
    }
    for (auto& t : threads) t.join();
    for (auto& e : errors)
        if (e) std::rethrow_exception(e);
}

void MakeTrainable(Run& run, const TrainOptions& o) {
    for (auto& p : Parameters(run.model, o.freeze_positions)) {
        *p.tensor = p.tensor->detach().clone().requires_grad_(true);  // own memory, outside inference mode
        run.params.push_back(*p.tensor);
    }
    if (o.freeze_positions) run.model.wpe = run.model.wpe.detach().clone();
    run.model.lm_head = run.model.wte;  // tied
    std::vector<at::Tensor> decay, rest;
    for (auto& p : Parameters(run.model, o.freeze_positions)) (p.decay ? decay : rest).push_back(*p.tensor);
    auto options = [&](double wd) {
        return std::make_unique<torch::optim::AdamWOptions>(
            torch::optim::AdamWOptions(o.lr).betas({0.9, 0.95}).eps(1e-8).weight_decay(wd));
    };
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(decay, options(o.weight_decay));
    groups.emplace_back(rest, options(0.0));
    run.optimizer = std::make_unique<torch::optim::AdamW>(groups, torch::optim::AdamWOptions(o.lr));
}

double LearningRate(const TrainOptions& o, int64_t step) {  // step counted from 1
    if (step <= o.warmup) return o.lr * static_cast<double>(step) / std::max<int64_t>(1, o.warmup);
    const double progress = static_cast<double>(step - o.warmup) / std::max<int64_t>(1, o.steps - o.warmup);
    const double cosine = 0.5 * (1 + std::cos(M_PI * std::min(1.0, progress)));
    return o.lr * (o.min_lr_ratio + (1 - o.min_lr_ratio) * cosine);
}

Status WriteText(const std::string& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary);
    if (!(out << text)) return Fail(path + ": cannot write");
    return Ok{};
}

Status CopyTokenizer(const std::string& from, const std::string& to) {
    int copied = 0;
    for (const char* name : kTokenizerFiles) {
        std::error_code ec;
        if (!fs::is_regular_file(fs::path(from) / name)) continue;
        fs::copy_file(fs::path(from) / name, fs::path(to) / name, fs::copy_options::overwrite_existing, ec);
        if (ec) return Fail(from + "/" + name + ": cannot copy (" + ec.message() + ")");
        ++copied;
    }
    if (!copied) return Fail("tokenizer folder '" + from + "' has no tokenizer files");
    return Ok{};
}

nlohmann::json Evaluate(const TrainingTask& task, const SsaGpt& m) {
    at::NoGradGuard no_grad;
    return task.Evaluate(m);
}

// The settings that must match for a checkpoint to resume.
nlohmann::json RunIdentity(const TrainOptions& o) {
    nlohmann::json identity = {{"config", ConfigToJson(o.config)}, {"task", TaskSpecToJson(o.task)}, {"seed", o.seed}, {"lr", o.lr},
                               {"warmup", o.warmup}, {"weight_decay", o.weight_decay}, {"twin", o.twin}, {"freeze_positions", o.freeze_positions}};
    if (!o.from.empty()) identity["from"] = o.from;  // absent from a run without a base, as it was before --from
    return identity;
}

// What train writes, file by file: a folder holding anything else is not one it wrote, and is
// never replaced (its files would be deleted with it).
const std::set<std::string> kModelFolderFiles = {"config.json", "lit_config.json", "model.safetensors", "train.json",
                                                 "vocab.json",  "merges.txt",      "tokenizer.json",    "tokenizer.model"};
const std::set<std::string> kCheckpointSideFiles = {"config.json", "lit_config.json", "model.safetensors", "optimizer.pt"};

std::string Shown(const std::string& path) { return "'" + EscapeForMessage(path) + "'"; }

Status NotOurs(const std::string& dir, const std::string& why) {
    return Fail(Shown(dir) + " " + why + ": it is not a folder ssaviz train wrote, so train leaves it alone (move it, or choose another --out)");
}

// Whether `name` is the temporary name a write of one of `names` used (CreateTempFileBeside's
// ".NAME.ssaviz-PID-N.tmp"), left by a process killed while writing it.
bool OurTempFile(const std::string& name, const std::set<std::string>& names) {
    if (name.size() < 5 || name[0] != '.' || name.compare(name.size() - 4, 4, ".tmp") != 0) return false;
    const size_t tag = name.find(".ssaviz-", 1);
    return tag != std::string::npos && names.count(name.substr(1, tag - 1));
}

// Only regular files of `names` in `dir`, and folders of `folders` (checked by the caller); with
// `temps`, also the temporary files of `names` (a folder being written when its process died).
Status OnlyOurFiles(const std::string& dir, const std::set<std::string>& names, const std::set<std::string>& folders = {},
                    bool temps = false) {
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        const fs::file_status st = it->symlink_status(ec);
        const bool ours = ((names.count(name) || (temps && OurTempFile(name, names))) && fs::is_regular_file(st)) ||
                          (folders.count(name) && fs::is_directory(st));
        if (!ours) return NotOurs(dir, "holds " + Shown(name) + (fs::is_symlink(st) ? ", a symbolic link" : ""));
    }
    if (ec) return Fail(Shown(dir) + ": cannot read (" + ec.message() + ")");
    return Ok{};
}

bool IsEmptyFolder(const std::string& dir) {
    std::error_code ec;
    return fs::is_empty(dir, ec) && !ec;
}

// A model folder train wrote for `role`: its files only, and a train.json that says so.
Status OwnedModelFolder(const std::string& dir, const std::string& role) {
    if (IsEmptyFolder(dir)) return Ok{};  // nothing in it to lose (an older train made it before failing)
    if (auto s = OnlyOurFiles(dir, kModelFolderFiles); !s) return s;
    auto record = ParseJsonFile(dir + "/train.json");
    if (!record || !record->is_object() || record->value("role", nlohmann::json()) != role)
        return NotOurs(dir, "has no train.json with \"role\": \"" + role + "\"");
    return Ok{};
}

// A checkpoint train wrote: state.json with its identity, and a folder of model and optimizer per side.
Status OwnedCheckpoint(const std::string& dir) {
    if (IsEmptyFolder(dir)) return Ok{};
    if (auto s = OnlyOurFiles(dir, {"state.json"}, {"ssa", "vanilla"}); !s) return s;
    for (const char* role : {"ssa", "vanilla"})
        if (fs::is_directory(fs::symlink_status(fs::path(dir) / role)))
            if (auto s = OnlyOurFiles(dir + "/" + role, kCheckpointSideFiles); !s) return s;
    auto state = ParseJsonFile(dir + "/state.json");
    if (!state || !state->is_object() || !state->contains("identity")) return NotOurs(dir, "has no state.json with an \"identity\"");
    return Ok{};
}

// A run train kept (--keep-checkpoints): ssa/ and vanilla/, each holding checkpoint-N/ model
// folders train wrote for that side (and the temporary folders of one being written).
Status OwnedRun(const std::string& dir) {
    if (IsEmptyFolder(dir)) return Ok{};
    if (auto s = OnlyOurFiles(dir, {}, {"ssa", "vanilla"}); !s) return s;
    for (const std::string role : {"ssa", "vanilla"}) {
        const std::string side = dir + "/" + role;
        if (!fs::is_directory(fs::symlink_status(side))) continue;
        std::error_code ec;
        for (fs::directory_iterator it(side, ec), end; !ec && it != end; it.increment(ec)) {
            const std::string name = it->path().filename().string();
            const bool step = name.rfind("checkpoint-", 0) == 0, temp = name.rfind(".checkpoint-", 0) == 0;
            const fs::file_status st = it->symlink_status(ec);
            if ((!step && !temp) || !fs::is_directory(st)) return NotOurs(side, "holds " + Shown(name) + (fs::is_symlink(st) ? ", a symbolic link" : ""));
            const std::string path = it->path().string();
            if (auto s = step ? OwnedModelFolder(path, role) : OnlyOurFiles(path, kModelFolderFiles, {}, /*temps=*/true); !s) return s;
        }
        if (ec) return Fail(Shown(side) + ": cannot read (" + ec.message() + ")");
    }
    return Ok{};
}

// Temporary folders of one run, removed when it ends however it ends (a folder already renamed
// into place is no longer there to remove); held while it runs, so that a later train removes
// those of a train that was killed (HeldTempFolder).
struct TempFolders {
    std::vector<HeldTempFolder> held;
    ~TempFolders() {
        std::error_code ec;
        for (const HeldTempFolder& f : held) fs::remove_all(f.path(), ec);
    }
    Result<std::string> Beside(const std::string& path) {
        auto temp = HeldTempFolder::Create(path);
        if (!temp) return Fail(temp.error());
        held.push_back(std::move(*temp));
        return held.back().path();
    }
};

Status SaveCheckpoint(const std::string& dir, std::vector<Run>& runs, const nlohmann::json& state) {
    TempFolders temps;
    auto tmp = temps.Beside(dir);
    if (!tmp) return Fail(tmp.error());
    for (auto& run : runs) {
        const std::string d = *tmp + "/" + run.role;
        std::error_code ec;
        fs::create_directory(d, ec);
        if (ec) return Fail(d + ": cannot create (" + ec.message() + ")");
        if (auto s = SaveModelFolder(run.model, d); !s) return s;
        try {
            torch::save(*run.optimizer, d + "/optimizer.pt");
        } catch (const std::exception& e) {
            return Fail(d + "/optimizer.pt: cannot write");
        }
    }
    if (auto s = WriteText(*tmp + "/state.json", JsonText(state, 1)); !s) return s;
    return ReplaceFolder(*tmp, dir, OwnedCheckpoint);
}

// One step of a kept run: each side's weights as a model folder FOLDER/ROLE/checkpoint-STEP/,
// in the storage dtype, with the tokenizer and a train.json naming the step (so `ssaviz eval`
// scores it too).
Status SaveRunStep(const TrainOptions& o, const std::string& folder, const std::vector<Run>& runs, int64_t step, const nlohmann::json& task) {
    for (const Run& run : runs) {
        const std::string side = folder + "/" + run.role;
        std::error_code ec;
        if (!fs::is_directory(fs::symlink_status(side, ec))) fs::create_directory(side, ec);
        if (ec) return Fail(Shown(side) + ": cannot create (" + ec.message() + ")");
        const std::string dir = side + "/checkpoint-" + std::to_string(step);
        TempFolders temps;
        auto tmp = temps.Beside(dir);
        if (!tmp) return Fail(tmp.error());
        if (auto s = SaveModelFolder(run.model, *tmp, o.storage); !s) return s;
        if (auto s = CopyTokenizer(o.tokenizer_dir, *tmp); !s) return s;
        const nlohmann::json record = {{"role", run.role}, {"step", step},      {"steps", o.steps},          {"task", task},
                                       {"seed", o.seed}, {"command", o.command}, {"identity", RunIdentity(o)}};
        if (auto s = WriteText(*tmp + "/train.json", JsonText(record, 1) + "\n"); !s) return s;
        if (auto s = ReplaceFolder(*tmp, dir, [&](const std::string& d) { return OwnedModelFolder(d, run.role); }); !s) return s;
    }
    return Ok{};
}

// Whether `folder` (run/ or run.new/) holds this run's kept steps up to the checkpoint's `step`:
// its ssa/checkpoint-STEP written with these settings (RunIdentity; a step kept before train.json
// named them, by its seed and `task`, the task's spec). Resuming into another run's steps would
// mix two runs in one timeline, and at the end put them over run/.
bool KeptStepsOf(const TrainOptions& o, const std::string& folder, int64_t step, const nlohmann::json* task) {
    auto record = ParseJsonFile(folder + "/ssa/checkpoint-" + std::to_string(step) + "/train.json");
    if (!record || !record->is_object()) return false;
    if (record->contains("identity")) return (*record)["identity"] == RunIdentity(o);
    return task && record->value("seed", nlohmann::json()) == nlohmann::json(o.seed) && record->value("task", nlohmann::json()) == *task;
}

// Kept steps after the checkpoint's `step` that another schedule wrote (their train.json's "steps"
// not this run's --steps): resuming would replace those it reaches again with another trajectory
// and leave the rest, two runs drawn as one (an older checkpoint put back, trained further). A step
// this schedule wrote is what resuming writes again (a train stopped between a kept step and its
// checkpoint).
std::vector<std::string> LaterStepsOfAnotherSchedule(const TrainOptions& o, const std::string& folder, int64_t step) {
    std::vector<std::string> found;
    std::error_code ec;
    for (const char* role : {"ssa", "vanilla"})
        for (fs::directory_iterator it(folder + "/" + role, ec), end; !ec && it != end && found.size() < 4; it.increment(ec)) {
            const std::string name = it->path().filename().string(), prefix = "checkpoint-";
            if (name.compare(0, prefix.size(), prefix) != 0 || name.size() == prefix.size() || name.size() > prefix.size() + 18 ||
                name.find_first_not_of("0123456789", prefix.size()) != std::string::npos)
                continue;
            if (std::stoll(name.substr(prefix.size())) <= step) continue;
            auto record = ParseJsonFile(it->path().string() + "/train.json");
            const nlohmann::json steps = record && record->is_object() ? record->value("steps", nlohmann::json()) : nlohmann::json();
            if (steps != nlohmann::json(o.steps))
                found.push_back(std::string(role) + "/" + name + (steps.is_number_integer() ? " (of --steps " + steps.dump() + ")" : ""));
        }
    return found;
}

// A new run keeps its steps in run.new/ until it ends; a resumed one where its steps are: run.new/
// (an unfinished new run: it must be this run's), else run/ when that is this run's (a finished run
// trained further), else a new run.new/ from the checkpoint's step on.
Result<std::string> KeptStepsFolder(const TrainOptions& o, int64_t step, const nlohmann::json* task) {
    const std::string kept = o.out + "/run", staged = o.out + "/run.new";
    std::error_code ec;
    if (!o.resume) return staged;
    if (fs::is_directory(fs::symlink_status(staged, ec))) {
        if (IsEmptyFolder(staged) || KeptStepsOf(o, staged, step, task)) return staged;  // empty: a resume stopped before its first step
        return Fail(Shown(staged) + " holds kept steps of another run than the checkpoint " + Shown(o.out + "/checkpoint") + " (no step " +
                    std::to_string(step) + " of these settings: a new run stopped before its first checkpoint, or one with other "
                    "settings): move it away, or train again without --resume (" + Shown(kept) + " is as it was)");
    }
    if (fs::is_directory(fs::symlink_status(kept, ec)) && KeptStepsOf(o, kept, step, task)) return kept;
    // run/ holding steps of this very run but not the checkpoint's (one removed by hand): a new
    // run.new/ would replace them at the end, this run's own steps lost. Another run's steps are
    // replaced at the end, as a new train replaces them.
    for (const char* role : {"ssa", "vanilla"})
        for (fs::directory_iterator it(kept + "/" + role, ec), end; !ec && it != end; it.increment(ec)) {
            auto record = ParseJsonFile(it->path().string() + "/train.json");
            if (record && record->is_object() && record->value("identity", nlohmann::json()) == RunIdentity(o)) {
                const std::string at = kept + "/ssa/checkpoint-" + std::to_string(step);
                if (fs::exists(fs::symlink_status(at, ec)))  // there, but another run's (its train.json edited, or copied in)
                    return Fail(Shown(kept) + " holds this run's kept steps, but its step " + std::to_string(step) + ", " + Shown(at) +
                                ", is of another run (other settings): resuming would replace it; put this run's back, or move " +
                                Shown(kept) + " away");
                return Fail(Shown(kept) + " holds this run's kept steps but not its step " + std::to_string(step) + " (" +
                            Shown(it->path().filename().string()) + " is one): resuming would replace them; put the step back, or move " +
                            Shown(kept) + " away");
            }
        }
    return staged;
}

// What resuming reads from state.json, each field checked for its type: a file edited by hand (or
// not written by train) is an error naming the field, never a JSON library exception.
struct ResumeState {
    int64_t step = 0;
    std::mt19937_64 rng;
    double seconds = 0;
    nlohmann::json history = nlohmann::json::array();
    std::string tokenizer;  // the tokenizer's digest (TokenizerDigest); empty in checkpoints written before it
};

Result<ResumeState> ReadResumeState(const std::string& path, const nlohmann::json& state, const nlohmann::json& identity) {
    auto bad = [&](const std::string& field, const std::string& what) {
        return Fail(EscapeForMessage(path) + ": '" + field + "' must be " + what +
                    (state.is_object() && state.contains(field) ? ", not " + DescribeJson(state[field]) : ""));
    };
    if (!state.is_object()) return Fail(EscapeForMessage(path) + ": not a JSON object (" + DescribeJson(state) + ")");
    if (!state.contains("identity") || state["identity"] != identity)
        return Fail(EscapeForMessage(fs::path(path).parent_path().string()) +
                    ": was written with other settings (model shape, task, seed or optimizer); resume with the same flags");
    ResumeState r;
    const nlohmann::json& step = state.value("step", nlohmann::json());
    if (!step.is_number_integer() || step.get<int64_t>() < 0) return bad("step", "a whole number of steps");
    r.step = step.get<int64_t>();
    const nlohmann::json& rng = state.value("rng", nlohmann::json());
    if (!rng.is_string()) return bad("rng", "the batch generator's state (a string)");
    // The generator's whole state and nothing after it: a cut or edited state is refused, not half read.
    std::istringstream rng_state(rng.get<std::string>());
    if (!(rng_state >> r.rng) || !(rng_state >> std::ws).eof())
        return Fail(EscapeForMessage(path) + ": 'rng' is not the batch generator's state (312 whole numbers)");
    if (state.contains("seconds")) {
        if (!state["seconds"].is_number() || !(state["seconds"].get<double>() >= 0) || !std::isfinite(state["seconds"].get<double>()))
            return bad("seconds", "a number of seconds, 0 or more");
        r.seconds = state["seconds"].get<double>();
    }
    if (state.contains("history")) {
        if (!state["history"].is_array()) return bad("history", "an array");
        for (const nlohmann::json& e : state["history"])  // train's evaluations, copied into train.json as they are
            if (!e.is_object() || !e.value("step", nlohmann::json()).is_number_integer()) return bad("history", "an array of evaluations (objects with a step)");
        r.history = state["history"];
    }
    if (state.contains("tokenizer")) {
        if (!state["tokenizer"].is_string()) return bad("tokenizer", "the tokenizer's digest (a string)");
        r.tokenizer = state["tokenizer"].get<std::string>();
    }
    return r;
}

// The tokenizer's files, as one FNV-1a digest: a run resumes only with the tokenizer its
// checkpoint was trained with (a text task's is trained again from --data, which may have changed).
Result<std::string> TokenizerDigest(const std::string& dir) {
    uint64_t h = 1469598103934665603ULL;
    auto mix = [&](std::string_view bytes) {
        for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ULL;
    };
    for (const char* name : kTokenizerFiles) {
        const fs::path path = fs::path(dir) / name;
        std::error_code ec;
        if (!fs::is_regular_file(path, ec)) continue;  // a link to one counts, as the tokenizer reads it (a hub snapshot's)
        auto bytes = ReadFile(path.string(), kMaxTokenizerFileBytes);
        if (!bytes) return Fail(bytes.error());
        mix(name);
        mix(std::string_view("\0", 1));
        mix(*bytes);
    }
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
    return std::string(hex);
}

// A checkpoint's side against the run it resumes: the same shape, or the run's flags were changed
// under it (its state.json kept while the models were replaced).
Status SameShape(const std::string& where, const ModelConfig& want, const ModelConfig& got) {
    auto field = [](const char* name, int64_t a) { return std::string(name) + " " + std::to_string(a); };
    const std::pair<const char*, std::pair<int64_t, int64_t>> fields[] = {
        {"layers", {want.n_layer, got.n_layer}}, {"heads", {want.n_head, got.n_head}}, {"width", {want.n_embd, got.n_embd}},
        {"context", {want.n_positions, got.n_positions}}, {"vocabulary", {want.vocab_size, got.vocab_size}}};
    for (const auto& [name, values] : fields)
        if (values.first != values.second)
            return Fail(where + ": a model of " + field(name, values.second) + ", where the run has " + std::to_string(values.first) +
                        ": not this run's checkpoint (resume with the flags it was trained with, or train anew without --resume)");
    return Ok{};
}

}  // namespace

SsaGpt InitSsaGpt(const ModelConfig& c, uint64_t seed, bool zero_positions) {
    at::NoGradGuard no_grad;
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    at::Generator ssa_gen = at::make_generator<at::CPUGeneratorImpl>(seed ^ 0x55aa55aaULL);  // twin-independent
    const int64_t E = c.n_embd, H = c.n_head, D = c.HeadSize();
    auto normal = [&](std::vector<int64_t> shape, double std) { return at::normal(0.0, std, shape, gen); };
    const double residual = 0.02 / std::sqrt(2.0 * c.n_layer);
    auto temperature = [&](const TemperatureForm& form) {
        TemperatureParams p;
        if (form.position != PositionForm::None) p.pos = at::full({H}, form.position == PositionForm::Linear ? 0.27 : -1.0);
        if (form.token != TokenForm::None) {
            const int64_t n = form.token == TokenForm::Shared ? D : E;
            p.tok_w = at::normal(0.0, 0.02, {H, n}, ssa_gen);
            p.tok_b = at::zeros({H});
        }
        return p;
    };
    SsaGpt m;
    m.config = c;
    m.layout = GetFormat(FormatOf(c)).layout;
    m.wte = normal({c.vocab_size, E}, 0.02);
    m.wpe = zero_positions ? at::zeros({c.n_positions, E}) : normal({c.n_positions, E}, 0.01);
    for (int l = 0; l < c.n_layer; ++l) {
        LayerWeights w;
        w.ln1_w = at::ones({E}); w.ln1_b = at::zeros({E});
        w.attn_w = normal({E, 3 * E}, 0.02); w.attn_b = at::zeros({3 * E});
        w.proj_w = normal({E, E}, residual); w.proj_b = at::zeros({E});
        w.ln2_w = at::ones({E}); w.ln2_b = at::zeros({E});
        w.fc_w = normal({E, 4 * E}, 0.02); w.fc_b = at::zeros({4 * E});
        w.mlp_proj_w = normal({4 * E, E}, residual); w.mlp_proj_b = at::zeros({E});
        w.q = temperature(c.query);
        w.v = temperature(c.value);
        m.layers.push_back(std::move(w));
    }
    m.ln_f_w = at::ones({E});
    m.ln_f_b = at::zeros({E});
    m.lm_head = m.wte;
    return m;
}

Result<SsaGpt> LoadFineTuneBase(const std::string& dir) {
    auto base = LoadSsaGptFolder(dir, at::kCPU);
    if (!base) return Fail("--from: " + base.error());
    const ModelConfig& c = base->config;
    const std::string shown = "--from: " + Shown(dir);
    if (c.family != "gpt2") return Fail(shown + " is a " + EscapeForMessage(c.family) + " model; train fine-tunes GPT-2-shaped models");
    if (!c.tied_head || c.lm_head_bias || !c.bias || !c.norm_bias)
        return Fail(shown + " has " + std::string(!c.tied_head || c.lm_head_bias ? "an output head of its own" : "no biases") +
                    "; train fine-tunes GPT-2-shaped models (a tied head, biases)");
    if (c.IsSsa()) return Fail(shown + " has temperatures already; a fine-tune starts from a vanilla model (its base)");
    return base;
}

namespace {
// A fine-tune's temperatures start where the official code's do: a position slope of
// exp(-exp(2)) = 6.2e-4 (its attn.beta of 2; 1 + s ln i stays within 0.006 of 1 over 8,192
// tokens) and token terms of zero weights (tanh 0), so the SSA model starts as its base.
void StartNearOne(TemperatureParams& p, const TemperatureForm& form) {
    constexpr double kOfficialBeta = 2.0;
    const double slope = std::exp(-std::exp(kOfficialBeta));
    if (p.pos.defined())
        p.pos.fill_(form.position == PositionForm::ExpExp ? kOfficialBeta
                    : form.position == PositionForm::Sigmoid ? std::log(slope / (1 - slope))
                                                             : slope);
    if (p.tok_w.defined()) p.tok_w.zero_();
    if (p.tok_b.defined()) p.tok_b.zero_();
}

// A fine-tune's start: `base`'s weights in a model of `config` (its shape, with the forms of the
// side being trained) and temperatures near one (StartNearOne).
Result<SsaGpt> StartFromBase(const SsaGpt& base, const ModelConfig& config, uint64_t seed, bool zero_positions) {
    SsaGpt m = InitSsaGpt(config, seed, zero_positions);
    at::NoGradGuard no_grad;
    for (LayerWeights& w : m.layers) {
        StartNearOne(w.q, config.query);
        StartNearOne(w.v, config.value);
    }
    const std::vector<RoleTensors> from = TensorsByRole(const_cast<SsaGpt&>(base)), to = TensorsByRole(m);
    if (from.size() != to.size()) return Fail("--from: the base has " + std::to_string(base.layers.size()) + " layers, not " + std::to_string(m.layers.size()));
    for (size_t k = 0; k < to.size(); ++k) {
        if (to[k].role == Role::Output) continue;  // tied: the token embedding
        for (const auto& [src, dst] : {std::pair(from[k].weight, to[k].weight), std::pair(from[k].bias, to[k].bias)}) {
            if (!src || !src->defined() || !dst || !dst->defined()) continue;  // the temperatures
            if (src->sizes() != dst->sizes())
                return Fail("--from: the base's " + std::string(GetRole(to[k].role).what) + (to[k].layer >= 0 ? " of layer " + std::to_string(to[k].layer) : "") +
                            " is " + ShapeString(src->sizes().vec()) + ", not " + ShapeString(dst->sizes().vec()) + " as train makes it");
            *dst = src->to(at::kFloat).contiguous().clone();
        }
    }
    m.lm_head = m.wte;
    return m;
}
}  // namespace

Status CheckTrainOutput(const TrainOptions& o) {
    std::vector<std::string> roles = {"ssa"};
    if (o.twin) roles.push_back("vanilla");
    if (!o.from.empty()) roles.push_back("base");
    // The base is read before anything is written, but a train must not replace it: --out's
    // folders are the fine-tune's, never the model it started from.
    std::vector<std::string> replaced = {"checkpoint", "run", "run.new"};
    replaced.insert(replaced.end(), roles.begin(), roles.end());
    if (!o.from.empty())
        for (const std::string& folder : replaced)
            if (IsWithin(o.from, o.out + "/" + folder))
                return Fail(Shown(o.out + "/" + folder) + " would replace --from " + Shown(o.from) + ", the model it starts from: choose another --out");
    for (const std::string& role : roles)
        if (auto s = CheckReplaceableFolder(o.out + "/" + role, [&](const std::string& d) { return OwnedModelFolder(d, role); }); !s) return s;
    if (o.keep_checkpoints)
        for (const char* run : {"/run", "/run.new"})
            if (auto s = CheckReplaceableFolder(o.out + run, OwnedRun); !s) return s;
    return CheckReplaceableFolder(o.out + "/checkpoint", OwnedCheckpoint);
}

namespace {
// `why`: ParseJsonFile's error, which names the file and what it is instead (missing, a FIFO, not JSON).
std::string NothingToResume(const std::string& why) { return "--resume: nothing to resume (" + why + ")"; }
}  // namespace

Status CheckResumeCheckpoint(const TrainOptions& o) {
    const std::string file = o.out + "/checkpoint/state.json";
    if (!o.resume) return Ok{};
    if (auto state = ParseJsonFile(file); !state) return Fail(NothingToResume(state.error()));
    return Ok{};
}

bool Resumable(const TrainOptions& o) {
    auto state = ParseJsonFile(o.out + "/checkpoint/state.json");
    if (!state || !state->is_object() || !state->value("step", nlohmann::json()).is_number_integer()) return false;
    // An unfinished run's kept steps must reach the checkpoint's step (their settings are for the
    // resume itself to check: these options are the command line's, before Train completes them).
    const std::string staged = o.out + "/run.new";
    std::error_code ec;
    if (!o.keep_checkpoints || !fs::is_directory(fs::symlink_status(staged, ec)) || IsEmptyFolder(staged)) return true;
    return fs::is_directory(fs::symlink_status(staged + "/ssa/checkpoint-" + std::to_string((*state)["step"].get<int64_t>()), ec));
}

size_t EstimateTrainingBytes(const TrainOptions& o) {
    const ModelConfig& c = o.config;
    const double V = std::max(c.vocab_size, 1), E = c.n_embd, L = c.n_layer, H = c.n_head, C = c.n_positions;
    const double B = o.task.batch, T = o.task.seq_len;
    // Weights, gradients and AdamW's two moments; then what autograd keeps of one batch: about 16
    // widths a token per layer, the [H, T, T] scores, softmax and mask, and the logits three times.
    const double parameters = (V + C) * E + L * (12 * E * E + 13 * E) + 2 * E;
    const double activations = L * (B * T * 16 * E + 3 * B * H * T * T) + 3 * B * T * V;
    const double bytes = (o.twin ? 2 : 1) * 4 * (4 * parameters + 2 * activations);  // backward holds as much again
    return bytes >= 1.8e19 ? SIZE_MAX : static_cast<size_t>(bytes);
}

Result<nlohmann::json> Train(const TrainOptions& o_in, const std::function<void(const TrainProgress&)>& progress,
                             const std::atomic<bool>* cancel) {
    TrainOptions o = o_in;
    if (o.steps < 1) return Fail("--steps must be at least 1");
    // A fine-tune has its base's shape and tokenizer, whatever o.config said of the shape.
    std::optional<SsaGpt> base;
    std::string tokenizer_flag = o.tokenizer_dir.empty() ? "" : "--tokenizer: ";  // what a tokenizer that does not load is said as
    if (!o.from.empty()) {
        if (o.from_opened) {
            base = *o.from_opened;  // its tensors, shared: a fine-tune reads them only
        } else {
            auto loaded = LoadFineTuneBase(o.from);
            if (!loaded) return Fail(loaded.error());
            base = std::move(*loaded);
        }
        ModelConfig shape = base->config;
        shape.query = o.config.query;
        shape.value = o.config.value;
        o.config = shape;
        if (o.tokenizer_dir.empty()) {  // the base's own: its folder's, or beside its checkpoint file
            std::error_code ec;
            o.tokenizer_dir = fs::is_regular_file(o.from, ec) ? fs::path(o.from).parent_path().string() : o.from;
            if (o.tokenizer_dir.empty()) o.tokenizer_dir = ".";
            tokenizer_flag = "--from: ";
        }
    }
    if (o.task.seq_len > o.config.n_positions)
        return Fail("--seq-len " + std::to_string(o.task.seq_len) + " exceeds the context " + std::to_string(o.config.n_positions));
    if (o.config.n_head < 1 || o.config.n_embd % o.config.n_head != 0)
        return Fail("--width " + std::to_string(o.config.n_embd) + " is not a multiple of --heads " + std::to_string(o.config.n_head));
    if (auto s = CheckResumeCheckpoint(o); !s) return Fail(s.error());
    if (auto s = CheckTrainOutput(o); !s) return Fail(s.error());
    const std::error_code ec = MakeFolders(o.out);
    if (ec) return Fail(o.out + ": cannot create (" + ec.message() + ")");
    // One train at a time in a folder (two mixed their steps and checkpoints): a lock on the folder
    // itself, released however this process ends. A file system without locks goes on without.
    struct FolderLock {
        int fd;
        ~FolderLock() { if (fd >= 0) ::close(fd); }
    } const lock{::open(o.out.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
    if (lock.fd >= 0 && ::flock(lock.fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK)
        return Fail(Shown(o.out) + " is in use by another ssaviz train: wait for it to end, or choose another --out");
    TempFolders temps;  // the tokenizer trained here and the model folders until they are in place

    // Tokenizer: given, built in for synthetic tasks, or a SentencePiece model trained on the corpus.
    // A tokenizer made here lives in a temporary folder: each model folder gets its own copy.
    const bool tokenizer_from_data = o.tokenizer_dir.empty() && o.task.task == "text";
    if (o.tokenizer_dir.empty()) {
        auto made = temps.Beside(o.out + "/tokenizer");
        if (!made) return Fail(made.error());
        o.tokenizer_dir = *made;
        if (o.task.task == "text") {
            auto corpus = ReadCorpus(o.task.data);
            if (!corpus) return Fail(corpus.error());
            std::vector<std::string> lines;
            for (const auto& text : corpus->texts) {
                std::istringstream in(text);
                for (std::string line; std::getline(in, line);) lines.push_back(line);
            }
            SentencePieceTraining sp;
            sp.vocab_size = o.config.vocab_size > 0 ? o.config.vocab_size : 4096;
            if (auto s = TrainSentencePiece(lines, sp, o.tokenizer_dir + "/tokenizer.model"); !s) return Fail(s.error());
        } else if (auto s = WriteTaskTokenizer(o.task.task, o.tokenizer_dir); !s) {
            return Fail(s.error());
        }
    }
    auto tokenizer = LoadTokenizer(o.tokenizer_dir);
    if (!tokenizer) return Fail(tokenizer_flag + tokenizer.error());
    auto digest = TokenizerDigest(o.tokenizer_dir);
    if (!digest) return Fail(tokenizer_flag + digest.error());
    const std::string tokenizer_digest = *digest;
    if (!base) {
        o.config.vocab_size = static_cast<int>((*tokenizer)->VocabSize());
    } else if (static_cast<int64_t>((*tokenizer)->VocabSize()) > o.config.vocab_size) {
        return Fail("--from: the tokenizer has " + std::to_string((*tokenizer)->VocabSize()) + " tokens, more than the base's " +
                    std::to_string(o.config.vocab_size) + " embeddings");
    }
    auto task = MakeTask(o.task, **tokenizer, cancel);
    if (!task) return Fail(task.error());
    if (const auto skipped = (*task)->spec.find("skipped"); skipped != (*task)->spec.end() && progress) {
        std::string note = "--data: skipped";
        const size_t count = (*task)->spec.value("skipped_files", skipped->size());
        for (size_t i = 0; i < skipped->size() && i < 3; ++i) note += (i ? ", " : " ") + (*skipped)[i].get<std::string>();
        if (count > 3) note += " and " + std::to_string(count - 3) + " more (train.json's task.skipped)";
        TrainProgress said;
        said.note = &note;
        progress(said);
    }

    ModelConfig vanilla_config = o.config;
    vanilla_config.query = vanilla_config.value = TemperatureForm{};
    std::vector<Run> runs;
    for (const ModelConfig* config : {&o.config, &vanilla_config}) {
        if (config == &vanilla_config && !o.twin) break;
        auto weights = base ? StartFromBase(*base, *config, o.seed, o.freeze_positions) : Result<SsaGpt>(InitSsaGpt(*config, o.seed, o.freeze_positions));
        if (!weights) return Fail(weights.error());
        runs.push_back({config == &o.config ? "ssa" : "vanilla", std::move(*weights), nullptr, {}, 0, {}});
    }

    const std::string checkpoint = o.out + "/checkpoint";
    std::mt19937_64 rng(o.seed);
    int64_t start = 0;
    double seconds_before = 0;
    nlohmann::json history = nlohmann::json::array();
    if (o.resume) {
        auto read = ParseJsonFile(checkpoint + "/state.json");
        if (!read) return Fail(NothingToResume(read.error()));
        auto state = ReadResumeState(checkpoint + "/state.json", *read, RunIdentity(o));
        if (!state) return Fail(state.error());
        if (state->step > o.steps)
            return Fail(EscapeForMessage(checkpoint) + " is at step " + std::to_string(state->step) + ", past --steps " + std::to_string(o.steps) +
                        ": nothing to resume (give --steps of at least " + std::to_string(state->step) + ")");
        if (!state->tokenizer.empty() && state->tokenizer != tokenizer_digest)
            return Fail(EscapeForMessage(checkpoint) + " was trained with another tokenizer than this run's" +
                        (tokenizer_from_data ? std::string(" (made from --data: has the data changed?)") : std::string()) +
                        "; resume with what it was trained on");
        for (auto& run : runs) {
            auto loaded = LoadSsaGptFolder(checkpoint + "/" + run.role, at::kCPU);
            if (!loaded) return Fail(loaded.error());
            if (auto same = SameShape(EscapeForMessage(checkpoint + "/" + run.role), run.model.config, loaded->config); !same) return Fail(same.error());
            run.model = std::move(*loaded);
        }
        rng = state->rng;
        start = state->step;
        seconds_before = state->seconds;
        history = std::move(state->history);
    }
    for (auto& run : runs) {
        MakeTrainable(run, o);
        if (o.resume) {
            // A regular file first: LibTorch's reader waited for ever on a FIFO there, and said nothing of a missing one.
            const std::string file = checkpoint + "/" + run.role + "/optimizer.pt";
            if (Status s = CheckRegularFile(file, SIZE_MAX); !s) return Fail(s.error() + ": --resume needs the optimizer's state the checkpoint saved");
            try {
                torch::load(*run.optimizer, file);
            } catch (const std::exception& e) {
                const std::string what = e.what();
                return Fail(Quoted(file) + ": not the optimizer's state of this run (" + EscapeForMessage(what.substr(0, what.find('\n'))) + ")");
            }
        }
    }

    if (cancel && cancel->load()) return Fail("cancelled before the first step");  // the tokenizer's training is not cut short
    // The kept steps of a new run go to run.new/ (an unfinished new run's left there is replaced)
    // and take run/'s place only when the run ends, so an older run's stay whole until then; a
    // resumed run continues where its steps are (KeptStepsFolder).
    const std::string kept = o.out + "/run", staged = o.out + "/run.new";
    std::string steps_folder = kept;
    if (o.keep_checkpoints) {
        std::error_code ec;
        auto folder = KeptStepsFolder(o, start, &(*task)->spec);
        if (!folder) return Fail(folder.error());
        steps_folder = *folder;
        if (const std::vector<std::string> later = o.resume ? LaterStepsOfAnotherSchedule(o, steps_folder, start) : std::vector<std::string>();
            !later.empty()) {
            std::string names;
            for (const std::string& n : later) names += (names.empty() ? "" : ", ") + n;
            return Fail(Shown(steps_folder) + " holds kept steps after the checkpoint's step " + std::to_string(start) + " of another schedule (" +
                        names + "): resuming with --steps " + std::to_string(o.steps) +
                        " would replace them with another trajectory; resume with their --steps, or move them away");
        }
        if (!o.resume) {
            auto empty = temps.Beside(staged);
            if (!empty) return Fail(empty.error());
            if (auto s = ReplaceFolder(*empty, staged, OwnedRun); !s) return Fail(s.error());
            if (auto s = SaveRunStep(o, staged, runs, 0, (*task)->spec); !s) return Fail(s.error());
        } else if (!fs::is_directory(fs::symlink_status(steps_folder, ec))) {
            fs::create_directory(steps_folder, ec);  // a run trained without --keep-checkpoints keeps its steps from here on
            if (ec) return Fail(Shown(steps_folder) + ": cannot create (" + ec.message() + ")");
        }
    }

    const auto t0 = std::chrono::steady_clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
    auto evaluate_all = [&](int64_t step) {
        nlohmann::json e = {{"step", step}};
        ForEachRun(runs, [&](Run& run) { run.eval = Evaluate(**task, run.model); });
        for (auto& run : runs) e[run.role] = run.eval;
        return e;
    };
    for (int64_t step = start + 1; step <= o.steps; ++step) {
        if (cancel && cancel->load()) return Fail("cancelled at step " + std::to_string(step));
        const double lr = LearningRate(o, step);
        TaskBatch batch = (*task)->Sample(rng);
        ForEachRun(runs, [&](Run& run) {
            for (auto& group : run.optimizer->param_groups())
                static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
            run.optimizer->zero_grad();
            at::Tensor loss = (*task)->Loss(run.model, batch);
            loss.backward();
            if (o.grad_clip > 0) torch::nn::utils::clip_grad_norm_(run.params, o.grad_clip);
            run.optimizer->step();
            run.last_loss = loss.item<double>();
        });
        for (auto& run : runs) {
            if (std::isfinite(run.last_loss)) continue;
            const std::string loss = std::isnan(run.last_loss) ? "NaN" : run.last_loss > 0 ? "inf" : "-inf";
            // The first step's loss is of the weights it started from, before any update: no --lr made it.
            if (step == 1)
                return Fail(run.role + " loss is " + loss + " at step 1, before any update: the weights it starts from overflow float range" +
                            (o.from.empty() ? "" : " (--from " + Shown(o.from) + ")"));
            return Fail(run.role + " loss became " + loss + " at step " + std::to_string(step) + "; lower --lr");
        }
        TrainProgress p;
        p.step = step;
        p.steps = o.steps;
        p.loss_ssa = runs[0].last_loss;
        p.loss_vanilla = runs.size() > 1 ? runs[1].last_loss : NAN;
        p.seconds = seconds_before + elapsed();
        p.tokens_per_second = (step - start) * (*task)->TokensPerBatch() / std::max(1e-9, elapsed());
        nlohmann::json eval;
        if ((o.eval_every > 0 && step % o.eval_every == 0) || step == o.steps) {
            eval = evaluate_all(step);
            if (cancel && cancel->load()) return Fail("cancelled at step " + std::to_string(step) + " while scoring it");  // partial scores
            eval["train_loss"] = {{"ssa", p.loss_ssa}, {"vanilla", runs.size() > 1 ? p.loss_vanilla : 0.0}};
            history.push_back(eval);
            p.eval = &eval;
        }
        if ((o.checkpoint_every > 0 && step % o.checkpoint_every == 0) || step == o.steps) {
            std::ostringstream rng_state;
            rng_state << rng;
            nlohmann::json state = {{"identity", RunIdentity(o)}, {"step", step}, {"rng", rng_state.str()},
                                    {"seconds", p.seconds}, {"history", history}, {"tokenizer", tokenizer_digest}};
            if (o.keep_checkpoints)
                if (auto s = SaveRunStep(o, steps_folder, runs, step, (*task)->spec); !s) return Fail(s.error());
            if (auto s = SaveCheckpoint(checkpoint, runs, state); !s) return Fail(s.error());
        }
        if (progress) progress(p);
    }

    // The models as shipped: written in the storage dtype, read back, and scored from the files.
    nlohmann::json final_eval = nlohmann::json::object();
    const double seconds = seconds_before + elapsed();
    std::map<std::string, std::string> written;  // role -> its folder, complete but not yet in place
    // A signal after the last step is not dropped (the models were written and exit 0): the run
    // stops before its models are put in place, as at any step, its last checkpoint kept.
    auto cancelled = [&] { return cancel && cancel->load(); };
    if (progress && o.task.task == "text") {  // minutes with a 50k vocabulary: said, not silent
        std::string note = "scoring the " + std::to_string(runs.size() + (base ? 1 : 0)) + " models as written on the held-out text";
        TrainProgress said;
        said.note = &note;
        progress(said);
    }
    for (auto& run : runs) {
        if (cancelled()) return Fail("cancelled after the last step, before the models were written");
        auto dir = temps.Beside(o.out + "/" + run.role);
        if (!dir) return Fail(dir.error());
        written[run.role] = *dir;
        if (auto s = SaveModelFolder(run.model, *dir, o.storage); !s) return Fail(s.error());
        if (auto s = CopyTokenizer(o.tokenizer_dir, *dir); !s) return Fail(s.error());
        auto saved = LoadSsaGptFolder(*dir, at::kCPU);
        if (!saved) return Fail(saved.error());
        final_eval[run.role] = Evaluate(**task, *saved);
        if (cancelled()) return Fail("cancelled after the last step, while scoring the models written");
    }
    if (base) {  // the weights both started from, exactly (f32), beside them for --compare base
        auto dir = temps.Beside(o.out + "/base");
        if (!dir) return Fail(dir.error());
        written["base"] = *dir;
        if (auto s = SaveModelFolder(*base, *dir, Dtype::F32); !s) return Fail(s.error());
        if (auto s = CopyTokenizer(o.tokenizer_dir, *dir); !s) return Fail(s.error());
        final_eval["base"] = Evaluate(**task, *base);
        const nlohmann::json record = {{"role", "base"}, {"from", o.from}, {"command", o.command}, {"task", (*task)->spec},
                                       {"parameters", base->ParameterCount()}, {"final", final_eval["base"]}};
        if (auto s = WriteText(*dir + "/train.json", JsonText(record, 1) + "\n"); !s) return Fail(s.error());
    }
    for (auto& run : runs) {
        nlohmann::json record = {
            {"role", run.role}, {"twin", std::string(run.role == "ssa" ? (o.twin ? "../vanilla" : "") : "../ssa")},
            {"command", o.command}, {"task", (*task)->spec}, {"steps", o.steps}, {"seed", o.seed},
            {"lr", o.lr}, {"warmup", o.warmup}, {"min_lr_ratio", o.min_lr_ratio}, {"weight_decay", o.weight_decay},
            {"grad_clip", o.grad_clip}, {"batch", o.task.batch}, {"seq_len", o.task.seq_len},
            {"freeze_positions", o.freeze_positions}, {"storage", ToString(o.storage)},
            {"threads", at::get_num_threads()}, {"wall_seconds", seconds},
            {"parameters", run.model.ParameterCount()}, {"final", final_eval[run.role]}, {"history", history}};
        if (base) {
            record["from"] = o.from;
            record["base"] = "../base";
        }
        if (auto s = WriteText(written[run.role] + "/train.json", JsonText(record, 1) + "\n"); !s) return Fail(s.error());
    }
    if (cancelled()) return Fail("cancelled after the last step, before the models were put in place");
    for (const auto& [role, dir] : written)
        if (auto s = ReplaceFolder(dir, o.out + "/" + role, [&, role = role](const std::string& d) { return OwnedModelFolder(d, role); }); !s)
            return Fail(s.error());
    if (o.keep_checkpoints && steps_folder == staged)
        if (auto s = ReplaceFolder(staged, kept, OwnedRun); !s) return Fail(s.error());
    return final_eval;
}

Result<nlohmann::json> EvaluateModelFolder(const std::string& dir, const std::vector<std::string>& data_override) {
    auto record = ParseJsonFile(dir + "/train.json");
    if (!record) return Fail(dir + "/train.json: missing or not JSON (eval scores models that ssaviz train wrote)");
    if (!record->is_object()) return Fail(dir + "/train.json: not a JSON object (eval scores models that ssaviz train wrote)");
    auto spec = TaskSpecFromJson(record->value("task", nlohmann::json::object()));
    if (!spec) return Fail(dir + "/train.json: " + spec.error());
    if (!data_override.empty()) spec->data = data_override;
    else if (spec->task == "text" && spec->data.empty())
        return Fail(dir + "/train.json: task.data is empty: name the text to score with --data");
    auto gpt = LoadSsaGptFolder(dir, at::kCPU);
    if (!gpt) return Fail(gpt.error());
    if (spec->seq_len > gpt->config.n_positions)
        return Fail(dir + "/train.json: task.seq_len " + std::to_string(spec->seq_len) + " is more than the model's context of " +
                    std::to_string(gpt->config.n_positions));
    auto tokenizer = LoadTokenizer(dir);
    if (!tokenizer) return Fail(tokenizer.error());
    auto task = MakeTask(*spec, **tokenizer);
    if (!task) return Fail(task.error());
    return Evaluate(**task, *gpt);
}

}  // namespace model
