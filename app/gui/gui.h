// The inspector window: GLFW + OpenGL 3.3 + Dear ImGui on the UI thread, the model on the
// inference worker. RunGui returns the process exit code.
#pragma once

#include <optional>
#include <string>

#include "app/core/launch.h"
#include "app/export/session.h"

namespace app {

// `run`: the model, text and requests the command line resolved (app/core/launch.h); `session`:
// the --session file's selections, view and export settings, applied over them.
int RunGui(const LaunchOptions& run, const std::optional<Session>& session);

}  // namespace app
