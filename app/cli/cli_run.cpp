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
#include <utility>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "app/cli/cli_common.h"
#include "app/core/exit_code.h"
#include "app/core/run.h"
#include "app/core/timeline.h"
#include "app/export/batch.h"
#include "app/export/export.h"
#include "app/export/head_summary.h"
#include "app/export/run_curves.h"
#include "app/export/run_export.h"
#include "model/io/files.h"
#include "model/io/npy.h"
#include "model/nn/analysis.h"
#include "viz/figure.h"
#include "viz/figures.h"

namespace app {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// --steps: "all", or step numbers ("100,500"), each one of the run's.
std::set<int64_t> ChosenSteps(const std::optional<std::string>& flag, const std::vector<RunStep>& steps) {
    std::set<int64_t> chosen, have;
    for (const RunStep& s : steps) have.insert(s.step);
    if (!flag) return chosen;
    if (*flag == "all") return have;
    if (flag->empty()) throw Failure{kExitUsage, "--steps is empty (give all, or steps such as 100,500)"};
    std::stringstream in(*flag + ",");  // a trailing comma leaves an empty last item
    std::string item;
    while (std::getline(in, item, ',')) {
        char* end = nullptr;
        errno = 0;
        const long long step = std::strtoll(item.c_str(), &end, 10);
        const bool digits = !item.empty() && item.find_first_not_of("0123456789") == std::string::npos;  // no sign, no spaces
        if (!digits || *end != '\0' || errno != 0 || step < 0)
            throw Failure{kExitUsage, "--steps: '" + model::EscapeForMessage(item) + "' is not a step number (give all, or steps such as 100,500)"};
        if (!have.count(step))
            throw Failure{kExitUsage, "--steps: step " + std::to_string(step) + " is not one of the run's " + std::to_string(steps.size()) +
                                          " steps (" + std::to_string(steps.front().step) + " .. " + std::to_string(steps.back().step) + ")"};
        chosen.insert(step);
    }
    return chosen;
}

// A run of thousands of broken steps (weights gone, another model's shape) names the first of them
// and counts the rest, where it printed a line each.
constexpr int kSkippedStepLines = 20;

// One run's steps on the text, in step order, each opened alone; a step that fails is named and
// skipped.
RunResults AnalyseRun(const RunStepSpec& spec, const std::string& text, const std::string& dir, const std::string& other_dir,
                      const std::string& label, const std::vector<RunStep>& steps, const std::set<int64_t>& full, const fs::path& step_root, ProgressBar* bar,
                      size_t* done, size_t total, const RunTimeline* beside = nullptr) {
    RunResults run;
    run.t.dir = dir;
    run.t.label = label;
    run.t.name = RunLegendName(dir, other_dir, label);
    int skipped = 0, alike = 0;  // alike: skipped for a reason said already
    int64_t last_skipped = 0;
    std::set<std::string> reasons;  // those said: a skipped step's message, its checkpoint's name taken out (RunStepReason)
    std::set<std::string> counted;  // the reasons of the steps counted, not said again
    for (const RunStep& step : steps) {
        const std::string file = fs::path(step.path).filename().string();
        bar->Update((*done)++, total, label == "run" ? file : label + ": " + file);  // the compare run's steps said as its
        const std::string full_out = full.count(step.step) ? (step_root / StepFolder(step.step)).string() : "";
        RunStepResult result = AnalyseRunStep(step, spec, text, &run.t, full_out);
        if (result.fatal)  // so would every step (the text, the comparison), or its export failed; the compare run's said as its
            throw Failure{result.fatal, (label == "run" ? "" : "--compare-run step " + std::to_string(step.step) + " (" + model::EscapeForMessage(file) + "): ") +
                                            result.error};
        // A compare run of another shape or tokenizer is refused at its first step that says so, not
        // once all of its steps have run.
        if (beside && result.error.empty())
            if (const std::string why = beside->CompareRunMisfit(result.n_layer, result.n_head, result.ids); !why.empty())
                throw Failure{kExitBadInput, "--compare-run " + model::Quoted(dir) + " " + why};
        const std::string error = AddRunStep(&run, std::move(result));
        if (error.empty()) continue;
        last_skipped = step.step;
        // A reason of the run's folder (no lit_config.json beside any checkpoint) said once, not a line a step.
        const std::string why = RunStepReason(error, file);
        if (reasons.count(why)) {
            ++alike;
            counted.insert(why);
            continue;
        }
        if (++skipped <= kSkippedStepLines && reasons.insert(why).second)
            std::fprintf(stderr, "\rssaviz: %s step %lld (%s): %s; skipped\n", label.c_str(), static_cast<long long>(step.step),
                         model::EscapeForMessage(file).c_str(), model::EscapeForMessage(error, 4096).c_str());
    }
    if (alike > 0)
        std::fprintf(stderr, "\rssaviz: %s: %d more step%s skipped for %s said above (run.json's failed lists every one)\n", label.c_str(),
                     alike, alike == 1 ? "" : "s", counted.size() == 1 ? "a reason" : "reasons");
    if (skipped > kSkippedStepLines)
        std::fprintf(stderr, "\rssaviz: %s: %d more steps skipped, the last step %lld (%d of %zu steps skipped in all)\n", label.c_str(),
                     skipped - kSkippedStepLines, static_cast<long long>(last_skipped), skipped + alike, steps.size());
    return run;
}

}  // namespace

