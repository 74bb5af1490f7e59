// The drivers: four benchmarks (--bench-open, --bench-typing, --bench-zoom, --bench-heads), whose printed
// figures bench/gui_latency.sh and bench/run.sh read, and two test drivers (--export-to,
// --screenshot), which end the run with an exit code.
#include "app/gui/drivers.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <new>
#include <sstream>
#include <string>
#include <thread>

#include <unistd.h>  // sysconf: the process's start time

#include <GLFW/glfw3.h>  // OpenGL, to read the back buffer
#include <nlohmann/json.hpp>

#include "app/core/exit_code.h"
#include "app/core/names.h"
#include "app/gui/views/view_export.h"
#include "app/gui/worker.h"
#include "model/io/files.h"
#include "model/text/utf8.h"
#include "viz/colormap.h"
#include "viz/figure.h"

namespace app {
namespace {

// Percentile of a sample (nearest rank); 0 for none.
double Percentile(std::vector<double> v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    size_t k = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size()))) - 1;
    return v[std::min(k, v.size() - 1)];
}

// For the runs that end once settled: the exit code of a model that did not open (the command
// line's for it), of a twin or base that did not open (export's for it), or of a text it cannot
// read (export's 3), with the error on stderr; none if the window has an analysis or may still get
// one.
std::optional<int> FailureExit(DrivenWindow& window) {
    const WindowState& state = window.State();
    if (const std::optional<RunError> failed = window.ComparisonFailure(); failed && window.Settled()) {
        std::fprintf(stderr, "ssaviz: %s\n", model::EscapeForMessage(failed->message, 4096).c_str());
        return ExitCodeOf(failed->kind);
    }
    // What-ifs the run asked for that the model cannot take: the command line's usage error, as
    // `export --ablate` gives (an export without them exited 0).
    if (!window.DroppedWhatIfs().empty() && window.Settled()) {
        std::fprintf(stderr, "ssaviz: %s\n", model::EscapeForMessage(window.DroppedWhatIfs(), 4096).c_str());
        return kExitUsage;
    }
    // An analysis that is not finite (a base or model that overflows): export's exit 3 and words.
    if (state.analysis && !state.not_finite.empty() && window.Settled()) {
        std::fprintf(stderr, "ssaviz: %s\n", model::EscapeForMessage(state.not_finite, 4096).c_str());
        return kExitBadInput;
    }
    if (state.analysis || state.error.empty() || !(window.ModelFailed() || window.Settled())) return std::nullopt;
    std::fprintf(stderr, "ssaviz: %s\n", model::EscapeForMessage(state.error, 4096).c_str());
    return window.ModelFailed() ? ExitCodeOf(OpenErrorKind(state.error)) : kExitBadInput;
}

int ShownTokens(DrivenWindow& window) {
    const WindowState& state = window.State();
    return state.analysis ? state.analysis->n_tokens : 0;
}

// The work of the frames a benchmark ran in: all of it, and ImGui's share.
struct FrameWork {
    std::vector<double> all_ms, ui_ms;

    void Add(const FrameTimes& t) {
        all_ms.push_back(t.end_ms - t.start_ms);
        ui_ms.push_back(t.ui_done_ms - t.start_ms);
    }
    void Print() const {
        std::printf("frame work ms (events, ImGui, GL render and swap): p50 %.2f  p99 %.2f  max %.2f\n", Percentile(all_ms, 50),
                    Percentile(all_ms, 99), Percentile(all_ms, 100));
        std::printf("  of which ImGui (views, bakes, uploads) ms: p50 %.2f  p99 %.2f  max %.2f\n", Percentile(ui_ms, 50),
                    Percentile(ui_ms, 99), Percentile(ui_ms, 100));
    }
};

// ---------------------------------------------------------------------------------------------
// --bench-typing N: once settled, types N characters, one every interval, by editing the text as
// the editor would at a cursor that starts at `at` (a fraction of the text, on a character
// boundary) and moves on with each character. Prints the frames' work and keystroke-to-pixels.

