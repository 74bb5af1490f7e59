#include "app/cli/cli.h"
#include "app/cli/cli_common.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "app/core/examples.h"
#include "app/export/export.h"
#include "app/export/head_summary.h"
#include "app/export/session.h"
#include "model/nn/analysis.h"
#include "model/io/files.h"

namespace app {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const char* kUsage =
    "usage: ssaviz [--model DIR] [--text STR | --text-file F] [--truncate] [--session FILE] [--device auto|cpu|cuda]\n"
    "              [--show export|help|demo|heads|matrix|temperatures|table|sparsity|next-token|what-ifs] [--continue N] [--rank-heads] [--example english|graph|passkey] [--screenshot PNG [--frames N]] [--window WxH]\n"
    "       ssaviz info     [--model DIR] [--json] [--device D]\n"
    "       ssaviz tokenize [--model DIR] (--text STR | --text-file F) [--json] [--truncate]\n"
    "       ssaviz export   [--model DIR] (--text STR | --text-file F [--batch]) --out DIR\n"
    "                       [--layers all|0,2] [--heads all|1,3] [--format json,npy,csv,png,svg,html (default: all but csv)]\n"
    "                       [--maps ssa,vanilla,diff] [--colormap viridis|magma] [--log] [--size PX]\n"
    "                       [--highlight tau_q|tau_v|entropy|spikiness|sink_mass|loss|loss_compare|loss_delta]\n"
    "                       [--highlight-scope model|L|L,H] [--ablate L:H[,L:*,L:H=pos|tok|xS]]\n"
    "                       [--compare vanilla|local|unedited|DIR] [--device auto|cpu|cuda] [--sink-eps 0.3] [--truncate]\n"
    "         --compare vanilla: tau = 1 in every layer (a second forward pass); local: tau = 1 in each layer alone,\n"
    "         on the SSA model's own q and k; unedited: the model without the --ablate what-ifs; DIR: a trained twin\n"
    "         --ablate: what-ifs on the SSA side: L:H sets head H of layer L to tau = 1 (L:* every head of L);\n"
    "         =pos keeps only tau_q's position term, =tok only its token term, =xS scales tau_q - 1 by S\n"
    "         --batch: F holds several texts, one per line, or JSON lines {\"name\": ..., \"text\": ...};\n"
    "         each gets a sub-folder of --out, and summary.csv / summary.json compare them\n"
    "       ssaviz generate [--model DIR] (--text STR | --text-file F) --tokens N [--temperature X] [--top-k K]\n"
    "                       [--seed S] [--ablate ...] [--json]   prints the continuation: greedy at --temperature 0\n"
    "                       (the default), else sampled from softmax(logits / X) over the K most likely\n"
    "       ssaviz init-random --out DIR [--seed N] [--tokenizer DIR] [--layers N] [--heads N] [--embd N] [--positions N]\n"
    "       ssaviz train    --out DIR [--task text|graph|passkey] [--data PATH[,PATH]] [--tokenizer DIR | --vocab N]\n"
    "                       [--layers N] [--heads N] [--width N] [--context N] [--query-form sigmoid,shared,sum]\n"
    "                       [--value-form none,feature,sum] [--steps N] [--batch N] [--seq-len N] [--lr X] [--warmup N]\n"
    "                       [--weight-decay X] [--seed N] [--eval-every N] [--checkpoint-every N] [--resume] [--no-twin]\n"
    "                       [--freeze-positions | --learn-positions] [--save-dtype f32|f16] [--threads N]\n"
    "         trains an SSA model and its vanilla twin on the same batches: DIR/ssa, DIR/vanilla, DIR/checkpoint\n"
    "       ssaviz eval     --model DIR [--data PATH] [--json]   re-scores a trained model on its task (from train.json)\n"
    "--model takes a folder (config.json + model.safetensors or pytorch_model.bin, or a lone checkpoint) or a\n"
    "torch.save checkpoint file (.pt / .pth / .bin / .ckpt). Without config.json the shape comes from the tensors;\n"
    "these say what they cannot: [--n-head N] [--query-form POSITION,TOKEN[,COMBINE]] [--value-form ...]\n"
    "[--activation gelu|gelu_new]   (POSITION: sigmoid|exp_exp|linear|none, TOKEN: shared|feature|none, COMBINE: sum|product)\n"
    "--dtype f32|bf16|f16: what the forward pass computes in (default f32; f16 needs CUDA); maps are float32 either way\n"
    "exit codes: 0 ok, 1 failure, 2 usage error, 3 bad model or input file\n";

std::string Format(const char* format, double value) {
    char buf[64];
    std::snprintf(buf, sizeof buf, format, value);
    return buf;
}

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
    auto text = model::ReadFile(flags.Get("--text-file"), model::kMaxTextFileBytes);
    if (!text) throw Failure{kExitBadInput, "--text-file: " + text.error()};
    return std::move(*text);
}

