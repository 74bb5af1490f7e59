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
        m_queue.push_back(std::move(request));
        m_busy = true;
    }
    m_cv.notify_one();
    return id;
}

uint64_t InferenceWorker::OpenModel(const std::string& dir, const std::string& device, const model::ConfigHints& hints,
                                    const std::string& dtype) {
    return Push({Request::Kind::OpenModel, 0, dir, device, false, 0, hints, dtype});
}
uint64_t InferenceWorker::OpenTwin(const std::string& dir, const model::ConfigHints& hints) {
    return Push({Request::Kind::OpenTwin, 0, dir, "", false, 0, hints, "f32"});
}
uint64_t InferenceWorker::CloseTwin() { return Push({Request::Kind::CloseTwin, 0, "", "", false, 0, {}, "f32"}); }
uint64_t InferenceWorker::SetComparison(model::Comparison comparison) {
    Request r{Request::Kind::SetComparison, 0, "", "", false, 0, {}, "f32"};
    r.comparison = comparison;
    return Push(std::move(r));
}
uint64_t InferenceWorker::Analyze(const std::string& text, bool truncate) {
    Request r{Request::Kind::Analyze, 0, text, "", false, 0, {}, "f32"};
    r.truncate = truncate;
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
    // The UI thread (and a software GL rasteriser, where there is one) keeps a core: on 2 cores,
    // 2 compute threads made keystroke-to-pixels ~4x slower than 1 (bench/gui_latency.sh).
    model::SetComputeThreads(model::ComputeThreadsFromEnvironment(static_cast<int>(std::thread::hardware_concurrency()) - 1));
    for (;;) {
        Request request;
        {
            std::unique_lock<std::mutex> lock(m_mutex);
            m_busy = !m_queue.empty();
            if (!m_busy && m_wake) {
                lock.unlock();
                m_wake();  // let the UI see that we went idle
                lock.lock();
            }
            m_cv.wait(lock, [this] { return m_stop || !m_queue.empty(); });
            if (m_stop) return;
            request = std::move(m_queue.front());
            m_queue.pop_front();
            m_cancel = false;
            m_busy = true;
        }
        try {
            Handle(request);
        } catch (const std::exception& e) {  // c10::Error and friends: report, never crash the app
            Emit({WorkerEvent::Kind::Error, {}, nullptr, std::string("internal error: ") + e.what(), request.id});
        }
    }
}

void InferenceWorker::Handle(const Request& r) {
    using Kind = WorkerEvent::Kind;
    switch (r.kind) {
        case Request::Kind::OpenModel: {
            auto engine = model::Engine::Open(r.arg, r.device, r.hints, r.dtype);
            if (!engine) return Emit({Kind::Error, {}, nullptr, engine.error(), r.id});
            m_engine = std::move(*engine);
            if (auto s = m_engine->SetComparison(m_comparison); !s) m_comparison = model::Comparison::Counterfactual;
            m_device = r.device;
            return Emit({Kind::ModelOpened, m_engine->Info(), nullptr, "", r.id, NowMs() - r.start_ms});
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
            return Emit({Kind::ComparisonSet, {}, nullptr, "", r.id});
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
            m_progress = 0.0f;
            auto analysis = m_engine->Analyze(*tokens, options);
            if (!analysis) {
                if (m_cancel) return;  // superseded: a newer request is queued
                return Emit({Kind::Error, {}, nullptr, analysis.error(), r.id});
            }
            auto shared = std::make_shared<const model::Analysis>(std::move(*analysis));
            // The map view's head, rebuilt here so the UI thread finds it cached (62 ms at 2,048
            // tokens on a CPU core would be a stalled frame there).
            const int layer = m_shown_layer.load(), head = m_shown_head.load();
            shared->Map(model::MapSide::Ssa, layer, head);
            shared->Map(model::MapSide::Compare, layer, head);
            return Emit({Kind::Analysis, {}, shared, "", r.id, NowMs() - r.start_ms});
        }
    }
}

}  // namespace app
