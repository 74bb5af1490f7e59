// The selected head's attention map: SSA, comparison, or their signed difference; zoom (wheel)
// and pan (drag), token labels when they fit, exact values on hover, a colour bar; and the
// selected query's row as bars, SSA against the comparison, with the top keys labelled.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "app/core/state.h"
#include "viz/imgui/texture.h"

namespace app {

class HeatmapView {
public:
    void Draw(AppState& state);

private:
    // The cells [row0, row0 + rows) x [col0, col0 + cols) the texture holds, pooled by `pool`
    // cells per texel (1 = one texel per cell; a power of two, the level of detail). The region
    // may end past the last token, in the last level cell's padding.
    struct BakedRegion {
        int row0 = 0, col0 = 0, rows = 0, cols = 0, pool = 0;
    };

    void DrawToolbar(AppState& state);
    void DrawMap(AppState& state, ImVec2 map_pos, float side, float label_size);
    void DrawRowChart(AppState& state, ImVec2 pos, ImVec2 size);
    void PrepareData(const AppState& state);  // values, range and labels for the selected head and mode
    void EnsureTexture(float side);           // re-bakes when the visible window needs another region
    void ClampView(float max_zoom);
    void ResetView();
    const float* MapValues() const;  // the shown map [T, T]: SSA, comparison or m_diff
    const float* Level(int level);   // the shown map max-pooled by 2^level: ceil(T / 2^level) a side
    std::string CellText(int i, int j, bool multiline) const;  // the hover read-out of cell (i, j)

    viz::Texture m_texture;
    const model::Analysis* m_baked_for = nullptr;  // re-bake when any of these change
    HeadRef m_baked_head;
    MapMode m_baked_mode = MapMode::Ssa;
    viz::Colormap m_baked_colormap = viz::Colormap::Viridis;
    bool m_baked_log = false;
    MapView* m_view = nullptr;  // state.settings.map_view, set at the start of Draw

    std::shared_ptr<const model::Analysis> m_analysis;  // held so m_baked_for cannot be reused by a newer result
    bool m_data_dirty = true;
    bool m_texture_dirty = true;
    MapMode m_mode = MapMode::Ssa;           // the mode shown (Ssa when the analysis has no comparison)
    viz::Colormap m_colormap = viz::Colormap::Viridis;  // Diverging for the difference
    bool m_log = false;
    viz::Range m_range;
    model::HeadMap m_ssa, m_compare;         // the selected head's [T, T] maps (m_compare null without one)
    std::vector<float> m_diff;               // [T, T] SSA - comparison, for the difference mode
    BakedRegion m_region;                    // what m_texture holds: a window of a level too large to bake whole
    std::vector<viz::Texture> m_whole;       // [level]: the whole level, for levels of at most kWholeMapMaxSide cells
    viz::Texture* m_drawn = nullptr;         // m_texture or one of m_whole: what the map draws
    BakedRegion m_drawn_region;
    std::vector<std::vector<float>> m_levels;  // [k - 1]: the shown map max-pooled by 2^k, built when first drawn
    std::vector<std::string> m_labels;       // [T] display text of each token
    std::vector<std::string> m_short_labels; // [T] the same, shortened to the label strip
    float m_short_width = 0;
    int m_tokens = 0;
    bool m_dragged = false;                  // the current press moved the view (not a click)
    bool m_double_clicked = false;           // the current press is a double-click (resets the view, selects nothing)
    int m_query_before_click = -1;           // restored by a double-click
    int m_hover_key = -1;                    // key under the mouse in the row chart (last frame)
    int m_hover_row = -1, m_hover_col = -1;  // cell under the mouse on the map (this frame)
};

}  // namespace app
