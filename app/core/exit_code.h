// The process exit codes of every ssaviz command and of the window (SPEC section 4).
#pragma once

namespace app {

enum ExitCode { kExitOk = 0, kExitFailure = 1, kExitUsage = 2, kExitBadInput = 3 };

}  // namespace app