class TypingBenchmark : public Driver {
public:
    TypingBenchmark(int keys, double interval_ms, double at) : m_keys(keys), m_interval_ms(interval_ms), m_at(at) {}

    // Frames when a key is due (and the ones the window draws anyway), as a user's typing gets them.
    double WakeInMs(double now_ms) const override {
        return m_typed < m_keys && m_next_key_ms > 0 ? std::max(0.0, m_next_key_ms - now_ms) : 1e9;
    }

    void BeforeFrame(DrivenWindow& window, double now_ms) override {
        if (window.Settled() && m_typed == 0) {
            m_next_key_ms = now_ms;
            m_last_analysis = window.State().analysis.get();  // the first load is not a keystroke's
        }
        if (m_typed < m_keys && m_next_key_ms > 0 && now_ms >= m_next_key_ms) {
            Type(window.State(), " abcdefghij"[m_typed % 11]);
            ++m_typed;
            m_next_key_ms += m_interval_ms;
        }
    }

    bool AfterFrame(DrivenWindow& window, const FrameTimes& times) override {
        if (m_typed > 0) {  // only keystrokes count, not the first load
            m_work.Add(times);
            const std::vector<double>& shown = window.ShownLatencies();
            m_latencies.insert(m_latencies.end(), shown.begin(), shown.end());
            const auto& a = window.State().analysis;
            if (a && a.get() != m_last_analysis) {  // the engine's share of what was shown
                m_last_analysis = a.get();
                m_engine_ms.push_back(a->forward_ms + a->metrics_ms);
                m_rows.push_back(a->n_tokens - a->reused_rows);
                const WorkerEvent::Split& split = window.State().analysis_split;
                if (split.timed && !shown.empty()) {  // the frame's last answered request is the one it shows
                    m_queued_ms.push_back(split.queued);
                    m_tokenize_ms.push_back(split.tokenize);
                    m_analyze_ms.push_back(split.analyze);
                    m_map_ms.push_back(split.map);
                    m_to_pixels_ms.push_back(shown.back() - window.State().analysis_answered_ms);
                }
            }
        }
        if (m_typed >= m_keys && window.Settled()) return true;
        // Pace like a 60 Hz display; the figure that matters is the work per frame.
        const double rest = 1000.0 / 60.0 - (times.end_ms - times.start_ms);
        if (rest > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(rest));
        return false;
    }

    void Report(DrivenWindow& window) override {
        std::printf("tokens %d, keys %d every %.0f ms, frames %zu\n", ShownTokens(window), m_keys, m_interval_ms, m_work.all_ms.size());
        m_work.Print();
        std::printf("keystroke to pixels ms (%zu keystrokes): p50 %.1f  p99 %.1f  max %.1f\n", m_latencies.size(),
                    Percentile(m_latencies, 50), Percentile(m_latencies, 99), Percentile(m_latencies, 100));
        std::printf("  analyses shown %zu: engine ms (forward + metrics) p50 %.1f  max %.1f; rows computed p50 %.0f  max %.0f\n",
                    m_engine_ms.size(), Percentile(m_engine_ms, 50), Percentile(m_engine_ms, 100), Percentile(m_rows, 50), Percentile(m_rows, 100));
        // Each part's own p50: they need not add up to the whole's.
        std::printf("  where a shown keystroke's time went (%zu), p50 ms: waiting for the worker %.1f, tokenizing %.1f, the engine %.1f, "
                    "the shown head's maps %.1f, from the answer to pixels %.1f\n",
                    m_queued_ms.size(), Percentile(m_queued_ms, 50), Percentile(m_tokenize_ms, 50), Percentile(m_analyze_ms, 50),
                    Percentile(m_map_ms, 50), Percentile(m_to_pixels_ms, 50));
    }

private:
    void Type(WindowState& state, char c) {
        if (m_typed == 0) {
            m_cursor = static_cast<size_t>(m_at * static_cast<double>(state.text.size()));
            while (m_cursor < state.text.size() && model::IsUtf8Continuation(static_cast<unsigned char>(state.text[m_cursor]))) ++m_cursor;
        }
        state.text.insert(std::min(m_cursor++, state.text.size()), 1, c);
        state.text_changed = true;
    }

