#include "app/export/run_export.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "app/core/exit_code.h"
#include "app/core/names.h"
#include "app/export/batch.h"
#include "app/export/export_figures.h"
#include "model/io/files.h"
#include "model/io/npy.h"
#include "model/nn/analysis.h"
#include "viz/figure.h"
#include "viz/figures.h"

namespace app {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

uint32_t Bits(float v) {
    uint32_t b;
    std::memcpy(&b, &v, sizeof b);
    return b;
}
float FromBits(uint32_t b) {
    float v;
    std::memcpy(&v, &b, sizeof v);
    return v;
}
json BitsOf(const std::vector<float>& values) {
    json a = json::array();
    for (float v : values) a.push_back(Bits(v));
    return a;
}
std::vector<float> FloatsOf(const json& a) {
    std::vector<float> out;
    out.reserve(a.size());
    for (const json& b : a) out.push_back(FromBits(b.get<uint32_t>()));
    return out;
}

std::string Number(float v) {
    if (!std::isfinite(v)) return "";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    return buf;
}

void AddCsvRows(const RunTimeline& t, const char* run, const std::vector<std::string>& keys, bool base, std::string* csv) {
    for (size_t k = 0; k < t.steps.size(); ++k)
        for (const HeadSummary& s : t.heads[k]) {
            *csv += std::string(run) + "," + std::to_string(t.steps[k]) + "," + std::to_string(s.ref.layer) + "," + std::to_string(s.ref.head);
            for (const std::string& key : keys) *csv += "," + Number(s.Get(key));
            *csv += "," + Number(t.loss[k]) + "," + Number(t.loss_compare[k]);
            if (base) *csv += "," + Number(t.loss_base[k]);
            *csv += "\n";
        }
}

// With --lens, run_lens.csv: a row per step, its loss read after each layer as a batch summary's
// columns (lens_loss_0, the embeddings, .. lens_loss_L, the model's own; the comparison's and the
// base's after them where the steps had them); a second run's rows after the first's.
std::string LensCsv(const RunTimeline& run, const RunTimeline* compare) {
    using Sides = std::vector<std::vector<float>> RunTimeline::*;
    const std::pair<const char*, Sides> kSides[] = {
        {"lens_loss", &RunTimeline::lens_loss}, {"lens_loss_compare", &RunTimeline::lens_loss_compare}, {"lens_loss_base", &RunTimeline::lens_loss_base}};
    std::vector<std::pair<Sides, size_t>> columns;  // a side and its layer
    std::string csv = "run,step";
    for (const auto& [name, side] : kSides) {
        size_t layers = 0;
        for (const RunTimeline* t : {&run, compare})
            for (const std::vector<float>& by_layer : t ? t->*side : std::vector<std::vector<float>>{}) layers = std::max(layers, by_layer.size());
        for (size_t l = 0; l < layers; ++l) {
            columns.emplace_back(side, l);
            csv += "," + std::string(name) + "_" + std::to_string(l);
        }
    }
    if (columns.empty()) return "";
    csv += "\n";
    for (const RunTimeline* t : {&run, compare}) {
        if (!t) continue;
        for (size_t k = 0; k < t->steps.size(); ++k) {
            csv += std::string(t == &run ? "run" : "compare") + "," + std::to_string(t->steps[k]);
            for (const auto& [side, l] : columns) {
                const std::vector<std::vector<float>>& rows = t->*side;
                csv += "," + (k < rows.size() && l < rows[k].size() ? Number(rows[k][l]) : std::string());
            }
            csv += "\n";
        }
    }
    return csv;
}

// run.csv: a row per step and head, each head value (RunHeadValues) and the step's mean losses; the
// compare run's rows after the run's, in the run's columns.
std::string RunCsv(const RunTimeline& run, const RunTimeline* compare) {
    // Against a base, each head's js_total and js_drift too (RunHeadValues).
    const std::vector<std::string> keys = RunHeadValues(run);
    std::string csv = "run,step,layer,head";
    for (const std::string& key : keys) csv += "," + key;
    // Against a base, its loss on the text too (the same at every step: the loss curve's base line).
    const bool base = std::any_of(run.loss_base.begin(), run.loss_base.end(), [](float v) { return std::isfinite(v); });
    csv += std::string(",loss_mean,loss_compare_mean") + (base ? ",loss_base_mean" : "") + "\n";
    AddCsvRows(run, "run", keys, base, &csv);
    if (compare) AddCsvRows(*compare, "compare", keys, base, &csv);
    return csv;
}

json TimelineJson(const RunResults& r) {
    const std::vector<int64_t> sparse = StepsToSparsity(r.t);
    json grid = json::array();
    for (int l = 0; l < r.t.n_layer; ++l) {
        json row = json::array();
        for (int h = 0; h < r.t.n_head; ++h) {
            const int64_t step = sparse[static_cast<size_t>(l) * r.t.n_head + h];
            row.push_back(step < 0 ? json() : json(step));
        }
        grid.push_back(std::move(row));
    }
    json out = {{"run", r.t.dir}, {"steps", r.rows}, {"failed", r.failures}, {"steps_to_sparsity", std::move(grid)}};
    if (r.t.HasLens()) {
        json halfway = json::array();
        for (int64_t step : StepsToLensHalfway(r.t)) halfway.push_back(step < 0 ? json() : json(step));
        out["steps_to_lens_halfway"] = std::move(halfway);
    }
    return out;
}

model::Status WriteCurves(const std::vector<const RunTimeline*>& runs, const ExportOptions& options) {
    const std::vector<ExportFile> files = RunCurveFiles(runs, options, "curves");
    if (!files.empty()) model::MakeFolders((fs::path(options.out_dir) / "curves").string());  // a failure shows as the first file's
    for (const ExportFile& f : files)
        if (auto s = f.write((fs::path(options.out_dir) / f.path).string()); !s) return model::Fail("run curves: " + s.error());
    return model::Ok{};
}

// Each token's tau_q over the run: float32 [S, L, H, T] (the steps as run.json lists them), when
// every step tokenised the text alike (one tokenizer over a run; otherwise no file, said once).
model::Status WriteTauQ(const RunTimeline& t, const fs::path& path) {
    const size_t per_step = static_cast<size_t>(t.n_layer) * t.n_head * t.n_tokens;
    std::vector<float> all;
    for (const std::vector<float>& step : t.tau_q) {
        if (step.size() != per_step) {
            std::fprintf(stderr, "ssaviz: %s: not written, the %s's steps tokenised the text differently\n", path.filename().c_str(), t.label.c_str());
            return model::Ok{};
        }
        all.insert(all.end(), step.begin(), step.end());
    }
    model::MakeFolders(path.parent_path().string());
    const std::vector<int64_t> shape = {static_cast<int64_t>(t.tau_q.size()), t.n_layer, t.n_head, t.n_tokens};
    return model::WriteNpy(path.string(), all.data(), shape);
}

}  // namespace

