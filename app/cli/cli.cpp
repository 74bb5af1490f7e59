// The subcommands info, tokenize, export, generate and init-random, and the dispatch that parses
// every command's flags (the window's too) with the table of app/export/flags.h. train and eval
// are in cli_train.cpp.
//
// Index:
//   [SECTION] What the commands share: the model, the text, the runner's answers
//   [SECTION] info, tokenize
//   [SECTION] export (and --batch)
//   [SECTION] generate
//   [SECTION] init-random
//   [SECTION] Dispatch, and the window's options
#include "app/cli/cli.h"
#include "app/cli/cli_common.h"
#include "app/cli/interrupts.h"

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
#include "app/core/head_impacts.h"
#include "app/core/model_scale.h"
#include "app/core/names.h"
#include "app/core/run.h"
#include "app/core/timeline.h"
#include "app/export/batch.h"
#include "app/export/export.h"
#include "app/export/flags.h"
#include "app/export/head_summary.h"
#include "app/export/run_export.h"
#include "app/export/session.h"
#include "model/nn/analysis.h"
#include "model/io/files.h"
#include "model/text/tokenizer.h"
#include "model/text/utf8.h"

namespace app {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

//-----------------------------------------------------------------------------
// [SECTION] What the commands share: the model, the text, the runner's answers
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
    // Named as the file's fault (a batch's lines are each their own text, said by line).
    if (const size_t bad = model::FindInvalidUtf8(*text); bad != std::string::npos && !o.batch)
        throw Failure{kExitBadInput, "--text-file " + model::Quoted(*o.text_file) + ": not valid UTF-8 at byte " + std::to_string(bad)};
    return std::move(*text);
}

// A runner's answer, or its failure as the command's exit code.
template <class T>
T Must(RunResult<T> result) {
    if (result) return std::move(*result);
    const RunError& e = result.error();
    throw Failure{ExitCodeOf(e.kind), e.message};
}

std::unique_ptr<Runner> OpenRunner(const CommandOptions& o) {
    model::UseComputeThreads(model::ResolveComputeThreads());
    const std::string dir = ModelDir(o);
    return Must(Runner::Open({dir, o.device.value_or("auto"), o.dtype, HintsWithBase(o.hints, dir, o.compare)}));
}

//-----------------------------------------------------------------------------
// [SECTION] info, tokenize
//-----------------------------------------------------------------------------

// tau_q's position term per layer (the official checkpoints' attn.beta): beta, the slope s and
// tau_q at a few lengths; a head's own values as a range where the layer has one per head.
void PrintSlopes(const model::ModelInfo& info) {
    if (info.query_slopes.empty()) return;
    const std::vector<int> at = SlopeContexts(info);
    // Four decimals, three significant digits below 0.01 (a fine-tune's slopes of 6e-4 read
    // "0.0006..0.0006": the heads' differences it had moved rounded away), more where the ends
    // would read alike.
    auto range = [](const std::vector<float>& v) {
        const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
        // Significant digits where fixed ones would not (below 0.01, or past 1e6: a beta of -3e38 ran
        // past the buffer, cut to "-300000000549775575777803994281").
        const float most = std::max(std::abs(*lo), std::abs(*hi));
        const bool small = most < 0.01f || !(most < 1e6f);
        char a[48], b[48];
        for (int digits = 4; digits <= 8; digits += 2) {
            std::snprintf(a, sizeof a, small ? "%.*g" : "%.*f", small ? digits - 1 : digits, *lo);
            std::snprintf(b, sizeof b, small ? "%.*g" : "%.*f", small ? digits - 1 : digits, *hi);
            if (v.size() == 1 || *lo == *hi || std::string(a) != b) break;
        }
        return v.size() == 1 || *lo == *hi ? std::string(a) : std::string(a) + ".." + b;
    };
    // The table's cells, a row a layer under a header, then each column as wide as its widest cell.
    std::vector<std::vector<std::string>> rows(1, {"layer", "beta", "s"});
    // A length past the context is marked: what the slope gives there, not a length the model runs at.
    const bool past = at.back() > info.config.n_positions;
    for (int i : at) rows[0].push_back("tau@" + std::to_string(i) + (i > info.config.n_positions ? "*" : ""));
    for (size_t l = 0; l < info.query_slopes.size(); ++l) {
        const model::TemperatureSlope& slope = info.query_slopes[l];
        std::vector<std::string> row = {std::to_string(l), range(slope.beta), range(slope.s)};
        for (int i : at) {
            std::vector<float> tau;
            for (float s : slope.s) tau.push_back(1.0f + s * std::log(static_cast<float>(i)));
            row.push_back(range(tau));
        }
        rows.push_back(std::move(row));
    }
    std::vector<size_t> width(rows[0].size(), 0);
    for (const auto& row : rows)
        for (size_t k = 0; k < row.size(); ++k) width[k] = std::max(width[k], row[k].size());
    std::printf("slopes       tau_q(i) = 1 + s ln i per layer (%s from beta)\n", model::ToString(info.config.query.position));
    for (const auto& row : rows) {
        std::printf("  %*s", static_cast<int>(width[0]), row[0].c_str());  // the layer, right-aligned
        for (size_t k = 1; k < row.size(); ++k) std::printf("  %-*s", k + 1 < row.size() ? static_cast<int>(width[k]) : 0, row[k].c_str());
        std::printf("\n");
    }
    if (past)
        std::printf("  * past the model's context (%d tokens): what the slope gives there, not a length the model runs at\n", info.config.n_positions);
}

