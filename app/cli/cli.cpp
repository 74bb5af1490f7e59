// The subcommands info, tokenize, export, generate and init-random, and the dispatch that parses
// every command's flags (the window's too) with the table of app/export/flags.h. train and eval
// are in cli_train.cpp.
//
// Index:
//   [SECTION] What the commands share: the model, the text
//   [SECTION] info, tokenize
//   [SECTION] export (and --batch)
//   [SECTION] generate
//   [SECTION] init-random
//   [SECTION] Dispatch, and the window's options
#include "app/cli/cli.h"
#include "app/cli/cli_common.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <new>
#include <optional>
#include <set>
#include <sstream>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "app/core/examples.h"
#include "app/export/batch.h"
#include "app/export/export.h"
#include "app/export/flags.h"
#include "app/export/head_summary.h"
#include "app/export/session.h"
#include "model/nn/analysis.h"
#include "model/io/files.h"

namespace app {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

//-----------------------------------------------------------------------------
// [SECTION] What the commands share: the model, the text
//-----------------------------------------------------------------------------

std::string ModelDir(const CommandOptions& o) {
    if (o.model_dir) return *o.model_dir;
    std::string dir = DefaultModelDir();
    if (dir.empty()) throw Failure{kExitBadInput, "no --model given and no bundled default model found (set SSAVIZ_MODEL)"};
    return dir;
}

std::string ReadText(const CommandOptions& o) {
    if (o.text && o.text_file) throw Failure{kExitUsage, "give --text or --text-file, not both"};
    if (o.text) return *o.text;
    if (!o.text_file) throw Failure{kExitUsage, "needs --text STR or --text-file F"};
    auto text = model::ReadFile(*o.text_file, model::kMaxTextFileBytes);
    if (!text) throw Failure{kExitBadInput, "--text-file: " + text.error()};
    return std::move(*text);
}

std::unique_ptr<model::Engine> OpenEngine(const CommandOptions& o) {
    if (const int threads = model::ComputeThreadsFromEnvironment(0)) model::SetComputeThreads(threads);
    auto engine = model::Engine::Open(ModelDir(o), o.device.value_or("auto"), o.hints, o.dtype);
    if (!engine) {
        bool device_problem = engine.error().rfind("--device", 0) == 0 || engine.error().rfind("--dtype", 0) == 0;
        throw Failure{device_problem ? kExitUsage : kExitBadInput, engine.error()};
    }
    return std::move(*engine);
}

model::Tokenization Tokenize(const model::Engine& engine, const std::string& text, const CommandOptions& o) {
    auto tokens = engine.Tokenize(text, o.truncate);
    if (!tokens) {
        const bool too_long = tokens.error().find("longer than the model's context") != std::string::npos;
        throw Failure{kExitBadInput, tokens.error() + (too_long ? "; pass --truncate to run it" : "")};
    }
    return std::move(*tokens);
}

// --ablate, checked against the model's shape.
void SetInterventions(model::Engine* engine, const CommandOptions& o) {
    if (!o.ablate) return;
    const model::ModelConfig& c = engine->Info().config;
    auto edits = model::ParseInterventions(*o.ablate, c.n_layer, c.n_head);
    if (!edits) throw Failure{kExitUsage, edits.error()};
    if (auto s = engine->SetInterventions(std::move(*edits)); !s) throw Failure{kExitUsage, s.error()};
}

//-----------------------------------------------------------------------------
// [SECTION] info, tokenize
//-----------------------------------------------------------------------------

int CmdInfo(const CommandOptions& o) {
    auto engine = OpenEngine(o);
    const model::ModelInfo& info = engine->Info();
    if (o.json) {
        std::printf("%s\n", InfoToJson(info).dump(2).c_str());
        return kExitOk;
    }
    const model::ModelConfig& c = info.config;
    std::printf("model        %s\n", model::EscapeForMessage(info.dir, 4096).c_str());
    std::printf("layers       %d\nheads        %d (head size %d)\nwidth        %d\ncontext      %d\nvocabulary   %d\n", c.n_layer,
                c.n_head, c.HeadSize(), c.n_embd, c.n_positions, c.vocab_size);
    std::printf("family       %s\n", model::DescribeArchitecture(c).c_str());
    std::printf("parameters   %lld\nactivation   %s\nlayout       %s\n", static_cast<long long>(info.parameters),
                model::ToString(c.activation), info.layout.c_str());
    std::printf("tau_q        %s\ntau_v        %s\n", model::Describe(c.query).c_str(), model::Describe(c.value).c_str());
    std::printf("tokenizer    %s, %zu tokens, from %s\ndevice       %s, computing in %s\n", info.tokenizer_kind.c_str(), info.tokenizer_vocab,
                info.tokenizer_source.c_str(), info.device.c_str(), info.compute_dtype.c_str());
    std::printf("weights      %s (%s, stored %s)\n", model::EscapeForMessage(info.weights_path, 4096).c_str(), info.weights_format.c_str(),
                info.stored_dtype.c_str());
    if (!info.unused_tensors.empty())
        std::printf("unused       %zu tensors (e.g. %s)\n", info.unused_tensors.size(), model::EscapeForMessage(info.unused_tensors[0]).c_str());
    for (const std::string& note : info.notes) std::printf("note         %s\n", model::EscapeForMessage(note, 4096).c_str());
    return kExitOk;
}

int CmdTokenize(const CommandOptions& o) {
    std::string text = ReadText(o);
    auto engine = OpenEngine(o);
    model::Tokenization tokens = Tokenize(*engine, text, o);
    if (o.json) {
        std::printf("%s\n", TokensToJson(text, tokens).dump(1, ' ', false, json::error_handler_t::replace).c_str());
        return kExitOk;
    }
    std::printf("%5s %7s %11s  piece\n", "i", "id", "bytes");
    for (size_t i = 0; i < tokens.ids.size(); ++i) {
        std::string range = std::to_string(tokens.offsets[i].first) + "-" + std::to_string(tokens.offsets[i].second);
        std::string piece = json(model::PieceToDisplay(tokens.pieces[i])).dump();  // quoted, escapes visible
        std::printf("%5zu %7d %11s  %s\n", i, tokens.ids[i], range.c_str(), piece.c_str());
    }
    std::printf("%zu tokens\n", tokens.ids.size());
    return kExitOk;
}

//-----------------------------------------------------------------------------
// [SECTION] export (and --batch)
//-----------------------------------------------------------------------------

struct BatchText {
    std::string name;  // the sub-folder
    std::string text;
    int line = 0;
};

// The texts of a --batch file: JSON lines when the first non-blank line starts with '{', else one
// text per non-blank line.
std::vector<BatchText> ReadBatch(const std::string& path, const std::string& content) {
    std::vector<BatchText> texts;
    std::set<std::string> used = BatchReservedNames();
    std::stringstream lines(content);
    std::string line;
    int number = 0;
    std::optional<bool> json_lines;
    while (std::getline(lines, line)) {
        ++number;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.find_first_not_of(" \t") == std::string::npos) continue;
        if (!json_lines) json_lines = line[line.find_first_not_of(" \t")] == '{';
        BatchText t;
        t.line = number;
        std::string name;
        if (*json_lines) {
            auto parsed = model::ParseJsonText(line);
            const json j = parsed ? std::move(*parsed) : json();
            const std::string where = model::EscapeForMessage(path) + ":" + std::to_string(number);
            if (!parsed || !j.is_object()) throw Failure{kExitBadInput, where + ": not a JSON object (JSON lines need one object per line)"};
            if (!j.contains("text") || !j["text"].is_string()) throw Failure{kExitBadInput, where + ": needs a \"text\" string"};
            if (j.contains("name") && !j["name"].is_string()) throw Failure{kExitBadInput, where + ": \"name\" must be a string"};
            t.text = j["text"].get<std::string>();
            if (j.contains("name")) name = j["name"].get<std::string>();
        } else {
            t.text = line;
        }
        t.name = BatchFolderName(name, static_cast<int>(texts.size()), &used);
        texts.push_back(std::move(t));
    }
    if (texts.empty()) throw Failure{kExitBadInput, path + ": no texts (the file is empty or blank)"};
    return texts;
}