std::vector<ExportFile> RunCurveFiles(const std::vector<const RunTimeline*>& runs, const ExportOptions& options, const std::string& folder,
                                      const std::optional<RunTokenPick>& token) {
    std::vector<ExportFile> files;
    if (runs.empty()) return files;
    std::vector<std::string> keys = RunHeadValues(*runs[0]);
    keys.push_back("loss");
    if (runs[0]->HasLens()) keys.push_back(kRunLensCurve);
    if (runs[0]->HasLensCompare()) keys.push_back(kRunLensDiffCurve);
    if (runs[0]->HasLensBase()) keys.push_back(kRunLensDiffBaseCurve);
    if (token) keys.push_back(kRunTokenCurve);
    const std::vector<const char*> extensions = FigureExtensions(options);
    for (const std::string& key : keys) {
        std::vector<RunCurve> curves;
        for (const RunTimeline* t : runs)
            curves.push_back(key == kRunTokenCurve ? TokenTauQCurve(*t, token->head.layer, token->head.head, token->token) : CurveOf(*t, key));
        std::string title;  // the token curve's names its token and head (the Run tab says them beside its chooser)
        if (key == kRunTokenCurve)
            title = "tau_q of token " + std::to_string(token->token) + (token->piece.empty() ? "" : " '" + token->piece + "'") + " in L" +
                    std::to_string(token->head.layer) + " H" + std::to_string(token->head.head) + " against training step";
        for (const char* ext : extensions)
            files.push_back(FigureFile(folder + "/" + key, ext, [key, curves, title, text = options.figures.text] {
                viz::Plot plot = RunCurvesPlot(key, curves);
                if (!title.empty()) plot.Options.Title = title;
                plot.Options.Text = text;
                return viz::PlotFigure(plot);
            }, size_t{16} << 20, options.figures.png_scale));
    }
    return files;
}

