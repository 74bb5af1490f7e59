#include "app/gui/worker.h"

#include <chrono>
#include <filesystem>

#include "app/core/attribution.h"
#include "app/core/examples.h"
#include "app/core/names.h"
#include "app/core/timeline.h"
#include "app/export/export.h"
#include "model/io/files.h"
#include "model/nn/runtime.h"

namespace app {

double NowMs() {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

InferenceWorker::InferenceWorker(std::function<void()> wake) : m_wake(std::move(wake)), m_thread([this] { Loop(); }) {}

InferenceWorker::~InferenceWorker() {
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_stop = true;
        m_cancel = true;
    }
    m_cv.notify_all();
    m_thread.join();
}

uint64_t InferenceWorker::Push(Request request) {
    uint64_t id;
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        id = request.id = m_next_id++;
        request.start_ms = NowMs();
        if (request.kind == Request::Kind::Analyze || request.kind == Request::Kind::LensAt) {
            // Only the newest text (or selected query) matters: drop queued ones of its kind.
            for (auto it = m_queue.begin(); it != m_queue.end();)
                it = it->kind == request.kind ? m_queue.erase(it) : it + 1;
        } else if (request.kind != Request::Kind::Lens) {
            m_cancel = true;  // a new model or twin makes the running analysis worthless
        }
        if (m_in_job) m_cancel = true;  // any request stops a job (a keystroke stops Continue)
        m_queue.push_back(std::move(request));
        m_busy = true;
    }
    m_cv.notify_one();
    return id;
}

namespace {

// A text the window cannot tokenize, and the window's remedy where there is one: its "truncate to
// context" box (the command line's --truncate, named for a screenshot run).
std::string TokenizeError(const std::string& error) {
    const bool too_long = error.find("(truncating keeps the first ") != std::string::npos;  // the model's context, or a shorter twin's or base's
    return too_long ? error + "; tick 'truncate to context' under the text (--truncate) to run it" : error;
}

// The comparison as a model takes it: a run's step may be its base itself (the run's first step often is).
CompareSpec CompareFor(CompareSpec compare, bool run_step) {
    compare.base_may_be_the_model = run_step;
    compare.base_of_the_run = run_step;  // every step the run's base, as export --run takes it
    return compare;
}

// Everything that decides what Runner::Open gives: two specs with one key open the same model.
std::string SpecKey(const ModelSpec& s) {
    auto form = [](const std::optional<model::TemperatureForm>& f) {
        return f ? std::to_string(static_cast<int>(f->position)) + "." + std::to_string(static_cast<int>(f->token)) + "." +
                       std::to_string(static_cast<int>(f->combine))
                 : std::string("-");
    };
    const model::ConfigHints& h = s.hints;
    return s.path + '\n' + s.device + '\n' + s.dtype + '\n' + std::to_string(h.n_head) + '\n' + form(h.query) + '\n' + form(h.value) + '\n' +
           (h.activation ? std::to_string(static_cast<int>(*h.activation)) : "-") + '\n' + h.config_file + '\n' + h.tokenizer_dir;
}

// The sides of a head's map the map view reads: SSA and the comparison, and with a base the base
// (its row chart, hover and colour range read it in every mode).
std::vector<model::MapSide> ShownSides(const model::Analysis& a) {
    std::vector<model::MapSide> sides = {model::MapSide::Ssa, model::MapSide::Compare};
    if (a.HasBase()) sides.push_back(model::MapSide::Base);
    return sides;
}

}  // namespace

void InferenceWorker::Prefetch(const std::string& dir, const std::string& device, const model::ConfigHints& hints, const std::string& dtype) {
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_prefetch_wanted = ModelSpec{dir, device, dtype, hints};
    }
    m_cv.notify_one();
}

uint64_t InferenceWorker::OpenModel(const std::string& dir, const std::string& device, const model::ConfigHints& hints,
                                    const std::string& dtype, bool run_step, std::vector<std::string> fallbacks,
                                    std::optional<CompareSpec> beside) {
    Request r(Request::Kind::OpenModel, dir);
    r.device = device;
    r.hints = hints;
    r.dtype = dtype;
    r.run_step = run_step;
    r.fallbacks = std::move(fallbacks);
    r.beside = std::move(beside);
    return Push(std::move(r));
}
uint64_t InferenceWorker::OpenTwin(const std::string& dir) {
    Request r(Request::Kind::OpenTwin, dir);
    return Push(std::move(r));
}
uint64_t InferenceWorker::CloseTwin() { return Push(Request(Request::Kind::CloseTwin)); }
uint64_t InferenceWorker::SetComparison(CompareSpec compare) {
    Request r(Request::Kind::SetComparison);
    r.compare = compare;
    return Push(std::move(r));
}
uint64_t InferenceWorker::Analyze(const std::string& text, bool truncate) {
    Request r(Request::Kind::Analyze, text);
    r.truncate = truncate;
    return Push(std::move(r));
}

