// The selected head's attention map: SSA, comparison, or their signed difference, or the three
// side by side (split); for a fine-tune beside its base also the base, SSA - base (all that
// fine-tuning changed), and SSA | tau = 1 | base (three-way); zoom (wheel) and pan (drag), token labels when they fit, exact values on
// hover, a colour bar, the queries' tau_q beside the rows and the keys' tau_v above the columns;
// and the selected query's row as bars, SSA against the comparison, with the top keys labelled.
#pragma once

#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "app/gui/window_state.h"
#include "viz/imgui/texture.h"

namespace app {

class HeatmapView {
public:
    void Draw(WindowState& state);

private:
    // The cells [row0, row0 + rows) x [col0, col0 + cols) the texture holds, pooled by `pool`
    // cells per texel (1 = one texel per cell; a power of two, the level of detail). The region
    // may end past the last token, in the last level cell's padding.
    struct BakedRegion {
        int row0 = 0, col0 = 0, rows = 0, cols = 0, pool = 0;
    };
    // One map as drawn (SSA, comparison, base or a difference): its colours, its max-pooled levels
    // and the textures baked from them.
    struct Layer {
        MapMode mode = MapMode::Ssa;
        viz::Colormap colormap = viz::Colormap::Viridis;  // Diverging for a difference
        bool log = false;
        viz::Range range;
        BakedRegion region;                      // what `window` holds: a window of a level too large to bake whole
        viz::Texture window;
        std::vector<viz::Texture> whole;         // [level]: the whole level, for levels of at most kWholeMapMaxSide cells
        viz::Texture* drawn = nullptr;           // window or one of whole: what the map draws
        BakedRegion drawn_region;
        bool dirty = true;                       // new values, range or colours: every texture is stale
    };

    void DrawToolbar(WindowState& state);
    void DrawGoTo(WindowState& state);
    void DrawMap(WindowState& state, Layer& layer, ImVec2 map_pos, float side, float label_size, bool row_labels);
    void DrawTemperatureStrips(AppState& state, ImVec2 map_pos, float side, float strip, bool rows, bool cols);
    void DrawRowChart(WindowState& state, ImVec2 pos, ImVec2 size);
    void PrepareData(const AppState& state);  // values, ranges and labels for the selected head and modes
    void EnsureTexture(Layer& layer, float side);  // re-bakes when the visible window needs another region
    void ClampView(float max_zoom);
    void ResetView();
    void ShowToken(AppState& state, int i);  // selects token i as the query and pans the map to it
    const model::MapCells& MapValues(const Layer& layer) const;  // SSA, comparison, base, m_diff or m_base_diff
    std::string CellText(int i, int j, bool multiline) const;  // the hover read-out of cell (i, j)

    const model::Analysis* m_baked_for = nullptr;  // re-bake when any of these change
    HeadRef m_baked_head;
    MapMode m_baked_mode = MapMode::Ssa;
    bool m_baked_split = false;
    bool m_baked_three_way = false;
    viz::Colormap m_baked_colormap = viz::Colormap::Viridis;
    bool m_baked_log = false;
    bool m_baked_per_head = false;
    MapView* m_view = nullptr;  // state.settings.map_view, set at the start of Draw

    std::shared_ptr<const model::Analysis> m_analysis;  // held so m_baked_for cannot be reused by a newer result
    MapMode m_mode = MapMode::Ssa;           // the mode shown (Ssa when the analysis lacks the side it reads)
    bool m_split = false;                    // SSA | comparison | difference side by side
    bool m_three_way = false;                // SSA | tau = 1 | base side by side (an analysis with a base)
    Layer m_layers[std::size(kAllMapModes)]; // [MapMode]
    // The selected head's maps where the engine keeps them (a GPU's memory on CUDA): only what is
    // drawn or hovered is copied to the host. m_compare null without one, m_base without a base
    // (with one, every mode reads it: the row chart, the hover, the colour range); m_diff (SSA - comparison) and m_base_diff (SSA -
    // base) null unless shown.
    model::MapCellsPtr m_ssa, m_compare, m_base, m_diff, m_base_diff;
    int m_row_query = -1;                    // the query whose rows m_rows holds (the row chart)
    std::vector<float> m_rows[3];            // its row of SSA, the comparison and the base (empty where there is none)
    viz::Range m_tau_q_range, m_tau_v_range; // diverging around 1 (see TemperatureRange)
    std::vector<std::string> m_labels;       // [T] display text of each token
    std::vector<std::string> m_short_labels; // [T] the same, shortened to the label strip
    float m_short_width = 0;
    int m_tokens = 0;
    float m_edge = 0;                        // the temperature strip between the labels and the map
    bool m_dragged = false;                  // the current press moved the view (not a click)
    bool m_double_clicked = false;           // the current press is a double-click (resets the view, selects nothing)
    int m_query_before_click = -1;           // restored by a double-click
    int m_hover_key = -1;                    // key under the mouse in the row chart (last frame)
    int m_hover_row = -1, m_hover_col = -1;  // cell under the mouse on a map (this frame)
    MapMode m_hover_mode = MapMode::Ssa;     // the map it is on
    std::string m_goto;                      // the go-to field: a position or text to find
    std::string m_goto_message;
    int m_find_from = -1;                    // the last match, so Enter finds the next
};

}  // namespace app