// What a checkpoint without config.json cannot tell about itself.
model::ConfigHints ConfigHints(const Flags& flags) {
    model::ConfigHints hints;
    if (flags.Has("--n-head")) hints.n_head = ParsePositive(flags, "--n-head", 0);
    for (const char* flag : {"--query-form", "--value-form"}) {
        if (!flags.Has(flag)) continue;
        auto form = model::ParseFormSpec(flags.Get(flag));
        if (!form) throw Failure{kExitUsage, std::string(flag) + ": " + form.error()};
        (std::string(flag) == "--query-form" ? hints.query : hints.value) = *form;
    }
    if (flags.Has("--activation")) {
        const std::string a = flags.Get("--activation");
        if (a != "gelu" && a != "gelu_new") throw Failure{kExitUsage, "--activation '" + a + "' is not gelu or gelu_new"};
        hints.activation = a == "gelu" ? model::Activation::Gelu : model::Activation::GeluNew;
    }
    return hints;
}

std::unique_ptr<model::Engine> OpenEngine(const Flags& flags) {
    std::string device = flags.Get("--device", "auto");
    if (device != "auto" && device != "cpu" && device != "cuda")
        throw Failure{kExitUsage, "--device '" + device + "' is not one of auto, cpu, cuda"};
    if (const int threads = model::ComputeThreadsFromEnvironment(0)) model::SetComputeThreads(threads);
    auto engine = model::Engine::Open(ModelDir(flags), device, ConfigHints(flags), flags.Get("--dtype", "f32"));
    if (!engine) {
        bool device_problem = engine.error().rfind("--device", 0) == 0 || engine.error().rfind("--dtype", 0) == 0;
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
    std::printf("model        %s\n", model::EscapeForMessage(info.dir, 4096).c_str());
    std::printf("layers       %d\nheads        %d (head size %d)\nwidth        %d\ncontext      %d\nvocabulary   %d\n", c.n_layer,
                c.n_head, c.HeadSize(), c.n_embd, c.n_positions, c.vocab_size);
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

// Everything of `export` but the text and the heads (which need the model): formats, maps, figures.
ExportOptions ParseExportOptions(const Flags& flags) {
    ExportOptions options;
    options.out_dir = flags.Get("--out");
    ClearExportFormats(&options);
    std::stringstream formats(flags.Get("--format", "json,npy,png,svg,html"));
    std::string f;
    while (std::getline(formats, f, ','))
        if (!EnableExportFormat(&options, f))
            throw Failure{kExitUsage, "--format: unknown format '" + f + "' (expected " + kExportFormatList + ")"};
    if (flags.Has("--maps")) {
        options.maps.clear();
        std::stringstream maps(flags.Get("--maps"));
        while (std::getline(maps, f, ',')) {
            auto mode = ParseMapMode(f);
            if (!mode) throw Failure{kExitUsage, "--maps: unknown map '" + f + "' (expected ssa, vanilla, diff)"};
            options.maps.push_back(*mode);
        }
        if (options.maps.empty()) throw Failure{kExitUsage, "--maps is empty"};
    }
    FigureSettings& fig = options.figures;
    if (flags.Has("--colormap")) {
        auto map = ParseColormap(flags.Get("--colormap"));
        if (!map) throw Failure{kExitUsage, "--colormap '" + flags.Get("--colormap") + "' is not one of viridis, magma, diverging"};
        fig.colormap = *map;
    }
    fig.log_scale = flags.Has("--log");
    if (flags.Has("--size")) {
        const std::string text = flags.Get("--size");  // Get returns a copy: keep it alive for *end
        char* end = nullptr;
        long v = std::strtol(text.c_str(), &end, 10);
        if (*end != '\0' || v < 16 || v > kMaxMapSize)
            throw Failure{kExitUsage, "--size must be a heatmap side of 16 to " + std::to_string(kMaxMapSize) + " pixels"};
        fig.map_size = static_cast<int>(v);
    }
    if (flags.Has("--highlight")) {
        auto color = ParseTokenColor(flags.Get("--highlight"));
        if (!color) throw Failure{kExitUsage, "--highlight '" + flags.Get("--highlight") + "' is not one of tau_q, tau_v, entropy, spikiness, sink_mass, tau_q_position, tau_q_token"};
        fig.highlight = *color;
    }
    if (flags.Has("--sink-eps")) {
        const std::string text = flags.Get("--sink-eps");
        char* end = nullptr;
        options.sink_epsilon = std::strtof(text.c_str(), &end);
        if (*end != '\0' || !(options.sink_epsilon > 0 && options.sink_epsilon < 1))
            throw Failure{kExitUsage, "--sink-eps must be a number in (0, 1)"};
    }
    return options;
}

// --highlight-scope model | L (layer L's mean) | L,H (one head), checked against the model.
void ParseHighlightScope(const std::string& spec, const model::ModelConfig& c, FigureSettings* fig) {
    if (spec == "model") {
        fig->highlight_scope = TokenScope::ModelMean;
        return;
    }
    std::vector<int> parts;
    std::stringstream ss(spec);
    std::string item;
    while (std::getline(ss, item, ',')) {
        char* end = nullptr;
        long v = std::strtol(item.c_str(), &end, 10);
        if (item.empty() || *end != '\0' || v < 0) parts.push_back(-1);
        else parts.push_back(static_cast<int>(std::min<long>(v, 1 << 20)));
    }
    const bool shape_ok = (parts.size() == 1 || parts.size() == 2) && std::all_of(parts.begin(), parts.end(), [](int v) { return v >= 0; });
    if (!shape_ok) throw Failure{kExitUsage, "--highlight-scope '" + spec + "' is not model, a layer (2) or a layer,head (2,1)"};
    if (parts[0] >= c.n_layer) throw Failure{kExitUsage, "--highlight-scope: layer " + std::to_string(parts[0]) + " is out of range (the model has " + std::to_string(c.n_layer) + ")"};
    if (parts.size() == 2 && parts[1] >= c.n_head) throw Failure{kExitUsage, "--highlight-scope: head " + std::to_string(parts[1]) + " is out of range (the model has " + std::to_string(c.n_head) + ")"};
    fig->highlight_scope = parts.size() == 1 ? TokenScope::LayerMean : TokenScope::Head;
    fig->highlight_head = {parts[0], parts.size() == 2 ? parts[1] : 0};
}

struct BatchText {
    std::string name;  // the sub-folder
    std::string text;
    int line = 0;
};

// A folder name from a text's name: letters, digits, '.', '-', '_' kept, others '_'; unique.
std::string FolderName(const std::string& name, int index, std::set<std::string>* used) {
    std::string out;
    for (char c : name) out += std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' ? c : '_';
    if (out.size() > 64) out.resize(64);
    if (out.empty() || out == "." || out == "..") {
        char buf[32];
        std::snprintf(buf, sizeof buf, "text_%04d", index + 1);
        out = buf;
    }
    std::string unique = out;
    for (int k = 2; used->count(unique); ++k) unique = out + "_" + std::to_string(k);
    used->insert(unique);
    return unique;
}

// The texts of a --batch file: JSON lines when the first non-blank line starts with '{', else one
// text per non-blank line.
std::vector<BatchText> ReadBatch(const std::string& path, const std::string& content) {
    std::vector<BatchText> texts;
    std::set<std::string> used = {"summary.json", "summary.csv"};  // the batch's own files: a text named so gets "_2"
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
        t.name = FolderName(name, static_cast<int>(texts.size()), &used);
        texts.push_back(std::move(t));
    }
    if (texts.empty()) throw Failure{kExitBadInput, path + ": no texts (the file is empty or blank)"};
    return texts;
}

// One row of the batch summary: the model-wide means a reader compares across texts.
json SummaryRow(const BatchText& t, const model::Analysis& a, float eps) {
    const std::vector<HeadSummary> heads = SummarizeHeads(a);
    auto mean = [&](float HeadSummary::*field) {
        double sum = 0;
        int n = 0;
        for (const HeadSummary& h : heads)
            if (std::isfinite(h.*field)) sum += h.*field, ++n;
        return n ? sum / n : NAN;
    };
    int sinks = 0, sinks_compare = 0;
    for (const HeadSummary& h : heads) sinks += IsSinkHead(h.sink_mass, eps), sinks_compare += IsSinkHead(h.sink_mass_compare, eps);
    const double n = heads.empty() ? 1.0 : static_cast<double>(heads.size());
    return json{{"name", t.name},       {"line", t.line},
                {"n_tokens", a.n_tokens},
                {"entropy", mean(&HeadSummary::entropy)},
                {"entropy_compare", mean(&HeadSummary::entropy_compare)},
                {"normalized_entropy", mean(&HeadSummary::normalized_entropy)},
                {"normalized_entropy_compare", mean(&HeadSummary::normalized_entropy_compare)},
                {"spikiness", mean(&HeadSummary::spikiness)},
                {"spikiness_compare", mean(&HeadSummary::spikiness_compare)},
                {"sink_mass", mean(&HeadSummary::sink_mass)},
                {"sink_mass_compare", mean(&HeadSummary::sink_mass_compare)},
                {"sink_ratio", sinks / n},
                {"sink_ratio_compare", sinks_compare / n},
                {"js_divergence", mean(&HeadSummary::js)},
                {"tau_q_mean", mean(&HeadSummary::tau_q_mean)},
                {"loss", model::MeanLoss(a.loss)},
                {"loss_compare", model::MeanLoss(a.loss_compare)}};
}

int CmdExport(const Flags& flags) {
    if (!flags.Has("--out")) throw Failure{kExitUsage, "export needs --out DIR"};
    if (flags.Has("--batch") && !flags.Has("--text-file")) throw Failure{kExitUsage, "--batch needs --text-file F"};
    ExportOptions options = ParseExportOptions(flags);
    if (auto s = CheckExportFolder(options.out_dir); !s) throw Failure{kExitUsage, "--out: " + s.error()};
    std::string text = ReadText(flags);
    std::vector<BatchText> texts = flags.Has("--batch") ? ReadBatch(flags.Get("--text-file"), text) : std::vector<BatchText>{{"", text, 0}};
    auto engine = OpenEngine(flags);
    const model::ModelConfig& c = engine->Info().config;
    options.layers = ParseIndexList("--layers", flags.Get("--layers", "all"), c.n_layer, "layer");
    options.heads = ParseIndexList("--heads", flags.Get("--heads", "all"), c.n_head, "head");
    if (flags.Has("--highlight-scope")) ParseHighlightScope(flags.Get("--highlight-scope"), c, &options.figures);
    // vanilla: the tau = 1 counterfactual (a whole second forward pass); local: tau = 1 layer by
    // layer on the SSA model's own q and k; anything else: a twin model's folder (./local for a
    // folder of that name).
    // unedited: the SSA model without the --ablate what-ifs, so differences are theirs alone.
    std::string compare = flags.Get("--compare", "vanilla");
    if (compare == "local" || compare == "unedited") {
        const auto kind = compare == "local" ? model::Comparison::LayerLocal : model::Comparison::Unedited;
        if (auto s = engine->SetComparison(kind); !s) throw Failure{kExitFailure, s.error()};
    } else if (compare != "vanilla") {
        if (auto s = engine->OpenTwin(compare, ConfigHints(flags)); !s) throw Failure{kExitBadInput, s.error()};
    }
    if (flags.Has("--ablate")) {
        auto edits = model::ParseInterventions(flags.Get("--ablate"), c.n_layer, c.n_head);
        if (!edits) throw Failure{kExitUsage, edits.error()};
        if (auto s = engine->SetInterventions(std::move(*edits)); !s) throw Failure{kExitUsage, s.error()};
    }

    if (!flags.Has("--batch")) {
        model::Tokenization tokens = Tokenize(*engine, text, flags);
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
        auto tokens = engine->Tokenize(t.text, flags.Has("--truncate"));
        std::string error = tokens ? "" : tokens.error();
        if (tokens) {
            auto analysis = engine->Analyze(*tokens);
            if (!analysis) {
                error = analysis.error();
            } else {
                ExportOptions one = options;
                one.out_dir = (out / t.name).string();
                if (auto s = WriteExport(t.text, *analysis, engine->Info(), one); !s) throw Failure{kExitFailure, s.error()};
                rows.push_back(SummaryRow(t, *analysis, options.sink_epsilon));
            }
        }
        if (!error.empty()) {
            std::fprintf(stderr, "%sssaviz: %s line %d (%s): %s\n", isatty(fileno(stderr)) ? "\n" : "", flags.Get("--text-file").c_str(),
                         t.line, t.name.c_str(), error.c_str());
            failures.push_back({{"name", t.name}, {"line", t.line}, {"error", error}});
        }
    }
    bar.Update(texts.size(), texts.size(), "done");
    // summary.json and summary.csv: one row per text, the columns in one order.
    std::ostringstream csv;
    const std::vector<std::string> columns = {"name", "n_tokens", "entropy", "entropy_compare", "normalized_entropy", "normalized_entropy_compare",
                                              "spikiness", "spikiness_compare", "sink_mass", "sink_mass_compare", "sink_ratio",
                                              "sink_ratio_compare", "js_divergence", "tau_q_mean", "loss", "loss_compare"};
    for (size_t k = 0; k < columns.size(); ++k) csv << (k ? "," : "") << columns[k];
    csv << "\n";
    std::printf("%-24s %6s %9s %9s %9s %9s %9s %9s\n", "text", "tokens", "H ssa", "H cmp", "Hn ssa", "Hn cmp", "sink", "JS");
    for (const json& r : rows) {
        for (size_t k = 0; k < columns.size(); ++k) {
            const json& v = r[columns[k]];
            csv << (k ? "," : "");
            if (v.is_string()) csv << v.get<std::string>();
            else if (v.is_number_float()) csv << Format("%.6g", v.get<double>());
            else if (!v.is_null()) csv << v.dump();
        }
        csv << "\n";
        auto num = [&](const char* key) { return r[key].is_number() ? r[key].get<double>() : NAN; };
        std::printf("%-24s %6d %9.4f %9.4f %9.4f %9.4f %9.4f %9.4f\n", r["name"].get<std::string>().substr(0, 24).c_str(), r["n_tokens"].get<int>(),
                    num("entropy"), num("entropy_compare"), num("normalized_entropy"), num("normalized_entropy_compare"), num("sink_mass"),
                    num("js_divergence"));
    }
    // summary.json and summary.csv: one row per text, the columns in one order; written whole or not at all.
    const std::string summary = json{{"texts", rows}, {"failed", failures}}.dump(1, ' ', false, json::error_handler_t::replace) + "\n";
    if (auto s = model::WriteFileAtomically((out / "summary.json").string(), summary); !s) throw Failure{kExitFailure, s.error()};
    if (auto s = model::WriteFileAtomically((out / "summary.csv").string(), csv.str()); !s) throw Failure{kExitFailure, s.error()};
    std::fprintf(stderr, "ssaviz: wrote %zu of %zu texts to %s (summary.csv, summary.json)\n", rows.size(), texts.size(), options.out_dir.c_str());
    return failures.empty() ? kExitOk : kExitBadInput;
}

// A finite number, from a flag: a one-line usage error otherwise.
double ParseNumber(const Flags& flags, const std::string& flag, double fallback, double lo, double hi) {
    if (!flags.Has(flag)) return fallback;
    const std::string text = flags.Get(flag);
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(v) || v < lo || v > hi)
        throw Failure{kExitUsage, flag + " '" + model::EscapeForMessage(text, 40) + "' is not a number from " + Format("%g", lo) + " to " +
                                      Format("%g", hi)};
    return v;
}

