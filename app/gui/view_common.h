// Small pieces the views share.
#pragma once

#include "app/core/state.h"

namespace app {

// For views with nothing to show yet: draws why ("waiting for the model..." or a pointer to the
// error) and returns true when there is no analysis.
bool DrawNoAnalysisNote(const AppState& state);

// Continues on the same line when an item of `width` still fits there (else starts a new line).
void SameLineIfFits(float width);

}  // namespace app
