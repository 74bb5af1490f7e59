// The inference worker: one thread that owns the model (a Runner, app/core/run.h) and runs requests
// off the UI thread. Opening a model and analysing text are queued; a newer analysis request replaces a
// queued one, so typing never queues work. A running analysis finishes (so fast typing still
// shows results, each at most one request behind); opening a model cancels it between layers.
// Results come back as immutable shared pointers the UI takes at the start of a frame; a long
// analysis comes back twice, its maps and temperatures first and then with its predictions.
// A big model (app/core/model_scale.h) opens with the layer-local comparison unless another than
// the global tau = 1 one was asked for; SetComparison(Counterfactual) then runs the global pass.
// Two longer jobs run step by step and stop at any newer request: ranking the heads by the loss
// their ablation causes (one forward pass per head) and Continue (one token per step, each step's
// analysis streamed to the UI), the runner's generation loop. A third runs on request: the logit
// lens and attribution of the shown text (a forward pass of each side).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <list>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "app/core/model_scale.h"
#include "app/core/run.h"
#include "app/core/state.h"
#include "app/export/head_summary.h"
#include "app/export/run_curves.h"
#include "model/nn/analysis.h"

namespace app {

// The logit lens and attribution of one text (model/nn/lens.h), SSA and its comparison.
struct LensPair {
    std::vector<int32_t> ids;  // the text it was run on
    std::string model_dir, compare_label;  // and the model's folder and comparison (LensKey)
    model::Lens ssa;
    std::optional<model::Lens> compare;  // tau = 1, the twin, or with a base its weights at tau = 1
    std::optional<model::Lens> base;     // a fine-tune's base
};

// One position's lens and attribution (Engine::RunLensAt), SSA and its comparison: what the Lens tab
// shows of the selected query before (or without) the whole lens.
struct LensAtPair {
    std::vector<int32_t> ids;
    std::string model_dir, compare_label;
    int64_t position = 0;
    // Whose logit the parts split, on every side the same token (each side's `target` says it):
    // at the last position, which has no next token, SSA's top prediction. With NextAgainstOther
    // each side's parts and logit are the next token's minus `versus`'s.
    LensTarget target = LensTarget::Next;
    int32_t versus = -1;
    model::LensAt ssa;
    std::optional<model::LensAt> compare;
    std::optional<model::LensAt> base;
};

// A training run's timeline of one text (the Run tab): its steps analysed so far, each opened on
// its own, and those that failed; with a compare run (--compare-run) its steps after the run's.
struct RunTrack {
    RunTimeline timeline;
    std::optional<RunTimeline> compare;  // the compare run's (its dir set from the start)
    std::string text;                 // the text it ran
    bool lens = false;                // each step's loss read after each layer too (RunTimeline::lens_loss: the lens curve)
    std::vector<std::string> failed;  // "step N (file): why", "compare run: step N (file): why"
    size_t total = 0;                 // the steps of both runs
    size_t tried = 0;                 // steps tried so far, in order (analysed or failed)
    bool done = false;                // every step tried
    std::string compare_spec;         // the worker's comparison it ran with: resumed only with the same
    std::string compared;             // LensKey of its run's steps' analyses: the curves are the shown analysis's where its LensKey is this
};

struct WorkerEvent {
    enum class Kind {
        ModelOpened, TwinOpened, TwinClosed, ComparisonSet, ComparisonFailed, InterventionsSet, Analysis, Generated, HeadImpacts, Lens,
        LensAt, Timeline, Prefetched, Error
    };
    WorkerEvent() = default;
    WorkerEvent(Kind k, std::optional<model::ModelInfo> i, std::shared_ptr<const model::Analysis> a, std::string e, uint64_t id,
                double latency = 0)
        : kind(k), info(std::move(i)), analysis(std::move(a)), error(std::move(e)), request(id), latency_ms(latency) {}
    Kind kind = Kind::Error;
    std::optional<model::ModelInfo> info;               // ModelOpened, TwinOpened
    std::shared_ptr<const model::Analysis> analysis;    // Analysis, Generated
    std::shared_ptr<const std::vector<HeadSummary>> heads;  // Analysis, Generated: SummarizeHeads(*analysis), made here
    std::string error;                                  // Error, ComparisonFailed: one line; InterventionsSet: why some were dropped
    RunError::Kind error_kind = RunError::Kind::Failure;  // ComparisonFailed: the command line's kind of it (ExitCodeOf)
    uint64_t request = 0;                               // the request it answers
    double latency_ms = 0;                              // from the request to this result
    // Analysis: where latency_ms went (the typing benchmark's split), in ms; not `timed` for the
    // early answer shown before its predictions.
    struct Split {
        bool timed = false;
        double queued = 0;    // waiting for the worker (another request or idle work before it)
        double tokenize = 0;  // the whole text
        double analyze = 0;   // the engine: forward, metrics, predictions and the host arrays
        double map = 0;       // the shown head's maps, made ahead for the map view
    };
    Split split;
    std::vector<model::Intervention> interventions;     // InterventionsSet: what the SSA side runs with now
    std::string text;                                   // Generated: the text with the new token appended
    bool prefetched = false;                            // ModelOpened: the model Prefetch had opened aside
    bool kept = false;                                  // Analysis: a run step's analysis kept from before (not run again)
    std::string not_finite;                             // Analysis, Generated: NonFiniteAnalysis(*analysis), made here
    bool last = false;                                  // Generated: the last step of its request
    std::shared_ptr<const HeadImpacts> impacts;         // HeadImpacts: the heads ranked so far
    std::shared_ptr<const LensPair> lens;               // Lens
    std::shared_ptr<const LensAtPair> lens_at;          // LensAt
    std::shared_ptr<const RunTrack> timeline;           // Timeline: after each step
    std::shared_ptr<const std::vector<std::string>> vocab;  // ModelOpened: [V] each id's bytes
    model::Comparison comparison = model::Comparison::Counterfactual;  // ModelOpened, ComparisonSet, ComparisonFailed: what runs now
    std::string twin_beside;  // ModelOpened: the twin or base model shipped beside it (TwinBeside); empty: none
    std::string base_beside;  // ModelOpened: the base it was fine-tuned from (BaseBeside); empty: none
    // ModelOpened: the folder that opened (the request's, or a fallback's), and how many tried
    // before it did not, the first's error. Error: the request's error, and how many fallbacks
    // failed after it.
    std::string opened_dir;
    int passed_over = 0;
    std::string passed_over_error;
};

// The base comparisons asked of the worker and the base that runs, for the folder the window shows
// (AppState::base_dir): a base that does not open gives it back to the last one that did, once no
// other base is on its way (A asked, then B, which fails: A is shown again, after A has answered).
class BaseRequests {
public:
    void Asked(uint64_t request, std::string dir) { m_asked[request] = std::move(dir); }  // "": the base beside the model
    // ComparisonSet: the base it answers, if it answers one, runs now.
    void Set(uint64_t request) {
        if (auto it = m_asked.find(request); it != m_asked.end()) m_running = std::move(it->second), m_asked.erase(it);
    }
    // ComparisonFailed: the folder to show now (the base running) where it answered the last base
    // on its way; nothing where another is still coming or it answered no base.
    std::optional<std::string> Failed(uint64_t request) {
        if (m_asked.erase(request) == 0 || !m_asked.empty()) return std::nullopt;
        return m_running;
    }

private:
    std::map<uint64_t, std::string> m_asked;  // request -> folder
    std::string m_running;                    // the folder of the base last set ("": beside the model, or none)
};

class InferenceWorker {
public:
    // `wake` is called from the worker thread after each event (e.g. glfwPostEmptyEvent).
    explicit InferenceWorker(std::function<void()> wake = {});
    ~InferenceWorker();  // cancels, joins
    InferenceWorker(const InferenceWorker&) = delete;
    InferenceWorker& operator=(const InferenceWorker&) = delete;