uint64_t InferenceWorker::SetInterventions(std::vector<model::Intervention> interventions) {
    Request r(Request::Kind::SetInterventions);
    r.interventions = std::move(interventions);
    return Push(std::move(r));
}
uint64_t InferenceWorker::RankHeads(const std::string& text, bool truncate) {
    Request r(Request::Kind::RankHeads, text);
    r.truncate = truncate;
    return Push(std::move(r));
}
uint64_t InferenceWorker::RunLens(std::vector<int32_t> ids, bool compare, std::string compare_label) {
    Request r(Request::Kind::Lens);
    r.ids = std::move(ids);
    r.lens_compare = compare;
    r.compare_label = std::move(compare_label);
    return Push(std::move(r));
}
uint64_t InferenceWorker::RunLensAt(std::vector<int32_t> ids, int64_t position, bool compare, std::string compare_label, LensTarget target) {
    Request r(Request::Kind::LensAt);
    r.ids = std::move(ids);
    r.position = position;
    r.lens_compare = compare;
    r.lens_target = target;
    r.compare_label = std::move(compare_label);
    return Push(std::move(r));
}
uint64_t InferenceWorker::RunTimelineOf(const std::string& dir, const std::string& compare_dir, const std::string& text, bool truncate,
                                        bool lens, std::shared_ptr<const RunTrack> resume) {
    Request r(Request::Kind::Timeline, dir);
    r.compare_run = compare_dir;
    r.text = text;
    r.truncate = truncate;
    r.lens_compare = lens;
    r.resume = std::move(resume);
    return Push(std::move(r));
}
uint64_t InferenceWorker::Continue(const std::string& text, bool truncate, const GenerationSpec& settings) {
    Request r(Request::Kind::Continue, text);
    r.truncate = truncate;
    r.generate = settings;
    return Push(std::move(r));
}

std::vector<WorkerEvent> InferenceWorker::TakeEvents() {
    std::lock_guard<std::mutex> lock(m_mutex);
    std::vector<WorkerEvent> events;
    events.swap(m_events);
    return events;
}

void InferenceWorker::EmitComparisonFailed(const RunError& error, uint64_t request) {
    WorkerEvent e{WorkerEvent::Kind::ComparisonFailed, {}, nullptr, error.message, request};
    e.error_kind = error.kind;
    e.comparison = m_runner ? m_runner->engine().comparison() : CompareKindOf(m_compare.kind).runs;
    Emit(std::move(e));
}

void InferenceWorker::Emit(WorkerEvent event) {
    // Every head's summary goes with its analysis, made here rather than by the views on the UI
    // thread (each that lists heads would make its own: ~3 ms at 1,000 tokens of GPT-2 small).
    if (event.analysis && !event.heads) event.heads = std::make_shared<const std::vector<HeadSummary>>(SummarizeHeads(*event.analysis));
    // Whether it is finite, here too: the scan reads every row array (milliseconds a keystroke on the UI thread).
    if (event.analysis) event.not_finite = NonFiniteAnalysis(*event.analysis);
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_events.push_back(std::move(event));
    }
    if (m_wake) m_wake();
}

void InferenceWorker::Loop() {
    // The UI thread (and a software GL rasteriser, where there is one) keeps a core. Re-measured
    // with OpenMP OpenBLAS on 2 cores (issue 27, docs/benchmarks.md): 2 compute threads typed at the
    // end of 1,000 tokens of GPT-2 small at 290 ms keystroke to pixels against 133 ms on 1, and
    // though they ran a TinyLlama-sized model's first analysis 1.5x faster, the UI's frame work
    // p99 went over 8 ms. SSAVIZ_THREADS=N overrides.
    model::UseComputeThreads(model::ResolveComputeThreads(/*reserve=*/1));
    for (;;) {
        Request request(Request::Kind::Analyze);  // replaced by the queue's front
        {
            std::unique_lock<std::mutex> lock(m_mutex);
            auto wake_ui = [&] {  // let the UI see what changed, without holding the lock it may want
                if (!m_wake) return;
                lock.unlock();
                m_wake();
                lock.lock();
            };
            m_busy = !m_queue.empty();
            if (!m_busy) wake_ui();  // we went idle
            if (!m_busy && m_reserve && m_runner) {  // idle: the next keystroke's memory, until a request comes
                m_readying = true;
                lock.unlock();
                try {
                    m_reserve = !m_runner->engine().ReserveForEdits([this] { return Superseded(); });
                } catch (const std::exception&) {  // out of memory: the edit will try again, and say so
                    m_reserve = false;
                }
                lock.lock();
                m_readying = false;
                wake_ui();
            }
            // Idle: Prefetch's model, opened aside (not for a big shown model: two may not fit).
            if (!m_busy && m_prefetch_wanted && !m_stop) {
                ModelSpec spec = *std::exchange(m_prefetch_wanted, std::nullopt);
                spec.hints = HintsWithBase(spec.hints, spec.path, CompareFor(m_compare, true));  // a run's next step, as OpenModel opens it
                const std::string key = SpecKey(spec);
                if (key != m_prefetched_key && m_runner && !ScaleOf(m_runner->Info(), m_big_parameters).big) {
                    m_readying = true;
                    lock.unlock();
                    m_prefetched.reset();  // one aside at a time
                    m_prefetched_key.clear();
                    WorkerEvent done{WorkerEvent::Kind::Prefetched, std::nullopt, nullptr, "", 0};
                    if (auto runner = Runner::Open(spec)) {
                        m_prefetched = std::move(*runner);
                        m_prefetched_key = key;
                        done.info = m_prefetched->Info();
                    } else {
                        done.error = runner.error().message;  // said again by the OpenModel that asks for it
                    }
                    lock.lock();
                    m_events.push_back(std::move(done));
                    m_readying = false;
                    wake_ui();
                }
                continue;  // a request may have come meanwhile
            }
            // Idle: the maps of the heads next to the shown one, one at a time while nothing is asked.
            if (!m_busy && !m_stop && NeighboursWanted()) {
                lock.unlock();
                PrefetchNeighbours();
                lock.lock();
                continue;
            }
            m_cv.wait(lock, [this] { return m_stop || !m_queue.empty() || m_prefetch_wanted || NeighboursWanted(); });
            if (m_stop) return;
            if (m_queue.empty()) continue;  // woken for a prefetch
            request = std::move(m_queue.front());
            request.taken_ms = NowMs();
            m_queue.pop_front();
            m_cancel = false;
            m_busy = true;
            m_in_job = request.kind == Request::Kind::RankHeads || request.kind == Request::Kind::Continue ||
                       request.kind == Request::Kind::Lens || request.kind == Request::Kind::Timeline;
            m_in_timeline = request.kind == Request::Kind::Timeline;
        }
        try {
            Handle(request);
        } catch (const std::exception& e) {  // c10::Error and friends: report, never crash the app
            Emit({WorkerEvent::Kind::Error, {}, nullptr, ExceptionMessage(e), request.id});
        }
        m_in_job = false;
        m_in_timeline = false;
    }
}

