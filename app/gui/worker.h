// The inference worker: one thread that owns the model (model::Engine) and runs requests off the
// UI thread. Opening a model and analysing text are queued; a newer analysis request replaces a
// queued one, so typing never queues work. A running analysis finishes (so fast typing still
// shows results, each at most one request behind); opening a model cancels it between layers.
// Results come back as immutable shared pointers the UI takes at the start of a frame.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "model/nn/analysis.h"

namespace app {

struct WorkerEvent {
    enum class Kind { ModelOpened, TwinOpened, TwinClosed, ComparisonSet, Analysis, Error };
    Kind kind = Kind::Error;
    std::optional<model::ModelInfo> info;               // ModelOpened, TwinOpened
    std::shared_ptr<const model::Analysis> analysis;    // Analysis
    std::string error;                                  // Error: one line
    uint64_t request = 0;                               // the request it answers
    double latency_ms = 0;                              // from the request to this result
};

class InferenceWorker {
public:
    // `wake` is called from the worker thread after each event (e.g. glfwPostEmptyEvent).
    explicit InferenceWorker(std::function<void()> wake = {});
    ~InferenceWorker();  // cancels, joins
    InferenceWorker(const InferenceWorker&) = delete;
    InferenceWorker& operator=(const InferenceWorker&) = delete;

    // `hints`: what a checkpoint without config.json cannot tell (n_head, SSA forms).
    uint64_t OpenModel(const std::string& dir, const std::string& device, const model::ConfigHints& hints = {},
                       const std::string& dtype = "f32");
    uint64_t OpenTwin(const std::string& dir, const model::ConfigHints& hints = {});
    uint64_t CloseTwin();
    // Without a twin: the tau = 1 counterfactual (a second forward pass) or the layer-local one.
    uint64_t SetComparison(model::Comparison comparison);
    uint64_t Analyze(const std::string& text, bool truncate);

    std::vector<WorkerEvent> TakeEvents();  // everything finished since the last call, oldest first
    bool Busy() const { return m_busy.load(); }
    float Progress() const { return m_progress.load(); }  // of the running analysis: layers done / layers
    // The head the map view shows: each analysis rebuilds its full maps before it is handed over.
    void SetShownHead(int layer, int head) {
        m_shown_layer = layer;
        m_shown_head = head;
    }

private:
    struct Request {
        enum class Kind { OpenModel, OpenTwin, CloseTwin, SetComparison, Analyze } kind;
        uint64_t id;
        std::string arg;     // folder or text
        std::string device;
        bool truncate = false;
        double start_ms = 0;
        model::ConfigHints hints;
        std::string dtype = "f32";
        model::Comparison comparison = model::Comparison::Counterfactual;
    };

    uint64_t Push(Request request);
    void Loop();
    void Handle(const Request& request);
    void Emit(WorkerEvent event);

    std::function<void()> m_wake;
    std::unique_ptr<model::Engine> m_engine;  // touched only by the worker thread
    std::string m_device = "auto";
    model::Comparison m_comparison = model::Comparison::Counterfactual;  // kept across models

    std::mutex m_mutex;
    std::condition_variable m_cv;
    std::deque<Request> m_queue;
    std::vector<WorkerEvent> m_events;
    uint64_t m_next_id = 1;
    bool m_stop = false;
    std::atomic<bool> m_cancel{false};
    std::atomic<bool> m_busy{false};
    std::atomic<float> m_progress{0.0f};
    std::atomic<int> m_shown_layer{0}, m_shown_head{0};
    std::thread m_thread;  // last: starts after everything above exists
};

double NowMs();  // steady clock, milliseconds

}  // namespace app