int CmdInfo(const CommandOptions& o) {
    auto runner = OpenRunner(o);
    const model::ModelInfo& info = runner->Info();
    const json j = InfoCommandJson(info);
    if (o.json) {
        std::printf("%s\n", model::JsonText(j, 2).c_str());
        return kExitOk;
    }
    // What the window and --compare base would set it against, found beside it.
    const std::string base = j["base_beside"].is_null() ? "" : j["base_beside"].get<std::string>();
    const std::string twin = j["twin_beside"].is_null() ? "" : j["twin_beside"].get<std::string>();
    const model::ModelConfig& c = info.config;
    std::printf("model        %s\n", model::EscapeForMessage(info.dir, 4096).c_str());
    std::printf("layers       %d\nheads        %d (head size %d)\nwidth        %d\ncontext      %d\nvocabulary   %d\n", c.n_layer,
                c.n_head, c.HeadSize(), c.n_embd, c.n_positions, c.vocab_size);
    std::printf("family       %s\n", model::DescribeArchitecture(c).c_str());
    std::printf("parameters   %lld\nactivation   %s\nlayout       %s\n", static_cast<long long>(info.parameters),
                model::ActivationName(c), info.layout.c_str());
    std::printf("tau_q        %s\ntau_v        %s\n", model::Describe(c.query).c_str(), model::Describe(c.value).c_str());
    PrintSlopes(info);
    std::printf("tokenizer    %s, %zu tokens, from %s\ndevice       %s, computing in %s\n", info.tokenizer_kind.c_str(), info.tokenizer_vocab,
                info.tokenizer_source.c_str(), info.device.c_str(), info.compute_dtype.c_str());
    const model::ComputeThreads threads = model::CurrentComputeThreads();
    std::printf("threads      %d (%s)\nblas         %s\n", threads.count, threads.why.c_str(), model::DescribeBlas().c_str());
    for (const std::string& setting : info.settings) std::printf("setting      %s\n", setting.c_str());
    std::printf("weights      %s (%s, stored %s)\n", model::EscapeForMessage(info.weights_path, 4096).c_str(), info.weights_format.c_str(),
                info.stored_dtype.c_str());
    if (!info.unused_tensors.empty())
        std::printf("unused       %zu tensors (e.g. %s)\n", info.unused_tensors.size(), model::EscapeForMessage(info.unused_tensors[0]).c_str());
    if (!base.empty())
        std::printf("base         %s (beside it: --compare base sets the fine-tune against it, three sides)\n",
                    model::EscapeForMessage(base, 4096).c_str());
    if (!twin.empty())
        std::printf("twin         %s (beside it, trained apart: the window offers it; --compare DIR%s)\n", model::EscapeForMessage(twin, 4096).c_str(),
                    base.empty() ? "" : ", on its own: what training with temperatures gave, where the base's split says what they do in this fine-tune");
    for (const std::string& note : info.notes) std::printf("note         %s\n", model::EscapeForMessage(note, 4096).c_str());
    return kExitOk;
}

// A piece as the table shows it: quoted and escaped as JSON would, each byte that is not part of a
// whole character as \xNN (byte-level BPE splits characters; --json keeps every byte in piece_bytes).
std::string QuotedPiece(const std::string& piece) {
    std::string out = "\"";
    for (size_t i = 0; i < piece.size();) {
        const model::Utf8Char c = model::DecodeUtf8(piece, i);
        if (c.length == 0) {
            char byte[8];
            std::snprintf(byte, sizeof byte, "\\x%02X", static_cast<unsigned char>(piece[i++]));
            out += byte;
            continue;
        }
        // The JSON library escapes U+0000..U+001F only; a zero-width space read as an empty piece.
        if (c.code_point == 0x7F || model::IsHiddenControl(c.code_point) || model::IsInvisibleFormat(c.code_point)) {
            char escaped[12];
            std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(c.code_point));
            out += escaped;
            i += c.length;
            continue;
        }
        const std::string quoted = json(piece.substr(i, c.length)).dump();
        out.append(quoted, 1, quoted.size() - 2);
        i += c.length;
    }
    return out + "\"";
}

