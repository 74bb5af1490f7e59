// Every head as one cell of a layer x head matrix holding a number (any head value of the
// catalogue, app/core/quantities.h: SSA, the comparison or their difference), coloured by it: readable where thumbnails are too small
// (12 x 12, 24 x 16 heads); at 22 x 32 the whole matrix fits the pane as a heatmap, its numbers on
// hover. Click selects a head, Ctrl+click pins it.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "app/export/head_summary.h"
#include "app/gui/views/view_common.h"
#include "app/gui/window_state.h"

namespace app {

class HeadMatrixView {
public:
    void Draw(WindowState& state);
    void ShowNumbers(bool on) { m_numbers = on; }  // as the checkbox does (tests)

private:
    HeadSummaries m_summaries;
    MapMode m_side = MapMode::Ssa;  // which number a cell shows
    // With a base, the decomposition whose scale the three JS take (the Fine-tune tab's), and its analysis.
    std::weak_ptr<const model::Analysis> m_parts_for;
    model::Decomposition m_parts;
    // Numbers in the cells when they do not fit the pane (the matrix scrolls) or the whole matrix
    // fitted without them; unset: whichever suits the shape (the user's checkbox sets it).
    std::optional<bool> m_numbers;
};

}  // namespace app
