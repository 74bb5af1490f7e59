// Model summary (layers, heads, SSA forms, parameters, device, twin) and a Help window listing
// the keyboard shortcuts.
#pragma once

#include "app/core/state.h"

namespace app {

struct ModelView {
    void Draw(AppState& state);
};

struct HelpView {
    void Draw(AppState& state);  // a window while state.show_help
};

}  // namespace app