    const int m_keys;
    const double m_interval_ms, m_at;
    int m_typed = 0;
    double m_next_key_ms = 0;
    size_t m_cursor = 0;  // where the next character goes
    FrameWork m_work;
    std::vector<double> m_latencies;
    const model::Analysis* m_last_analysis = nullptr;  // compared, never dereferenced
    std::vector<double> m_engine_ms, m_rows;
    std::vector<double> m_queued_ms, m_tokenize_ms, m_analyze_ms, m_map_ms, m_to_pixels_ms;  // each shown analysis's split
};

// ---------------------------------------------------------------------------------------------
// --bench-open: from the process's start until the model has answered (and, with --global-pass,
// until the global tau = 1 pass is shown): when the model was loaded, when the first map and the
// predictions were shown, whether the first analysis showed its progress, the frames' work while
// the model ran, and the peak resident memory (VmHWM).

// Milliseconds since this process started (/proc: clock ticks since boot); 0 where unknown.
double ProcessAgeMs() {
    std::ifstream stat("/proc/self/stat"), uptime("/proc/uptime");
    std::string line;
    double up = 0;
    if (!std::getline(stat, line) || !(uptime >> up)) return 0;
    const size_t close = line.rfind(')');  // the command name may hold spaces
    if (close == std::string::npos) return 0;
    std::istringstream fields(line.substr(close + 2));
    std::string field;
    for (int i = 3; i <= 22 && fields >> field; ++i)
        if (i == 22) return std::max(0.0, up * 1000.0 - std::stod(field) * 1000.0 / static_cast<double>(sysconf(_SC_CLK_TCK)));
    return 0;
}

// A /proc/self/status line's value in MB ("VmHWM", "VmRSS"); 0 where unknown.
double StatusMb(const std::string& key) {
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line))
        if (line.rfind(key + ":", 0) == 0) return std::strtod(line.c_str() + key.size() + 1, nullptr) / 1024.0;
    return 0;
}

class OpenBenchmark : public Driver {
public:
    OpenBenchmark() : m_start_ms(NowMs() - ProcessAgeMs()) {}
    double WakeInMs(double) const override { return 1e9; }

    bool AfterFrame(DrivenWindow& window, const FrameTimes& times) override {
        const WindowState& state = window.State();
        const double t = times.end_ms - m_start_ms;
        if (state.model && m_model_ms < 0) {
            m_model_ms = t;
            // The loader's peak (its mapped file and the converted weights side by side) apart from
            // the analysis's: write 5 to clear_refs to start VmHWM again from here.
            m_load_peak_mb = StatusMb("VmHWM");
            m_loaded_mb = StatusMb("VmRSS");
            std::ofstream("/proc/self/clear_refs") << "5";
        }
        if (state.analysis && m_map_ms < 0) m_map_ms = t;
        const bool whole = state.analysis && (!state.analysis->loss.empty() || state.analysis->n_tokens == 1);
        if (whole && m_predictions_ms < 0) m_predictions_ms = t;
        if (m_map_ms < 0 && state.busy && state.progress > 0.0f && state.progress < 1.0f) ++m_progress_frames;
        if (state.global_pass_running && m_global_start_ms < 0) m_global_start_ms = t;
        if (m_global_start_ms >= 0 && m_global_done_ms < 0 && !state.global_pass_running) m_global_done_ms = t;
        if (state.busy) m_busy.Add(times);
        return window.Settled() && whole;
    }