int CmdGenerate(const Flags& flags) {
    if (!flags.Has("--tokens")) throw Failure{kExitUsage, "generate needs --tokens N"};
    const int count = static_cast<int>(ParseNumber(flags, "--tokens", 0, 1, 100000));
    if (std::to_string(count) != flags.Get("--tokens")) throw Failure{kExitUsage, "--tokens '" + model::EscapeForMessage(flags.Get("--tokens"), 40) + "' is not a whole number"};
    const float temperature = static_cast<float>(ParseNumber(flags, "--temperature", 0, 0, 1000));
    const int top_k = static_cast<int>(ParseNumber(flags, "--top-k", 0, 0, 1e9));
    uint64_t rng = static_cast<uint64_t>(ParseNumber(flags, "--seed", 1234, 0, 9007199254740992.0));
    const std::string text = ReadText(flags);
    auto engine = OpenEngine(flags);
    const model::ModelConfig& c = engine->Info().config;
    if (flags.Has("--ablate")) {
        auto edits = model::ParseInterventions(flags.Get("--ablate"), c.n_layer, c.n_head);
        if (!edits) throw Failure{kExitUsage, edits.error()};
        if (auto s = engine->SetInterventions(std::move(*edits)); !s) throw Failure{kExitUsage, s.error()};
    }
    // Only the SSA side is needed: the layer-local comparison runs no forward pass of its own.
    if (auto s = engine->SetComparison(model::Comparison::LayerLocal); !s) throw Failure{kExitFailure, s.error()};
    model::Tokenization tokens = Tokenize(*engine, text, flags);
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
        model::AppendToken(engine->tokenizer(), next, &tokens);
        bar.Update(n + 1, count, "");
    }
    const std::string continuation = engine->tokenizer().Decode(generated);
    if (flags.Has("--json")) {
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

int CmdInitRandom(const Flags& flags) {
    if (!flags.Has("--out")) throw Failure{kExitUsage, "init-random needs --out DIR"};
    model::ModelConfig c;
    c.n_layer = ParsePositive(flags, "--layers", 4);
    c.n_head = ParsePositive(flags, "--heads", 4);
    c.n_embd = ParsePositive(flags, "--embd", 128);
    c.n_positions = ParsePositive(flags, "--positions", 1024);
    if (c.n_embd % c.n_head != 0) throw Failure{kExitUsage, "--embd must be divisible by --heads"};
    // What `info` accepts (config.json's own limits), and what fits in memory: refused before anything is built.
    if (c.n_layer > 1024 || c.n_head > 1024) throw Failure{kExitUsage, "--layers and --heads must be at most 1024"};
    const double parameters = (50257.0 + c.n_positions) * c.n_embd + 12.0 * c.n_layer * c.n_embd * c.n_embd;
    if (parameters * sizeof(float) > double(size_t{4} << 30))
        throw Failure{kExitUsage, "a model of --layers " + std::to_string(c.n_layer) + " --embd " + std::to_string(c.n_embd) + " --positions " +
                                      std::to_string(c.n_positions) + " has " + model::FormatBytes(static_cast<size_t>(parameters * sizeof(float))) +
                                      " of weights, more than the 4.3 GB init-random writes"};
    // The paper's recipe: query temperature from position and token, value temperature from token.
    c.query = {model::PositionForm::Sigmoid, model::TokenForm::Shared, model::Combine::Sum};
    c.value = {model::PositionForm::None, model::TokenForm::Feature, model::Combine::Sum};
    uint64_t seed = static_cast<uint64_t>(ParsePositive(flags, "--seed", 1234));
    std::string tokenizer = flags.Get("--tokenizer", "assets/tokenizers/gpt2");
    if (auto s = model::WriteRandomModel(c, seed, tokenizer, flags.Get("--out")); !s) throw Failure{kExitBadInput, s.error()};
    return kExitOk;
}

}  // namespace