int CmdExport(const CommandOptions& o) {
    if (o.batch && !o.text_file) throw Failure{kExitUsage, "--batch needs --text-file F"};
    ExportOptions options = o.export_options;
    options.out_dir = o.out;
    if (auto s = CheckExportFolder(options.out_dir); !s) throw Failure{kExitUsage, "--out: " + s.error()};
    std::string text = ReadText(o);
    std::vector<BatchText> texts = o.batch ? ReadBatch(*o.text_file, text) : std::vector<BatchText>{{"", text, 0}};
    auto engine = OpenEngine(o);
    const model::ModelConfig& c = engine->Info().config;
    if (auto s = ResolveExportHeads(&options, c.n_layer, c.n_head); !s) throw Failure{kExitUsage, s.error()};
    if (auto s = CheckHighlightScope(options.figures, c.n_layer, c.n_head); !s) throw Failure{kExitUsage, s.error()};
    // vanilla: the tau = 1 counterfactual (a whole second forward pass); local: tau = 1 layer by
    // layer on the SSA model's own q and k; anything else: a twin model's folder (./local for a
    // folder of that name).
    // unedited: the SSA model without the --ablate what-ifs, so differences are theirs alone.
    const std::string& compare = o.compare;
    if (compare == "local" || compare == "unedited") {
        const auto kind = compare == "local" ? model::Comparison::LayerLocal : model::Comparison::Unedited;
        if (auto s = engine->SetComparison(kind); !s) throw Failure{kExitFailure, s.error()};
    } else if (compare != "vanilla") {
        if (auto s = engine->OpenTwin(compare, o.hints); !s) throw Failure{kExitBadInput, s.error()};
    }
    SetInterventions(engine.get(), o);

    if (!o.batch) {
        model::Tokenization tokens = Tokenize(*engine, text, o);
        auto analysis = engine->Analyze(tokens);
        if (!analysis) throw Failure{kExitFailure, analysis.error()};
        ProgressBar bar("export");
        auto s = WriteExport(text, *analysis, engine->Info(), options, [&](size_t done, size_t total, const std::string& path) {
            bar.Update(done, total, path);
            return true;
        });
        if (!s) throw Failure{kExitFailure, s.error()};
        std::fprintf(stderr, "ssaviz: wrote %s (%d tokens, %d x %d heads, forward %.1f ms, metrics %.1f ms on %s)\n",
                     options.out_dir.c_str(), analysis->n_tokens, analysis->n_layer, analysis->n_head, analysis->forward_ms,
                     analysis->metrics_ms, analysis->device.c_str());
        return kExitOk;
    }

    // Batch: one sub-folder per text; a bad text is reported and skipped, the rest go on.
    json rows = json::array(), failures = json::array();
    ProgressBar bar("batch");
    const fs::path out(options.out_dir);
    for (size_t k = 0; k < texts.size(); ++k) {
        const BatchText& t = texts[k];
        bar.Update(k, texts.size(), t.name);
        auto tokens = engine->Tokenize(t.text, o.truncate);
        std::string error = tokens ? "" : tokens.error();
        if (tokens) {
            auto analysis = engine->Analyze(*tokens);
            if (!analysis) {
                error = analysis.error();
            } else {
                ExportOptions one = options;
                one.out_dir = (out / t.name).string();
                if (auto s = WriteExport(t.text, *analysis, engine->Info(), one); !s) throw Failure{kExitFailure, s.error()};
                rows.push_back(BatchSummaryRow(t.name, t.line, *analysis, options.sink_epsilon));
            }
        }
        if (!error.empty()) {
            std::fprintf(stderr, "%sssaviz: %s line %d (%s): %s\n", isatty(fileno(stderr)) ? "\n" : "", o.text_file->c_str(),
                         t.line, t.name.c_str(), error.c_str());
            failures.push_back({{"name", t.name}, {"line", t.line}, {"error", error}});
        }
    }
    bar.Update(texts.size(), texts.size(), "done");
    std::printf("%s", BatchSummaryTable(rows).c_str());
    if (auto s = WriteBatchSummary(options.out_dir, rows, failures); !s) throw Failure{kExitFailure, s.error()};
    std::fprintf(stderr, "ssaviz: wrote %zu of %zu texts to %s (summary.csv, summary.json)\n", rows.size(), texts.size(), options.out_dir.c_str());
    return failures.empty() ? kExitOk : kExitBadInput;
}

