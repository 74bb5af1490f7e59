// The Fine-tune tab: what fine-tuning changed in a model beside its base (SPEC section 9), split
// in two. Every head's change as two layer x head matrices on one scale, the temperatures' part
// (SSA against its own weights at tau = 1) beside the other weights' drift (tau = 1 against the
// base); the mean loss of the three sides; and each token's loss change as two bars, the
// temperatures' part and the drift's. Click a head to show it (the map's three-way layout shows
// its three maps), a token to select it as the query. Without a base, how to get one.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "app/gui/window_state.h"
#include "model/nn/analysis.h"

namespace app {

class FineTuneView {
public:
    void Draw(WindowState& state);

private:
    void DrawMatrices(WindowState& state);
    void DrawRankedParts(WindowState& state);
    void DrawLossParts(WindowState& state);

    // The matrices' shared scale: linear from 0 as finetune.png draws it (export --log, Python's
    // plot("finetune", log=True) the other), or logarithmic, four decades down from the larger
    // part's largest, where a drift some 1e-4 beside temperatures' 0.4 would be dark.
    bool m_log_scale = false;
    std::weak_ptr<const model::Analysis> m_for;  // what m_parts was made from
    model::Decomposition m_parts;
    std::vector<std::string> m_labels;  // [T] token labels
    // The caption's "where on the text" and "along the layers" (each part token by token: L x H x T
    // values, not made again each frame), of the ranking m_where_for, on m_for's text.
    std::weak_ptr<const HeadImpacts> m_where_for;
    std::string m_where, m_path;
};

}  // namespace app
