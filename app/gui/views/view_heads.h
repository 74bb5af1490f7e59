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

#include "app/gui/window_state.h"
#include "app/export/head_summary.h"
#include "app/gui/views/view_common.h"
#include "viz/heatmap.h"
#include "viz/imgui/texture.h"

namespace app {

class HeadsView {
public:
    void Draw(WindowState& state);

    // How every head's map in one mode is coloured: the style (a difference diverging and
    // linear, the range shared) and its colours, made once for them all.
    struct Colours {
        viz::HeatmapStyle style;
        viz::ColourScale scale;
    };

private:
    void Rebake(WindowState& state);
    void DrawGrid(WindowState& state);
    void DrawPinned(WindowState& state);
    float BadgeValue(const AppState& state, int index) const;

    std::vector<viz::Texture> m_thumbnails;  // [L * H]
    std::map<std::tuple<int, int, MapMode>, viz::Texture> m_pinned_textures;  // larger bakes of pinned heads, each in its own mode
    std::weak_ptr<const model::Analysis> m_baked_for;  // weak: keeps the address from being reused
    MapMode m_baked_mode = MapMode::Ssa;
    std::vector<Colours> m_colours;  // [MapMode]: the shared colour scale of every head in that mode
    viz::Colormap m_baked_colormap = viz::Colormap::Viridis;
    bool m_baked_log = false;
    std::vector<char> m_stale;  // [L * H]: 1 while the thumbnail shows an older analysis or setting
    size_t m_stale_count = 0;
    size_t m_next_bake = 0;        // after the visible ones, stale thumbnails are re-baked in order from here
    std::vector<size_t> m_visible;  // the thumbnails the grid drew last frame
    viz::Range m_range;      // shared by every thumbnail and the pinned maps
    HeadSummaries m_summaries;
};

}  // namespace app
