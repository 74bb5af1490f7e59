#include "app/cli.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "app/export.h"
#include "model/analysis.h"

namespace app {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const char* kUsage =
    "usage: ssaviz [--model DIR] [--text STR | --text-file F] [--device auto|cpu|cuda] [--screenshot PNG [--frames N]]\n"
    "       ssaviz info     [--model DIR] [--json] [--device D]\n"
    "       ssaviz tokenize [--model DIR] (--text STR | --text-file F) [--json] [--truncate]\n"
    "       ssaviz export   [--model DIR] (--text STR | --text-file F) --out DIR\n"
    "                       [--layers all|0,2] [--heads all|1,3] [--format json,npy,csv]\n"
    "                       [--compare vanilla|DIR] [--device auto|cpu|cuda] [--sink-eps 0.3] [--truncate]\n"
    "       ssaviz init-random --out DIR [--seed N] [--tokenizer DIR] [--layers N] [--heads N] [--embd N] [--positions N]\n"
    "exit codes: 0 ok, 1 failure, 2 usage error, 3 bad model or input file\n";

struct Failure {
    int code;
    std::string message;
};

// --flag value pairs and bare --switches, checked against what the command accepts.
class Flags {
public:
    Flags(const std::vector<std::string>& args, size_t first, const std::set<std::string>& with_value,
          const std::set<std::string>& switches) {
        for (size_t i = first; i < args.size(); ++i) {
            const std::string& a = args[i];
            if (with_value.count(a)) {
                if (i + 1 >= args.size()) throw Failure{kExitUsage, a + " needs a value"};
                m_values[a] = args[++i];
            } else if (switches.count(a)) {
                m_values[a] = "";
            } else if (a == "--help" || a == "-h") {
                m_values["--help"] = "";
            } else {
                throw Failure{kExitUsage, "unknown argument '" + a + "'"};
            }
        }
    }
    bool Has(const std::string& k) const { return m_values.count(k) != 0; }
    std::string Get(const std::string& k, const std::string& fallback = "") const {
        auto it = m_values.find(k);
        return it == m_values.end() ? fallback : it->second;
    }

private:
    std::map<std::string, std::string> m_values;
};

std::string ModelDir(const Flags& flags) {
    if (flags.Has("--model")) return flags.Get("--model");
    std::string dir = DefaultModelDir();
    if (dir.empty()) throw Failure{kExitBadInput, "no --model given and no bundled default model found (set SSAVIZ_MODEL)"};
    return dir;
}

std::string ReadText(const Flags& flags) {
    if (flags.Has("--text") && flags.Has("--text-file")) throw Failure{kExitUsage, "give --text or --text-file, not both"};
    if (flags.Has("--text")) return flags.Get("--text");
    if (!flags.Has("--text-file")) throw Failure{kExitUsage, "needs --text STR or --text-file F"};
    std::string path = flags.Get("--text-file");
    std::ifstream in(path, std::ios::binary);
    if (!in || fs::is_directory(path)) throw Failure{kExitBadInput, path + ": cannot read text file"};
    std::stringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
}

std::unique_ptr<model::Engine> OpenEngine(const Flags& flags) {
    std::string device = flags.Get("--device", "auto");
    if (device != "auto" && device != "cpu" && device != "cuda")
        throw Failure{kExitUsage, "--device '" + device + "' is not one of auto, cpu, cuda"};
    auto engine = model::Engine::Open(ModelDir(flags), device);
    if (!engine) {
        bool device_problem = engine.error().rfind("--device", 0) == 0;
        throw Failure{device_problem ? kExitUsage : kExitBadInput, engine.error()};
    }
    return std::move(*engine);
}

model::Tokenization Tokenize(const model::Engine& engine, const std::string& text, const Flags& flags) {
    auto tokens = engine.Tokenize(text, flags.Has("--truncate"));
    if (!tokens) {
        const bool too_long = tokens.error().find("longer than the model's context") != std::string::npos;
        throw Failure{kExitBadInput, tokens.error() + (too_long ? "; pass --truncate to run it" : "")};
    }
    return std::move(*tokens);
}

// "all" or a comma list of indices below `count`.
std::vector<int> ParseIndexList(const std::string& flag, const std::string& spec, int count, const char* what) {
    std::vector<int> out;
    if (spec == "all") {
        for (int i = 0; i < count; ++i) out.push_back(i);
        return out;
    }
    std::stringstream ss(spec);
    std::string item;
    while (std::getline(ss, item, ',')) {
        char* end = nullptr;
        long v = std::strtol(item.c_str(), &end, 10);
        if (item.empty() || *end != '\0') throw Failure{kExitUsage, flag + ": '" + item + "' is not a number (expected all or a list like 0,2)"};
        if (v < 0 || v >= count)
            throw Failure{kExitUsage, flag + ": " + what + " " + std::to_string(v) + " is out of range (the model has " + std::to_string(count) + ")"};
        out.push_back(static_cast<int>(v));
    }
    if (out.empty()) throw Failure{kExitUsage, flag + " is empty"};
    return out;
}

int CmdInfo(const Flags& flags) {
    auto engine = OpenEngine(flags);
    const model::ModelInfo& info = engine->Info();
    if (flags.Has("--json")) {
        std::printf("%s\n", InfoToJson(info).dump(2).c_str());
        return kExitOk;
    }
    const model::ModelConfig& c = info.config;
    std::printf("model        %s\n", info.dir.c_str());
    std::printf("layers       %d\nheads        %d (head size %d)\nwidth        %d\ncontext      %d\nvocabulary   %d\n", c.n_layer,
                c.n_head, c.HeadSize(), c.n_embd, c.n_positions, c.vocab_size);
    std::printf("parameters   %lld\nactivation   %s\nlayout       %s\n", static_cast<long long>(info.parameters),
                model::ToString(c.activation), info.layout.c_str());
    std::printf("tau_q        %s\ntau_v        %s\n", model::Describe(c.query).c_str(), model::Describe(c.value).c_str());
    std::printf("tokenizer    %s, %zu tokens\ndevice       %s\n", info.tokenizer_kind.c_str(), info.tokenizer_vocab, info.device.c_str());
    if (!info.unused_tensors.empty()) std::printf("unused       %zu tensors (e.g. %s)\n", info.unused_tensors.size(), info.unused_tensors[0].c_str());
    return kExitOk;
}

int CmdTokenize(const Flags& flags) {
    std::string text = ReadText(flags);
    auto engine = OpenEngine(flags);
    model::Tokenization tokens = Tokenize(*engine, text, flags);
    if (flags.Has("--json")) {
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

int CmdExport(const Flags& flags) {
    if (!flags.Has("--out")) throw Failure{kExitUsage, "export needs --out DIR"};
    ExportOptions options;
    options.out_dir = flags.Get("--out");
    options.json = options.npy = false;
    std::stringstream formats(flags.Get("--format", "json,npy,csv"));
    std::string f;
    while (std::getline(formats, f, ',')) {
        if (f == "json") options.json = true;
        else if (f == "npy") options.npy = true;
        else if (f == "csv") options.csv = true;
        else if (f == "png" || f == "svg")
            throw Failure{kExitUsage, "--format " + f + ": heatmap images are not implemented yet (available: json, npy, csv)"};
        else throw Failure{kExitUsage, "--format: unknown format '" + f + "' (expected json, npy, csv)"};
    }
    if (flags.Has("--sink-eps")) {
        char* end = nullptr;
        options.sink_epsilon = std::strtof(flags.Get("--sink-eps").c_str(), &end);
        if (*end != '\0' || !(options.sink_epsilon > 0 && options.sink_epsilon < 1))
            throw Failure{kExitUsage, "--sink-eps must be a number in (0, 1)"};
    }
    std::string text = ReadText(flags);
    auto engine = OpenEngine(flags);
    const model::ModelConfig& c = engine->Info().config;
    options.layers = ParseIndexList("--layers", flags.Get("--layers", "all"), c.n_layer, "layer");
    options.heads = ParseIndexList("--heads", flags.Get("--heads", "all"), c.n_head, "head");
    std::string compare = flags.Get("--compare", "vanilla");
    if (compare != "vanilla") {
        if (auto s = engine->OpenTwin(compare); !s) throw Failure{kExitBadInput, s.error()};
    }
    model::Tokenization tokens = Tokenize(*engine, text, flags);
    auto analysis = engine->Analyze(tokens);
    if (!analysis) throw Failure{kExitFailure, analysis.error()};
    if (auto s = WriteExport(text, *analysis, engine->Info(), options); !s) throw Failure{kExitFailure, s.error()};
    std::fprintf(stderr, "ssaviz: wrote %s (%d tokens, %d x %d heads, forward %.1f ms, metrics %.1f ms on %s)\n",
                 options.out_dir.c_str(), analysis->n_tokens, analysis->n_layer, analysis->n_head, analysis->forward_ms,
                 analysis->metrics_ms, analysis->device.c_str());
    return kExitOk;
}

int ParsePositive(const Flags& flags, const std::string& name, int fallback) {
    if (!flags.Has(name)) return fallback;
    char* end = nullptr;
    long v = std::strtol(flags.Get(name).c_str(), &end, 10);
    if (*end != '\0' || v <= 0 || v > 1 << 20) throw Failure{kExitUsage, name + " must be a positive integer"};
    return static_cast<int>(v);
}

int CmdInitRandom(const Flags& flags) {
    if (!flags.Has("--out")) throw Failure{kExitUsage, "init-random needs --out DIR"};
    model::ModelConfig c;
    c.n_layer = ParsePositive(flags, "--layers", 4);
    c.n_head = ParsePositive(flags, "--heads", 4);
    c.n_embd = ParsePositive(flags, "--embd", 128);
    c.n_positions = ParsePositive(flags, "--positions", 1024);
    if (c.n_embd % c.n_head != 0) throw Failure{kExitUsage, "--embd must be divisible by --heads"};
    // The paper's recipe: query temperature from position and token, value temperature from token.
    c.query = {model::PositionForm::Sigmoid, model::TokenForm::Shared, model::Combine::Sum};
    c.value = {model::PositionForm::None, model::TokenForm::Feature, model::Combine::Sum};
    uint64_t seed = static_cast<uint64_t>(ParsePositive(flags, "--seed", 1234));
    std::string tokenizer = flags.Get("--tokenizer", "assets/tokenizers/gpt2");
    if (auto s = model::WriteRandomModel(c, seed, tokenizer, flags.Get("--out")); !s) throw Failure{kExitBadInput, s.error()};
    return kExitOk;
}

}  // namespace

std::string DefaultModelDir() {
    if (const char* env = std::getenv("SSAVIZ_MODEL"); env && *env) return env;
    std::error_code ec;
    fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (ec) return "";
    for (const fs::path& candidate : {exe.parent_path() / "models" / "default", exe.parent_path() / ".." / "assets" / "models" / "default"})
        if (fs::exists(candidate / "config.json")) return candidate.lexically_normal().string();
    return "";
}

int RunCommandLine(const std::vector<std::string>& args, GuiOptions* gui) {
    const std::set<std::string> model_flags = {"--model", "--device"};
    try {
        std::string command = args.size() > 1 ? args[1] : "";
        auto with = [&](std::set<std::string> extra) {
            extra.insert(model_flags.begin(), model_flags.end());
            return extra;
        };
        if (command == "info") {
            Flags flags(args, 2, with({}), {"--json"});
            if (flags.Has("--help")) return std::printf("%s", kUsage), kExitOk;
            return CmdInfo(flags);
        }
        if (command == "tokenize") {
            Flags flags(args, 2, with({"--text", "--text-file"}), {"--json", "--truncate"});
            if (flags.Has("--help")) return std::printf("%s", kUsage), kExitOk;
            return CmdTokenize(flags);
        }
        if (command == "export") {
            Flags flags(args, 2, with({"--text", "--text-file", "--out", "--layers", "--heads", "--format", "--compare", "--sink-eps"}),
                        {"--truncate"});
            if (flags.Has("--help")) return std::printf("%s", kUsage), kExitOk;
            return CmdExport(flags);
        }
        if (command == "init-random") {
            Flags flags(args, 2, {"--out", "--seed", "--tokenizer", "--layers", "--heads", "--embd", "--positions"}, {});
            if (flags.Has("--help")) return std::printf("%s", kUsage), kExitOk;
            return CmdInitRandom(flags);
        }
        if (command == "help" || command == "--help" || command == "-h") return std::printf("%s", kUsage), kExitOk;
        if (!command.empty() && command.rfind("--", 0) != 0) throw Failure{kExitUsage, "unknown command '" + command + "'"};

        Flags flags(args, 1, with({"--text", "--text-file", "--screenshot", "--frames", "--bench-typing"}), {});
        if (flags.Has("--help")) return std::printf("%s", kUsage), kExitOk;
        gui->model_dir = ModelDir(flags);
        gui->device = flags.Get("--device", "auto");
        gui->screenshot = flags.Get("--screenshot");
        gui->frames = ParsePositive(flags, "--frames", 30);
        gui->bench_keys = flags.Has("--bench-typing") ? ParsePositive(flags, "--bench-typing", 1) : 0;
        if (flags.Has("--text") || flags.Has("--text-file")) gui->text = ReadText(flags);
        return -1;
    } catch (const Failure& f) {
        std::fprintf(stderr, "ssaviz: %s\n", f.message.c_str());
        return f.code;
    } catch (const std::exception& e) {  // torch errors (c10::Error) and the like: never a crash
        std::fprintf(stderr, "ssaviz: internal error: %s\n", e.what());
        return kExitFailure;
    }
}

}  // namespace app
