// ssaviz: the command line and (when built with SSAVIZ_GUI) the live inspector window.
#include <cstdio>
#include <string>
#include <vector>

#include "app/cli/cli.h"
#ifdef SSAVIZ_HAVE_GUI
#include "app/gui/gui.h"
#endif

int main(int argc, char** argv) {
    std::vector<std::string> args(argv, argv + argc);
    app::GuiOptions gui;
    int code = app::RunCommandLine(args, &gui);
    if (code >= 0) return code;
#ifdef SSAVIZ_HAVE_GUI
    app::GuiRunOptions run;
    run.screenshot = gui.screenshot;
    run.frames = gui.frames;
    run.bench_keys = gui.bench_keys;
    run.bench_zoom_frames = gui.bench_zoom_frames;
    run.bench_at = gui.bench_at;
    run.bench_heads = gui.bench_heads;
    run.width = gui.window_width;
    run.height = gui.window_height;
    return app::RunGui(gui, run);
#else
    std::fprintf(stderr, "ssaviz: built without the GUI (SSAVIZ_GUI=OFF); here is the model instead\n");
    return app::RunCommandLine({args[0], "info", "--model", gui.model_dir, "--device", gui.device}, &gui);
#endif
}
