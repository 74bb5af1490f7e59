// Every head as one cell of a layer x head matrix holding a number (any per-head metric, SSA, the
// comparison or their difference), coloured by it: readable where thumbnails are too small
// (12 x 12, 24 x 16 heads). Click selects a head, Ctrl+click pins it.
#pragma once

#include <vector>

#include "app/export/head_summary.h"
#include "app/gui/views/view_common.h"
#include "app/gui/window_state.h"

namespace app {

// A per-head number the matrix can show. `compare` is null when the metric has no comparison side.
struct HeadMetric {
    const char* key;    // ViewSettings::matrix_metric, sessions
    const char* label;
    const char* help;
    float (*ssa)(const HeadSummary&);
    float (*compare)(const HeadSummary&);
    bool temperature;   // coloured on the diverging scale around 1
};
const std::vector<HeadMetric>& HeadMetrics();

class HeadMatrixView {
public:
    void Draw(WindowState& state);

private:
    HeadSummaries m_summaries;
    MapMode m_side = MapMode::Ssa;  // which number a cell shows
    bool m_numbers = false;         // when they do not fit the pane: numbers in scrolling cells, not the whole matrix
};

}  // namespace app
