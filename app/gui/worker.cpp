#include "app/gui/worker.h"

#include <chrono>

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
        if (request.kind == Request::Kind::Analyze) {
            // Only the newest text matters: drop queued analyses.
            for (auto it = m_queue.begin(); it != m_queue.end();)
                it = it->kind == Request::Kind::Analyze ? m_queue.erase(it) : it + 1;
        } else {
            m_cancel = true;  // a new model or twin makes the running analysis worthless
        }
        if (m_in_job) m_cancel = true;  // any request stops a job (a keystroke stops Continue)
        m_queue.push_back(std::move(request));
        m_busy = true;
    }
    m_cv.notify_one();
    return id;
}

uint64_t InferenceWorker::OpenModel(const std::string& dir, const std::string& device, const model::ConfigHints& hints,
                                    const std::string& dtype) {
    Request r(Request::Kind::OpenModel, dir);
    r.device = device;
    r.hints = hints;
    r.dtype = dtype;
    return Push(std::move(r));
}
uint64_t InferenceWorker::OpenTwin(const std::string& dir, const model::ConfigHints& hints) {
    Request r(Request::Kind::OpenTwin, dir);
    r.hints = hints;
    return Push(std::move(r));
}
uint64_t InferenceWorker::CloseTwin() { return Push(Request(Request::Kind::CloseTwin)); }
uint64_t InferenceWorker::SetComparison(model::Comparison comparison) {
    Request r(Request::Kind::SetComparison);
    r.comparison = comparison;
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
uint64_t InferenceWorker::Continue(const std::string& text, bool truncate, const GenerateSettings& settings) {
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

void InferenceWorker::Emit(WorkerEvent event) {
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_events.push_back(std::move(event));
    }
    if (m_wake) m_wake();
}

void InferenceWorker::Loop() {
    // The UI thread (and a software GL rasteriser, where there is one) keeps a core. Re-measured
    // with OpenMP OpenBLAS on 2 cores (issue 27, README Benchmarks): 2 compute threads typed at the
    // end of 1,000 tokens of GPT-2 small at 290 ms keystroke to pixels against 133 ms on 1, and
    // though they ran a TinyLlama-sized model's first analysis 1.5x faster, the UI's frame work
    // p99 went over 8 ms. SSAVIZ_THREADS=N overrides.
    model::SetComputeThreads(model::ComputeThreadsFromEnvironment(static_cast<int>(std::thread::hardware_concurrency()) - 1));
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
            if (!m_busy && m_reserve && m_engine) {  // idle: the next keystroke's memory, until a request comes
                m_readying = true;
                lock.unlock();
                try {
                    m_reserve = !m_engine->ReserveForEdits([this] { return Superseded(); });
                } catch (const std::exception&) {  // out of memory: the edit will try again, and say so
                    m_reserve = false;
                }
                lock.lock();
                m_readying = false;
                wake_ui();
            }
            m_cv.wait(lock, [this] { return m_stop || !m_queue.empty(); });
            if (m_stop) return;
            request = std::move(m_queue.front());
            m_queue.pop_front();
            m_cancel = false;
            m_busy = true;
            m_in_job = request.kind == Request::Kind::RankHeads || request.kind == Request::Kind::Continue;
        }
        try {
            Handle(request);
        } catch (const std::exception& e) {  // c10::Error and friends: report, never crash the app
            Emit({WorkerEvent::Kind::Error, {}, nullptr, std::string("internal error: ") + e.what(), request.id});
        }
        m_in_job = false;
    }
}

