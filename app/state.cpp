#include "app/state.h"

#include <algorithm>

namespace app {

bool AppState::IsPinned(HeadRef h) const { return std::find(pinned.begin(), pinned.end(), h) != pinned.end(); }

void AppState::TogglePin(HeadRef h) {
    auto it = std::find(pinned.begin(), pinned.end(), h);
    if (it != pinned.end()) pinned.erase(it);
    else pinned.push_back(h);
}

void AppState::ClampSelection() {
    const int L = Layers(), H = Heads(), T = Tokens();
    if (L == 0) return;
    selected.layer = std::clamp(selected.layer, 0, L - 1);
    selected.head = std::clamp(selected.head, 0, H - 1);
    if (query >= T) query = T - 1;
    pinned.erase(std::remove_if(pinned.begin(), pinned.end(), [&](HeadRef h) { return h.layer >= L || h.head >= H; }), pinned.end());
}

}  // namespace app