bool InferenceWorker::OnlyTheTimeline() const {
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_in_timeline && m_queue.empty();
}

void InferenceWorker::Handle(const Request& r) {
    using Kind = WorkerEvent::Kind;
    switch (r.kind) {
        case Request::Kind::OpenModel: {
            // A fine-tune beside its base reads what its folder lacks from the base's (HintsWithBase): the
            // base asked for with it (at launch the comparison that sets it comes after the open), else
            // the comparison in force.
            const CompareSpec beside = CompareFor(r.beside ? *r.beside : m_compare, r.run_step);
            ModelSpec spec{r.arg, r.device, r.dtype, HintsWithBase(r.hints, r.arg, beside)};
            const bool prefetched = m_prefetched && m_prefetched_key == SpecKey(spec);
            int passed_over = 0;
            std::string passed_over_error;
            if (prefetched) {
                m_runner = std::move(m_prefetched);
            } else {
                m_prefetched.reset();  // not this one: its memory goes before another model is read
                auto runner = Runner::Open(spec);
                // A run's truncated last steps: the latest before them that opens, here in one go.
                for (size_t k = 0; !runner && k < r.fallbacks.size(); ++k) {
                    if (passed_over++ == 0) passed_over_error = runner.error().message;
                    spec.path = r.fallbacks[k];
                    spec.hints = HintsWithBase(r.hints, spec.path, beside);
                    runner = Runner::Open(spec);
                }
                if (!runner) {
                    WorkerEvent failed{Kind::Error, {}, nullptr, passed_over ? passed_over_error : runner.error().message, r.id};
                    failed.passed_over = static_cast<int>(r.fallbacks.size());  // nor did any of these
                    return Emit(std::move(failed));
                }
                m_runner = std::move(*runner);
            }
            m_prefetched_key.clear();
            m_twin.reset();  // a new runner, without the twin (the window opens it again)
            m_opened = {spec.path, r.device, r.dtype, r.hints};
            m_run_step = r.run_step;
            // A big model opens with the cheap comparison; m_compare stays what was asked for. One
            // that does not open (a base or twin gone) is said right after ModelOpened.
            const bool big = ScaleOf(m_runner->Info(), m_big_parameters).big;
            CompareSpec compare = CompareFor(m_compare, r.run_step);
            if (compare.kind == CompareKind::Global && big) compare = CompareKind::LayerLocal;
            std::optional<RunError> compare_failed;
            if (auto s = m_runner->SetCompare(compare); !s) {
                compare_failed = s.error();
                m_compare = CompareKind::Global;
                (void)m_runner->SetCompare(big ? CompareKind::LayerLocal : CompareKind::Global);
            }
            WorkerEvent opened{Kind::ModelOpened, m_runner->Info(), nullptr, "", r.id, NowMs() - r.start_ms};
            opened.prefetched = prefetched;
            opened.comparison = m_runner->engine().comparison();
            opened.twin_beside = TwinBeside(m_runner->Info().dir);  // looked for once here, not by the views each frame
            opened.base_beside = BaseBeside(m_runner->Info().dir, r.run_step);  // a run's step: the run's
            opened.opened_dir = spec.path;
            opened.passed_over = passed_over;
            opened.passed_over_error = std::move(passed_over_error);
            auto vocab = m_runner->Vocabulary();
            if (!vocab) return Emit({Kind::Error, {}, nullptr, vocab.error().message, r.id});
            opened.vocab = std::move(*vocab);
            Emit(std::move(opened));
            if (compare_failed) EmitComparisonFailed(*compare_failed, r.id);
            if (m_interventions.empty()) return;
            return Emit(ApplyWhatIfs(m_interventions, r.id));
        }
        case Request::Kind::OpenTwin: {
            if (!m_runner) return Emit({Kind::Error, {}, nullptr, "open a model before its twin", r.id});
            // Opened as the model was, its own folder's config and tokenizer first (Runner: model::HintsBeside).
            if (auto s = m_runner->SetCompare(CompareSpec::Twin(r.arg)); !s) return EmitComparisonFailed(s.error(), r.id);
            m_twin = CompareSpec::Twin(r.arg);  // the timeline's steps compare with it too
            return Emit({Kind::TwinOpened, *m_runner->engine().TwinInfo(), nullptr, "", r.id, NowMs() - r.start_ms});
        }
        case Request::Kind::SetComparison:
            m_twin.reset();  // the runner lets its twin go for another comparison
            if (m_runner)
                if (auto s = m_runner->SetCompare(CompareFor(r.compare, m_run_step)); !s) return EmitComparisonFailed(s.error(), r.id);
            m_compare = r.compare;
            {
                WorkerEvent set{Kind::ComparisonSet, {}, nullptr, "", r.id};
                set.comparison = m_runner ? m_runner->engine().comparison() : CompareKindOf(m_compare.kind).runs;
                return Emit(std::move(set));
            }
        case Request::Kind::CloseTwin:
            m_twin.reset();
            if (m_runner) m_runner->CloseTwin();
            return Emit({Kind::TwinClosed, {}, nullptr, "", r.id});
        case Request::Kind::Analyze: {
            if (!m_runner) return Emit({Kind::Error, {}, nullptr, "no model is open", r.id});
            const std::string kept_key = m_run_step ? StepAnalysisKey(m_opened, m_runner->engine().comparison(), r.arg, r.truncate) : "";
            for (auto it = m_step_analyses.begin(); !kept_key.empty() && it != m_step_analyses.end(); ++it)
                if (it->key == kept_key) {  // a run step shown again: its analysis as it was
                    m_step_analyses.splice(m_step_analyses.begin(), m_step_analyses, it);
                    const auto& a = m_step_analyses.front().analysis;
                    Prefetch(*a);
                    {
                        std::lock_guard<std::mutex> lock(m_mutex);
                        m_latest = a;  // the one shown, whose neighbours' maps are made ahead
                    }
                    WorkerEvent e{Kind::Analysis, {}, a, "", r.id, NowMs() - r.start_ms};
                    e.kept = true;
                    return Emit(std::move(e));
                }
            WorkerEvent::Split split;
            split.queued = r.taken_ms - r.start_ms;
            double lap = NowMs();
            auto since_lap = [&lap] {  // ms since the last lap, which starts a new one
                const double now = NowMs(), ms = now - lap;
                lap = now;
                return ms;
            };
            auto tokens = m_runner->engine().Tokenize(r.arg, r.truncate);  // the window's own words: it has a Truncate box
            split.tokenize = since_lap();
            if (!tokens) return Emit({Kind::Error, {}, nullptr, TokenizeError(tokens.error()), r.id});
            model::AnalyzeOptions options;
            options.cancel = &m_cancel;
            options.progress = &m_progress;
            // Where the predictions are long work ([rows, V] logits a side, ~1 s for 1,000 rows of
            // GPT-2 small), the maps and temperatures are shown first, the predictions after them.
            const int64_t vocab = m_runner->Info().config.vocab_size;
            options.before_predictions = [&](const model::Analysis& a) {
                if (static_cast<int64_t>(a.n_tokens - a.reused_rows) * vocab >= (int64_t{4} << 20) && !Superseded())
                    Emit({Kind::Analysis, {}, Share(a), "", r.id, NowMs() - r.start_ms});
            };
            m_progress = 0.0f;
            auto analysis = m_runner->Analyze(*tokens, options);
            if (!analysis) {
                if (m_cancel) return;  // superseded: a newer request is queued
                return Emit({Kind::Error, {}, nullptr, analysis.error().message, r.id});
            }
            m_reserve = true;
            split.analyze = since_lap();
            auto shared = Share(std::move(*analysis));
            split.map = since_lap();
            split.timed = true;
            if (!kept_key.empty()) KeepStepAnalysis(kept_key, shared, m_runner->Info().config.HeadSize());
            WorkerEvent e{Kind::Analysis, {}, std::move(shared), "", r.id, NowMs() - r.start_ms};
            e.split = split;
            return Emit(std::move(e));
        }
        case Request::Kind::SetInterventions: {
            if (m_runner) return Emit(ApplyWhatIfs(r.interventions, r.id));
            m_interventions = r.interventions;  // applied when a model opens, those that fit it
            WorkerEvent e{Kind::InterventionsSet, {}, nullptr, "", r.id};
            e.interventions = m_interventions;
            return Emit(std::move(e));
        }
        case Request::Kind::RankHeads: return RankHeadsJob(r);
        case Request::Kind::Continue: return ContinueJob(r);
        case Request::Kind::Lens: return LensJob(r);
        case Request::Kind::LensAt: return LensAtPosition(r);
        case Request::Kind::Timeline: return TimelineJob(r);
    }
}