int CmdTokenize(const CommandOptions& o) {
    std::string text = ReadText(o);
    auto runner = OpenRunner(o);
    model::Tokenization tokens = Must(runner->Tokenize(text, o.truncate));
    if (o.json) {
        std::printf("%s\n", model::JsonText(TokensToJson(text, tokens), 1).c_str());
        return kExitOk;
    }
    std::printf("%5s %7s %11s  piece\n", "i", "id", "bytes");
    const std::vector<std::string> labels = TokenLabels(tokens);  // "é 1/2" where tokens split a character
    for (size_t i = 0; i < tokens.ids.size(); ++i) {
        std::string range = std::to_string(tokens.offsets[i].first) + "-" + std::to_string(tokens.offsets[i].second);
        std::string piece = QuotedPiece(tokens.pieces[i]);
        if (model::FindInvalidUtf8(tokens.pieces[i]) != std::string::npos && labels[i] != TokenLabel(tokens.pieces[i]))
            piece += "  (" + labels[i] + ")";
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
            if (!parsed) throw Failure{kExitBadInput, where + ": not JSON (" + parsed.error() + "; JSON lines need one object per line)"};
            if (!j.is_object()) throw Failure{kExitBadInput, where + ": not a JSON object (JSON lines need one object per line)"};
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

// --lens's sides, with their progress.
std::vector<std::shared_ptr<const model::Lens>> RunLensWithProgress(Runner& runner, const model::Analysis& a) {
    ProgressBar bar("lens");
    auto sides = app::RunLensSides(runner.engine(), a, [&](size_t done, size_t total) {
        bar.Update(done, total, done < total ? LensSideName(a, done) : "");  // the side now running
    });
    if (!sides) throw Failure{kExitFailure, "--lens: " + sides.error()};
    return std::move(*sides);
}

// --rank-heads's measures, with their progress (the engine's what-ifs on top, as the analysis ran).
HeadImpacts RankHeadsWithProgress(Runner& runner, const model::Analysis& a) {
    ProgressBar bar("rank heads");
    HeadImpacts impacts;
    auto s = MeasureHeadImpacts(runner.engine(), a.tokens, {}, &impacts, [&](const HeadImpacts& so_far) {
        const HeadImpact& last = so_far.heads.back();
        bar.Update(so_far.heads.size(), static_cast<size_t>(so_far.total), HeadName({last.layer, last.head}));
        return true;
    }, RankOptions{/*split=*/true, /*drift=*/true});
    if (!s) throw Failure{kExitBadInput, "--rank-heads: " + s.error()};
    return impacts;
}

int CmdExport(const CommandOptions& o) {
    if (o.batch && !o.text_file) throw Failure{kExitUsage, "--batch needs --text-file F"};
    ExportOptions options = o.export_options;
    options.out_dir = o.out;
    for (const std::optional<std::string>& run : {o.run, o.compare_run})  // first: the run's own words for it
        if (run)
            if (auto s = CheckOutsideRun(options.out_dir, *run); !s) throw Failure{kExitUsage, "--out: " + s.error()};
    if (auto s = CheckExportFolder(options.out_dir); !s) throw Failure{kExitUsage, "--out: " + s.error()};
    std::string text = ReadText(o);
    if ((o.compare_run || o.steps) && !o.run)
        throw Failure{kExitUsage, std::string(o.steps ? "--steps" : "--compare-run") + " goes with --run DIR" +
                                      (o.example.empty() ? "" : ": --example " + o.example + " is no training run")};
    if (o.compare_run)
        if (auto s = CheckCompareRun(*o.run, *o.compare_run); !s) throw Failure{kExitUsage, "--compare-run " + s.error()};
    // What only a base has, asked for without one: a usage error before the model runs.
    if (auto s = CheckExportSettings(options, o.compare.kind == CompareKind::Base); !s && !(o.export_options.lens && ExportFormats(options).empty()))
        throw Failure{kExitUsage, s.error()};
    if (o.run) return CmdExportRun(o, options, text);
    if (o.batch && options.rank_heads) throw Failure{kExitUsage, "--rank-heads analyses the text once a head: not with --batch"};
    std::vector<BatchText> texts = o.batch ? ReadBatch(*o.text_file, text) : std::vector<BatchText>{{"", text, 0}};
    // Where the files go (each text's sub-folder in a batch), before the model runs: a link or a
    // file where a folder goes is refused, not written through.
    for (const BatchText& t : texts)
        if (auto s = CheckExportPlaces(options.out_dir, (fs::path(options.out_dir) / t.name).string(), options); !s)
            throw Failure{kExitUsage, "--out: " + s.error()};
    auto runner = OpenRunner(o);
    const model::ModelConfig& c = runner->Info().config;
    if (auto s = ResolveExportHeads(&options, c.n_layer, c.n_head); !s) throw Failure{kExitUsage, s.error()};
    if (auto s = CheckHighlightScope(options.figures, c.n_layer, c.n_head); !s) throw Failure{kExitUsage, s.error()};
    Must(runner->Configure({o.compare, o.ablate.value_or("")}));
    if (o.compare.kind == CompareKind::Base && o.compare.base_dir.empty())  // which base it found (another experiment's base/ would read as this one's)
        std::fprintf(stderr, "ssaviz: base: %s, found beside the model (--base DIR names another)\n",
                     model::EscapeForMessage(runner->BasePath(), 4096).c_str());
    if (options.lens && o.ablate) throw Failure{kExitUsage, "--lens runs the model as loaded: not with --ablate"};

    if (!o.batch) {
        const model::Tokenization tokens = Must(runner->Tokenize(text, o.truncate));
        if (auto s = CheckHeatmapsFit(options, static_cast<int64_t>(tokens.ids.size())); !s) throw Failure{kExitUsage, s.error()};
        if (auto s = CheckHighlightFits(tokens.pieces, options.figures, options.png, options.svg); !s) throw Failure{kExitUsage, s.error()};
        const model::Analysis analysis = Must(runner->Analyze(tokens));
        // What the file's numbers hold is the input's fault: exit 3, as every refusal of a file.
        if (const std::string why = NonFiniteAnalysis(analysis); !why.empty()) throw Failure{kExitBadInput, why + "; nothing was written"};
        if (auto s = CheckHighlightHeld(options, analysis); !s) throw Failure{kExitUsage, s.error()};
        if (auto s = CheckDlaPosition(options, analysis.n_tokens); !s) throw Failure{kExitUsage, s.error()};
        std::vector<ExportFile> lens_files;
        std::vector<std::shared_ptr<const model::Lens>> lens_sides;
        if (options.lens) {
            lens_sides = RunLensWithProgress(*runner, analysis);
            auto files = LensExportFiles(runner->engine(), runner->Info(), analysis, lens_sides, options);
            if (!files) throw Failure{kExitFailure, "--lens: " + files.error()};
            lens_files = std::move(*files);
        }
        std::optional<HeadImpacts> impacts;
        if (options.rank_heads) {
            impacts = RankHeadsWithProgress(*runner, analysis);
            for (ExportFile& f : HeadImpactFiles(*impacts, runner->Info(), options, TokenLabels(analysis.tokens))) lens_files.push_back(std::move(f));
        }
        ProgressBar bar("export");
        auto s = WriteExport(text, analysis, runner->Info(), options, [&](size_t done, size_t total, const std::string& path) {
            bar.Update(done, total, path);
            return true;
        }, std::move(lens_files));
        if (!s) throw Failure{kExitFailure, s.error()};
        // The model named (an export without --model said nothing of which model it had run).
        std::fprintf(stderr, "ssaviz: wrote %s (%s: %d token%s, %d x %d heads, forward %.1f ms, metrics %.1f ms on %s)\n",
                     model::EscapeForMessage(options.out_dir, 4096).c_str(), model::EscapeForMessage(ModelName(runner->Info())).c_str(), analysis.n_tokens,
                     analysis.n_tokens == 1 ? "" : "s", analysis.n_layer, analysis.n_head, analysis.forward_ms, analysis.metrics_ms, analysis.device.c_str());
        // Beside a base, what fine-tuning changed, at a glance (metrics.json's decomposition).
        if (const model::Decomposition d = model::Decompose(analysis); !d.empty() && analysis.n_tokens < 2)
            std::fprintf(stderr, "ssaviz: fine-tuning: a text of one token has no loss and one attention row: nothing to compare\n");
        else if (!d.empty())
            // A head's rows read after every earlier layer's temperatures too (a head whose own tau is 1.01
            // ranked first): said, with where a layer's own is had.
            std::fprintf(stderr, "ssaviz: fine-tuning: %s; heads whose rows moved most (JS, nats; not shares of the loss) by the %s: %s "
                                 "(with every earlier layer's; --compare local without --base: a layer's own); by the drift: %s\n",
                         FineTuneHeadline(analysis, d).c_str(), TemperaturePartName(analysis).c_str(), TopHeads(d.js_temperature, d.n_head, 3, kJsRoundingFloor).c_str(),
                         TopHeads(d.js_drift, d.n_head, 3, kJsRoundingFloor).c_str());
        if (const std::string note = BaseTemperaturesNote(analysis); !note.empty() && analysis.n_tokens >= 2)  // one token: no split to note
            std::fprintf(stderr, "ssaviz: note: %s\n", note.c_str());
        if (const std::string note = BaseDifferenceNote(analysis); !note.empty()) std::fprintf(stderr, "ssaviz: note: %s\n", note.c_str());
        if (const std::string note = SelfComparisonNote(analysis); !note.empty()) std::fprintf(stderr, "ssaviz: note: %s\n", note.c_str());
        // The lens at a glance: each side's mean loss read after each layer (lens_loss.npy's means).
        if (!lens_sides.empty() && analysis.n_tokens >= 2) {
            std::string line;
            for (size_t k = 0; k < lens_sides.size(); ++k) {
                line += (k ? "; " : "") + model::EscapeForMessage(LensSideName(analysis, k)) + ":";  // a twin's folder name
                for (double v : LensLossMeans(*lens_sides[k])) {
                    char number[32];
                    std::snprintf(number, sizeof number, " %.3f", v);
                    line += number;
                }
            }
            std::fprintf(stderr, "ssaviz: the lens, mean loss read after the embeddings, L0 ... L%d (the model's own), nats: %s\n", analysis.n_layer - 1,
                         line.c_str());
        }
        if (impacts) {
            const int L = analysis.n_layer, H = analysis.n_head;
            std::fprintf(stderr, "ssaviz: each head's temperatures' part of the loss %.4f (nats, one head at tau = 1 at a time): %s\n",
                         impacts->baseline, PartsHeadline(TemperatureParts(*impacts, L, H), H, 3).c_str());
            const model::ModelConfig& c = runner->Info().config;
            if (c.query.Active() && c.value.Active())
                std::fprintf(stderr, "ssaviz: of that, tau_q alone: %s; tau_v alone: %s\n",
                             PartsHeadline(TemperatureParts(*impacts, L, H, TemperaturePart::TauQ), H, 2).c_str(),
                             PartsHeadline(TemperatureParts(*impacts, L, H, TemperaturePart::TauV), H, 2).c_str());
            else if (c.query.Active() || c.value.Active())  // the official checkpoints: tau_q alone, which is then the whole part
                std::fprintf(stderr, "ssaviz: the model has %s alone: the part above is %s's (%s null: not measured)\n",
                             c.query.Active() ? "tau_q" : "tau_v", c.query.Active() ? "tau_q" : "tau_v", c.query.Active() ? "part_tau_v" : "part_tau_q");
            if (impacts->drift) {
                // Beside the split's drift, which is another measure: tau = 1 against the base, no temperatures on either side.
                const model::Decomposition d = model::Decompose(analysis);
                std::fprintf(stderr, "ssaviz: the drift's parts (nats, one head's or MLP's weights from the base at a time, SSA's temperatures kept): %s (the split's drift, tau = 1 against the base: %+.3g)\n",
                             DriftHeadline(*impacts, L, H, 3).c_str(), d.loss_mean_tau1 - d.loss_mean_base);
                std::fprintf(stderr, "ssaviz: the drift along the layers (each part taken back from the base on top of those before it, one way and the other): %s\n",
                             PathHeadline(*impacts, L, H, 6).c_str());
            }
            if (const std::string where = WhereLine(*impacts, TokenLabels(analysis.tokens), L, H, 2); !where.empty())
                std::fprintf(stderr, "ssaviz: where on the text: %s (head_impacts_tokens.npy: every part token by token)\n",
                             model::EscapeForMessage(where, 4096).c_str());
        }
        return kExitOk;
    }

    // Batch: one sub-folder per text; a bad text is reported and skipped, the rest go on.
    json rows = json::array(), failures = json::array();
    ProgressBar bar("batch");
    const fs::path out(options.out_dir);
    // A batch is text by text: an interrupt says which texts are in place, and that a summary
    // there is an earlier batch's (it is written last).
    std::error_code had_ec;
    const bool earlier_summary = fs::exists(out / "summary.json", had_ec) || fs::exists(out / "summary.csv", had_ec);
    auto note_done = [&](size_t done) {
        SetInterruptNote(std::to_string(done) + " of " + std::to_string(texts.size()) + " texts were written in " +
                         model::Quoted(options.out_dir) +
                         (earlier_summary ? " beside an earlier batch's summary.json and summary.csv, which are not this one's" : ", and no summary"));
    };
    note_done(0);
    for (size_t k = 0; k < texts.size(); ++k) {
        const BatchText& t = texts[k];
        bar.Update(k, texts.size(), t.name);
        auto tokens = runner->engine().Tokenize(t.text, o.truncate);  // a failure is the text's row: the engine's own words
        std::string error = tokens ? "" : tokens.error();
        if (tokens)  // a highlight too long to draw: that text's, before it runs
            if (auto s = CheckHighlightFits(tokens->pieces, options.figures, options.png, options.svg); !s) error = s.error();
        if (error.empty()) {
            auto analysis = runner->Analyze(*tokens);
            ExportOptions one = options;
            one.out_dir = (out / t.name).string();
            if (!analysis) {
                error = analysis.error().message;
            } else if (auto s = CheckDlaPosition(options, analysis->n_tokens); !s) {
                // A text too short for it: that text's failure, listed in the summary, as a text too
                // long for the context (an attribution at another position than asked would be
                // mistaken for the one asked for).
                error = s.error();
            } else {
                // What the base differs in that is no weight, once for the batch (a lone export says it; a batch said nothing).
                if (const std::string note = rows.empty() ? BaseDifferenceNote(*analysis) : ""; !note.empty())
                    std::fprintf(stderr, "%sssaviz: note: %s\n", isatty(fileno(stderr)) ? "\n" : "", note.c_str());
                json row = BatchSummaryRow(t.name, t.line, *analysis, options.sink_epsilon);
                std::vector<ExportFile> lens_files;
                if (options.lens) {  // each text's lens files, and its loss by layer in the summary (none for one token), as a lone export's and Python's
                    const auto sides = RunLensWithProgress(*runner, *analysis);
                    row["lens_loss"] = LensLossByLayer(*sides[0]);
                    if (sides.size() > 1) row["lens_loss_compare"] = LensLossByLayer(*sides[1]);
                    if (sides.size() > 2) row["lens_loss_base"] = LensLossByLayer(*sides[2]);
                    auto files = LensExportFiles(runner->engine(), runner->Info(), *analysis, sides, one);
                    if (!files) throw Failure{kExitFailure, "--lens: " + files.error()};
                    lens_files = std::move(*files);
                }
                if (auto s = CheckBatchFolder(options.out_dir, t.name); !s) throw Failure{kExitFailure, s.error()};  // made a link meanwhile
                if (auto s = WriteExport(t.text, *analysis, runner->Info(), one, nullptr, std::move(lens_files)); !s) throw Failure{kExitFailure, s.error()};
                rows.push_back(std::move(row));
                note_done(rows.size());
            }
        }
        if (!error.empty()) {
            std::fprintf(stderr, "%sssaviz: %s line %d (%s): %s\n", isatty(fileno(stderr)) ? "\n" : "", model::EscapeForMessage(*o.text_file).c_str(),
                         t.line, model::EscapeForMessage(t.name).c_str(), model::EscapeForMessage(error, 4096).c_str());
            failures.push_back({{"name", t.name}, {"line", t.line}, {"error", error}});
        }
    }
    bar.Update(texts.size(), texts.size(), "done");
    std::printf("%s", BatchSummaryTable(rows).c_str());
    // The summary lists the failures even where no text was written (--out is then made for it alone).
    if (const std::error_code ec = model::MakeFolders(options.out_dir))
        throw Failure{kExitFailure, model::Quoted(options.out_dir) + ": cannot create (" + ec.message() + ")"};
    if (auto s = WriteBatchSummary(options.out_dir, rows, failures); !s) throw Failure{kExitFailure, s.error()};
    SetInterruptNote("");
    std::fprintf(stderr, "ssaviz: wrote %zu of %zu texts to %s (summary.csv, summary.json)\n", rows.size(), texts.size(), model::EscapeForMessage(options.out_dir).c_str());
    return failures.empty() ? kExitOk : kExitBadInput;
}

//-----------------------------------------------------------------------------
// [SECTION] generate
//-----------------------------------------------------------------------------

int CmdGenerate(const CommandOptions& o) {
    const GenerationSpec& spec = o.generate;
    const std::string text = ReadText(o);
    if (spec.temperature == 0 && (spec.top_k != 0 || spec.seed != GenerationSpec{}.seed))
        std::fprintf(stderr, "ssaviz: --temperature 0 takes the most likely token: --top-k and --seed draw nothing (sample with --temperature X above 0)\n");
    auto runner = OpenRunner(o);
    Must(runner->Configure({CompareKind::None, o.ablate.value_or("")}));  // only the SSA side is needed
    model::Tokenization tokens = Must(runner->Tokenize(text, o.truncate));
    const size_t prompt = tokens.ids.size();
    ProgressBar bar("generate");
    GenerationHooks hooks;
    hooks.on_step = [&](const GenerationStep& step) { bar.Update(step.index + 1, spec.tokens, ""); };
    const Generation generated = Must(runner->Generate(&tokens, spec, hooks));
    if (generated.end == Generation::End::ContextFull)
        std::fprintf(stderr, "ssaviz: stopped after %zu token%s: the model's context of %d is full\n", generated.ids.size(),
                     generated.ids.size() == 1 ? "" : "s", runner->Info().config.n_positions);
    // The text the tokens add to the prompt, as the window's Continue appends it: a SentencePiece
    // token's leading space kept (decoding the new ids alone dropped it: "Hello there" + "is a man").
    const std::string& continuation = generated.text;
    if (o.json) {
        const json j = {{"prompt_tokens", prompt}, {"ids", generated.ids}, {"text", continuation}, {"temperature", spec.temperature},
                        {"top_k", spec.top_k}, {"interventions", model::FormatInterventions(runner->engine().interventions())}};
        std::printf("%s\n", model::JsonText(j).c_str());
    } else {
        const std::string shown = TerminalText(continuation);  // a piece's control characters inert
        std::fwrite(shown.data(), 1, shown.size(), stdout);
        std::printf("\n");
    }
    return kExitOk;
}

//-----------------------------------------------------------------------------
// [SECTION] init-random
//-----------------------------------------------------------------------------

// A family's preset (SPEC section 7, model/arch's family table), then the shape flags over it.
model::ModelConfig RandomModelConfig(const NewModelOptions& m) {
    const model::Family* family = model::FindFamily(m.family);
    if (!family || !family->preset) throw Failure{kExitUsage, "--family: '" + m.family + "' is not one of " + model::PresetFamilies(", ")};
    model::PresetShape shape;
    shape.n_layer = m.layers.value_or(shape.n_layer);
    shape.n_head = m.heads.value_or(shape.n_head);
    shape.n_embd = m.embd;
    shape.n_positions = m.positions;
    if (shape.n_embd % shape.n_head != 0) throw Failure{kExitUsage, "--embd must be divisible by --heads"};
    if (shape.n_layer > 1024 || shape.n_head > 1024) throw Failure{kExitUsage, "--layers and --heads must be at most 1024"};
    if (family->positions != model::PositionKind::Rope && (m.kv_heads || m.rotary || m.rope_base || m.mlp)) {
        std::string rope;  // the families these flags shape
        for (const model::Family& f : model::Families())
            if (f.preset && f.positions == model::PositionKind::Rope) rope += std::string(rope.empty() ? "" : ", ") + f.name;
        throw Failure{kExitUsage, "--kv-heads, --mlp, --rotary and --rope-base need --family " + rope};
    }
    shape.kv_heads = m.kv_heads;
    shape.intermediate_size = m.mlp;
    shape.rotary = m.rotary;
    shape.rope_base = m.rope_base;
    auto c = model::FamilyPreset(*family, shape);
    if (!c) throw Failure{kExitUsage, c.error()};
    return *c;
}

// "pythia, llama, mistral, llama3": init-random's families lit-gpt's layout holds.
std::string LitFamilies() {
    std::string names;
    for (const model::Family& f : model::Families())
        if (f.preset && *f.lit_names && f.positions == model::PositionKind::Rope) names += std::string(names.empty() ? "" : ", ") + f.name;
    return names;
}

// What init-random may replace at --out: nothing, an empty folder, or a folder of the files it
// writes (a model it wrote before, as the build's default model, written again by every build). A
// trained model (its train.json), a downloaded one (its README.md) or anything else there is the
// user's: it was replaced file by file, and the folder left mixed.
model::Status InitRandomWrote(const std::string& dir) {
    static const std::set<std::string> kWritten = {"config.json", "lit_config.json", "model.safetensors", "lit_model.pth", "vocab.json",
                                                   "merges.txt",  "tokenizer.json",  "tokenizer.model",   "tokenizer_config.json"};
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        const fs::file_status st = it->symlink_status(ec);
        if (!kWritten.count(name) || !(fs::is_regular_file(st) || fs::is_symlink(st)))  // a link of its names: replaced, never followed
            return model::Fail(model::Quoted(dir) + " holds " + model::Quoted(name) +
                               ", which init-random does not write: give a new folder, or one init-random wrote");
    }
    if (ec) return model::Fail(model::Quoted(dir) + ": cannot read (" + ec.message() + ")");
    return model::Ok{};
}

int CmdInitRandom(const CommandOptions& o) {
    const NewModelOptions& m = o.new_model;
    model::ModelConfig c = RandomModelConfig(m);
    // What fits in memory: refused before anything is built or written, with the tokenizer's own
    // vocabulary (the embedding and head grow with it).
    const std::string tokenizer = m.tokenizer.value_or(BundledGpt2TokenizerDir());
    auto vocab = model::LoadTokenizer(tokenizer);
    if (!vocab) throw Failure{kExitBadInput, "--tokenizer: " + vocab.error()};
    model::ModelConfig sized = c;
    sized.vocab_size = static_cast<int>((*vocab)->VocabSize());
    const double parameters = static_cast<double>(sized.ParameterCount());
    // At most 4.3 GB on disk, and 8.6 GB of float32 while the weights are drawn.
    const double on_disk = parameters * model::DtypeSize(m.save_dtype);
    if (on_disk > double(size_t{4} << 30) || parameters * sizeof(float) > double(size_t{8} << 30))
        throw Failure{kExitUsage, "a model of --layers " + std::to_string(c.n_layer) + " --embd " + std::to_string(c.n_embd) + " --positions " +
                                      std::to_string(c.n_positions) + " and a vocabulary of " + std::to_string(sized.vocab_size) +
                                      " has " + model::FormatBytes(static_cast<size_t>(on_disk)) +
                                      " of weights, more than the 4.3 GB init-random writes (8.6 GB of float32 while drawn)"};
    c.query = m.random_query_form.value_or(model::kPaperQueryForm);
    c.value = model::kPaperValueForm;
    const uint64_t seed = m.seed.value_or(1234);
    // The layouts a family's model fits, said before anything is written.
    if (m.layout != model::Layout::Hf && c.HfOnly())
        throw Failure{kExitUsage, "--family " + m.family + " is written as an HF folder only: give --layout hf"};
    if (m.layout == model::Layout::Lit && !c.Rope())
        throw Failure{kExitUsage, "--layout lit needs a RoPE family lit-gpt holds (" + LitFamilies() + "); GPT-2 is HF's layout"};
    if (auto s = CheckExportFolder(o.out, /*weights=*/true); !s) throw Failure{kExitUsage, "--out: " + s.error()};
    std::string out = o.out;  // "DIR/" is DIR: its temporary folder goes beside it
    while (out.size() > 1 && out.back() == '/') out.pop_back();
    if (auto s = model::CheckReplaceableFolder(out, InitRandomWrote); !s) throw Failure{kExitUsage, "--out: " + s.error()};
    // Written whole beside --out, then put in its place: an earlier model's files never stay
    // beside the new one's (its tokenizer.model beside GPT-2's pair), and a failure leaves it as it was.
    if (const fs::path parent = fs::path(out).parent_path(); !parent.empty())
        if (std::error_code ec = model::MakeFolders(parent.string()))
            throw Failure{kExitFailure, "--out: " + model::Quoted(parent.string()) + ": cannot create (" + ec.message() + ")"};
    auto staged = model::HeldTempFolder::Create(out);
    if (!staged) throw Failure{kExitFailure, "--out: " + staged.error()};
    model::Status s = model::WriteRandomModel(c, seed, tokenizer, staged->path(), m.save_dtype, m.layout);
    if (s) s = model::ReplaceFolder(staged->path(), out, InitRandomWrote);
    if (!s) {
        std::error_code ignored;
        fs::remove_all(staged->path(), ignored);
        throw Failure{kExitBadInput, s.error()};
    }
    // As every writer says what it wrote (it said nothing).
    std::fprintf(stderr, "ssaviz: wrote %s (a random %s model: %d layers x %d heads, width %d, %s parameters, seed %llu)\n",
                 model::Quoted(out).c_str(), model::EscapeForMessage(c.family).c_str(), c.n_layer, c.n_head, c.n_embd,
                 CountName(static_cast<int64_t>(parameters)).c_str(), static_cast<unsigned long long>(seed));
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

// Whether `file` is absent, empty, a link (replaced, never followed), or a screenshot ssaviz wrote:
// a PNG, or (`description`) the JSON beside it, which begins with its "height".
bool IsScreenshotOrNothing(const std::string& file, bool description) {
    std::error_code ec;
    const fs::file_status st = fs::symlink_status(file, ec);
    if (!fs::exists(st) || fs::is_symlink(st) || !fs::is_regular_file(st) || fs::file_size(file, ec) == 0) return true;
    const std::string want = description ? "{\n \"height\":" : "\x89PNG\r\n\x1a\n";
    std::string head(want.size(), '\0');
    std::ifstream in(file, std::ios::binary);
    return in.read(head.data(), static_cast<std::streamsize>(head.size())) && head == want;
}

// --example ID for a command: the example's model and, unless --text or --text-file gives one, its
// text; export also compares with its twin or base as the window does, and exports a run's example
// as --run with its --compare-run. The other commands take a run's last step.
void ApplyExample(Command command, CommandOptions* o) {
    if (o->example.empty()) return;  // the table refused flags naming another model (NotWith)
    const std::vector<Example> examples = BundledExamples();
    const auto x = std::find_if(examples.begin(), examples.end(), [&](const Example& e) { return e.id == o->example; });
    if (x == examples.end()) throw Failure{kExitBadInput, "--example " + QuoteForMessage(o->example) + " is no longer among the bundled examples"};
    if (!o->text && !o->text_file) o->text = x->text;
    const bool export_run = command == Command::Export && !x->run_dir.empty();
    if (export_run) {
        o->run = x->run_dir;
        if (!x->compare_run_dir.empty()) o->compare_run = x->compare_run_dir;
        return;
    }
    if (!x->run_dir.empty()) {
        auto steps = FindRunSteps(x->run_dir);
        if (!steps) throw Failure{kExitBadInput, "--example " + x->id + ": " + steps.error()};
        o->model_dir = steps->back().path;
    } else {
        o->model_dir = x->model_dir;
    }
    if (command != Command::Export) return;
    if (!x->base_dir.empty()) o->compare = CompareSpec::Base(x->base_dir);
    else if (!x->twin_dir.empty()) o->compare = CompareSpec::Twin(x->twin_dir);
}

// The window's start: its own flags, and the model and text from the flags, else the session's.
void ResolveLaunch(const CommandOptions& o, LaunchOptions* launch, std::optional<Session>* session) {
    *launch = o.window;
    launch->example = o.example;
    if (!launch->session_path.empty()) {
        auto loaded = LoadSession(launch->session_path);
        if (!loaded) throw Failure{kExitBadInput, loaded.error()};
        for (const std::string& w : loaded->warnings)
            std::fprintf(stderr, "ssaviz: %s: %s\n", model::EscapeForMessage(launch->session_path).c_str(), w.c_str());
        *session = std::move(*loaded);
    }
    const Session* s = *session ? &**session : nullptr;
    if (o.compare_run && !o.run) throw Failure{kExitUsage, "--compare-run goes with --run DIR"};
    // A session's run, unless the command line names a model or a run: the step it showed.
    const bool session_run = s && !o.run && !o.model_dir && !s->run_dir.empty();
    // The command line wins over the session: --model, --device and --text replace its own. A run
    // opens its own step (below), with no default model needed.
    launch->model_dir = s && !o.model_dir && !s->model_dir.empty() ? s->model_dir : (o.run && !o.model_dir) || session_run ? "" : ModelDir(o);
    const std::optional<std::string> run = session_run ? std::optional<std::string>(s->run_dir) : o.run;
    const std::optional<std::string> compare_run =
        session_run ? (s->compare_run_dir.empty() ? std::nullopt : std::optional<std::string>(s->compare_run_dir)) : o.compare_run;
    if (run) {  // a training run: its last step, the most trained (a session's: the step it showed)
        if (o.model_dir) throw Failure{kExitUsage, "--run opens the run's checkpoints: not with --model"};
        auto steps = FindRunSteps(*run);
        if (!steps) throw Failure{kExitBadInput, "--run: " + steps.error()};
        launch->run = *run;
        launch->model_dir = steps->back().path;
        if (session_run && !s->model_dir.empty()) {  // the step it showed, however its path is spelt
            std::error_code ec;
            const auto shown = std::find_if(steps->begin(), steps->end(), [&](const RunStep& step) { return fs::equivalent(step.path, s->model_dir, ec); });
            if (shown != steps->end()) launch->model_dir = shown->path;
            else
                std::fprintf(stderr, "ssaviz: the session's model %s is not a step of its run %s; showing the run's last step\n",
                             model::Quoted(s->model_dir).c_str(), model::Quoted(*run).c_str());
        }
        if (compare_run) {
            if (auto s = CheckCompareRun(*run, *compare_run); !s) throw Failure{kExitUsage, "--compare-run " + s.error()};
            auto compare = FindRunSteps(*compare_run);
            if (!compare) throw Failure{kExitBadInput, "--compare-run: " + compare.error()};
            launch->compare_run = *compare_run;
        }
    }
    launch->device = o.device.value_or(s ? s->device : "auto");
    launch->hints = o.hints;
    launch->dtype = o.dtype;
    if (s && !o.text && !o.text_file && !s->text.empty()) launch->text = s->text;  // a session without one keeps the default
    // Checked as export's --out is, before the model runs (a file there failed after it, exit 1).
    if (!launch->export_to.empty()) {
        std::optional<std::string> shown_run = run, shown_compare_run = compare_run;
        for (const Example& x : BundledExamples())  // a run's example opens its run in the window
            if (x.id == o.example && !x.run_dir.empty()) {
                shown_run = x.run_dir;
                if (!x.compare_run_dir.empty()) shown_compare_run = x.compare_run_dir;
            }
        for (const std::optional<std::string>& shown : {shown_run, shown_compare_run})  // inside a run it would become one of its steps
            if (shown)
                if (auto outside = CheckOutsideRun(launch->export_to, *shown, RunExportFolders::Window); !outside)
                    throw Failure{kExitUsage, "--export-to: " + outside.error()};
        if (auto checked = CheckExportFolder(launch->export_to); !checked) throw Failure{kExitUsage, "--export-to: " + checked.error()};
        ExportOptions shown;  // without a session, the export dialog's first settings: the figures, the selected head
        shown.png = shown.svg = shown.html = true;
        if (auto checked = CheckExportPlaces(launch->export_to, launch->export_to, s ? s->export_options : shown); !checked)
            throw Failure{kExitUsage, "--export-to: " + checked.error()};
        if (shown_run)  // the Run tab's timeline, in run/
            if (auto checked = CheckRunDataPlaces(launch->export_to, launch->export_to + "/run", s ? s->export_options : shown); !checked)
                throw Failure{kExitUsage, "--export-to: " + checked.error()};
    }
    if (o.text || o.text_file) launch->text = ReadText(o);
    // The editor holds C strings: a NUL would hide the text after it while the model read it all (as a session's text).
    if (const size_t nul = launch->text.find('\0'); nul != std::string::npos)
        throw Failure{kExitBadInput, std::string(o.text_file ? "--text-file " + model::Quoted(*o.text_file) : std::string("--text")) +
                                         ": holds a NUL character at byte " + std::to_string(nul) + " (the window's editor would hide what follows it)"};
    launch->truncate = o.truncate || (s && s->truncate);
    if (o.compare.kind != CompareKind::Global) launch->compare = o.compare;  // --compare / --base, over the session's
    // A screenshot is written after the model has run: where it goes is checked first, both files;
    // each replaces only an earlier screenshot (a session saved as "view.json" and a screenshot
    // named "view" replaced the session; one named after a model's config replaced it).
    if (!launch->screenshot.empty())
        for (const auto& [file, description] : {std::pair{launch->screenshot, false}, std::pair{launch->screenshot + ".json", true}}) {
            if (auto s = model::CheckCanWriteFile(file); !s) throw Failure{kExitUsage, "--screenshot: " + s.error()};
            if (!IsScreenshotOrNothing(file, description))
                throw Failure{kExitUsage, "--screenshot: " + model::Quoted(file) + " exists and is not " +
                                              (description ? "a screenshot's description" : "a PNG") + ": ssaviz replaces only a screenshot it wrote"};
        }
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
        if (!window) ApplyExample(*command, &o);
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
        // Messages escape what they quote from files and flags; this is the net under the ones that
        // put a path in as given (a folder named with an escape sequence stays one line, inert).
        std::fprintf(stderr, "ssaviz: %s\n", model::EscapeForMessage(f.message, 4096).c_str());
        return f.code;
    } catch (const std::exception& e) {  // torch errors (c10::Error), a failed allocation (freed by now): one line, never a crash
        std::fprintf(stderr, "ssaviz: %s\n", ExceptionMessage(e).c_str());
        return kExitFailure;
    }
}

}  // namespace app
