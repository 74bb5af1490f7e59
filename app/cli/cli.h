// The command line (SPEC section 4): `ssaviz info | tokenize | export | init-random | train | eval`, headless,
// on the same model code as the GUI. Exit codes: 0 ok, 1 runtime failure, 2 usage error,
// 3 bad model or input file; every failure prints one line naming what is wrong.
#pragma once

#include <string>
#include <vector>

#include "app/core/exit_code.h"
#include "app/gui/gui.h"  // GuiOptions: what the command line hands the window

namespace app {

// Runs a subcommand and returns its exit code. When argv names no subcommand, fills `gui` and
// returns -1 so main() can open the window.
int RunCommandLine(const std::vector<std::string>& args, GuiOptions* gui);

}  // namespace app