WorkerEvent InferenceWorker::ApplyWhatIfs(const std::vector<model::Intervention>& list, uint64_t id) {
    // Those that fit the model are kept (a session's list saved with a model of another shape: one
    // that did not fit dropped them all), those that do not named; a list the engine refuses (the
    // scales together) leaves it as it was.
    WorkerEvent e{WorkerEvent::Kind::InterventionsSet, {}, nullptr, "", id};
    const model::ModelConfig& c = m_runner->Info().config;
    std::vector<model::Intervention> fit, dropped;
    for (const model::Intervention& x : list) (x.layer < c.n_layer && x.head < c.n_head ? fit : dropped).push_back(x);
    if (auto s = m_runner->engine().SetInterventions(fit); !s) {
        e.error = s.error();
    } else {
        m_interventions = std::move(fit);
        if (!dropped.empty())
            e.error = "dropped the what-ifs " + model::FormatInterventions(dropped) + ": past the model's " + std::to_string(c.n_layer) +
                      " layers x " + std::to_string(c.n_head) + " heads";
    }
    e.interventions = m_interventions;
    return e;
}

void InferenceWorker::TimelineJob(const Request& r) {
    using Kind = WorkerEvent::Kind;
    auto found = FindRunSteps(r.arg);
    if (!found) return Emit({Kind::Error, {}, nullptr, found.error(), r.id});
    std::vector<std::pair<RunStep, bool>> steps;  // the run's steps, then the compare run's (true)
    for (const RunStep& s : *found) steps.push_back({s, false});
    if (!r.compare_run.empty()) {
        auto more = FindRunSteps(r.compare_run);
        if (!more) return Emit({Kind::Error, {}, nullptr, "compare run: " + more.error(), r.id});
        for (const RunStep& s : *more) steps.push_back({s, true});
    }
    RunTrack track;
    // Each step against the comparison shown: the twin open beside the model (its steps ran against
    // tau = 1 under a twin), a big model's layer-local one; one comparison a timeline (one stopped by
    // a change of comparison starts again).
    CompareSpec step_compare = m_twin ? *m_twin : CompareFor(m_compare, /*run_step=*/true);
    if (step_compare.kind == CompareKind::Global && m_runner && m_runner->engine().comparison() == model::Comparison::LayerLocal)
        step_compare = CompareKind::LayerLocal;
    const std::string compare_spec = std::to_string(static_cast<int>(step_compare.kind)) + '\n' + step_compare.twin_dir + '\n' + step_compare.base_dir;
    if (r.resume && r.resume->timeline.dir == r.arg && (r.resume->compare ? r.resume->compare->dir : "") == r.compare_run &&
        r.resume->text == r.text && r.resume->total == steps.size() && r.resume->lens == r.lens_compare && r.resume->compare_spec == compare_spec)
        track = *r.resume;
    track.compare_spec = compare_spec;
    track.timeline.dir = r.arg;
    track.timeline.label = "run";
    track.timeline.name = RunLegendName(r.arg, r.compare_run, "run");
    if (!r.compare_run.empty() && !track.compare) {
        track.compare.emplace();
        track.compare->dir = r.compare_run;
        track.compare->label = "compare run";
        track.compare->name = RunLegendName(r.compare_run, r.arg, "compare run");
    }
    track.text = r.text;
    track.lens = r.lens_compare;
    track.total = steps.size();
    auto post = [&] {
        WorkerEvent e{Kind::Timeline, {}, nullptr, "", r.id, NowMs() - r.start_ms};
        e.timeline = std::make_shared<const RunTrack>(track);
        Emit(std::move(e));
    };
    // Every step set against the step shown where the open model is one of the run's: a step of
    // another shape before it was the run's model, and the step shown was listed as failed.
    if (track.timeline.steps.empty() && track.timeline.model_from.empty() && m_runner) {
        std::error_code ec;
        for (const auto& [step, of_compare_run] : steps)
            if (!of_compare_run && std::filesystem::equivalent(step.path, m_opened.path, ec))
                track.timeline.Expect(RunModelOf(m_runner->Info().config), "the step shown, " + std::to_string(step.step) + " (" +
                                                                               model::EscapeForMessage(std::filesystem::path(step.path).filename().string()) + ")");
    }
    m_progress = static_cast<float>(track.tried) / static_cast<float>(steps.size());
    for (size_t k = track.tried; k < steps.size(); ++k) {
        if (Superseded()) return;  // what was posted stays, shown as stopped
        const RunStep& step = steps[k].first;
        RunTimeline& timeline = steps[k].second ? *track.compare : track.timeline;
        const std::string file = std::filesystem::path(step.path).filename().string();
        auto fail = [&](const std::string& why) {
            track.failed.push_back(std::string(steps[k].second ? "compare run: " : "") + "step " + std::to_string(step.step) + " (" +
                                   model::EscapeForMessage(file) + "): " + why);
        };
        {  // the step's model is let go before the next one opens
            ModelSpec spec = m_opened;
            spec.path = step.path;
            spec.hints = HintsWithBase(m_opened.hints, step.path, CompareFor(m_compare, true));  // as the shown step opened
            auto runner = Runner::Open(spec);
            std::string misfit;  // another model than the run's first step: said before it runs
            if (!runner) {
                fail(runner.error().message);
            } else if (const model::ModelConfig& c = (*runner)->Info().config;
                       !(misfit = timeline.Fits(RunModelOf(c), {})).empty()) {
                fail(misfit);
            } else if (auto s = (*runner)->SetCompare(step_compare); !s) {
                fail(s.error().message);
            } else if (auto tokens = (*runner)->engine().Tokenize(r.text, r.truncate); !tokens) {
                fail(TokenizeError(tokens.error()));
            } else if (tokens->ids.size() < 2) {  // so for every step: said once in the Run tab, as export --run says it
                track.failed = {kRunNeedsTwoTokens};
                track.tried = track.total;
                track.done = true;
                return post();
            } else {
                model::AnalyzeOptions options;
                options.cancel = &m_cancel;
                auto a = (*runner)->Analyze(*tokens, options);
                if (!a && m_cancel) return;
                // Why the analysis is not one of this timeline's: it overflowed (a run that diverged:
                // its points were made up of NaN rows, as `export --run` says), another model or tokens.
                auto misfit = [&]() -> std::string {
                    if (!a) return "";
                    if (std::string why = NonFiniteAnalysis(*a); !why.empty()) return why;
                    if (std::string why = timeline.Fits(RunModelOf(c), a->tokens.ids); !why.empty()) return why;
                    return steps[k].second ? track.timeline.CompareRunMisfit(a->n_layer, a->n_head, a->tokens.ids) : "";
                };
                if (std::string why = misfit(); !why.empty()) {
                    fail(why);
                } else if (model::Result<std::vector<std::vector<float>>> lens = a && r.lens_compare ? StepLens((*runner)->engine(), *a)
                                                                                                            : std::vector<std::vector<float>>{};
                           a && !lens && m_cancel) {
                    return;
                } else if (a && !lens) {
                    fail("the lens: " + lens.error());  // not added: every step of the timeline has its lens
                } else if (a) {
                    if (r.lens_compare) timeline.AddLens(std::move(*lens));
                    timeline.Add(step.step, file, *a);
                    if (!steps[k].second && track.compared.empty()) track.compared = LensKey(*a);
                    // The run's own step, as the Run tab would show it (no what-ifs here): kept, so
                    // that the slider shows it at once.
                    if (!steps[k].second && m_interventions.empty())
                        KeepStepAnalysis(StepAnalysisKey(spec, (*runner)->engine().comparison(), r.text, r.truncate),
                                         std::make_shared<const model::Analysis>(std::move(*a)), (*runner)->Info().config.HeadSize());
                } else {
                    fail(a.error().message);
                }
            }
        }
        m_progress = static_cast<float>(k + 1) / static_cast<float>(steps.size());
        track.tried = k + 1;
        track.done = k + 1 == steps.size();
        post();
    }
}