//-----------------------------------------------------------------------------
// [SECTION] generate
//-----------------------------------------------------------------------------

int CmdGenerate(const CommandOptions& o) {
    const int count = o.generate.tokens;
    const float temperature = o.generate.temperature;
    const int top_k = o.generate.top_k;
    uint64_t rng = o.generate.seed;
    const std::string text = ReadText(o);
    auto engine = OpenEngine(o);
    const model::ModelConfig& c = engine->Info().config;
    SetInterventions(engine.get(), o);
    // Only the SSA side is needed: the layer-local comparison runs no forward pass of its own.
    if (auto s = engine->SetComparison(model::Comparison::LayerLocal); !s) throw Failure{kExitFailure, s.error()};
    model::Tokenization tokens = Tokenize(*engine, text, o);
    const size_t prompt = tokens.ids.size(), vocab = engine->tokenizer().VocabSize();
    std::vector<int32_t> generated;
    ProgressBar bar("generate");
    for (int n = 0; n < count; ++n) {
        if (static_cast<int>(tokens.ids.size()) >= c.n_positions) {
            std::fprintf(stderr, "ssaviz: stopped after %d tokens: the model's context of %d is full\n", n, c.n_positions);
            break;
        }
        auto analysis = engine->Analyze(tokens);  // reuses every earlier row: one new row a step
        if (!analysis) throw Failure{kExitFailure, analysis.error()};
        const int32_t next = model::NextToken(analysis->next_logits, vocab, temperature, top_k, &rng);
        generated.push_back(next);
        if (auto piece = model::AppendToken(engine->tokenizer(), next, &tokens); !piece) throw Failure{kExitBadInput, piece.error()};
        bar.Update(n + 1, count, "");
    }
    auto decoded = engine->tokenizer().Decode(generated);
    if (!decoded) throw Failure{kExitBadInput, decoded.error()};
    const std::string continuation = std::move(*decoded);
    if (o.json) {
        std::printf("%s\n", json{{"prompt_tokens", prompt}, {"ids", generated}, {"text", continuation}, {"temperature", temperature},
                                 {"top_k", top_k}, {"interventions", model::FormatInterventions(engine->interventions())}}
                                .dump(-1, ' ', false, json::error_handler_t::replace)
                                .c_str());
    } else {
        std::fwrite(continuation.data(), 1, continuation.size(), stdout);
        std::printf("\n");
    }
    return kExitOk;
}