std::vector<ExportFile> RunDataFiles(const std::vector<const RunTimeline*>& runs, const std::string& folder) {
    if (runs.empty()) return {};
    // One copy of the timelines for every file's writer (the files outlive the window's timeline).
    auto run = std::make_shared<const RunTimeline>(*runs[0]);
    auto compare = runs.size() > 1 ? std::make_shared<const RunTimeline>(*runs[1]) : nullptr;
    std::vector<ExportFile> files;
    auto csv = [&](const std::string& name, std::string text) {
        const size_t bytes = text.size();
        files.push_back({folder + "/" + name, [text = std::move(text)](const std::string& path) { return model::WriteFileAtomically(path, text); },
                         nullptr, bytes});
    };
    csv("run.csv", RunCsv(*run, compare.get()));
    if (std::string lens = LensCsv(*run, compare.get()); !lens.empty()) csv("run_lens.csv", std::move(lens));
    for (const auto& [t, name] : {std::pair{run, "tau_q.npy"}, std::pair{compare, "compare-run/tau_q.npy"}}) {
        if (!t || t->steps.empty()) continue;
        const size_t bytes = t->tau_q.size() * static_cast<size_t>(std::max(1, t->n_layer * t->n_head * t->n_tokens)) * sizeof(float);
        files.push_back({folder + "/" + name, [t = t](const std::string& path) { return WriteTauQ(*t, path); }, nullptr, 2 * bytes});
    }
    return files;
}

model::Status CheckRunDataPlaces(const std::string& out_dir, const std::string& folder, const ExportOptions& options) {
    const fs::path at(folder);
    std::vector<fs::path> folders = {at, at / "compare-run"};
    const std::vector<const char*> extensions = FigureExtensions(options);
    if (!extensions.empty()) folders.push_back(at / "curves");
    for (const fs::path& f : folders)
        if (auto s = model::CheckFoldersBelow(out_dir, f.string()); !s) return s;
    std::vector<fs::path> files = {at / "run.csv", at / "run_lens.csv", at / "tau_q.npy", at / "compare-run" / "tau_q.npy"};
    std::vector<std::string> curves(std::begin(kRunHeadValues), std::end(kRunHeadValues));
    curves.insert(curves.end(), std::begin(kRunBaseValues), std::end(kRunBaseValues));
    curves.insert(curves.end(), {"loss", kRunTokenCurve, kRunLensCurve, kRunLensDiffCurve, kRunLensDiffBaseCurve});
    for (const std::string& key : curves)
        for (const char* ext : extensions) files.push_back(at / "curves" / (key + "." + ext));
    for (const fs::path& f : files)
        if (auto s = model::CheckFilePlace(f.string()); !s) return s;
    return model::Ok{};
}

std::string StepFolder(int64_t step) {
    char name[32];
    std::snprintf(name, sizeof name, "step-%06lld", static_cast<long long>(step));
    return name;
}

std::string RunStepReason(std::string error, const std::string& checkpoint) {
    for (const std::string& name : {checkpoint, model::EscapeForMessage(checkpoint, 4096)})
        for (size_t at; !name.empty() && (at = error.find(name)) != std::string::npos;) error.replace(at, name.size(), "\x01");
    return error;
}

json RunStepToJson(const RunStepResult& r) {
    json j = {{"step", r.step}, {"checkpoint", r.checkpoint}, {"error", r.error}, {"fatal", r.fatal}};
    if (!r.error.empty()) return j;
    json heads = json::array();
    for (const HeadSummary& s : r.heads) heads.push_back({s.ref.layer, s.ref.head, BitsOf(s.values)});
    j.update({{"row", r.row},
              {"n_layer", r.n_layer},
              {"n_head", r.n_head},
              {"n_tokens", r.n_tokens},
              {"model", {r.model.family, r.model.layers, r.model.heads, r.model.width, r.model.vocab, r.model.context, r.model.rope_dims,
                         r.model.window, r.model.window_from, r.model.rope_base, r.model.norm_eps}},
              {"ids", r.ids},
              {"heads", std::move(heads)},
              {"loss", Bits(r.loss)},
              {"tau_q", BitsOf(r.tau_q)}});
    return j;
}