model::Result<std::vector<std::vector<float>>> InferenceWorker::StepLens(model::Engine& engine, const model::Analysis& a) {
    auto sides = RunLensSides(engine, a, {}, &m_cancel);  // as `export --run --lens`: SSA, its comparison, the base
    if (!sides) return model::Fail(sides.error());
    std::vector<std::vector<float>> out;
    for (const auto& side : *sides) {
        std::vector<float> by_layer;
        for (double v : LensLossMeans(*side)) by_layer.push_back(static_cast<float>(v));
        out.push_back(std::move(by_layer));
    }
    return out;
}

std::vector<model::MapSide> InferenceWorker::LensSides(const Request& r) const {
    std::vector<model::MapSide> sides = {model::MapSide::Ssa};
    if (r.lens_compare) sides.push_back(model::MapSide::Compare);
    if (r.lens_compare && m_runner->engine().comparison() == model::Comparison::Base) sides.push_back(model::MapSide::Base);
    return sides;
}

void InferenceWorker::LensJob(const Request& r) {
    using Kind = WorkerEvent::Kind;
    if (!m_runner) return Emit({Kind::Error, {}, nullptr, "no model is open", r.id});
    auto pair = std::make_shared<LensPair>();
    pair->ids = r.ids;
    pair->model_dir = m_runner->Info().dir;
    pair->compare_label = r.compare_label;
    m_progress = 0.0f;
    const std::vector<model::MapSide> sides = LensSides(r);
    for (size_t k = 0; k < sides.size(); ++k) {
        const model::MapSide side = sides[k];
        model::LensOptions options;  // one fraction over every side (each side's from 0 made the bar run back)
        options.cancel = &m_cancel;
        options.progress = &m_progress;
        options.progress_from = static_cast<float>(k) / sides.size();
        options.progress_span = 1.0f / sides.size();
        auto lens = m_runner->engine().RunLens(r.ids, side, options);
        if (!lens) {
            if (m_cancel) return;  // superseded
            return Emit({Kind::Error, {}, nullptr, "the lens: " + lens.error(), r.id});
        }
        if (side == model::MapSide::Ssa) pair->ssa = std::move(*lens);
        else if (side == model::MapSide::Compare) pair->compare = std::move(*lens);
        else pair->base = std::move(*lens);
    }
    WorkerEvent e{Kind::Lens, {}, nullptr, "", r.id, NowMs() - r.start_ms};
    e.lens = std::move(pair);
    Emit(std::move(e));
}