void InferenceWorker::Handle(const Request& r) {
    using Kind = WorkerEvent::Kind;
    switch (r.kind) {
        case Request::Kind::OpenModel: {
            auto engine = model::Engine::Open(r.arg, r.device, r.hints, r.dtype);
            if (!engine) return Emit({Kind::Error, {}, nullptr, engine.error(), r.id});
            m_engine = std::move(*engine);
            // A big model opens with the cheap comparison; m_comparison stays what was asked for.
            model::Comparison comparison = m_comparison;
            if (comparison == model::Comparison::Counterfactual && ScaleOf(m_engine->Info(), m_big_parameters).big)
                comparison = model::Comparison::LayerLocal;
            if (auto s = m_engine->SetComparison(comparison); !s) m_comparison = model::Comparison::Counterfactual;
            m_device = r.device;
            WorkerEvent opened{Kind::ModelOpened, m_engine->Info(), nullptr, "", r.id, NowMs() - r.start_ms};
            opened.comparison = m_engine->comparison();
            auto vocab = std::make_shared<std::vector<std::string>>(m_engine->tokenizer().VocabSize());
            for (size_t id = 0; id < vocab->size(); ++id) {
                auto text = m_engine->tokenizer().Decode({static_cast<int32_t>(id)});
                if (!text) return Emit({Kind::Error, {}, nullptr, text.error(), r.id});
                (*vocab)[id] = std::move(*text);
            }
            opened.vocab = std::move(vocab);
            Emit(std::move(opened));
            if (m_interventions.empty()) return;
            WorkerEvent e{Kind::InterventionsSet, {}, nullptr, "", r.id};
            if (auto s = m_engine->SetInterventions(m_interventions); !s) {
                e.error = "dropped the what-ifs " + model::FormatInterventions(m_interventions) + ": " + s.error();
                m_interventions.clear();
            }
            e.interventions = m_interventions;
            return Emit(std::move(e));
        }
        case Request::Kind::OpenTwin: {
            if (!m_engine) return Emit({Kind::Error, {}, nullptr, "open a model before its twin", r.id});
            if (auto s = m_engine->OpenTwin(r.arg, r.hints); !s) return Emit({Kind::Error, {}, nullptr, s.error(), r.id});
            return Emit({Kind::TwinOpened, *m_engine->TwinInfo(), nullptr, "", r.id, NowMs() - r.start_ms});
        }
        case Request::Kind::SetComparison:
            m_comparison = r.comparison;
            if (m_engine)
                if (auto s = m_engine->SetComparison(r.comparison); !s) return Emit({Kind::Error, {}, nullptr, s.error(), r.id});
            {
                WorkerEvent set{Kind::ComparisonSet, {}, nullptr, "", r.id};
                set.comparison = m_engine ? m_engine->comparison() : m_comparison;
                return Emit(std::move(set));
            }
        case Request::Kind::CloseTwin:
            if (m_engine) m_engine->CloseTwin();
            return Emit({Kind::TwinClosed, {}, nullptr, "", r.id});
        case Request::Kind::Analyze: {
            if (!m_engine) return Emit({Kind::Error, {}, nullptr, "no model is open", r.id});
            auto tokens = m_engine->Tokenize(r.arg, r.truncate);
            if (!tokens) return Emit({Kind::Error, {}, nullptr, tokens.error(), r.id});
            model::AnalyzeOptions options;
            options.cancel = &m_cancel;
            options.progress = &m_progress;
            // Where the predictions are long work ([rows, V] logits a side, ~1 s for 1,000 rows of
            // GPT-2 small), the maps and temperatures are shown first, the predictions after them.
            const int64_t vocab = m_engine->Info().config.vocab_size;
            options.before_predictions = [&](const model::Analysis& a) {
                if (static_cast<int64_t>(a.n_tokens - a.reused_rows) * vocab >= (int64_t{4} << 20) && !Superseded())
                    Emit({Kind::Analysis, {}, Share(a), "", r.id, NowMs() - r.start_ms});
            };
            m_progress = 0.0f;
            auto analysis = m_engine->Analyze(*tokens, options);
            if (!analysis) {
                if (m_cancel) return;  // superseded: a newer request is queued
                return Emit({Kind::Error, {}, nullptr, analysis.error(), r.id});
            }
            m_reserve = true;
            return Emit({Kind::Analysis, {}, Share(std::move(*analysis)), "", r.id, NowMs() - r.start_ms});
        }
        case Request::Kind::SetInterventions: {
            WorkerEvent e{Kind::InterventionsSet, {}, nullptr, "", r.id};
            if (!m_engine) {
                m_interventions = r.interventions;  // applied when a model opens, if they fit it
            } else if (auto s = m_engine->SetInterventions(r.interventions); s) {
                m_interventions = r.interventions;
            } else {
                e.error = s.error();  // the engine keeps its list
            }
            e.interventions = m_interventions;
            return Emit(std::move(e));
        }
        case Request::Kind::RankHeads: return RankHeadsJob(r);
        case Request::Kind::Continue: return ContinueJob(r);
    }
}

std::shared_ptr<const model::Analysis> InferenceWorker::Share(model::Analysis analysis) {
    auto shared = std::make_shared<const model::Analysis>(std::move(analysis));
    // The map view's head, rebuilt here so the UI thread finds it cached (62 ms at 2,048 tokens on
    // a CPU core would be a stalled frame there).
    const int layer = m_shown_layer.load(), head = m_shown_head.load();
    shared->Map(model::MapSide::Ssa, layer, head);
    shared->Map(model::MapSide::Compare, layer, head);
    return shared;
}

