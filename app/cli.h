// The command line (SPEC section 4): `ssaviz info | tokenize | export | init-random`, headless,
// on the same model code as the GUI. Exit codes: 0 ok, 1 runtime failure, 2 usage error,
// 3 bad model or input file; every failure prints one line naming what is wrong.
#pragma once

#include <string>
#include <vector>

namespace app {

enum ExitCode { kExitOk = 0, kExitFailure = 1, kExitUsage = 2, kExitBadInput = 3 };

// Options of the GUI invocation (no subcommand), parsed by the same code.
struct GuiOptions {
    std::string model_dir;  // empty: the bundled default model
    std::string text;
    std::string device = "auto";
    std::string screenshot;  // --screenshot FILE: render, save a PNG of the window, exit
    int frames = 30;         // --frames N: settled frames before the screenshot
    int bench_keys = 0;      // --bench-typing N: a benchmark that types N characters
};

// Runs a subcommand and returns its exit code. When argv names no subcommand, fills `gui` and
// returns -1 so main() can open the window.
int RunCommandLine(const std::vector<std::string>& args, GuiOptions* gui);

// The bundled default model: $SSAVIZ_MODEL, else models/default next to the executable, else
// ../assets/models/default from it. Empty when none exists.
std::string DefaultModelDir();

}  // namespace app
