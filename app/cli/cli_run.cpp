// `ssaviz export --run DIR` (SPEC section 11): a training run as a timeline. Each checkpoint is
// opened on its own, one model in memory at a time, in step order, and analysed on the text as
// `ssaviz export --model CHECKPOINT` would; a step that fails (another shape, a truncated file)
// is named and skipped and the rest of the run goes on. Writes run.json and run.csv (per step the
// model's means and every head's entropy, JS to the comparison, sink mass and mean tau_q; each
// head's steps to sparsity), with PNG / SVG the curves, and for --steps each chosen step's whole
// export as step-NNNNNN/. --compare-run DIR: a second run (the vanilla run of the same schedule,
// another seed) likewise, beside the first in every file.
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "app/cli/cli_common.h"
#include "app/core/exit_code.h"
#include "app/core/run.h"
#include "app/core/timeline.h"
#include "app/export/batch.h"
#include "app/export/export.h"
#include "app/export/head_summary.h"
#include "app/export/run_curves.h"
#include "model/io/files.h"
#include "model/io/npy.h"
#include "model/nn/analysis.h"
#include "viz/figure.h"
#include "viz/figures.h"

namespace app {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string StepFolder(int64_t step) {
    char name[32];
    std::snprintf(name, sizeof name, "step-%06lld", static_cast<long long>(step));
    return name;
}

// --steps: "all", or step numbers ("100,500"), each one of the run's.
std::set<int64_t> ChosenSteps(const std::optional<std::string>& flag, const std::vector<RunStep>& steps) {
    std::set<int64_t> chosen, have;
    for (const RunStep& s : steps) have.insert(s.step);
    if (!flag) return chosen;
    if (*flag == "all") return have;
    std::stringstream in(*flag);
    std::string item;
    while (std::getline(in, item, ',')) {
        char* end = nullptr;
        errno = 0;
        const long long step = std::strtoll(item.c_str(), &end, 10);
        if (item.empty() || *end != '\0' || errno != 0 || step < 0)
            throw Failure{kExitUsage, "--steps: '" + model::EscapeForMessage(item) + "' is not a step number (give all, or steps such as 100,500)"};
        if (!have.count(step))
            throw Failure{kExitUsage, "--steps: step " + std::to_string(step) + " is not one of the run's " + std::to_string(steps.size()) +
                                          " steps (" + std::to_string(steps.front().step) + " .. " + std::to_string(steps.back().step) + ")"};
        chosen.insert(step);
    }
    return chosen;
}

// One run's steps on the text, and run.json's rows and failures.
struct Timeline {
    RunTimeline t;
    json rows = json::array(), failures = json::array();
};

struct RunContext {
    RunContext(const CommandOptions& o, const ExportOptions& options, const std::string& text) : o(o), options(options), text(text) {}
    const CommandOptions& o;
    const ExportOptions& options;
    const std::string& text;
    std::optional<std::pair<int, int>> shape;  // the first step's layers and heads: every step must have them
    ProgressBar bar{"run"};
    size_t done = 0, total = 0;
};

Timeline AnalyseRun(RunContext& ctx, const std::string& dir, const std::string& label, const std::vector<RunStep>& steps,
                    const std::set<int64_t>& full, const fs::path& step_root) {
    Timeline t;
    t.t.dir = dir;
    t.t.label = label;
    for (const RunStep& step : steps) {
        const std::string file = fs::path(step.path).filename().string();
        ctx.bar.Update(ctx.done++, ctx.total, file);
        auto fail = [&](const std::string& why) {
            t.failures.push_back({{"step", step.step}, {"checkpoint", file}, {"error", why}});
            std::fprintf(stderr, "\rssaviz: %s step %lld (%s): %s; skipped\n", label.c_str(), static_cast<long long>(step.step),
                         model::EscapeForMessage(file).c_str(), why.c_str());
        };
        auto runner = Runner::Open({step.path, ctx.o.device.value_or("auto"), ctx.o.dtype, ctx.o.hints});
        if (!runner) { fail(runner.error().message); continue; }
        const model::ModelConfig& c = (*runner)->Info().config;
        if (ctx.shape && *ctx.shape != std::pair(c.n_layer, c.n_head)) {
            fail("has " + std::to_string(c.n_layer) + " layers x " + std::to_string(c.n_head) + " heads, the run's first step " +
                 std::to_string(ctx.shape->first) + " x " + std::to_string(ctx.shape->second));
            continue;
        }
        ctx.shape = std::pair(c.n_layer, c.n_head);
        if (auto s = (*runner)->Configure({ctx.o.compare, ctx.o.ablate.value_or("")}); !s) { fail(s.error().message); continue; }
        auto tokens = (*runner)->Tokenize(ctx.text, ctx.o.truncate);
        if (!tokens) { fail(tokens.error().message); continue; }
        auto a = (*runner)->Analyze(*tokens);
        if (!a) { fail(a.error().message); continue; }
        if (full.count(step.step)) {  // what `ssaviz export` writes for this checkpoint alone
            ExportOptions one = ctx.options;
            one.out_dir = (step_root / StepFolder(step.step)).string();
            if (auto s = ResolveExportHeads(&one, c.n_layer, c.n_head); !s) throw Failure{kExitUsage, s.error()};
            if (auto s = WriteExport(ctx.text, *a, (*runner)->Info(), one); !s) throw Failure{kExitFailure, s.error()};
        }
        json row = BatchSummaryRow(StepFolder(step.step), static_cast<int>(t.t.steps.size() + 1), *a, ctx.options.sink_epsilon);
        row["step"] = step.step;
        row["checkpoint"] = file;
        t.t.Add(step.step, file, *a);
        const std::vector<HeadSummary>& heads = t.t.heads.back();
        for (const char* key : kRunHeadValues) {
            json grid = json::array();
            for (int l = 0; l < c.n_layer; ++l) {
                json layer = json::array();
                for (int h = 0; h < c.n_head; ++h) {
                    const float v = heads[static_cast<size_t>(l) * c.n_head + h].Get(key);
                    layer.push_back(std::isfinite(v) ? json(v) : json());
                }
                grid.push_back(std::move(layer));
            }
            row["heads"][key] = std::move(grid);
        }
        t.rows.push_back(std::move(row));
    }
    return t;
}

std::string Number(float v) {
    if (!std::isfinite(v)) return "";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    return buf;
}

void AddCsvRows(const RunTimeline& t, const char* run, std::string* csv) {
    for (size_t k = 0; k < t.steps.size(); ++k)
        for (const HeadSummary& s : t.heads[k]) {
            *csv += std::string(run) + "," + std::to_string(t.steps[k]) + "," + std::to_string(s.ref.layer) + "," + std::to_string(s.ref.head);
            for (const char* key : kRunHeadValues) *csv += "," + Number(s.Get(key));
            *csv += "," + Number(t.loss[k]) + "\n";
        }
}

json TimelineJson(const Timeline& t) {
    const std::vector<int64_t> sparse = StepsToSparsity(t.t);
    json grid = json::array();
    for (int l = 0; l < t.t.n_layer; ++l) {
        json row = json::array();
        for (int h = 0; h < t.t.n_head; ++h) {
            const int64_t step = sparse[static_cast<size_t>(l) * t.t.n_head + h];
            row.push_back(step < 0 ? json() : json(step));
        }
        grid.push_back(std::move(row));
    }
    return {{"run", t.t.dir}, {"steps", t.rows}, {"failed", t.failures}, {"steps_to_sparsity", std::move(grid)}};
}

void WriteCurves(const std::vector<const RunTimeline*>& runs, const ExportOptions& options) {
    if (!options.png && !options.svg) return;
    std::string error;
    if (!viz::LoadFigureFonts(&error)) throw Failure{kExitFailure, "run curves: " + error};
    const fs::path dir = fs::path(options.out_dir) / "curves";
    fs::create_directories(dir);
    std::vector<std::string> keys(std::begin(kRunHeadValues), std::end(kRunHeadValues));
    keys.push_back("loss");
    for (const std::string& key : keys) {
        std::vector<RunCurve> curves;
        for (const RunTimeline* t : runs) curves.push_back(CurveOf(*t, key));
        const viz::Figure figure = viz::PlotFigure(RunCurvesPlot(key, curves));
        const std::string base = (dir / key).string();
        if (options.png) {
            const std::vector<uint8_t> png = viz::EncodePng(viz::RasterizeFigure(figure));
            if (auto s = model::WriteFileAtomically(base + ".png", std::string(png.begin(), png.end())); !s) throw Failure{kExitFailure, s.error()};
        }
        if (options.svg)
            if (auto s = model::WriteFileAtomically(base + ".svg", viz::FigureToSvg(figure)); !s) throw Failure{kExitFailure, s.error()};
    }
}

// Each token's tau_q over the run: float32 [S, L, H, T] (the steps as run.json lists them), when
// every step tokenised the text alike (one tokenizer over a run; otherwise no file, said once).
void WriteTauQ(const RunTimeline& t, const fs::path& path) {
    const size_t per_step = static_cast<size_t>(t.n_layer) * t.n_head * t.n_tokens;
    std::vector<float> all;
    for (const std::vector<float>& step : t.tau_q) {
        if (step.size() != per_step) {
            std::fprintf(stderr, "ssaviz: %s: not written, the %s's steps tokenised the text differently\n", path.filename().c_str(), t.label.c_str());
            return;
        }
        all.insert(all.end(), step.begin(), step.end());
    }
    fs::create_directories(path.parent_path());
    const std::vector<int64_t> shape = {static_cast<int64_t>(t.tau_q.size()), t.n_layer, t.n_head, t.n_tokens};
    if (auto s = model::WriteNpy(path.string(), all.data(), shape); !s) throw Failure{kExitFailure, s.error()};
}

}  // namespace

