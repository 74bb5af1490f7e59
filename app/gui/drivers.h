// Test and benchmark drivers of the window. Each steers it as a user would (types, zooms, selects
// heads) or acts once the model has answered (--export-to, --screenshot), and prints what it
// measured; the platform loop (RunGui in gui.cpp) calls them at fixed points of every frame and
// knows nothing of what they do.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "app/gui/gui.h"
#include "app/gui/window_state.h"

namespace app {

class ExportDialog;

// What a driver sees of the window: its state, which a driver changes as the views would, and a
// few questions about where the model stands.
class DrivenWindow {
public:
    virtual WindowState& State() = 0;
    // The model has answered and nothing more is on its way (no run, twin, Continue or ranking).
    virtual bool Settled() const = 0;
    // No model is open and the last attempt failed (a missing or broken --model or session model).
    virtual bool ModelFailed() const = 0;
    // The twin or base last asked for (--compare DIR, --base, a session's) did not open; the window
    // compares with what it compared with before.
    virtual std::optional<RunError> ComparisonFailure() const = 0;
    // What-ifs asked for at start (a session's) that did not fit the model and were dropped: what
    // the window says of them; empty when none were.
    virtual const std::string& DroppedWhatIfs() const = 0;
    virtual ExportDialog& Exporter() = 0;
    // Keystroke-to-pixels latencies (ms) of the analysis requests the frame just shown answered.
    virtual const std::vector<double>& ShownLatencies() const = 0;

protected:
    ~DrivenWindow() = default;
};

// One frame's times (NowMs): its start (after the events), the end of ImGui's work (views, bakes,
// uploads), and its end (rendered, swapped, the views' requests handled).
struct FrameTimes {
    double start_ms = 0, ui_done_ms = 0, end_ms = 0;
};

class Driver {
public:
    virtual ~Driver() = default;
    // In how many ms it next needs a frame: 0 (the default) draws frames as fast as the driver
    // paces them (it zooms, selects heads); a driver that types waits for its next keystroke, one
    // that only watches never asks. Otherwise the window draws the frames it would for a user: on
    // events (the worker's results among them), and a few a second while the model runs.
    virtual double WakeInMs(double now_ms) const { return 0; }
    // Before the frame's views run: act as a user would.
    virtual void BeforeFrame(DrivenWindow& window, double now_ms) {}
    // The frame is in the back buffer (width x height framebuffer pixels, `scale` of them a window
    // unit) and not shown yet. An exit code ends the loop here.
    virtual std::optional<int> AfterRender(DrivenWindow& window, int width, int height, float scale) { return std::nullopt; }
    // The frame was shown and its requests handled; true ends the loop.
    virtual bool AfterFrame(DrivenWindow& window, const FrameTimes& times) { return false; }
    // The loop ended: print what was measured.
    virtual void Report(DrivenWindow& window) {}
    // True: the window draws as if the pointer were outside it (a screenshot shows no hover
    // tooltip from where the display's pointer happens to rest, the middle of an Xvfb screen).
    virtual bool HidesPointer() const { return false; }
};

// The drivers the options ask for, in the order the loop calls them; none for a plain window.
std::vector<std::unique_ptr<Driver>> MakeDrivers(const LaunchOptions& run);

}  // namespace app
