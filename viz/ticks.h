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

// The range an axis fitted to data from lo to hi shows: widened by `fraction` of the span on each
// side (a single value by 10% of it), but never across zero where the data does not cross it (a
// divergence's axis starts at 0, not below it; bars from 0 start there). [0, 1] for data that is 0
// alone, and where lo > hi or either is NaN (no data). Both backends'.
Range PaddedRange(float lo, float hi, float fraction);

// A short label for a value: "0.25", "1e-04", "-0.031". Always '.' as the decimal point.
std::string FormatTick(float value);
// A number printed with a fixed precision ("%+.3f") that rounds to zero, without its sign: "-0.000"
// and "+0.000" read "0.000" (a sign beside no digit said more than the digits do); any other text as it is.
std::string SignlessZero(std::string printed);
// Labels for an axis's ticks: FormatTick's, with more digits where two neighbours would read the
// same ("10.85" beside "10.8", not "10.8" twice).
std::vector<std::string> FormatTicks(const std::vector<float>& ticks);

// Label positions along one axis (a line's end labels, "L0".."L11") moved apart the least so
// that no two are closer than `gap`, in their order, inside [lo, hi] where they fit; the i-th
// result is the i-th label's. Non-finite positions go to lo.
std::vector<float> SpreadLabels(const std::vector<float>& at, float gap, float lo, float hi);

}  // namespace viz
