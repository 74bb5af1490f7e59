// Model summary (layers, heads, SSA forms, parameters, device, twin) and a Help window listing
// the keyboard shortcuts.
#pragma once

#include "app/gui/window_state.h"

namespace app {

struct ModelView {
    void Draw(WindowState& state);
};

struct HelpView {
    void Draw(WindowState& state);  // a window while state.show_help
};

}  // namespace app