    void Report(DrivenWindow& window) override {
        const WindowState& state = window.State();
        std::printf("open: %d tokens, %s comparison%s\n", ShownTokens(window), state.analysis ? model::ToString(state.analysis->comparison) : "no",
                    state.model && ScaleOf(*state.model, state.big_model_parameters).big ? " (a big model)" : "");
        std::printf("open ms from process start: model loaded %.0f, first map shown %.0f, predictions shown %.0f\n", m_model_ms, m_map_ms,
                    m_predictions_ms);
        std::printf("first analysis: progress shown in %d frames before its maps\n", m_progress_frames);
        if (m_global_start_ms >= 0)
            std::printf("global tau = 1 pass: asked for at %.0f ms, shown at %.0f ms (%.0f ms)\n", m_global_start_ms, m_global_done_ms,
                        m_global_done_ms - m_global_start_ms);
        std::printf("while the model ran (%zu frames): ", m_busy.all_ms.size());
        m_busy.Print();
        std::printf("resident memory MB: peak while loading %.0f, once loaded %.0f, peak since %.0f, now %.0f\n", m_load_peak_mb, m_loaded_mb,
                    StatusMb("VmHWM"), StatusMb("VmRSS"));
    }

private:
    const double m_start_ms;
    double m_model_ms = -1, m_map_ms = -1, m_predictions_ms = -1, m_global_start_ms = -1, m_global_done_ms = -1;
    double m_load_peak_mb = 0, m_loaded_mb = 0;
    int m_progress_frames = 0;
    FrameWork m_busy;
};

// ---------------------------------------------------------------------------------------------
// The benchmarks that steer the window as a user would, once the model has settled: `steps` steps,
// one every `every` frames, each measured by the work of the frame that showed it.

class SteppedBenchmark : public Driver {
public:
    SteppedBenchmark(int steps, int every) : m_steps(steps), m_every(every) {}

    void BeforeFrame(DrivenWindow& window, double now_ms) override {
        WindowState& state = window.State();
        m_stepping = window.Settled() && state.analysis && m_taken < m_steps && ++m_frame % m_every == 0;
        if (m_stepping) Step(state, m_taken++);
    }

    bool AfterFrame(DrivenWindow& window, const FrameTimes& times) override {
        if (m_stepping) m_work.Add(times);
        return m_taken >= m_steps;
    }

protected:
    virtual void Step(WindowState& state, int k) = 0;  // the k-th of m_steps; state.analysis is set

    const int m_steps;
    FrameWork m_work;  // of the frames that showed a step

private:
    const int m_every;
    int m_taken = 0, m_frame = 0;
    bool m_stepping = false;  // this frame shows a step
};

// --bench-zoom N: N frames that zoom the selected head's map in to 64x and back out, panning
// across it, as the mouse wheel and drag would. Prints the frames' work.
class ZoomBenchmark : public SteppedBenchmark {
public:
    explicit ZoomBenchmark(int frames) : SteppedBenchmark(frames, 1) {}

    void Report(DrivenWindow& window) override {
        const int tokens = ShownTokens(window);
        std::printf("zoom and pan: %d x %d map, %zu frames (zoom 1 to 64 and back)\n", tokens, tokens, m_work.all_ms.size());
        m_work.Print();
    }

private:
    void Step(WindowState& state, int k) override {
        const double t = static_cast<double>(k) / m_steps, pi = 3.14159265358979;
        const float zoom = static_cast<float>(std::pow(64.0, std::sin(t * pi)));
        const float T = static_cast<float>(state.analysis->n_tokens), room = T - T / zoom;
        MapView& view = state.settings.map_view;
        view.zoom = zoom;
        view.pan_x = room * static_cast<float>(0.5 + 0.5 * std::sin(t * 6 * pi));
        view.pan_y = room * static_cast<float>(0.5 + 0.5 * std::cos(t * 4 * pi));
    }
};

