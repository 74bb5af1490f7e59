// ssaviz: the command line and (when built with SSAVIZ_GUI) the live inspector window.
#include <cstdio>
#include <string>
#include <vector>

#include "app/cli.h"

int main(int argc, char** argv) {
    std::vector<std::string> args(argv, argv + argc);
    app::GuiOptions gui;
    int code = app::RunCommandLine(args, &gui);
    if (code >= 0) return code;
    // The inspector window is the next milestone; until then the bare command shows the model.
    std::fprintf(stderr, "ssaviz: the inspector window is not in this build yet; here is the model (see ssaviz --help)\n");
    return app::RunCommandLine({args[0], "info", "--model", gui.model_dir, "--device", gui.device}, &gui);
}