model::Result<RunStepResult> RunStepFromJson(const std::string& text) {
    const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) return model::Fail("a run step's result is not JSON");
    try {
        RunStepResult r;
        r.step = j.at("step").get<int64_t>();
        r.checkpoint = j.at("checkpoint").get<std::string>();
        r.error = j.at("error").get<std::string>();
        r.fatal = j.at("fatal").get<int>();
        if (!r.error.empty()) return r;
        r.row = j.at("row");
        r.n_layer = j.at("n_layer").get<int>();
        r.n_head = j.at("n_head").get<int>();
        r.n_tokens = j.at("n_tokens").get<int>();
        const json& m = j.at("model");
        r.model = {m.at(0).get<std::string>(), m.at(1).get<int>(), m.at(2).get<int>(), m.at(3).get<int>(), m.at(4).get<int>(), m.at(5).get<int>(),
                   m.at(6).get<int>(),         m.at(7).get<int>(), m.at(8).get<int>(), m.at(9).get<double>(), m.at(10).get<double>()};
        r.ids = j.at("ids").get<std::vector<int32_t>>();
        for (const json& h : j.at("heads")) {
            HeadSummary s;
            s.ref = {h.at(0).get<int>(), h.at(1).get<int>()};
            s.values = FloatsOf(h.at(2));
            r.heads.push_back(std::move(s));
        }
        r.loss = FromBits(j.at("loss").get<uint32_t>());
        r.tau_q = FloatsOf(j.at("tau_q"));
        if (r.heads.size() != static_cast<size_t>(r.n_layer) * r.n_head ||
            r.tau_q.size() != static_cast<size_t>(r.n_layer) * r.n_head * static_cast<size_t>(r.n_tokens))
            return model::Fail("a run step's result has arrays of the wrong size");
        return r;
    } catch (const json::exception& e) {
        return model::Fail(std::string("a run step's result lacks a field: ") + e.what());
    }
}