int RunCommandLine(const std::vector<std::string>& args, GuiOptions* gui) {
    const std::set<std::string> model_flags = {"--model", "--device", "--dtype", "--n-head", "--query-form", "--value-form", "--activation"};
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
            Flags flags(args, 2,
                        with({"--text", "--text-file", "--out", "--layers", "--heads", "--format", "--compare", "--sink-eps", "--maps",
                              "--colormap", "--size", "--highlight", "--highlight-scope", "--ablate"}),
                        {"--truncate", "--log", "--batch"});
            if (flags.Has("--help")) return std::printf("%s", kUsage), kExitOk;
            return CmdExport(flags);
        }
        if (command == "generate") {
            Flags flags(args, 2, with({"--text", "--text-file", "--tokens", "--temperature", "--top-k", "--seed", "--ablate"}),
                        {"--json", "--truncate"});
            if (flags.Has("--help")) return std::printf("%s", kUsage), kExitOk;
            return CmdGenerate(flags);
        }
        if (command == "init-random") {
            Flags flags(args, 2, {"--out", "--seed", "--tokenizer", "--layers", "--heads", "--embd", "--positions"}, {});
            if (flags.Has("--help")) return std::printf("%s", kUsage), kExitOk;
            return CmdInitRandom(flags);
        }
        if (command == "train") {
            Flags flags(args, 2,
                        {"--task", "--data", "--out", "--tokenizer", "--layers", "--heads", "--width", "--context", "--vocab",
                         "--query-form", "--value-form", "--seq-len", "--batch", "--steps", "--lr", "--warmup", "--weight-decay",
                         "--seed", "--eval-every", "--checkpoint-every", "--save-dtype", "--threads"},
                        {"--resume", "--no-twin", "--freeze-positions", "--learn-positions"});
            if (flags.Has("--help")) return std::printf("%s", kUsage), kExitOk;
            return CmdTrain(flags);
        }
        if (command == "eval") {
            Flags flags(args, 2, {"--model", "--data", "--threads"}, {"--json"});
            if (flags.Has("--help")) return std::printf("%s", kUsage), kExitOk;
            return CmdEval(flags);
        }
        if (command == "help" || command == "--help" || command == "-h") return std::printf("%s", kUsage), kExitOk;
        if (!command.empty() && command.rfind("--", 0) != 0) throw Failure{kExitUsage, "unknown command '" + command + "'"};

        Flags flags(args, 1, with({"--text", "--text-file", "--screenshot", "--frames", "--bench-typing", "--bench-zoom", "--bench-at", "--bench-heads", "--session", "--export-to", "--show", "--example", "--window", "--continue"}), {"--truncate", "--rank-heads"});
        if (flags.Has("--help")) return std::printf("%s", kUsage), kExitOk;
        if (flags.Has("--session")) {
            auto session = LoadSession(flags.Get("--session"));
            if (!session) throw Failure{kExitBadInput, session.error()};
            gui->session = std::move(*session);
            gui->session_path = flags.Get("--session");
        }
        // The command line wins over the session: --model, --device and --text replace its own.
        if (gui->session && !flags.Has("--model") && !gui->session->model_dir.empty()) gui->model_dir = gui->session->model_dir;
        else gui->model_dir = ModelDir(flags);
        gui->device = flags.Get("--device", gui->session ? gui->session->device : "auto");
        gui->hints = ConfigHints(flags);
        gui->dtype = flags.Get("--dtype", "f32");
        if (gui->session && !flags.Has("--text") && !flags.Has("--text-file")) gui->text = gui->session->text;
        gui->export_to = flags.Get("--export-to");
        if (flags.Has("--example")) {
            gui->example = flags.Get("--example");
            std::string ids;
            bool found = false;
            for (const Example& x : BundledExamples()) {
                ids += (ids.empty() ? "" : ", ") + x.id;
                found |= x.id == gui->example;
            }
            if (!found) throw Failure{kExitUsage, "--example '" + gui->example + "' is not one of the bundled examples (" + (ids.empty() ? "none found" : ids) + ")"};
        }
        gui->show = flags.Get("--show");
        const std::set<std::string> shows = {"export", "help",   "demo",      "heads",      "matrix",
                                             "temperatures", "table", "sparsity", "next-token", "what-ifs"};
        if (!gui->show.empty() && !shows.count(gui->show))
            throw Failure{kExitUsage, "--show '" + model::EscapeForMessage(gui->show) +
                                          "' is not one of export, help, demo (windows) or heads, matrix, temperatures, table, sparsity, "
                                          "next-token, what-ifs (tabs)"};
        if (!gui->export_to.empty() && !gui->session) throw Failure{kExitUsage, "--export-to needs --session FILE (its export settings)"};
        gui->screenshot = flags.Get("--screenshot");
        gui->continue_tokens = flags.Has("--continue") ? ParsePositive(flags, "--continue", 1) : 0;  // Continue at start (screenshots, tests)
        gui->rank_heads = flags.Has("--rank-heads");
        gui->frames = ParsePositive(flags, "--frames", 30);
        gui->bench_keys = flags.Has("--bench-typing") ? ParsePositive(flags, "--bench-typing", 1) : 0;
        gui->bench_zoom_frames = flags.Has("--bench-zoom") ? ParsePositive(flags, "--bench-zoom", 1) : 0;
        gui->bench_heads = flags.Has("--bench-heads") ? ParsePositive(flags, "--bench-heads", 1) : 0;
        const std::string at = flags.Get("--bench-at", "end");
        if (at != "end" && at != "middle" && at != "start") throw Failure{kExitUsage, "--bench-at '" + at + "' is not one of end, middle, start"};
        gui->bench_at = at == "end" ? 1.0 : at == "middle" ? 0.5 : 0.0;
        if (flags.Has("--text") || flags.Has("--text-file")) gui->text = ReadText(flags);
        gui->truncate = flags.Has("--truncate") || (gui->session && gui->session->truncate);
        if (flags.Has("--window")) {
            const std::string size = flags.Get("--window");
            int w = 0, h = 0;
            char tail = 0;
            if (std::sscanf(size.c_str(), "%dx%d%c", &w, &h, &tail) != 2 || w < 320 || h < 240 || w > 16384 || h > 16384)
                throw Failure{kExitUsage, "--window '" + model::EscapeForMessage(size) + "' must be WIDTHxHEIGHT in pixels, e.g. 1280x800"};
            gui->window_width = w;
            gui->window_height = h;
        }
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
