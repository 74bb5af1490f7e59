// Axis ticks on plain numbers: round values inside a range and short labels for them. Shared by
// the GUI's colour bars and plots (viz/imgui/widgets.h) and the exported figures (viz/figures.h), so it
// needs no ImGui.
#pragma once

#include <string>
#include <vector>

#include "viz/colormap.h"

namespace viz {

// Round values inside the range for axis ticks: 1-2-5 steps (linear) or decades (log), at most
// about `max_ticks` of them.
std::vector<float> NiceTicks(Range range, bool log_scale, int max_ticks = 6);

// A short label for a value: "0.25", "1e-04", "-0.031". Always '.' as the decimal point.
std::string FormatTick(float value);
// Labels for an axis's ticks: FormatTick's, with more digits where two neighbours would read the
// same ("10.85" beside "10.8", not "10.8" twice).
std::vector<std::string> FormatTicks(const std::vector<float>& ticks);

}  // namespace viz