//-----------------------------------------------------------------------------
// [SECTION] init-random
//-----------------------------------------------------------------------------

// A family's preset (SPEC section 7), then the shape flags over it.
model::ModelConfig RandomModelConfig(const NewModelOptions& m) {
    model::ModelConfig c;
    c.family = m.family;
    c.n_layer = m.layers.value_or(4);
    c.n_head = m.heads.value_or(4);
    c.n_embd = m.embd;
    c.n_positions = m.positions;
    if (c.n_embd % c.n_head != 0) throw Failure{kExitUsage, "--embd must be divisible by --heads"};
    if (c.n_layer > 1024 || c.n_head > 1024) throw Failure{kExitUsage, "--layers and --heads must be at most 1024"};
    if (m.family != "gpt2") {  // lit-gpt's GPT
        const bool llama = m.family != "pythia";
        c.positions = model::PositionKind::Rope;
        c.tied_head = false;
        c.norm = llama ? model::NormKind::RmsNorm : model::NormKind::LayerNorm;
        c.mlp = llama ? model::MlpKind::SwiGlu : model::MlpKind::Gelu;
        c.activation = model::Activation::Gelu;
        c.parallel_residual = !llama;
        c.bias = !llama;
        c.rope_base = m.rope_base.value_or(m.family == "llama3" ? 500000.0 : 10000.0);
        const int head = c.HeadSize();
        c.rope_n_elem = static_cast<int>(m.rotary.value_or(llama ? 1.0 : 0.25) * head) / 2 * 2;
        c.n_query_groups = m.kv_heads.value_or(llama && c.n_head % 4 == 0 ? c.n_head / 4 : c.n_head);
        // SwiGLU's width as Llama sizes it: about 8/3 of the residual, a multiple of 32.
        c.intermediate_size = m.mlp.value_or(llama ? (8 * c.n_embd / 3 + 31) / 32 * 32 : 4 * c.n_embd);
    } else if (m.kv_heads || m.rotary || m.rope_base || m.mlp) {
        throw Failure{kExitUsage, "--kv-heads, --mlp, --rotary and --rope-base need --family pythia, llama, mistral or llama3"};
    }
    c.vocab_size = 1;  // the tokenizer's size, once it is read
    if (auto s = c.Validate("init-random"); !s) throw Failure{kExitUsage, s.error()};
    return c;
}

