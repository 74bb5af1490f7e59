#include "viz/colormap.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace viz {
namespace {

struct Key {
    float t;
    uint8_t r, g, b;
};

// Key colours read off the published maps (viridis and magma by van der Walt and Smith, CC0; the
// diverging map blue-white-red), interpolated linearly in between.
const std::vector<Key> kViridis = {{0.000f, 68, 1, 84},    {0.125f, 71, 44, 123},  {0.250f, 59, 82, 139},
                                   {0.375f, 44, 114, 142}, {0.500f, 33, 145, 140}, {0.625f, 40, 174, 128},
                                   {0.750f, 94, 201, 98},  {0.875f, 171, 220, 50}, {1.000f, 253, 231, 37}};
const std::vector<Key> kMagma = {{0.000f, 0, 0, 4},       {0.125f, 28, 16, 68},   {0.250f, 79, 18, 123},
                                 {0.375f, 129, 37, 129},  {0.500f, 181, 54, 122}, {0.625f, 229, 80, 100},
                                 {0.750f, 251, 135, 97},  {0.875f, 254, 194, 135}, {1.000f, 252, 253, 191}};
const std::vector<Key> kDiverging = {{0.0f, 33, 102, 172}, {0.25f, 146, 197, 222}, {0.5f, 247, 247, 247},
                                     {0.75f, 244, 165, 130}, {1.0f, 178, 24, 43}};

using Lut = std::array<Rgba8, 256>;

Lut Expand(const std::vector<Key>& keys) {
    Lut lut;
    for (int i = 0; i < 256; ++i) {
        float t = static_cast<float>(i) / 255.0f;
        size_t k = 1;
        while (k + 1 < keys.size() && keys[k].t < t) ++k;
        const Key &a = keys[k - 1], &b = keys[k];
        float u = std::clamp((t - a.t) / (b.t - a.t), 0.0f, 1.0f);
        auto mix = [u](uint8_t x, uint8_t y) { return static_cast<uint8_t>(std::lround(x + (y - x) * u)); };
        lut[i] = {mix(a.r, b.r), mix(a.g, b.g), mix(a.b, b.b), 255};
    }
    return lut;
}

const Lut& Table(Colormap map) {
    static const Lut viridis = Expand(kViridis), magma = Expand(kMagma), diverging = Expand(kDiverging);
    switch (map) {
        case Colormap::Magma: return magma;
        case Colormap::Diverging: return diverging;
        case Colormap::Viridis: break;
    }
    return viridis;
}

}  // namespace

Rgba8 SampleColormap(Colormap map, float t) {
    if (!(t >= 0.0f)) t = 0.0f;  // NaN too
    if (t > 1.0f) t = 1.0f;
    return Table(map)[static_cast<size_t>(std::lround(t * 255.0f))];
}

float Normalize(float value, Range range, bool log_scale) {
    if (log_scale) {
        float lo = std::log10(std::max(range.min, 1e-6f)), hi = std::log10(std::max(range.max, 1e-6f));
        float v = std::log10(std::max(value, 1e-6f));
        return hi > lo ? std::clamp((v - lo) / (hi - lo), 0.0f, 1.0f) : 0.0f;
    }
    return range.max > range.min ? std::clamp((value - range.min) / (range.max - range.min), 0.0f, 1.0f) : 0.0f;
}

const char* ColormapName(Colormap map) {
    switch (map) {
        case Colormap::Magma: return "magma";
        case Colormap::Diverging: return "diverging";
        case Colormap::Viridis: break;
    }
    return "viridis";
}

}  // namespace viz
