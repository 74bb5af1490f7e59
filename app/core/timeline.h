// A training run as a timeline (SPEC section 11): the checkpoints of one run folder, in step
// order. The official code's lit-gpt runs save iter-NNNNNN-ckpt.pth (beside their
// lit_config.json), Hugging Face's trainer checkpoint-N/ folders; each step is opened on its own,
// one at a time, as any checkpoint is.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/io/result.h"

namespace app {

struct RunStep {
    int64_t step = 0;
    std::string path;  // the checkpoint file (lit-gpt) or folder (HF)
};

// The most entries a run folder's listing reads, and the most steps a run holds.
constexpr int64_t kMaxRunEntries = 100000;
constexpr int64_t kMaxRunSteps = 10000;

// Why a text of one token makes no timeline (every curve would be empty): the command line, Python
// and the window say the same.
constexpr const char* kRunNeedsTwoTokens =
    "a text of one token has no loss and one attention row, so nothing to follow over the steps: give a run two tokens or more";

// The run's steps, by step: entries named iter-<digits>-ckpt.pth (lit-gpt files) or
// checkpoint-<digits> (HF folders), by name alone (a link or anything else so named is a step that
// fails when it opens, named then; a step named twice is an error naming both). A folder with neither, one that
// is not a folder, or one with more than kMaxRunEntries entries or kMaxRunSteps steps: a one-line
// error naming it.
model::Result<std::vector<RunStep>> FindRunSteps(const std::string& dir);

// Whether `out` (where a run's export goes) is outside the run folder `run`: an export inside it
// became a step of the run (--out RUN/checkpoint-999), a broken one that later exports skipped and
// `train --resume` refused. Nor may the run be inside a folder the export writes below `out`:
// heatmaps/, plots/ and csv/, and `export --run`'s curves/, compare-run/ and step-N/ (Run) or the
// window's run/ (Window; train keeps its runs in OUT/run/, which then held curves/).
enum class RunExportFolders { Run, Window };
model::Status CheckOutsideRun(const std::string& out, const std::string& run, RunExportFolders folders = RunExportFolders::Run);

// Whether a compare run is a second run: the run itself (its folder, a link to it) set beside it
// gave every difference 0, analysed twice, as the model itself as its twin is refused.
model::Status CheckCompareRun(const std::string& run, const std::string& compare_run);

// Whether writing at `out` would add a step to a run: `out`, or a folder on the way to it that is
// not there yet, named as a step (checkpoint-N, iter-N-ckpt.pth) in a folder that holds steps.
// `export --model M --out RUN/checkpoint-999` made one without weights, a broken step that later
// exports skipped and `train --resume` refused.
model::Status CheckNotANewRunStep(const std::string& out);

}  // namespace app
