// A window that shows every viz widget on synthetic data made here (no models): colour maps and
// colour bars, causal heatmaps in each colour map (linear and log), a signed difference, the
// max-pooled level of detail of a large map, plots of each kind of series, and the small widgets. It doubles as documentation,
// like imgui_demo.cpp: each section says which function draws it.
#pragma once

namespace viz {

// Shows the demo window while *open is true; closing it frees its textures (they are also freed
// when the ImGui context shuts down, while the GL context still exists).
void ShowDemoWindow(bool* open);

}  // namespace viz