RunStepResult AnalyseRunStep(const RunStep& step, const RunStepSpec& spec, const std::string& text, const RunTimeline* of_run,
                             const std::string& full_out) {
    RunStepResult r;
    r.step = step.step;
    r.checkpoint = fs::path(step.path).filename().string();
    auto fail = [&](std::string why) {
        r.error = std::move(why);
        return r;
    };
    CompareSpec compare = spec.run.compare;
    compare.base_of_the_run = true;  // the run's base, for every step alike (as Configure below reads it)
    auto runner = Runner::Open({step.path, spec.device, spec.dtype, HintsWithBase(spec.hints, step.path, compare)});
    if (!runner) return fail(runner.error().message);
    const model::ModelConfig& c = (*runner)->Info().config;
    if (of_run)  // another model than the run's: said before it runs (its tokens once it has)
        if (std::string why = of_run->Misfit(RunModelOf(c), {}); !why.empty()) return fail(why);
    // What the comparison, the what-ifs, the heads chosen or the text make fail fails for every
    // step: the run stops with the command line's code for it instead of opening every checkpoint
    // to say it again. The heads and the highlight's head are checked on every step, with --steps or
    // not, so --layers 99 or --highlight-scope 5,5 is refused however the run is exported.
    ExportOptions one = spec.options;
    one.out_dir = full_out;
    if (auto s = ResolveExportHeads(&one, c.n_layer, c.n_head); !s) {
        r.fatal = kExitUsage;
        return fail(s.error());
    }
    if (auto s = CheckHighlightScope(one.figures, c.n_layer, c.n_head); !s) {
        r.fatal = kExitUsage;
        return fail(s.error());
    }
    RunSpec run = spec.run;
    run.compare.base_may_be_the_model = true;  // a run's first step is often its base
    run.compare.base_of_the_run = true;        // the run's, for every step alike
    if (auto s = (*runner)->Configure(run); !s) {
        r.fatal = ExitCodeOf(s.error().kind);
        return fail(s.error().message);
    }
    auto tokens = (*runner)->Tokenize(text, spec.truncate);
    if (!tokens) {
        r.fatal = ExitCodeOf(tokens.error().kind);
        return fail(tokens.error().message);
    }
    if (tokens->ids.size() < 2) {  // every curve of the run was empty
        r.fatal = kExitBadInput;
        return fail(kRunNeedsTwoTokens);
    }
    auto a = (*runner)->Analyze(*tokens);
    if (!a) return fail(a.error().message);
    // A step that overflows (a run that diverged) fails as `export --model` of it alone does: its
    // curves' points were made up of NaN rows (a finite JS beside a NaN entropy). A twin or base
    // that overflows would fail every step: the run stops, said once.
    if (std::string why = NonFiniteOtherModel(*a); !why.empty()) {
        r.fatal = kExitBadInput;
        return fail(why);
    }
    if (std::string why = NonFiniteAnalysis(*a); !why.empty()) return fail(why);
    // --lens: each side's loss read after each layer (run.json's rows, run_lens.csv, the lens curve),
    // and a chosen step's lens files, as `ssaviz export --lens` writes them for the checkpoint.
    std::vector<std::shared_ptr<const model::Lens>> lens;
    if (spec.options.lens) {
        if (!run.ablate.empty()) {
            r.fatal = kExitUsage;
            return fail("--lens runs the model as loaded: not with --ablate");
        }
        if (auto s = CheckDlaPosition(one, a->n_tokens); !s) {  // the text's: every step's
            r.fatal = kExitUsage;
            return fail(s.error());
        }
        auto sides = RunLensSides((*runner)->engine(), *a);
        if (!sides) return fail("the lens: " + sides.error());
        lens = std::move(*sides);
    }
    if (!full_out.empty()) {  // what `ssaviz export` writes for this checkpoint alone
        if (auto s = CheckHighlightHeld(one, *a); !s) {
            r.fatal = kExitUsage;
            return fail(s.error());
        }
        std::vector<ExportFile> lens_files;
        if (!lens.empty()) {
            auto files = LensExportFiles((*runner)->engine(), (*runner)->Info(), *a, lens, one);
            if (!files) return fail("the lens: " + files.error());
            lens_files = std::move(*files);
        }
        if (auto s = WriteExport(text, *a, (*runner)->Info(), one, nullptr, std::move(lens_files)); !s) {
            r.fatal = kExitFailure;
            return fail(s.error());
        }
    }
    r.n_layer = a->n_layer;
    r.n_head = a->n_head;
    r.n_tokens = a->n_tokens;
    r.model = RunModelOf(c);
    r.ids = a->tokens.ids;
    r.heads = SummarizeHeads(*a);
    r.loss = static_cast<float>(model::MeanLoss(a->loss));
    r.tau_q = a->tau_q.Flat();
    r.row = BatchSummaryRow(StepFolder(step.step), 0, *a, spec.options.sink_epsilon);  // its line: the step's place, set when added
    r.row["step"] = step.step;
    r.row["checkpoint"] = r.checkpoint;
    if (!a->loss_compare.empty()) r.row["compared_with"] = CompareName(*a);  // the loss curve's legend: "tau = 1", "twin"
    if (!(*runner)->BasePath().empty()) r.row["base"] = (*runner)->BasePath();  // which base each step was set against
    if (const std::string note = BaseDifferenceNote(*a); !note.empty()) r.row["base_difference"] = note;  // what is no weight, said once below
    for (size_t k = 0; k < lens.size(); ++k)  // as a batch's rows: SSA, the comparison, the base
        r.row[k == 0 ? "lens_loss" : k == 1 ? "lens_loss_compare" : "lens_loss_base"] = LensLossByLayer(*lens[k]);
    std::vector<std::string> keys(std::begin(kRunHeadValues), std::end(kRunHeadValues));
    if (a->HasBase()) keys.insert(keys.end(), std::begin(kRunBaseValues), std::end(kRunBaseValues));
    for (const std::string& key : keys) {
        json grid = json::array();
        for (int l = 0; l < c.n_layer; ++l) {
            json layer = json::array();
            for (int h = 0; h < c.n_head; ++h) {
                const float v = r.heads[static_cast<size_t>(l) * c.n_head + h].Get(key);
                layer.push_back(std::isfinite(v) ? json(v) : json());
            }
            grid.push_back(std::move(layer));
        }
        r.row["heads"][key] = std::move(grid);
    }
    return r;
}

