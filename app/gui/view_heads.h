// All L x H heads as thumbnails (one texture each, baked when the analysis changes) with a badge
// of the chosen metric, in a pane that scrolls and zooms (Ctrl+wheel) for large models; click
// selects, Ctrl+click pins; pinned heads are shown side by side, each with its own map.
#pragma once

#include <map>
#include <tuple>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "app/export/head_summary.h"
#include "app/core/state.h"
#include "viz/imgui/texture.h"

namespace app {

// Whether a cache made for `cached` is still current for `now` (same analysis object; a weak
// pointer so a new analysis never passes for an old one at a reused address).
bool SameAnalysis(const std::weak_ptr<const model::Analysis>& cached, const std::shared_ptr<const model::Analysis>& now);

// The head's main numbers, SSA beside the comparison, as a tooltip (the grid, the matrix, pins).
void HeadTooltip(const AppState& state, const HeadSummary& s);
// Click selects, Ctrl+click pins; on the item just submitted.
void HandleHeadClick(AppState& state, HeadRef ref);
// A number in at most 4 significant characters ("1.23", "0.045", "12.3", "1.2e-4").
std::string FormatNumber(float v);

class HeadsView {
public:
    void Draw(AppState& state);

private:
    void Rebake(AppState& state);
    void DrawGrid(AppState& state);
    void DrawPinned(AppState& state);
    float BadgeValue(const AppState& state, int index) const;

    std::vector<viz::Texture> m_thumbnails;  // [L * H]
    std::map<std::tuple<int, int, MapMode>, viz::Texture> m_pinned_textures;  // larger bakes of pinned heads, each in its own mode
    std::weak_ptr<const model::Analysis> m_baked_for;  // weak: keeps the address from being reused
    MapMode m_baked_mode = MapMode::Ssa;
    viz::Range m_ranges[3];  // [MapMode]: the shared colour scale of every head in that mode
    viz::Colormap m_baked_colormap = viz::Colormap::Viridis;
    bool m_baked_log = false;
    size_t m_next_bake = 0;
    viz::Range m_range;      // shared by every thumbnail and the pinned maps  // thumbnails are re-baked a few per frame, from here
    std::vector<HeadSummary> m_summary;
};

// The per-head metrics as a sortable table (entropy, spikiness, sink mass, JS to the comparison,
// tau_q mean, QK eigenvalue variance, ...). Click a row to select the head.
struct HeadTableView {
    void Draw(AppState& state);

private:
    std::weak_ptr<const model::Analysis> m_for;
    std::vector<HeadSummary> m_summary;
    std::vector<int> m_order;  // rows in display order, indices into m_summary
    bool m_sort_dirty = true;
    float m_sorted_eps = -1.0f;
    HeadRef m_last_selected{-1, -1};
};

}  // namespace app