int CmdExportRun(const CommandOptions& o, const ExportOptions& options, const std::string& text) {
    if (o.batch || options.rank_heads || o.model_dir) {
        const char* given = o.model_dir ? "--model" : o.batch ? "--batch" : "--rank-heads";  // the one given, named (all three were)
        throw Failure{kExitUsage, (o.example.empty() ? std::string("--run") : "--example " + o.example + ", a training run,") +
                                      " opens each of its checkpoints: not with " + given};
    }
    if (options.lens && o.ablate) throw Failure{kExitUsage, "--lens runs the model as loaded: not with --ablate"};
    auto steps = FindRunSteps(*o.run);
    if (!steps) throw Failure{kExitBadInput, "--run: " + steps.error()};
    std::optional<std::vector<RunStep>> compare_steps;
    if (o.compare_run) {
        auto found = FindRunSteps(*o.compare_run);
        if (!found) throw Failure{kExitBadInput, "--compare-run: " + found.error()};
        compare_steps = std::move(*found);
    }
    const std::set<int64_t> full = ChosenSteps(o.steps, *steps);
    if ((options.dla_position || options.dla_target) && full.empty())  // run.json's lens has no attribution: they would act on nothing
        throw Failure{kExitUsage, std::string(options.dla_position ? "--dla-position" : "--dla-target") +
                                      " picks what a step's attribution figures split, which only --steps exports hold: give --steps"};
    model::UseComputeThreads(model::ResolveComputeThreads());
    RunStepSpec spec;
    spec.device = o.device.value_or("auto");
    spec.dtype = o.dtype;
    spec.hints = o.hints;
    if (auto s = CheckOpenSettings({"", spec.device, spec.dtype, spec.hints}); !s) throw Failure{ExitCodeOf(s.error().kind), s.error().message};
    spec.run = {o.compare, o.ablate.value_or("")};
    spec.truncate = o.truncate;
    spec.options = options;
    std::set<int64_t> both;  // --steps's steps the second run has too
    if (compare_steps) {
        for (const RunStep& s : *compare_steps)
            if (full.count(s.step)) both.insert(s.step);
        // Said, not left to be found missing: compare-run/ gets the steps it has.
        std::string missing;
        size_t count = 0;
        for (int64_t step : full)
            if (!both.count(step) && ++count <= 10) missing += (missing.empty() ? "" : ", ") + std::to_string(step);
        if (count > 10) missing += " and " + std::to_string(count - 10) + " more";
        if (count > 0)
            std::fprintf(stderr, "ssaviz: note: the compare run has no step %s of --steps: compare-run/ holds no export of %s\n", missing.c_str(),
                         count == 1 ? "it" : "them");
    }
    // Where the files go, checked before any checkpoint is opened: outside the runs (CmdExport asked),
    // and no link or file where a folder goes.
    const fs::path out(options.out_dir);
    std::vector<fs::path> exports, folders;  // a step's export's folder; the run's own
    for (int64_t step : full) exports.push_back(out / StepFolder(step));
    for (int64_t step : both) exports.push_back(out / "compare-run" / StepFolder(step));
    if (compare_steps) folders.push_back(out / "compare-run");
    if (options.png || options.svg) folders.push_back(out / "curves");
    for (const fs::path& folder : exports)
        if (auto s = CheckExportPlaces(out.string(), folder.string(), options); !s) throw Failure{kExitUsage, "--out: " + s.error()};
    for (const fs::path& folder : folders)
        if (auto s = model::CheckFoldersBelow(out.string(), folder.string()); !s) throw Failure{kExitUsage, "--out: " + s.error()};
    // Everything is written into a folder of its own inside --out and moved into place at the end, so
    // a run that stops (a step's export that cannot be written) leaves --out as it was.
    std::error_code ec;
    const bool out_existed = fs::exists(fs::symlink_status(out, ec));
    if ((ec = model::MakeFolders(out.string()))) throw Failure{kExitFailure, model::Quoted(out.string()) + ": cannot create (" + ec.message() + ")"};
    model::FoldersInProgress made_out;  // an interrupt removes --out too where the run made it (and it is still empty)
    if (!out_existed) made_out.Add(out.string());
    auto made = model::HeldTempFolder::Create((out / "run").string());  // held: a later run removes it only if this one was killed
    if (!made) throw Failure{kExitFailure, made.error()};
    struct Staged {  // removed, with --out if the run made it, unless the run was put in place
        std::string dir, made_out;
        ~Staged() {
            std::error_code ignored;
            if (dir.empty()) return;
            fs::remove_all(dir, ignored);
            if (!made_out.empty()) ::rmdir(made_out.c_str());
        }
    } staged{made->path(), out_existed ? "" : out.string()};
    ExportOptions staged_options = options;
    staged_options.out_dir = staged.dir;
    ProgressBar bar{"run"};
    size_t done = 0;
    const size_t total = steps->size() + (compare_steps ? compare_steps->size() : 0);
    const fs::path into(staged.dir);
    const RunResults run = AnalyseRun(spec, text, *o.run, o.compare_run.value_or(""), "run", *steps, full, into, &bar, &done, total);
    std::optional<RunResults> compare;
    if (compare_steps)
        compare = AnalyseRun(spec, text, *o.compare_run, *o.run, "compare run", *compare_steps, both, into / "compare-run", &bar, &done, total,
                             &run.t);
    bar.Update(total, total, "");
    if (run.rows.empty()) throw Failure{kExitBadInput, "--run: no checkpoint of the run could be analysed (" + std::to_string(run.failures.size()) + " failed)"};
    if (auto s = WriteRunFiles(staged_options, run, compare ? &*compare : nullptr); !s) throw Failure{kExitFailure, s.error()};
    if (auto s = model::MoveTreeInto(std::exchange(staged.dir, std::string()), out.string()); !s) throw Failure{kExitFailure, s.error()};
    const size_t failed = run.failures.size() + (compare ? compare->failures.size() : 0);
    // What the base differs in that is no weight, once for the run (a lone export says it; a run said nothing).
    for (const nlohmann::json& row : run.rows)
        if (row.contains("base_difference")) {
            std::fprintf(stderr, "ssaviz: note: %s\n", model::EscapeForMessage(row["base_difference"].get<std::string>(), 4096).c_str());
            break;
        }
    std::fprintf(stderr, "ssaviz: wrote %s (%zu of %zu steps%s)\n", model::EscapeForMessage(options.out_dir).c_str(), run.rows.size(), steps->size(),
                 compare ? (", compare run " + std::to_string(compare->rows.size()) + " of " + std::to_string(compare_steps->size())).c_str() : "");
    return failed == 0 ? kExitOk : kExitBadInput;
}

}  // namespace app
