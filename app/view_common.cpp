// Small pieces shared by the views.
#include <imgui.h>

#include "app/state.h"

namespace app {

bool DrawNoAnalysisNote(const AppState& state) {
    if (state.analysis) return false;
    ImGui::TextDisabled("%s", state.error.empty() ? "waiting for the model..." : "no analysis (see the message above)");
    return true;
}

}  // namespace app
