// The text editor and, under it, the token strip: every token a chip coloured by its temperature
// (the paper's Figure 1) or a row metric; hover shows id, piece, bytes and numbers; a click
// selects the token as the query.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "app/gui/window_state.h"
#include "viz/colormap.h"

namespace app {

struct TextView {
    void Draw(WindowState& state);

private:
    // A token's piece as the strip draws it: printable text where whitespace became marks
    // (· ↵ →) and bytes of a partial UTF-8 character became escapes («\xE4\xBD»).
    struct Label {
        std::string text;
        std::vector<std::pair<uint32_t, uint32_t>> marks;  // byte ranges of `text` drawn faint
        bool line_break = false;                            // the piece holds a newline: the strip breaks after it
    };
    struct Chip {
        float x = 0, y = 0, w = 0;  // in strip coordinates
    };

    static Label MakeLabel(const std::string& piece);
    void DrawEditor(WindowState& state, float height);
    void DrawControls(WindowState& state);
    void DrawStrip(WindowState& state, float height);
    void DrawTooltip(const AppState& state, int i) const;
    static void DrawLossRows(const model::Analysis& a, int i);
    void UpdateLabels(const AppState& state);
    void UpdateLayout(float width);
    // Over a run with its timeline of the text, tau_q's scale is the run's, every step's (colours
    // compare while stepping through it).
    void UpdateValues(const WindowState& state);
    void UpdateLossValues(const model::Analysis& a, TokenColor color);

    // Caches, rebuilt when the analysis, the width, the font or the colouring changes. Weak, so an
    // analysis the app has dropped is freed at once (its maps can be hundreds of MB).
    std::weak_ptr<const model::Analysis> m_labels_for;
    std::vector<Label> m_labels;  // [T]
    std::vector<float> m_label_widths;  // [T] text width in pixels
    unsigned m_font_generation = ~0u;
    float m_layout_width = -1;
    float m_layout_line_step = 0;
    std::vector<Chip> m_chips;     // [T]
    std::vector<int> m_line_first; // first chip of each line, plus T at the end
    float m_content_height = 0;

    std::weak_ptr<const model::Analysis> m_values_for;
    TokenColor m_values_color = TokenColor::TauQ;
    TokenScope m_values_scope = TokenScope::Head;
    HeadRef m_values_head;
    const void* m_values_run = nullptr;  // the timeline whose range tau_q's scale spans (null: none)
    std::vector<float> m_values;  // [T] the chosen quantity in the chosen scope
    float m_value_min = 0, m_value_max = 0;  // of the shown tokens
    viz::Range m_scale;                      // the colour scale: diverging around 1 for temperatures
    viz::Range m_legend;                     // the part of it the legend's ramp shows (TemperatureScale::used)
    bool m_values_per_head = false;
    bool m_values_valid = false;

    int m_shown_query = -1;  // the query the strip last scrolled to
    int m_shown_key = -1;    // the zoomed map's first visible key the strip last scrolled to (-1: not zoomed)
};

}  // namespace app
