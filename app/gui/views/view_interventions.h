// What-ifs on the SSA side (issue 17): a panel that adds interventions on a head or a whole layer
// (tau = 1, position term only, token term only, tau_q - 1 scaled), lists them with remove
// buttons, switches the comparison to the unedited model, and ranks the heads by the loss their
// ablation causes. A head's context menu (heads grid, matrix) offers the same what-ifs.
#pragma once

#include <memory>

#include "app/export/export_figures.h"
#include "app/gui/window_state.h"

namespace app {

struct InterventionsView {
    void Draw(WindowState& state);

private:
    void DrawAdd(AppState& state);
    void DrawList(AppState& state);
    void DrawHeadRanking(WindowState& state);
    void DrawRankingTable(WindowState& state, const HeadImpacts& impacts);
    void DrawPartsGrid(WindowState& state, RankingView view);

    int m_layer = 0, m_head = -1;  // -1: every head of the layer
    int m_kind = 0;                // model::Intervention::Kind
    float m_scale = 0.5f;
    int m_sort_column = 3;         // the ranking's sort: 0 layer, 1 head, 2 mean loss, 3 part, 4 tau_q, 5 tau_v, 6 drift
    bool m_sort_ascending = true;  // the parts that lowered the loss most first
    // The grid of parts token by token, built once a measure and view (a model's 144 heads over
    // 1,024 tokens are 147,456 cells, and their scale a percentile over them).
    std::shared_ptr<const HeadImpacts> m_grid_for;
    RankingView m_grid_view = RankingView::Table;
    TokenPartsGrid m_grid;
    DivergingScale m_grid_scale;
    std::vector<std::string> m_grid_labels;  // the ranked text's token labels
    int m_grid_query = -1;  // the query the grid last scrolled to
};

// The right-click menu of a head: ablate it, keep one term of tau_q, or drop its what-ifs.
// Call between ImGui::BeginPopupContextItem and EndPopup.
void DrawHeadWhatIfMenu(AppState& state, HeadRef head);

// `list` with `x` added (an earlier what-if on the same head or layer and kind is replaced).
std::vector<model::Intervention> WithIntervention(std::vector<model::Intervention> list, const model::Intervention& x);

}  // namespace app
