// The Table tab: every head's metrics in a sortable table (entropy, spikiness, sink mass, JS to the
// comparison, tau_q mean, QK eigenvalue variance, ...). Click a row to select the head.
#pragma once

#include <memory>
#include <vector>

#include "app/gui/window_state.h"
#include "app/export/head_summary.h"

namespace app {

class HeadTableView {
public:
    void Draw(WindowState& state);

private:
    std::weak_ptr<const model::Analysis> m_for;
    std::vector<HeadSummary> m_summary;
    std::vector<int> m_order;  // rows in display order, indices into m_summary
    bool m_sort_dirty = true;
    float m_sorted_eps = -1.0f;
    HeadRef m_last_selected{-1, -1};
};

}  // namespace app
