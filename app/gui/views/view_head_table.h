// The Table tab: every head's metrics in a sortable table (entropy, spikiness, sink mass, JS to the
// comparison, tau_q mean, QK eigenvalue variance, ...). Click a row to select the head.
#pragma once

#include <vector>

#include "app/export/head_summary.h"
#include "app/gui/views/view_common.h"
#include "app/gui/window_state.h"

namespace app {

class HeadTableView {
public:
    void Draw(WindowState& state);

private:
    HeadSummaries m_summaries;
    std::vector<int> m_order;  // rows in display order, indices into m_summary
    bool m_sort_dirty = true;
    float m_sorted_eps = -1.0f;
    HeadRef m_last_selected{-1, -1};
};

}  // namespace app
