// A training run's export (SPEC section 11), shared by `ssaviz export --run` and Python's
// Run.export: each step analysed on its own (AnalyseRunStep), its result kept as a value that also
// travels as JSON (so a Dask worker can hand it to the process that writes the run's files), the
// steps gathered into a timeline in step order (AddRunStep), then run.json, run.csv, tau_q.npy and
// the curves written from them (WriteRunFiles). The same steps give the same bytes either way.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/core/run.h"
#include "app/core/timeline.h"
#include "app/export/export.h"
#include "app/export/head_summary.h"
#include "app/export/run_curves.h"
#include "model/io/result.h"

namespace app {

// One step's part of its run's timeline, or why it failed.
struct RunStepResult {
    int64_t step = 0;
    std::string checkpoint;  // the checkpoint's file (or folder) name
    std::string error;       // empty: analysed
    int fatal = 0;           // an exit code (app/core/exit_code.h) where the run stops: the step's own export could not be written,
                             // or the comparison, the what-ifs or the text failed (so would every step's)
    nlohmann::json row;      // run.json's row: the batch summary's, step, checkpoint, heads
    int n_layer = 0, n_head = 0, n_tokens = 0;
    RunModel model;                  // the step's model and the text's tokens: a run's steps are one model's
    std::vector<int32_t> ids;
    std::vector<HeadSummary> heads;  // [L * H]
    float loss = 0;                  // the mean loss on the text
    std::vector<float> tau_q;        // [L, H, T]
};
// Floats as their bits, so NaN, infinities and every value come back exactly.
nlohmann::json RunStepToJson(const RunStepResult& r);
model::Result<RunStepResult> RunStepFromJson(const std::string& text);

// How every step is opened and run.
struct RunStepSpec {
    std::string device = "auto", dtype = "f32";
    model::ConfigHints hints;
    RunSpec run;          // the comparison and what-ifs, as for one checkpoint
    bool truncate = false;
    ExportOptions options;  // a chosen step's whole export, and the summary row's sink epsilon
};

// The step's checkpoint opened alone and analysed on `text`. `of_run`: the run it must fit, its model
// checked before the analysis (RunTimeline::Fits; null: any). `full_out` non-empty: also what
// `ssaviz export` writes for that checkpoint, there.
RunStepResult AnalyseRunStep(const RunStep& step, const RunStepSpec& spec, const std::string& text, const RunTimeline* of_run,
                             const std::string& full_out);

// One run's steps gathered in step order, and run.json's rows and failures.
struct RunResults {
    RunTimeline t;
    nlohmann::json rows = nlohmann::json::array(), failures = nlohmann::json::array();
};
// Adds a step's result: analysed, or a failure; one that is not of the run's first analysed step's
// shape and tokenizer (RunTimeline::Fits) becomes a failure saying so. Returns the step's error, empty when it was added.
std::string AddRunStep(RunResults* run, RunStepResult step);

// run.json, run.csv, tau_q.npy (and compare-run/tau_q.npy) and with PNG / SVG the curves, in
// options.out_dir, the run's staging folder; `run` has at least one analysed step. A failed step's
// export written there before it failed (a step whose tokenizer is not the run's first step's is
// found out only as it is added) is removed: the steps exported are the steps in run.json.
model::Status WriteRunFiles(const ExportOptions& options, const RunResults& run, const RunResults* compare);

// One token's tau_q in one head over the run (TokenTauQCurve), for a figure: the Run tab's
// selected token and head, its piece as the views show it (the title names it).
struct RunTokenPick {
    HeadRef head;
    int token = 0;
    std::string piece;
};
// The run's curves as `export --run` writes them, `folder`/<key>.png and .svg as options asks:
// each head value's (RunHeadValues), the loss's and, where the steps ran the lens, the lens's;
// with `token`, also that token's tau_q (`folder`/tau_q_token: the window's Run tab's curve).
// `runs`: the run, then its compare run. The curves are copied: the files outlive the timelines.
std::vector<ExportFile> RunCurveFiles(const std::vector<const RunTimeline*>& runs, const ExportOptions& options, const std::string& folder,
                                      const std::optional<RunTokenPick>& token = std::nullopt);

// The run's numbers as `export --run` writes them in `folder`: run.csv, run_lens.csv where its
// steps ran the lens, tau_q.npy and compare-run/tau_q.npy (not run.json: its rows are each step's
// batch summary, which only `export --run` makes). `runs`: the run, then its compare run; copied.
std::vector<ExportFile> RunDataFiles(const std::vector<const RunTimeline*>& runs, const std::string& folder);

// RunDataFiles' and RunCurveFiles' places in `folder` (below `out_dir`), checked before the long
// work: no link or file where a folder goes, no FIFO or folder where a file goes (the window's
// --export-to found them only once the timeline had run).
model::Status CheckRunDataPlaces(const std::string& out_dir, const std::string& folder, const ExportOptions& options);

// A step's folder name: step-NNNNNN (six digits, as the official names are).
std::string StepFolder(int64_t step);

// A skipped step's reason without its checkpoint's name (raw, or escaped as messages write it):
// steps that fail for one reason of the run's folder (no lit_config.json beside any checkpoint) are
// said once and counted (the command line's lines, Python's warnings).
std::string RunStepReason(std::string error, const std::string& checkpoint);

}  // namespace app