// --bench-heads N: selects the next head (as the arrow keys would) every 6th frame, N times. Prints
// the work of the frames that showed a new head (map rebuild, bake, upload, draw).
class HeadsBenchmark : public SteppedBenchmark {
public:
    explicit HeadsBenchmark(int switches) : SteppedBenchmark(switches, 6) {}

    void Report(DrivenWindow& window) override {
        const std::vector<double>& ms = m_work.all_ms;
        std::printf("head switch ms (frame work: map rebuild, bake, upload, draw; %zu switches at %d tokens): p50 %.1f  p99 %.1f  max %.1f\n",
                    ms.size(), ShownTokens(window), Percentile(ms, 50), Percentile(ms, 99), Percentile(ms, 100));
    }

private:
    void Step(WindowState& state, int) override {
        const int H = state.analysis->n_head, L = state.analysis->n_layer;
        HeadRef& s = state.selected;
        s.head = (s.head + 1) % H;
        if (s.head == 0) s.layer = (s.layer + 1) % L;
    }
};

// ---------------------------------------------------------------------------------------------
// --export-to DIR (tests): once settled, exports through the export dialog's own path with the
// session's export settings, then ends the run.

class ExportDriver : public Driver {
public:
    explicit ExportDriver(std::string dir) : m_dir(std::move(dir)) {}

    std::optional<int> AfterRender(DrivenWindow& window, int width, int height, float scale) override {
        ExportDialog& exporter = window.Exporter();
        if (!m_started) {
            if (const std::optional<int> failed = FailureExit(window)) return failed;
        }
        if (!m_started && window.Settled()) {
            exporter.EnsureOptions(window.State());  // without a session's settings, the dialog's first ones
            exporter.Options().out_dir = m_dir;
            if (!exporter.Start(window.State())) {
                std::fprintf(stderr, "ssaviz: export: %s\n", exporter.Error().c_str());
                return exporter.ErrorExit();
            }
            m_started = true;
        } else if (m_started && !exporter.Busy() && (!exporter.Done().empty() || !exporter.Error().empty())) {
            if (!exporter.Error().empty()) {
                std::fprintf(stderr, "ssaviz: export: %s\n", exporter.Error().c_str());
                return kExitFailure;
            }
            std::fprintf(stderr, "ssaviz: %s\n", exporter.Done().c_str());
            return exporter.LeftOutSteps() ? kExitBadInput : kExitOk;  // as export --run: a run's steps left out
        }
        return std::nullopt;
    }

private:
    const std::string m_dir;
    bool m_started = false;
};

// ---------------------------------------------------------------------------------------------
// --screenshot FILE --frames N: after N settled frames (or 120 s), writes the back buffer as a PNG
// and FILE.json (the views' rectangles and what is on screen), then ends the run.

// The Lens tab's selected query (null before any): its position, target, each layer's loss of the
// next token and the parts' logit, SSA and the comparison.
nlohmann::json LensAtJson(const LensAtPair* at) {
    if (!at) return nullptr;
    auto side = [](const model::LensAt& x) {
        return nlohmann::json{{"target", x.target}, {"loss", x.loss}, {"logit", x.logit}, {"parts", x.parts}};
    };
    return {{"position", at->position}, {"target", ToString(at->target)}, {"versus", at->versus}, {"ssa", side(at->ssa)}, {"compare", at->compare ? side(*at->compare) : nlohmann::json()},
            {"base", at->base ? side(*at->base) : nlohmann::json()}};
}

// Tokens of the shown analysis that Continue appended.
int GeneratedCount(const AppState& state) {
    if (!state.analysis) return 0;
    int n = 0;
    for (int i = 0; i < state.analysis->n_tokens; ++i) n += state.IsGenerated(state.analysis->tokens, i);
    return n;
}

model::Status WriteScreenshot(const std::string& path, int width, int height, const WindowState& state, float scale);