std::string AddRunStep(RunResults* run, RunStepResult step) {
    if (step.error.empty()) step.error = run->t.Fits(step.model, step.ids);
    if (!step.error.empty()) {
        run->failures.push_back({{"step", step.step}, {"checkpoint", step.checkpoint}, {"error", step.error}});
        return step.error;
    }
    // The comparison's and the base's mean losses, from the batch row (null where a NaN travelled as JSON).
    auto number = [&](const char* key) {
        const auto v = step.row.find(key);
        return v != step.row.end() && v->is_number() ? v->get<float>() : NAN;
    };
    const RunTimeline::StepLosses losses = {step.loss, number("loss_compare"), number("loss_base")};
    if (const auto name = step.row.find("compared_with"); name != step.row.end() && name->is_string()) run->t.compare_name = *name;
    step.row["line"] = static_cast<int>(run->t.steps.size() + 1);
    run->rows.push_back(std::move(step.row));
    const json& row = run->rows.back();
    std::vector<std::vector<float>> lens;  // each side's; empty without --lens (the timeline has no lens then: HasLens)
    for (const char* side : {"lens_loss", "lens_loss_compare", "lens_loss_base"}) {
        std::vector<float>& by_layer = lens.emplace_back();
        if (const auto v = row.find(side); v != row.end() && v->is_array())
            for (const json& x : *v) by_layer.push_back(x.is_number() ? x.get<float>() : NAN);
    }
    run->t.AddLens(std::move(lens));
    run->t.Add(step.step, step.checkpoint, step.n_layer, step.n_head, std::move(step.heads), losses, step.n_tokens, std::move(step.tau_q));
    return "";
}

model::Status WriteRunFiles(const ExportOptions& options, const RunResults& run, const RunResults* compare) {
    const fs::path out(options.out_dir);
    model::MakeFolders(out.string());
    for (const auto& [side, folder] : {std::pair{&run, out}, std::pair{compare, out / "compare-run"}})
        for (const json& failure : side ? side->failures : json::array()) {
            std::error_code ignored;
            fs::remove_all(folder / StepFolder(failure.at("step").get<int64_t>()), ignored);
        }
    json timeline = TimelineJson(run);
    timeline["about"] =
        "per step: the model's means as a batch summary's row (line: the step's place in the run, 1 the first; name: the folder "
        "its export goes to when --steps chooses it; loss: the mean loss, run.csv's loss_mean; entropies, JS divergences and losses in nats), and "
        "heads[value][layer][head]; steps_to_sparsity[layer][head]: the first "
        "step whose mean entropy is below half of the first step's (null: never)";
    if (run.t.HasLens())
        timeline["about"] = timeline["about"].get<std::string>() +
                            "; lens_loss[0 .. L]: the mean loss read after the embeddings (0) and each layer (L: the model's own), "
                            "lens_loss_compare and lens_loss_base the other sides' (run_lens.csv); steps_to_lens_halfway[0 .. L]: "
                            "the first step at which lens_loss[l] had fallen half of the way from the first step's to the last's "
                            "(null: it did not fall)";
    if (compare) timeline["compare_run"] = TimelineJson(*compare);
    const RunTimeline* compare_t = compare ? &compare->t : nullptr;
    if (auto s = model::WriteFileAtomically((out / "run.json").string(), model::JsonText(timeline, 1) + "\n"); !s) return s;
    if (auto s = model::WriteFileAtomically((out / "run.csv").string(), RunCsv(run.t, compare_t)); !s) return s;
    if (const std::string lens = LensCsv(run.t, compare_t); !lens.empty())
        if (auto s = model::WriteFileAtomically((out / "run_lens.csv").string(), lens); !s) return s;
    if (auto s = WriteTauQ(run.t, out / "tau_q.npy"); !s) return s;
    if (compare && !compare->rows.empty())
        if (auto s = WriteTauQ(compare->t, out / "compare-run" / "tau_q.npy"); !s) return s;
    std::vector<const RunTimeline*> curves = {&run.t};
    if (compare && !compare->rows.empty()) curves.push_back(&compare->t);
    return WriteCurves(curves, options);
}

}  // namespace app
