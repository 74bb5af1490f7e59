// What the model predicts (issue 17): for the selected query token (the last token when none is
// selected), the ten most likely next tokens of the SSA side beside the comparison's, with
// probabilities as bars and the text's actual next token marked with its rank; and Continue
// (Ctrl+G), which appends generated tokens to the text one at a time.
#pragma once

#include "app/gui/window_state.h"

namespace app {

struct PredictionView {
    void Draw(WindowState& state);

private:
    void DrawContinue(AppState& state);
    void DrawNextTokens(const AppState& state);
};

}  // namespace app