void InferenceWorker::LensAtPosition(const Request& r) {
    using Kind = WorkerEvent::Kind;
    if (!m_runner) return Emit({Kind::Error, {}, nullptr, "no model is open", r.id});
    auto pair = std::make_shared<LensAtPair>();
    pair->ids = r.ids;
    pair->model_dir = m_runner->Info().dir;
    pair->compare_label = r.compare_label;
    pair->position = r.position;
    const std::vector<model::MapSide> sides = LensSides(r);
    auto attributed = AttributeAt(m_runner->engine(), r.ids, sides, r.position, r.lens_target);
    if (!attributed) return Emit({Kind::Error, {}, nullptr, "the lens: " + attributed.error(), r.id});
    pair->target = attributed->target;
    pair->versus = attributed->versus;
    for (size_t k = 0; k < sides.size() && k < attributed->sides.size(); ++k) {
        model::LensAt& at = attributed->sides[k];
        if (sides[k] == model::MapSide::Ssa) pair->ssa = std::move(at);
        else if (sides[k] == model::MapSide::Compare) pair->compare = std::move(at);
        else pair->base = std::move(at);
    }
    WorkerEvent e{Kind::LensAt, {}, nullptr, "", r.id, NowMs() - r.start_ms};
    e.lens_at = std::move(pair);
    Emit(std::move(e));
}

