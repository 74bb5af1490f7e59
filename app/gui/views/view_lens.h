// The Lens tab: what each layer and head writes (SPEC section 10), run on request (a forward pass
// of each side). A layer x position grid of the logit lens, each cell the token the residual
// after that layer would predict, coloured by the probability it gives the actual next token
// (hover: the top 5; click: that query); then, for the selected query, the heads ranked by their
// direct contribution to the next token's logit, SSA beside its comparison, and each layer's
// attention and MLP totals.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "app/gui/window_state.h"

namespace app {

class LensView {
public:
    void Draw(WindowState& state);

private:
    void DrawGrid(WindowState& state, const LensPair& lens);
    void DrawAttribution(WindowState& state, const LensPair& lens, int position);

    std::shared_ptr<const LensPair> m_for;       // what m_pieces was made for
    std::vector<std::string> m_pieces;           // [L + 1, T]: the top-1 piece of each cell
};

}  // namespace app
