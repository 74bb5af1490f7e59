// The inspector window: GLFW + OpenGL 3.3 + Dear ImGui on the UI thread, the model on the
// inference worker. RunGui returns the process exit code.
#pragma once

#include <string>

namespace app {

struct GuiOptions;

struct GuiRunOptions {
    std::string screenshot;   // write a PNG of the window after `frames` settled frames, then exit
    int frames = 30;
    int width = 1600, height = 1000;
    // Benchmark: type `bench_keys` characters, one every `bench_interval_ms`, then print frame
    // times and keystroke-to-pixels latency. 0 = off.
    int bench_keys = 0;
    double bench_interval_ms = 100;
    // Benchmark: zoom and pan the attention map for this many frames, then print frame times.
    int bench_zoom_frames = 0;
};

int RunGui(const GuiOptions& options, const GuiRunOptions& run);

}  // namespace app