std::shared_ptr<const model::Analysis> InferenceWorker::Share(model::Analysis analysis) {
    auto shared = std::make_shared<const model::Analysis>(std::move(analysis));
    Prefetch(*shared);
    std::lock_guard<std::mutex> lock(m_mutex);
    m_latest = shared;
    return shared;
}

bool InferenceWorker::NeighboursWanted() const {
    const auto a = m_latest.lock();
    return a && (a.get() != m_neighbours_of || m_shown_layer.load() * a->n_head + m_shown_head.load() != m_neighbours_for);
}

void InferenceWorker::PrefetchNeighbours() {
    std::shared_ptr<const model::Analysis> a;
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        a = m_latest.lock();
    }
    if (!a) return;
    const int layer = m_shown_layer.load(), head = m_shown_head.load(), L = a->n_layer, H = a->n_head;
    m_neighbours_of = a.get();
    m_neighbours_for = layer * H + head;
    if (layer >= L || head >= H) return;
    // The arrow keys' next heads, the most likely first (right: the next head), as many as the map
    // cache holds beside the shown one: every side's map.
    const HeadRef next[] = {{layer, (head + 1) % H}, {layer, (head + H - 1) % H}, {(layer + 1) % L, head}, {(layer + L - 1) % L, head}};
    const std::vector<model::MapSide> sides = ShownSides(*a);
    const size_t map_bytes = sides.size() * model::HeadMapBytes(a->n_tokens);
    const size_t fit = model::kMapCacheBytes / std::max<size_t>(map_bytes, 1), room = fit > 1 ? std::min(std::size(next), fit - 1) : 0;
    for (size_t i = 0; i < room && !Superseded(); ++i) {
        if (m_shown_layer.load() != layer || m_shown_head.load() != head) return;  // another head shown: start again from it
        for (model::MapSide side : sides) a->Cells(side, next[i].layer, next[i].head);
    }
}

void InferenceWorker::Prefetch(const model::Analysis& a) const {
    // The map view's head, rebuilt here so the UI thread finds it cached (62 ms at 2,048 tokens on
    // a CPU core would be a stalled frame there); where the view reads it (a GPU's map stays there).
    const int layer = m_shown_layer.load(), head = m_shown_head.load();
    for (model::MapSide side : ShownSides(a)) a.Cells(side, layer, head);
}

std::string InferenceWorker::StepAnalysisKey(const ModelSpec& spec, model::Comparison comparison, const std::string& text, bool truncate) const {
    return SpecKey(spec) + '\n' + std::to_string(static_cast<int>(comparison)) + '\n' + m_compare.twin_dir + '\n' + m_compare.base_dir + '\n' +
           model::FormatInterventions(m_interventions) + '\n' + (truncate ? "t" : "f") + '\n' + text;
}

