#include "model/train/train.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

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

struct NamedParam {
    std::string name;
    at::Tensor* tensor;
    bool decay;
};

// Every trainable tensor of the model, in a fixed order (the optimizer's state follows it).
std::vector<NamedParam> Parameters(SsaGpt& m, bool freeze_positions) {
    std::vector<NamedParam> p = {{"wte", &m.wte, true}};
    if (!freeze_positions) p.push_back({"wpe", &m.wpe, true});
    for (size_t l = 0; l < m.layers.size(); ++l) {
        LayerWeights& w = m.layers[l];
        const std::string h = "h." + std::to_string(l) + ".";
        for (auto [name, t, decay] : std::initializer_list<std::tuple<const char*, at::Tensor*, bool>>{
                 {"ln_1.weight", &w.ln1_w, false}, {"ln_1.bias", &w.ln1_b, false},
                 {"c_attn.weight", &w.attn_w, true}, {"c_attn.bias", &w.attn_b, false},
                 {"c_proj.weight", &w.proj_w, true}, {"c_proj.bias", &w.proj_b, false},
                 {"ln_2.weight", &w.ln2_w, false}, {"ln_2.bias", &w.ln2_b, false},
                 {"c_fc.weight", &w.fc_w, true}, {"c_fc.bias", &w.fc_b, false},
                 {"mlp.c_proj.weight", &w.mlp_proj_w, true}, {"mlp.c_proj.bias", &w.mlp_proj_b, false},
                 {"ssa_q_pos", &w.q.pos, false}, {"ssa_q_tok.weight", &w.q.tok_w, false}, {"ssa_q_tok.bias", &w.q.tok_b, false},
                 {"ssa_v_pos", &w.v.pos, false}, {"ssa_v_tok.weight", &w.v.tok_w, false}, {"ssa_v_tok.bias", &w.v.tok_b, false}})
            if (t->defined()) p.push_back({h + name, t, decay});
    }
    p.push_back({"ln_f.weight", &m.ln_f_w, false});
    p.push_back({"ln_f.bias", &m.ln_f_b, false});
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
    return {{"config", ConfigToJson(o.config)}, {"task", TaskSpecToJson(o.task)}, {"seed", o.seed}, {"lr", o.lr},
            {"warmup", o.warmup}, {"weight_decay", o.weight_decay}, {"twin", o.twin}, {"freeze_positions", o.freeze_positions}};
}