int CmdInitRandom(const CommandOptions& o) {
    const NewModelOptions& m = o.new_model;
    model::ModelConfig c = RandomModelConfig(m);
    // What fits in memory: refused before anything is built.
    const double E = c.n_embd, D = c.HeadSize(), L = c.n_layer, V = 50257;
    const double per_layer = E * (c.n_head + 2.0 * c.KvHeads()) * D + c.n_head * D * E + E * c.MlpWidth() * (c.mlp == model::MlpKind::SwiGlu ? 3 : 2);
    const double parameters = V * E * (c.tied_head ? 1 : 2) + (c.Rope() ? 0 : c.n_positions * E) + L * per_layer;
    // At most 4.3 GB on disk, and 8.6 GB of float32 while the weights are drawn.
    const double on_disk = parameters * model::DtypeSize(m.save_dtype);
    if (on_disk > double(size_t{4} << 30) || parameters * sizeof(float) > double(size_t{8} << 30))
        throw Failure{kExitUsage, "a model of --layers " + std::to_string(c.n_layer) + " --embd " + std::to_string(c.n_embd) + " --positions " +
                                      std::to_string(c.n_positions) + " has " + model::FormatBytes(static_cast<size_t>(on_disk)) +
                                      " of weights, more than the 4.3 GB init-random writes (8.6 GB of float32 while drawn)"};
    // The paper's recipe: query temperature from position and token, value temperature from token.
    c.query = m.random_query_form.value_or(model::TemperatureForm{model::PositionForm::Sigmoid, model::TokenForm::Shared, model::Combine::Sum});
    c.value = {model::PositionForm::None, model::TokenForm::Feature, model::Combine::Sum};
    const uint64_t seed = m.seed.value_or(1234);
    const std::string tokenizer = m.tokenizer.value_or("assets/tokenizers/gpt2");
    if (m.lit_checkpoint && !c.Rope()) throw Failure{kExitUsage, "--layout lit needs --family pythia, llama, mistral or llama3 (GPT-2 is HF's layout)"};
    if (auto s = CheckExportFolder(o.out); !s) throw Failure{kExitUsage, "--out: " + s.error()};
    if (auto s = model::WriteRandomModel(c, seed, tokenizer, o.out, m.save_dtype, m.lit_checkpoint); !s) throw Failure{kExitBadInput, s.error()};
    return kExitOk;
}

//-----------------------------------------------------------------------------
// [SECTION] Dispatch, and the window's options
//-----------------------------------------------------------------------------

