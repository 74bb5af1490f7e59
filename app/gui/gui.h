// The inspector window: GLFW + OpenGL 3.3 + Dear ImGui on the UI thread, the model on the
// inference worker. RunGui returns the process exit code.
#pragma once

#include <optional>
#include <string>

#include "app/export/session.h"
#include "model/io/weights.h"

namespace app {

// Options of the GUI invocation (ssaviz with no subcommand), parsed by app/cli with the same code as
// the subcommands. A plain struct: the command line builds it without the GUI too.
struct GuiOptions {
    std::string model_dir;  // empty: the bundled default model
    std::string text;
    std::string device = "auto";
    bool truncate = false;   // --truncate: analyse the first n_positions tokens of a longer text
    std::string screenshot;  // --screenshot FILE: render, save a PNG of the window, exit
    int frames = 30;         // --frames N: settled frames before the screenshot
    int window_width = 1600, window_height = 1000;  // --window WxH
    int bench_keys = 0;      // --bench-typing N: a benchmark that types N characters
    int bench_zoom_frames = 0;  // --bench-zoom N: a benchmark that zooms and pans the map for N frames
    double bench_at = 1.0;      // --bench-at end|middle|start: where --bench-typing types (fraction of the text)
    int bench_heads = 0;        // --bench-heads N: a benchmark that selects another head N times
    std::optional<Session> session;  // --session FILE: selections, view and export settings to restore
    std::string session_path;
    std::string show;        // --show export|help|demo: a window open from the start; heads|matrix|temperatures|table|sparsity: that tab
    std::string example;     // --example ID: open a bundled model with its twin and text (Examples menu)
    std::string export_to;   // --export-to DIR: export with the session's export settings, then exit (tests)
    model::ConfigHints hints;   // --n-head, --query-form, --value-form, --activation: for checkpoints without config.json
    std::string dtype = "f32";  // --dtype: the compute dtype
    // Once the first analysis is shown (screenshots, tests): --continue N appends N tokens as
    // Continue (Ctrl+G) does, with the session's generation settings; --rank-heads ranks the heads.
    int continue_tokens = 0;
    bool rank_heads = false;
};

struct GuiRunOptions {
    std::string screenshot;   // write a PNG of the window after `frames` settled frames, then exit
    int frames = 30;
    int width = 1600, height = 1000;
    // Benchmark: type `bench_keys` characters, one every `bench_interval_ms`, then print frame
    // times and keystroke-to-pixels latency. 0 = off.
    int bench_keys = 0;
    double bench_interval_ms = 100;
    double bench_at = 1.0;  // where it types: 1 at the end, 0.5 in the middle, 0 at the start
    // Benchmark: select the next head this many times (a few frames apart), then print the work of
    // the frames that showed a new head (map rebuild, bake and upload). 0 = off.
    int bench_heads = 0;
    // Benchmark: zoom and pan the attention map for this many frames, then print frame times.
    int bench_zoom_frames = 0;
};

int RunGui(const GuiOptions& options, const GuiRunOptions& run);

}  // namespace app
