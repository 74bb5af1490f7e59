// Whose logit an attribution splits (the Lens tab's Attribute, `export --dla-target`, Python's
// dla_target=): one position's parts on every side, of the same token, the choice resolved on SSA's
// side. One place for the window, the command line and Python, so the three name the same token.
#pragma once

#include <cstdint>
#include <vector>

#include "app/core/state.h"
#include "model/io/result.h"
#include "model/nn/analysis.h"

namespace app {

struct SidesAttribution {
    int64_t position = 0;                 // the token whose prediction is attributed (0 .. T - 1)
    LensTarget target = LensTarget::Next;  // as resolved: the last position has no next token, so SSA's top prediction there
    int32_t token = -1;                   // the token attributed: the next, or SSA's top prediction
    int32_t versus = -1;                  // NextAgainstOther: SSA's most likely other token, whose parts each side's are less
    std::vector<model::LensAt> sides;     // as `sides` asked; with `versus` parts and logit are differences
};

// SSA's prediction after its last layer is read on MapSide::Ssa, which `sides` must start with:
// Top attributes it, NextAgainstOther the next token against it (or against SSA's second where the
// top is the next token). Each side a LensAtPosition of the engine's kept stream (its first call
// for a text runs that side's forward pass).
model::Result<SidesAttribution> AttributeAt(model::Engine& engine, const std::vector<int32_t>& ids, const std::vector<model::MapSide>& sides,
                                            int64_t position, LensTarget target);

}  // namespace app