    // `hints`: what a checkpoint without config.json cannot tell (n_head, SSA forms). `run_step`: a
    // training run's checkpoint (the Run tab's): its analyses are kept (RunStepCacheBytes), so a
    // step shown again on the same text, comparison and what-ifs is shown at once.
    // `fallbacks`: a run's steps before it, latest first, tried in turn while it and those before
    // them do not open (a run whose last steps are truncated): the first that opens answers
    // ModelOpened, saying how many it passed over, in one request (a request each took a frame
    // each, minutes for thousands of such steps).
    // `beside`: the base the model opens beside (asked for with it, before the comparison that sets
    // it comes), whose lit_config.json and tokenizer it reads where its folder has none (app::HintsWithBase);
    // none: the comparison in force.
    uint64_t OpenModel(const std::string& dir, const std::string& device, const model::ConfigHints& hints = {},
                       const std::string& dtype = "f32", bool run_step = false, std::vector<std::string> fallbacks = {},
                       std::optional<CompareSpec> beside = std::nullopt);
    // A twin or base that does not open answers ComparisonFailed (why, and what runs instead) and
    // leaves the comparison as it was; so does one asked for before the model opened, right after
    // its ModelOpened.
    uint64_t OpenTwin(const std::string& dir);  // with the model's load flags where its folder lacks a config or tokenizer
    uint64_t CloseTwin();
    // The tau = 1 counterfactual (a second forward pass), the layer-local one or the unedited model
    // (closes a twin); kept across models.
    uint64_t SetComparison(CompareSpec compare);  // a kind, or a base and its folder
    uint64_t Analyze(const std::string& text, bool truncate);
    // What-ifs on the SSA side, kept across models that they fit (dropped, with a note, otherwise).
    uint64_t SetInterventions(std::vector<model::Intervention> interventions);
    // Ablates each head in turn on top of the interventions and ranks them by the mean loss on `text`.
    uint64_t RankHeads(const std::string& text, bool truncate);
    // Appends settings.tokens tokens to `text`, one Generated event per token.
    uint64_t Continue(const std::string& text, bool truncate, const GenerationSpec& settings);
    // The logit lens and attribution of `ids` (the shown analysis's), SSA and, with `compare`, its
    // comparison: a job (any newer request stops it), its progress in Progress().
    uint64_t RunLens(std::vector<int32_t> ids, bool compare, std::string compare_label);
    // One position of it (the selected query): the first for a text runs each side's forward pass
    // and keeps its residual stream; another position then costs its own rows. Replaces a queued one.
    uint64_t RunLensAt(std::vector<int32_t> ids, int64_t position, bool compare, std::string compare_label,
                       LensTarget target = LensTarget::Next);
    // Every checkpoint of the run in `dir` on `text`, each opened on its own beside the shown model
    // (device, dtype and comparison as the shown model's), one at a time: a job (any newer request
    // stops it), a Timeline event after each step, its progress in Progress().
    // `compare_dir` (may be empty): a second run whose steps follow the first's. `resume`: a
    // timeline of the same runs and text stopped part way; its steps are not run again. `lens`: each
    // step's SSA lens too, its loss by layer kept (one lens pass a step: slower).
    uint64_t RunTimelineOf(const std::string& dir, const std::string& compare_dir, const std::string& text, bool truncate, bool lens,
                           std::shared_ptr<const RunTrack> resume = nullptr);
    // Opens `dir` as OpenModel would, once the worker is idle, and keeps it aside: an OpenModel of
    // the same folder, device, hints and dtype then takes it at once (the Run tab's next step).
    // At most one is kept (the shown model and it: two in memory); a newer wish replaces an older
    // one, and an OpenModel of anything else lets the kept one go first. Not while the shown model
    // is big (ScaleOf): two of those may not fit.
    void Prefetch(const std::string& dir, const std::string& device, const model::ConfigHints& hints = {}, const std::string& dtype = "f32");
    // A Prefetched event says when it is kept (info: its model; error: why it did not open, which
    // the OpenModel for it will say again).
    // Models with this many parameters or more open with the layer-local comparison (on a CPU).
    void SetBigModelParameters(int64_t parameters) { m_big_parameters = parameters; }
    void Cancel() { m_cancel = true; }  // stops the running analysis or job