model::Status SaveScreenshot(const std::string& path, int width, int height, const WindowState& state, float scale) {
    // The pixels, their copy and the PNG take 12 bytes a pixel and more: a 16384x16384 window's
    // 3.2 GB where memory is short is a line, not an abort (the allocation failed under a frame
    // that cannot throw). The PNG and its .json are written under temporary names: earlier ones stay.
    try {
        return WriteScreenshot(path, width, height, state, scale);
    } catch (const std::bad_alloc&) {
        return model::Fail("not enough memory for a " + std::to_string(width) + "x" + std::to_string(height) +
                           " screenshot (about " + model::FormatBytes(static_cast<size_t>(width) * height * 12) + "): a smaller --window");
    }
}

model::Status WriteScreenshot(const std::string& path, int width, int height, const WindowState& state, float scale) {
    std::vector<unsigned char> pixels(static_cast<size_t>(width) * height * 4);
    glPixelStorei(GL_PACK_ALIGNMENT, 1);
    glReadBuffer(GL_BACK);
    glReadPixels(0, 0, width, height, GL_RGBA, GL_UNSIGNED_BYTE, pixels.data());
    viz::Image flipped;  // top row first
    flipped.width = width;
    flipped.height = height;
    flipped.pixels.resize(static_cast<size_t>(width) * height);
    const size_t stride = static_cast<size_t>(width) * 4;
    for (int y = 0; y < height; ++y)
        std::memcpy(flipped.pixels.data() + static_cast<size_t>(y) * width, pixels.data() + (height - 1 - y) * stride, stride);
    for (viz::Rgba8& p : flipped.pixels) p.a = 255;  // opaque, whatever the framebuffer's alpha
    const std::vector<uint8_t> png = viz::EncodePng(flipped);
    if (png.empty()) return model::Fail("the window's pixels could not be encoded as a PNG");
    nlohmann::json regions = nlohmann::json::object();
    for (const auto& [name, r] : state.regions) regions[name] = {r.x * scale, r.y * scale, r.w * scale, r.h * scale};
    // What is on screen, so tests can check that a session reopened exactly.
    nlohmann::json pinned = nlohmann::json::array();
    for (const Pin& p : state.pinned) pinned.push_back({p.layer, p.head, ToString(p.mode)});
    const ViewSettings& v = state.settings;
    nlohmann::json shown = {{"model", state.model ? state.model->dir : ""},
                            {"twin", state.twin ? state.twin->dir : ""},
                            {"text", state.text},
                            {"tokens", state.Tokens()},
                            {"selected", {state.selected.layer, state.selected.head}},
                            {"pinned", pinned},
                            {"query", state.query},
                            {"interventions", model::FormatInterventions(state.interventions)},
                            {"analysed_interventions", state.analysis ? model::FormatInterventions(state.analysis->interventions) : ""},
                            {"comparison", state.analysis ? ComparisonKindName(state.analysis->comparison) : ""},  // as metrics.json names it
                            {"big_model", state.model && ScaleOf(*state.model, state.big_model_parameters).big},
                            {"generated_tokens", GeneratedCount(state)},
                            {"colormap", viz::ColormapName(v.colormap)},
                            {"log_scale", v.log_scale},
                            {"map", ToString(v.map_mode)},
                            {"split", v.split},
                            {"three_way", v.three_way},
                            {"grid_map", ToString(v.grid_mode)},
                            {"per_head_scale", v.per_head_scale},
                            {"tab", v.right_tab},
                            {"layout", {v.layout.left, v.layout.center, v.layout.right}},
                            {"token_color", ToString(v.token_color)},
                            {"token_scope", ToString(v.token_scope)},
                            {"map_zoom", v.map_view.zoom},
                            {"map_pan", {v.map_view.pan_x, v.map_view.pan_y}},
                            {"run_step", state.run_step >= 0 && state.run_step < static_cast<int>(state.run_steps.size())
                                             ? nlohmann::json(state.run_steps[state.run_step].step) : nlohmann::json()},
                            {"timeline_steps", state.timeline ? nlohmann::json(state.timeline->timeline.steps) : nlohmann::json::array()},
                            {"timeline_failed", state.timeline ? nlohmann::json(state.timeline->failed) : nlohmann::json::array()},
                            {"compare_timeline_steps", state.timeline && state.timeline->compare ? nlohmann::json(state.timeline->compare->steps)
                                                                                                 : nlohmann::json::array()},
                            {"run_curve", v.run_curve},
                            {"timeline_lens", state.timeline && state.timeline->lens},
                            {"timeline_lens_loss", state.timeline ? nlohmann::json(state.timeline->timeline.lens_loss) : nlohmann::json::array()},
                            {"timeline_lens_halfway", state.timeline ? nlohmann::json(StepsToLensHalfway(state.timeline->timeline)) : nlohmann::json::array()},
                            {"lens_map", ToString(v.lens_map)},
                            {"ranking", ToString(v.ranking)},
                            {"lens_target", ToString(v.lens_target)},
                            {"run_curves", state.timeline ? nlohmann::json(RunCurveKeys(state.timeline->timeline)) : nlohmann::json::array()},
                            {"lens_at", LensAtJson(state.lens_at.get())}};
    const nlohmann::json record = {{"width", width}, {"height", height}, {"regions", regions}, {"state", shown}};
    const std::string description = model::JsonText(record, 1) + "\n";
    // Both or neither: a PNG without its description (or beside the last run's) would mislead a test.
    return model::WriteFilesAtomically({{path, std::string_view(reinterpret_cast<const char*>(png.data()), png.size())}, {path + ".json", description}});
}

