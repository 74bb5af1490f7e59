// Colour maps for heatmaps and token chips: a few key colours expanded once into a 256-entry
// lookup table, sampled with clamping. viz/ takes plain floats and knows nothing of torch.
#pragma once

#include <array>
#include <cstdint>
#include <optional>

namespace viz {

enum class Colormap { Viridis, Magma, Diverging };

struct Rgba8 {
    uint8_t r = 0, g = 0, b = 0, a = 255;
};

struct Range {
    float min = 0.0f;
    float max = 1.0f;
};

// Maps t in [0, 1] (clamped; NaN draws as the lowest colour) to a colour.
Rgba8 SampleColormap(Colormap map, float t);

// Value to [0, 1] within a range; log scale uses log10 over [max(min, 1e-6), max].
float Normalize(float value, Range range, bool log_scale);

const char* ColormapName(Colormap map);

}  // namespace viz
