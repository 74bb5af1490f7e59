// What the views draw from and write to: the AppState the window shares with the rest of the app
// (model, text, analysis, selections, settings, requests), plus what only the window keeps: which
// of its windows are open, where the views lie on screen, focus and frame timings.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "app/core/state.h"
#include "app/core/timeline.h"
#include "app/gui/worker.h"
#include "viz/colormap.h"

namespace app {

// A view's rectangle on screen, in framebuffer pixels, for screenshots and tests.
struct Rect {
    float x = 0, y = 0, w = 0, h = 0;
};

// The first milliseconds of the model's jobs, in which the window asks for no frame of its own (no
// progress, no thumbnails baked in slices): an edit's analysis mostly ends within them, and a
// frame under way when its result arrives delays the result by that frame (a software
// rasteriser's 25-30 ms), besides taking the core the model wants.
constexpr double kQuietMs = 300.0;

// What the open dialog opens: the model, its comparison twin, the base a fine-tune started from,
// or a training run's folder of checkpoints.
enum class OpenPurpose { Model, Twin, Base, Run };

struct WindowState : AppState {
    // Every head's summary of `analysis` (SummarizeHeads) as the worker made it, and the analysis
    // it is of (HeadSummaries::Update checks they agree); null where it came without one.
    std::shared_ptr<const std::vector<HeadSummary>> head_summaries;
    std::weak_ptr<const model::Analysis> head_summaries_of;
    void ShowAnalysis(const WorkerEvent& e) {
        analysis = e.analysis;
        // Said as `ssaviz export` refuses it (a base that overflows read "base: -nan", "ready").
        not_finite = e.not_finite;  // the worker's scan
        head_summaries = e.heads;
        head_summaries_of = e.analysis;
        analysis_split = e.split;
        analysis_answered_ms = e.latency_ms;
    }
    std::string not_finite;  // why the shown analysis is not finite (NonFiniteAnalysis); empty where it is
    bool Quiet() const { return busy && busy_ms < kQuietMs; }
    // An analysis asked for is not shown yet (a comparison's or a model's being set): the shown one
    // is about to go.
    bool analysis_pending = false;
    bool timeline_alone = false;  // the worker runs the Run tab's timeline, nothing asked after it
    void ShowOpenDialog(OpenPurpose purpose) { show_open_dialog = true, open_dialog_for = purpose; }
    // A model the user chose (File > Open, Recent, a drop, an example): a base chosen for the model
    // before is not its base (forget_base: the window lets it go, and its three-way comparison).
    void OpenAnotherModel(const std::string& path) { open_model_request = path, forget_base = true; }
    bool forget_base = false;
    bool show_open_dialog = false;
    OpenPurpose open_dialog_for = OpenPurpose::Model;
    // Asked for by File > Compare with a base model... and File > Open a training run... (the
    // open dialog): a fine-tune's base in a folder of its own, a run's folder of checkpoints.
    std::optional<std::string> open_base_request, open_run_request;
    bool show_help = false;
    bool show_demo = false;
    bool show_graph = false;     // the graph experiment window (paper Figure 3)
    bool show_timings = false;   // the status bar's developer timings (View > Timings in the status bar)
    bool focus_goto = false;     // Ctrl+F: the map's go-to field takes the keyboard
    bool escape_taken = false;   // a dialog closed on this frame's Esc: the shortcuts leave the query as it is
    bool want_frame = false;     // a view has more to do (e.g. baking in slices): draw again soon
    int layout_generation = 0;   // bumped when a session sets the layout, so the panes take it
    std::string twin_beside;     // the open model's shipped twin or base model (TwinBeside, found by the worker); empty: none
    std::string base_beside;     // the base a fine-tune started from (BaseBeside, found by the worker): the three-way comparison
    std::string base_dir;        // a base chosen (--base, a session's, File > Compare with a base model...); "": base_beside
    const std::string& BaseShown() const { return base_dir.empty() ? base_beside : base_dir; }
    double last_latency_ms = 0;  // keystroke (analysis request) to the frame that showed its result
    WorkerEvent::Split analysis_split;  // where the shown analysis's time went in the worker
    double analysis_answered_ms = 0;    // its request to its answer (the rest of last_latency_ms: to pixels)
    float frame_ms = 0;
    std::map<std::string, Rect> regions;  // "heatmap", "tokens", "heads", ...
    std::map<std::string, viz::Range> scales;  // a view's colour scale by its region ("matrix", "finetune_matrix"): what a colour means
    // The logit lens and attribution (the Lens tab): the last run, of the text whose ids it holds
    // (stale once the analysis's ids differ); a request, and whether one runs.
    std::shared_ptr<const LensPair> lens;
    bool lens_request = false;
    bool lens_running = false;
    // The selected query's lens and attribution alone (shown until the whole lens is run): the last
    // one, and the position the Lens tab wants (-1: none) when the last is not of it.
    std::shared_ptr<const LensAtPair> lens_at;
    int lens_at_wanted = -1;
    // A training run (the Run tab, --run DIR): its steps in order and the one shown (the open
    // model is that step's checkpoint), a step asked for, and the timeline of a text over the run.
    std::string run_dir;
    std::string compare_run_dir;        // --compare-run: a second run whose curves the Run tab sets beside
    std::vector<RunStep> run_steps;
    int run_step = -1;                  // index into run_steps; -1: the open model is none of them
    std::optional<int> run_step_request;
    bool run_playing = false;           // Play: the next step once this one's analysis is shown
    std::shared_ptr<const RunTrack> timeline;
    bool timeline_request = false;
    bool timeline_running = false;
    bool stop_timeline_request = false;  // Esc or the Run tab's Stop: the timeline stops where it is (Go on resumes it)
    bool timeline_lens = false;         // the next timeline reads each step's loss after each layer (--lens; the Run tab's Lens)
};

}  // namespace app