    std::vector<WorkerEvent> TakeEvents();  // everything finished since the last call, oldest first
    bool Busy() const { return m_busy.load(); }
    bool Readying() const { return m_readying.load(); }  // idle, readying memory for the next edit (ReserveForEdits)
    // Busy with a timeline alone, nothing asked after it: what is shown stays as it is meanwhile.
    bool OnlyTheTimeline() const;
    float Progress() const { return m_progress.load(); }  // of the running analysis: layers done / layers
    // The head the map view shows: each analysis rebuilds its maps before it is handed over, and
    // once idle the worker rebuilds the heads the arrow keys go to next (PrefetchNeighbours).
    void SetShownHead(int layer, int head) {
        const bool layer_changed = m_shown_layer.exchange(layer) != layer, head_changed = m_shown_head.exchange(head) != head;
        if (!layer_changed && !head_changed) return;
        { std::lock_guard<std::mutex> lock(m_mutex); }  // the worker is waiting, or sees the new head before it waits
        m_cv.notify_one();
    }

private:
    struct Request {
        enum class Kind { OpenModel, OpenTwin, CloseTwin, SetComparison, Analyze, SetInterventions, RankHeads, Continue, Lens, LensAt, Timeline };
        explicit Request(Kind k, std::string argument = "") : kind(k), arg(std::move(argument)) {}
        Kind kind;
        uint64_t id = 0;
        std::string arg;     // folder or text
        std::string device;
        bool truncate = false;
        double start_ms = 0;
        double taken_ms = 0;  // when the worker took it from the queue
        model::ConfigHints hints;
        std::string dtype = "f32";
        bool run_step = false;  // OpenModel
        std::vector<std::string> fallbacks;  // OpenModel
        std::optional<CompareSpec> beside;   // OpenModel: the base it opens beside
        CompareSpec compare;
        std::vector<model::Intervention> interventions;
        GenerationSpec generate;
        std::vector<int32_t> ids;  // Lens, LensAt
        int64_t position = 0;      // LensAt
        bool lens_compare = false;  // Lens, LensAt; Timeline: each step's lens
        LensTarget lens_target = LensTarget::Next;  // LensAt
        std::string compare_label;
        std::string text;  // Timeline (arg: the run's folder)
        std::string compare_run;  // Timeline: the compare run's folder, or empty
        std::shared_ptr<const RunTrack> resume;
    };