// The command as typed (for records): each argument shell-quoted when it needs it.
std::string TypedCommandLine(const std::vector<std::string>& args) {
    std::string typed = "ssaviz";
    for (size_t i = 1; i < args.size(); ++i) {
        const bool quote = args[i].find_first_of(" \t'\"$") != std::string::npos;
        typed += " " + (quote ? "'" + args[i] + "'" : args[i]);
    }
    return typed;
}

// The window's start: its own flags, and the model and text from the flags, else the session's.
void ResolveLaunch(const CommandOptions& o, LaunchOptions* launch, std::optional<Session>* session) {
    *launch = o.window;
    if (!launch->session_path.empty()) {
        auto loaded = LoadSession(launch->session_path);
        if (!loaded) throw Failure{kExitBadInput, loaded.error()};
        *session = std::move(*loaded);
    }
    const Session* s = *session ? &**session : nullptr;
    // The command line wins over the session: --model, --device and --text replace its own.
    launch->model_dir = s && !o.model_dir && !s->model_dir.empty() ? s->model_dir : ModelDir(o);
    launch->device = o.device.value_or(s ? s->device : "auto");
    launch->hints = o.hints;
    launch->dtype = o.dtype;
    if (s && !o.text && !o.text_file) launch->text = s->text;
    if (!launch->export_to.empty() && !s) throw Failure{kExitUsage, "--export-to needs --session FILE (its export settings)"};
    if (o.text || o.text_file) launch->text = ReadText(o);
    launch->truncate = o.truncate || (s && s->truncate);
}

}  // namespace

int RunCommandLine(const std::vector<std::string>& args, LaunchOptions* launch, std::optional<Session>* session) {
    try {
        const std::string name = args.size() > 1 ? args[1] : "";
        if (name == "help" || name == "--help" || name == "-h") {
            if (args.size() <= 2 || name != "help") return std::printf("%s", UsageText().c_str()), kExitOk;
            const auto about = FindCommand(args[2]);
            if (!about) throw Failure{kExitUsage, "unknown command " + QuoteForMessage(args[2])};
            return std::printf("%s", CommandHelp(*about).c_str()), kExitOk;
        }
        const bool window = name.empty() || name.rfind("--", 0) == 0;
        const std::optional<Command> command = window ? std::optional(Command::Window) : FindCommand(name);
        if (!command || (!window && *command == Command::Window)) throw Failure{kExitUsage, "unknown command " + QuoteForMessage(name)};
        CommandOptions o;
        if (auto s = ParseFlags(*command, args, window ? 1 : 2, &o); !s) throw Failure{kExitUsage, s.error()};
        if (o.help) return std::printf("%s", window ? UsageText().c_str() : CommandHelp(*command).c_str()), kExitOk;
        switch (*command) {
            case Command::Info: return CmdInfo(o);
            case Command::Tokenize: return CmdTokenize(o);
            case Command::Export: return CmdExport(o);
            case Command::Generate: return CmdGenerate(o);
            case Command::InitRandom: return CmdInitRandom(o);
            case Command::Train: return CmdTrain(o, TypedCommandLine(args));
            case Command::Eval: return CmdEval(o);
            case Command::Window: break;
        }
        ResolveLaunch(o, launch, session);
        return -1;
    } catch (const Failure& f) {
        std::fprintf(stderr, "ssaviz: %s\n", f.message.c_str());
        return f.code;
    } catch (const std::bad_alloc&) {  // what failed to fit has been freed by now: printing is safe
        std::fprintf(stderr, "ssaviz: out of memory (a size or text too large for this machine)\n");
        return kExitFailure;
    } catch (const std::exception& e) {  // torch errors (c10::Error) and the like: never a crash
        // c10::Error appends a backtrace: its first line is the message, and one line is what is printed.
        const std::string what = e.what();
        std::fprintf(stderr, "ssaviz: internal error: %s\n", model::EscapeForMessage(what.substr(0, what.find('\n')), 400).c_str());
        return kExitFailure;
    }
}

}  // namespace app
