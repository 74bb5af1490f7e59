// The command line (SPEC section 4): `ssaviz info | tokenize | export | generate | init-random | train |
// eval`, headless, on the same model code as the GUI, with the flags of app/export/flags.h. Exit
// codes: 0 ok, 1 runtime failure, 2 usage error, 3 bad model or input file; every failure prints
// one line naming what is wrong.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "app/core/exit_code.h"
#include "app/core/launch.h"
#include "app/export/session.h"

namespace app {

// Runs a subcommand and returns its exit code. When argv names no subcommand, fills `launch` (and
// `session`, from --session FILE) and returns -1 so main() can open the window.
int RunCommandLine(const std::vector<std::string>& args, LaunchOptions* launch, std::optional<Session>* session);

}  // namespace app