namespace {

// What a kept analysis holds, roughly: its host arrays, thumbnails and the q and k its maps are
// rebuilt from (both sides), and the map cache it may fill.
size_t AnalysisBytes(const model::Analysis& a, int head_size) {
    size_t floats = static_cast<size_t>(a.n_layer) * a.n_head * a.n_tokens * (40 + 4 * static_cast<size_t>(head_size));
    for (const auto& band : a.thumbnails.bands)
        for (const auto& cells : band->cells) floats += cells.size();
    return floats * sizeof(float) + model::kMapCacheBytes / 4;
}

}  // namespace

void InferenceWorker::KeepStepAnalysis(std::string key, std::shared_ptr<const model::Analysis> analysis, int head_size) {
    // As much as a run's steps may hold: an eighth of the machine's memory, at most 512 MiB.
    const size_t budget = std::min<size_t>(size_t{512} << 20, model::PhysicalMemoryBytes() / 8);
    const size_t bytes = AnalysisBytes(*analysis, head_size);
    if (bytes > budget / 2) return;  // one that would crowd out the rest is not kept
    m_step_analyses.push_front({std::move(key), std::move(analysis), bytes});
    m_step_analyses_bytes += bytes;
    while (m_step_analyses_bytes > budget) {
        m_step_analyses_bytes -= m_step_analyses.back().bytes;
        m_step_analyses.pop_back();
    }
}

bool InferenceWorker::Superseded() {
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_cancel || m_stop || !m_queue.empty();
}

void InferenceWorker::RankHeadsJob(const Request& r) {
    using Kind = WorkerEvent::Kind;
    if (!m_runner) return Emit({Kind::Error, {}, nullptr, "no model is open", r.id});
    model::Engine& engine = m_runner->engine();
    auto tokens = engine.Tokenize(r.arg, r.truncate);
    if (!tokens) return Emit({Kind::Error, {}, nullptr, TokenizeError(tokens.error()), r.id});
    model::AnalyzeOptions options;
    options.cancel = &m_cancel;
    HeadImpacts impacts;
    auto post = [&] {
        WorkerEvent e{Kind::HeadImpacts, {}, nullptr, "", r.id, NowMs() - r.start_ms};
        e.impacts = std::make_shared<const HeadImpacts>(impacts);
        Emit(std::move(e));
    };
    m_progress = 0.0f;
    RankOptions what{/*split=*/true, /*drift=*/true};  // as the command line's, so the window's export holds the same
    what.progress = &m_progress;  // pass by pass (a head is three and more)
    auto measured = MeasureHeadImpacts(engine, *tokens, options, &impacts, [&](const HeadImpacts&) {
        post();  // (so_far is `impacts`)
        return !Superseded();
    }, what);
    impacts.cancelled = !impacts.done;
    post();  // ends the ranking in the window (a scripted run waits for it), then says why where it failed
    if (!measured && !Superseded()) Emit({Kind::Error, {}, nullptr, measured.error(), r.id});
}

void InferenceWorker::ContinueJob(const Request& r) {
    using Kind = WorkerEvent::Kind;
    // Every way out ends with a `last` event, so the UI always learns that Continue stopped.
    auto finish = [&](std::string error) {
        WorkerEvent e{Kind::Generated, {}, nullptr, std::move(error), r.id, NowMs() - r.start_ms};
        e.last = true;
        Emit(std::move(e));
    };
    if (!m_runner) return finish("no model is open");
    auto tokens = m_runner->engine().Tokenize(r.arg, r.truncate);
    if (!tokens) return finish(TokenizeError(tokens.error()));
    std::string text = r.arg;
    if (!tokens->offsets.empty() && tokens->offsets.back().second != text.size())
        return finish("Continue appends to the end of the text, but only its first " + std::to_string(tokens->ids.size()) +
                      " tokens fit the context");
    // Each step's analysis goes to the UI as it comes; any request stops the loop between steps.
    GenerationHooks hooks;
    hooks.options.cancel = &m_cancel;
    hooks.stop = [this] { return Superseded(); };
    hooks.analyse_each_step = true;
    hooks.on_step = [&](GenerationStep& step) {
        text += step.piece;
        WorkerEvent e{Kind::Generated, {}, Share(std::move(*step.analysis)), "", r.id, NowMs() - r.start_ms};
        e.text = text;
        e.last = step.index + 1 == r.generate.tokens;
        Emit(std::move(e));
    };
    auto generated = m_runner->Generate(&*tokens, r.generate, hooks);
    if (!generated) return finish(m_cancel ? "" : generated.error().message);
    switch (generated->end) {
        case Generation::End::Done: return;  // its last step said so
        case Generation::End::ContextFull:
            return finish("Continue stopped: the text fills the model's context (" + std::to_string(m_runner->Info().config.n_positions) + " tokens)");
        case Generation::End::Stopped: return finish("");  // the user typed, or asked for something else
    }
}

}  // namespace app