Status SaveCheckpoint(const std::string& dir, std::vector<Run>& runs, const nlohmann::json& state) {
    const std::string tmp = dir + ".tmp";
    std::error_code ec;
    fs::remove_all(tmp, ec);
    for (auto& run : runs) {
        const std::string d = tmp + "/" + run.role;
        fs::create_directories(d, ec);
        if (ec) return Fail(d + ": cannot create (" + ec.message() + ")");
        if (auto s = SaveModelFolder(run.model, d); !s) return s;
        try {
            torch::save(*run.optimizer, d + "/optimizer.pt");
        } catch (const std::exception& e) {
            return Fail(d + "/optimizer.pt: cannot write");
        }
    }
    if (auto s = WriteText(tmp + "/state.json", state.dump(1)); !s) return s;
    fs::remove_all(dir, ec);
    fs::rename(tmp, dir, ec);
    if (ec) return Fail(dir + ": cannot replace (" + ec.message() + ")");
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
    m.layout = "conv1d";
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

Result<nlohmann::json> Train(const TrainOptions& o_in, const std::function<void(const TrainProgress&)>& progress,
                             const std::atomic<bool>* cancel) {
    TrainOptions o = o_in;
    if (o.steps < 1) return Fail("--steps must be at least 1");
    if (o.task.seq_len > o.config.n_positions)
        return Fail("--seq-len " + std::to_string(o.task.seq_len) + " exceeds the context " + std::to_string(o.config.n_positions));
    if (o.config.n_head < 1 || o.config.n_embd % o.config.n_head != 0)
        return Fail("--width " + std::to_string(o.config.n_embd) + " is not a multiple of --heads " + std::to_string(o.config.n_head));
    std::error_code ec;
    fs::create_directories(o.out, ec);
    if (ec) return Fail(o.out + ": cannot create (" + ec.message() + ")");

    // Tokenizer: given, built in for synthetic tasks, or a SentencePiece model trained on the corpus.
    if (o.tokenizer_dir.empty()) {
        o.tokenizer_dir = o.out + "/tokenizer";
        if (o.task.task == "text") {
            auto corpus = ReadCorpus(o.task.data);
            if (!corpus) return Fail(corpus.error());
            std::vector<std::string> lines;
            for (const auto& text : corpus->texts) {
                std::istringstream in(text);
                for (std::string line; std::getline(in, line);) lines.push_back(line);
            }
            fs::create_directories(o.tokenizer_dir, ec);
            SentencePieceTraining sp;
            sp.vocab_size = o.config.vocab_size > 0 ? o.config.vocab_size : 4096;
            if (auto s = TrainSentencePiece(lines, sp, o.tokenizer_dir + "/tokenizer.model"); !s) return Fail(s.error());
        } else if (auto s = WriteTaskTokenizer(o.task.task, o.tokenizer_dir); !s) {
            return Fail(s.error());
        }
    }
    auto tokenizer = LoadTokenizer(o.tokenizer_dir);
    if (!tokenizer) return Fail(tokenizer.error());
    o.config.vocab_size = static_cast<int>((*tokenizer)->VocabSize());
    auto task = MakeTask(o.task, **tokenizer);
    if (!task) return Fail(task.error());

    ModelConfig vanilla_config = o.config;
    vanilla_config.query = vanilla_config.value = TemperatureForm{};
    std::vector<Run> runs;
    runs.push_back({"ssa", InitSsaGpt(o.config, o.seed, o.freeze_positions), nullptr, {}, 0, {}});
    if (o.twin) runs.push_back({"vanilla", InitSsaGpt(vanilla_config, o.seed, o.freeze_positions), nullptr, {}, 0, {}});

    const std::string checkpoint = o.out + "/checkpoint";
    std::mt19937_64 rng(o.seed);
    int64_t start = 0;
    double seconds_before = 0;
    nlohmann::json history = nlohmann::json::array();
    if (o.resume) {
        auto read = ParseJsonFile(checkpoint + "/state.json");
        if (!read) return Fail(checkpoint + "/state.json: missing or not JSON (nothing to resume)");
        const nlohmann::json& state = *read;
        if (state.value("identity", nlohmann::json()) != RunIdentity(o))
            return Fail(checkpoint + ": was written with other settings (model shape, task, seed or optimizer); resume with the same flags");
        for (auto& run : runs) {
            auto loaded = LoadSsaGptFolder(checkpoint + "/" + run.role, at::kCPU);
            if (!loaded) return Fail(loaded.error());
            run.model = std::move(*loaded);
        }
        std::istringstream(state.at("rng").get<std::string>()) >> rng;
        start = state.at("step").get<int64_t>();
        seconds_before = state.value("seconds", 0.0);
        history = state.value("history", history);
    }
    for (auto& run : runs) {
        MakeTrainable(run, o);
        if (o.resume) {
            try {
                torch::load(*run.optimizer, checkpoint + "/" + run.role + "/optimizer.pt");
            } catch (const std::exception&) {
                return Fail(checkpoint + "/" + run.role + "/optimizer.pt: cannot read");
            }
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
            if (!std::isfinite(run.last_loss))
                return Fail(run.role + " loss became " + std::to_string(run.last_loss) + " at step " + std::to_string(step) +
                            "; lower --lr");
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
            eval["train_loss"] = {{"ssa", p.loss_ssa}, {"vanilla", runs.size() > 1 ? p.loss_vanilla : 0.0}};
            history.push_back(eval);
            p.eval = &eval;
        }
        if ((o.checkpoint_every > 0 && step % o.checkpoint_every == 0) || step == o.steps) {
            std::ostringstream rng_state;
            rng_state << rng;
            nlohmann::json state = {{"identity", RunIdentity(o)}, {"step", step}, {"rng", rng_state.str()},
                                    {"seconds", p.seconds}, {"history", history}};
            if (auto s = SaveCheckpoint(checkpoint, runs, state); !s) return Fail(s.error());
        }
        if (progress) progress(p);
    }

    // The models as shipped: written in the storage dtype, read back, and scored from the files.
    nlohmann::json final_eval = nlohmann::json::object();
    const double seconds = seconds_before + elapsed();
    for (auto& run : runs) {
        const std::string dir = o.out + "/" + run.role;
        fs::create_directories(dir, ec);
        if (auto s = SaveModelFolder(run.model, dir, o.storage); !s) return Fail(s.error());
        if (auto s = CopyTokenizer(o.tokenizer_dir, dir); !s) return Fail(s.error());
        auto saved = LoadSsaGptFolder(dir, at::kCPU);
        if (!saved) return Fail(saved.error());
        final_eval[run.role] = Evaluate(**task, *saved);
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
        if (auto s = WriteText(o.out + "/" + run.role + "/train.json", record.dump(1) + "\n"); !s) return Fail(s.error());
    }
    return final_eval;
}

Result<nlohmann::json> EvaluateModelFolder(const std::string& dir, const std::string& data_override) {
    auto record = ParseJsonFile(dir + "/train.json");
    if (!record) return Fail(dir + "/train.json: missing or not JSON (eval scores models that ssaviz train wrote)");
    auto spec = TaskSpecFromJson(record->value("task", nlohmann::json::object()));
    if (!spec) return Fail(dir + "/train.json: " + spec.error());
    if (!data_override.empty()) spec->data = {data_override};
    auto tokenizer = LoadTokenizer(dir);
    if (!tokenizer) return Fail(tokenizer.error());
    auto task = MakeTask(*spec, **tokenizer);
    if (!task) return Fail(task.error());
    auto gpt = LoadSsaGptFolder(dir, at::kCPU);
    if (!gpt) return Fail(gpt.error());
    return Evaluate(**task, *gpt);
}

}  // namespace model
