// The Sparsity tab: the plots of app/export/plots.h (attention dilution, the tau_q histogram, QK
// eigenvalue variance against entropy, first-token mass per head), the same descriptions the
// exports write, drawn for the selected head or the whole model with the window's selection.
// Clicking a point or bar selects the query or head it stands for.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "app/gui/views/view_common.h"
#include "app/gui/window_state.h"
#include "viz/plot.h"

namespace app {

class SparsityView {
public:
    void Draw(WindowState& state);

private:
    // The plots again when the analysis or what they show of it (scope, selection, eps) changed.
    void Refresh(const WindowState& state);

    bool m_whole_model = false;  // scope of the per-position plots (dilution, tau_q)
    HeadSummaries m_heads;
    struct Shown {  // what m_plots were made for
        std::weak_ptr<const model::Analysis> analysis;
        bool whole_model = false;
        HeadRef selected;
        int query = -1;
        float sink_epsilon = 0;
    } m_shown;
    std::vector<viz::Plot> m_plots;    // [SparsityPlots()]
    std::vector<std::string> m_notes;  // [SparsityPlots()] the line of numbers with each plot
};

}  // namespace app