class ScreenshotDriver : public Driver {
public:
    ScreenshotDriver(std::string path, int frames) : m_path(std::move(path)), m_frames(frames) {}

    bool HidesPointer() const override { return true; }

    std::optional<int> AfterRender(DrivenWindow& window, int width, int height, float scale) override {
        m_settled_frames = window.Settled() ? m_settled_frames + 1 : 0;
        const bool timed_out = NowMs() - m_start_ms > 120000;
        if (m_settled_frames < m_frames && !timed_out) return std::nullopt;
        if (auto s = SaveScreenshot(m_path, width, height, window.State(), scale); !s) {
            std::fprintf(stderr, "ssaviz: the screenshot: %s\n", s.error().c_str());
            return kExitFailure;
        }
        if (const std::optional<int> failed = FailureExit(window)) return failed;
        if (timed_out) {
            std::fprintf(stderr, "ssaviz: the model did not settle within 120 s; wrote %s anyway\n", m_path.c_str());
            return kExitFailure;
        }
        return kExitOk;
    }

private:
    const std::string m_path;
    const int m_frames;
    const double m_start_ms = NowMs();
    int m_settled_frames = 0;
};

}  // namespace

std::vector<std::unique_ptr<Driver>> MakeDrivers(const LaunchOptions& run) {
    std::vector<std::unique_ptr<Driver>> drivers;
    if (run.bench_open) drivers.push_back(std::make_unique<OpenBenchmark>());
    if (run.bench_keys > 0) drivers.push_back(std::make_unique<TypingBenchmark>(run.bench_keys, run.bench_interval_ms, run.bench_at));
    if (run.bench_zoom_frames > 0) drivers.push_back(std::make_unique<ZoomBenchmark>(run.bench_zoom_frames));
    if (run.bench_heads > 0) drivers.push_back(std::make_unique<HeadsBenchmark>(run.bench_heads));
    if (!run.export_to.empty()) drivers.push_back(std::make_unique<ExportDriver>(run.export_to));
    if (!run.screenshot.empty()) drivers.push_back(std::make_unique<ScreenshotDriver>(run.screenshot, run.frames));
    return drivers;
}

}  // namespace app
