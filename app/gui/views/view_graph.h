// The paper's Figure 3 in the window: the target P* (row-normalised adjacency of an 8-node graph)
// beside the maps the SSA model and its comparison learned, read live from the current analysis.
#pragma once

#include "app/gui/window_state.h"

namespace app {

struct GraphView {
    void Draw(WindowState& state);  // a window while state.show_graph
};

}  // namespace app
