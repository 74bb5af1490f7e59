// Small pieces the views share.
#pragma once

#include "app/core/state.h"

namespace app {

// For views with nothing to show yet: draws why ("waiting for the model..." or a pointer to the
// error) and returns true when there is no analysis.
bool DrawNoAnalysisNote(const AppState& state);

}  // namespace app