int CmdExportRun(const CommandOptions& o, const ExportOptions& options, const std::string& text) {
    if (o.batch || options.lens || o.model_dir) throw Failure{kExitUsage, "--run opens each of its checkpoints: not with --batch, --lens or --model"};
    auto steps = FindRunSteps(*o.run);
    if (!steps) throw Failure{kExitBadInput, "--run: " + steps.error()};
    std::optional<std::vector<RunStep>> compare_steps;
    if (o.compare_run) {
        auto found = FindRunSteps(*o.compare_run);
        if (!found) throw Failure{kExitBadInput, "--compare-run: " + found.error()};
        compare_steps = std::move(*found);
    }
    const std::set<int64_t> full = ChosenSteps(o.steps, *steps);
    model::UseComputeThreads(model::ResolveComputeThreads());
    RunContext ctx{o, options, text};
    ctx.total = steps->size() + (compare_steps ? compare_steps->size() : 0);
    const fs::path out(options.out_dir);
    const Timeline run = AnalyseRun(ctx, *o.run, "run", *steps, full, out);
    std::optional<Timeline> compare;
    if (compare_steps) {
        std::set<int64_t> both;  // --steps's steps the second run has too
        for (const RunStep& s : *compare_steps)
            if (full.count(s.step)) both.insert(s.step);
        compare = AnalyseRun(ctx, *o.compare_run, "compare run", *compare_steps, both, out / "compare-run");
    }
    ctx.bar.Update(ctx.total, ctx.total, "");
    if (run.rows.empty()) throw Failure{kExitBadInput, "--run: no checkpoint of the run could be analysed (" + std::to_string(run.failures.size()) + " failed)"};
    fs::create_directories(out);
    json timeline = TimelineJson(run);
    timeline["about"] =
        "per step: the model's means as a batch summary's row, and heads[value][layer][head]; steps_to_sparsity[layer][head]: the first "
        "step whose mean entropy is below half of the first step's (null: never)";
    if (compare) timeline["compare_run"] = TimelineJson(*compare);
    std::string csv = "run,step,layer,head";
    for (const char* key : kRunHeadValues) csv += std::string(",") + key;
    csv += ",loss_mean\n";
    AddCsvRows(run.t, "run", &csv);
    if (compare) AddCsvRows(compare->t, "compare", &csv);
    if (auto s = model::WriteFileAtomically((out / "run.json").string(), timeline.dump(1) + "\n"); !s) throw Failure{kExitFailure, s.error()};
    if (auto s = model::WriteFileAtomically((out / "run.csv").string(), csv); !s) throw Failure{kExitFailure, s.error()};
    WriteTauQ(run.t, out / "tau_q.npy");
    if (compare && !compare->rows.empty()) WriteTauQ(compare->t, out / "compare-run" / "tau_q.npy");
    std::vector<const RunTimeline*> curves = {&run.t};
    if (compare && !compare->rows.empty()) curves.push_back(&compare->t);
    WriteCurves(curves, options);
    const size_t failed = run.failures.size() + (compare ? compare->failures.size() : 0);
    std::fprintf(stderr, "ssaviz: wrote %s (%zu of %zu steps%s)\n", options.out_dir.c_str(), run.rows.size(), steps->size(),
                 compare ? (", compare run " + std::to_string(compare->rows.size()) + " of " + std::to_string(compare_steps->size())).c_str() : "");
    return failed == 0 ? kExitOk : kExitBadInput;
}

}  // namespace app
