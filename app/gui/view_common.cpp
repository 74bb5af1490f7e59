// Small pieces shared by the views.
#include "app/gui/view_common.h"

#include <imgui.h>

namespace app {

bool DrawNoAnalysisNote(const AppState& state) {
    if (state.analysis) return false;
    ImGui::TextDisabled("%s", state.error.empty() ? "waiting for the model..." : "no analysis (see the message above)");
    return true;
}

void SameLineIfFits(float width) {
    const float right = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x;
    if (ImGui::GetItemRectMax().x + ImGui::GetStyle().ItemSpacing.x + width <= right) ImGui::SameLine();
}

}  // namespace app