    // A run's step's lens loss by layer [L + 1], each side's (SSA, its comparison, the base): the Timeline job's, with its lens.
    model::Result<std::vector<std::vector<float>>> StepLens(model::Engine& engine, const model::Analysis& a);
    uint64_t Push(Request request);
    void Loop();
    void Handle(const Request& request);
    void Emit(WorkerEvent event);
    void EmitComparisonFailed(const RunError& error, uint64_t request);
    // Sets the what-ifs of `list` that fit the open model: the event that says which are in force.
    WorkerEvent ApplyWhatIfs(const std::vector<model::Intervention>& list, uint64_t id);
    bool Superseded();  // a job's check between steps: cancelled, or another request waits
    void RankHeadsJob(const Request& r);
    void ContinueJob(const Request& r);
    // The sides a lens request runs: SSA, its comparison when asked, and the base beside a base.
    std::vector<model::MapSide> LensSides(const Request& r) const;
    void LensJob(const Request& r);
    void LensAtPosition(const Request& r);
    void TimelineJob(const Request& r);
    // The analysis as the UI gets it: shared, with the shown head's maps already built.
    std::shared_ptr<const model::Analysis> Share(model::Analysis analysis);
    void Prefetch(const model::Analysis& a) const;  // the shown head's maps, ready for the map view

    std::function<void()> m_wake;
    std::unique_ptr<Runner> m_runner;  // touched only by the worker thread
    CompareSpec m_compare;                                                // kept across models
    std::optional<CompareSpec> m_twin;                                    // the twin open beside the model (OpenTwin), if any
    ModelSpec m_opened;                                                   // how the shown model was opened (a timeline's steps open so)
    std::unique_ptr<Runner> m_prefetched;                                 // Prefetch's model, kept aside (worker thread only)
    std::string m_prefetched_key;                                         // its SpecKey, "" when none
    bool m_run_step = false;                                              // the shown model is a run's step (OpenModel)
    struct KeptAnalysis {
        std::string key;  // the model's SpecKey, comparison, what-ifs, truncation and text
        std::shared_ptr<const model::Analysis> analysis;
        size_t bytes = 0;
    };
    std::list<KeptAnalysis> m_step_analyses;  // run steps' analyses, the most recent first (worker thread only)
    size_t m_step_analyses_bytes = 0;
    // A run step's analysis's key: how its model was opened, the comparison it ran, the what-ifs, the text.
    std::string StepAnalysisKey(const ModelSpec& spec, model::Comparison comparison, const std::string& text, bool truncate) const;
    void KeepStepAnalysis(std::string key, std::shared_ptr<const model::Analysis> analysis, int head_size);
    std::vector<model::Intervention> m_interventions;                     // kept across models they fit

    mutable std::mutex m_mutex;
    std::condition_variable m_cv;
    std::deque<Request> m_queue;
    std::optional<ModelSpec> m_prefetch_wanted;  // Prefetch's latest wish, not yet opened
    std::vector<WorkerEvent> m_events;
    uint64_t m_next_id = 1;
    bool m_stop = false;
    std::atomic<bool> m_cancel{false};
    std::atomic<bool> m_busy{false};
    std::atomic<bool> m_in_job{false};  // a job runs: any new request stops it
    std::atomic<bool> m_in_timeline{false};  // that job is a timeline
    bool m_reserve = false;             // an analysis finished: ready the memory its edits will write into, once idle
    std::atomic<bool> m_readying{false};
    std::atomic<float> m_progress{0.0f};
    std::atomic<int> m_shown_layer{0}, m_shown_head{0};
    std::weak_ptr<const model::Analysis> m_latest;  // the last analysis handed over (Share)
    // Which shown head of which analysis the neighbours' maps were rebuilt for (worker thread only).
    const model::Analysis* m_neighbours_of = nullptr;
    int m_neighbours_for = -1;
    bool NeighboursWanted() const;  // with m_mutex held
    void PrefetchNeighbours();
    std::atomic<int64_t> m_big_parameters{kBigModelParameters};
    std::thread m_thread;  // last: starts after everything above exists
};

double NowMs();  // steady clock, milliseconds

}  // namespace app
