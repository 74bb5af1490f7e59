// The Lens tab: what each layer and head writes (SPEC section 10), run on request (a forward pass
// of each side). A layer x position grid of the logit lens, each cell the token the residual
// after that layer would predict, coloured by the probability it gives the actual next token
// (hover: the top 5; click: that query), of SSA, its comparison or its base, or SSA's log
// probability of the next token minus another side's (with a base: where in depth and in the text
// fine-tuning changed the prediction); then, for the selected query, the heads ranked by their
// direct contribution to the next token's logit, SSA beside its comparison (and a fine-tune's base:
// which heads' writes fine-tuning changed, the heads then ranked by that change if asked), and
// each layer's attention and MLP totals. Until the lens is run, the selected query's column and attribution
// alone (the worker's RunLensAt: at once after the text's first position).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "app/export/export_figures.h"
#include "app/gui/window_state.h"

namespace app {

class LensView {
public:
    void Draw(WindowState& state);

private:
    // One position's parts of a token's logit on one side: the next token's, or `target`'s.
    struct Parts {
        std::vector<float> heads;  // [L * H], layer-major
        std::vector<float> mlp;    // [L]
        float embed = 0, constants = 0, logit = 0;
        float divisor = 0, free = 0;  // the final norm's divisor they were read through, and the constants' share outside it
        float norm = 0;               // read through another side's divisor (ThroughDivisor): what this side's own adds
        int32_t target = -1;  // the token whose logit they split (-1: the text's next token)
        int32_t versus = -1;  // with a logit difference: the token whose parts were taken off `target`'s
    };
    static Parts PartsOf(const model::Lens& lens, int position);
    static Parts PartsOf(const model::LensAt& at, int n_layer, int n_head);  // empty heads if its parts are not [L H + L + 2]
    // `x` read through divisor `to` (model::PartsThroughDivisor), its `norm` what its own adds: a part
    // that wrote the same on two sides reads the same.
    static Parts ThroughDivisor(const Parts& x, float to);

    // The lens a grid shows (`from`), or a difference's two: `from`'s loss minus `minus`'s; a null
    // `from` where `lens` lacks a side it needs.
    struct GridSides {
        const model::Lens* from = nullptr;
        const model::Lens* minus = nullptr;
        std::string from_name, minus_name;
    };
    static GridSides SidesOf(const WindowState& state, const LensPair& lens, LensGrid grid, const std::string& compare_name);
    // What the grid can show of `lens` (a side it lacks: SSA's), and the radios that choose it.
    static LensGrid GridMode(const WindowState& state, const LensPair& lens);
    void DrawGridModes(WindowState& state, const LensPair& lens, const std::string& compare_name);
    // `position`: the query the attribution below is of, framed (and scrolled to when it changes).
    void DrawGrid(WindowState& state, const LensPair& lens, LensGrid mode, const std::string& compare_name, int position);
    void DrawColumn(WindowState& state, const LensAtPair& at, const std::string& compare_name);
    // "Attribute: the next token | SSA's top prediction | next against other" (state.lens_target); at
    // the last token, SSA's top prediction alone.
    static void DrawTarget(WindowState& state, bool last);
    // `base`: a fine-tune's base beside them (null: none).
    void DrawAttribution(WindowState& state, int position, const Parts& ssa, const Parts* compare, const Parts* base,
                         const std::string& compare_name);

    std::shared_ptr<const LensPair> m_for;       // what m_pieces and m_difference were made for
    LensGrid m_for_mode = LensGrid::Ssa;         // and which grid
    int m_grid_query = -1;                       // the position the grid last scrolled to
    std::vector<std::string> m_pieces;           // [L + 1, T]: the top-1 piece of each cell
    LensDifference m_difference;                 // a difference grid's cells and scale
    bool m_by_change = false;                    // with a base: heads ranked by |SSA - base| instead of |SSA|
};

}  // namespace app