bool InferenceWorker::Superseded() {
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_cancel || m_stop || !m_queue.empty();
}

void InferenceWorker::RankHeadsJob(const Request& r) {
    using Kind = WorkerEvent::Kind;
    if (!m_engine) return Emit({Kind::Error, {}, nullptr, "no model is open", r.id});
    auto tokens = m_engine->Tokenize(r.arg, r.truncate);
    if (!tokens) return Emit({Kind::Error, {}, nullptr, tokens.error(), r.id});
    model::AnalyzeOptions options;
    options.cancel = &m_cancel;
    HeadImpacts impacts;
    impacts.on_top = m_interventions;
    const model::ModelConfig& c = m_engine->Info().config;
    impacts.total = c.n_layer * c.n_head;
    auto post = [&] {
        WorkerEvent e{Kind::HeadImpacts, {}, nullptr, "", r.id, NowMs() - r.start_ms};
        e.impacts = std::make_shared<const HeadImpacts>(impacts);
        Emit(std::move(e));
    };
    m_progress = 0.0f;
    auto base = m_engine->Analyze(*tokens, options);  // usually the shown analysis, reused whole
    if (base) {
        impacts.baseline = model::MeanLoss(base->loss);
        for (int l = 0; l < c.n_layer && !Superseded(); ++l) {
            for (int h = 0; h < c.n_head && !Superseded(); ++h) {
                std::vector<model::Intervention> with = m_interventions;
                with.push_back({model::Intervention::Kind::Ablate, l, h, 0.0f});
                if (!m_engine->SetInterventions(with)) continue;  // cannot happen: l and h are the model's
                auto a = m_engine->Analyze(*tokens, options);
                if (!a) break;  // cancelled
                const float loss = model::MeanLoss(a->loss);
                impacts.heads.push_back({l, h, loss, loss - impacts.baseline});
                m_progress = static_cast<float>(impacts.heads.size()) / static_cast<float>(impacts.total);
                post();
            }
        }
    }
    (void)m_engine->SetInterventions(m_interventions);  // the next analysis is the user's again
    impacts.done = static_cast<int>(impacts.heads.size()) == impacts.total;
    impacts.cancelled = !impacts.done;
    post();
}

void InferenceWorker::ContinueJob(const Request& r) {
    using Kind = WorkerEvent::Kind;
    // Every way out ends with a `last` event, so the UI always learns that Continue stopped.
    auto finish = [&](std::string error) {
        WorkerEvent e{Kind::Generated, {}, nullptr, std::move(error), r.id, NowMs() - r.start_ms};
        e.last = true;
        Emit(std::move(e));
    };
    if (!m_engine) return finish("no model is open");
    auto tokens = m_engine->Tokenize(r.arg, r.truncate);
    if (!tokens) return finish(tokens.error());
    std::string text = r.arg;
    if (!tokens->offsets.empty() && tokens->offsets.back().second != text.size())
        return finish("Continue appends to the end of the text, but only its first " + std::to_string(tokens->ids.size()) +
                      " tokens fit the context");
    model::AnalyzeOptions options;
    options.cancel = &m_cancel;
    auto first = m_engine->Analyze(*tokens, options);  // usually the shown analysis, reused whole
    if (!first) return finish(m_cancel ? "" : first.error());
    std::vector<float> logits = std::move(first->next_logits);
    const int context = m_engine->Info().config.n_positions;
    const size_t vocab = m_engine->tokenizer().VocabSize();
    uint64_t rng = r.generate.seed;
    for (int step = 0; step < r.generate.tokens; ++step) {
        if (static_cast<int>(tokens->ids.size()) >= context)
            return finish("Continue stopped: the text fills the model's context (" + std::to_string(context) + " tokens)");
        if (Superseded()) return finish("");  // the user typed, or asked for something else
        const int32_t id = model::NextToken(logits, vocab, r.generate.temperature, r.generate.top_k, &rng);
        auto piece = model::AppendToken(m_engine->tokenizer(), id, &*tokens);
        if (!piece) return finish(piece.error());
        text += *piece;
        auto next = m_engine->Analyze(*tokens, options);  // incremental: only the new row is computed
        if (!next) return finish(m_cancel ? "" : next.error());
        logits = next->next_logits;
        WorkerEvent e{Kind::Generated, {}, Share(std::move(*next)), "", r.id, NowMs() - r.start_ms};
        e.text = text;
        e.last = step + 1 == r.generate.tokens;
        Emit(std::move(e));
    }
}

}  // namespace app
