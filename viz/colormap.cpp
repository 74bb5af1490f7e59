#include "viz/colormap.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
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

// The table entry t samples.
int EntryOf(float t) {
    if (!(t >= 0.0f)) t = 0.0f;  // NaN too
    if (t > 1.0f) t = 1.0f;
    return static_cast<int>(std::lround(t * 255.0f));
}

// Floats in order as unsigned integers: -inf is the least, +inf the greatest, NaNs outside both.
uint32_t OrderKey(float f) {
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    return bits & 0x80000000u ? ~bits : bits | 0x80000000u;
}
float FromOrderKey(uint32_t key) {
    const uint32_t bits = key & 0x80000000u ? key & 0x7fffffffu : ~key;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

}  // namespace

Rgba8 SampleColormap(Colormap map, float t) { return Table(map)[static_cast<size_t>(EntryOf(t))]; }

ColourScale::ColourScale(Colormap map, Range range, bool log_scale, size_t values)
    : m_normalize(range, log_scale),
      m_log_scale(log_scale),
      m_direct(values < kFewValues || !std::isfinite(range.max - range.min)),  // NaN or infinite ends: not finite either
      m_table(&Table(map)) {
    m_first.fill(std::numeric_limits<float>::quiet_NaN());
    if (m_direct) return;
    if (log_scale) {
        const float lo = std::log2(std::max(range.min, 1e-6f)), hi = std::log2(std::max(range.max, 1e-6f));
        m_origin = lo;
        m_per_entry = hi > lo ? 255.0f / (hi - lo) : 0.0f;
        m_narrow = 0.0077f * m_per_entry >= 0.45f;
    } else {  // the guess's rounding differs from Normalize's in the last bits: never a whole entry
        m_origin = range.min;
        m_per_entry = range.max > range.min ? 255.0f / (range.max - range.min) : 0.0f;
    }
    if (!std::isfinite(m_per_entry)) m_narrow = true;  // a range a few subnormals wide
    auto entry = [&](uint32_t key) { return Direct(FromOrderKey(key)); };
    const uint32_t greatest = OrderKey(std::numeric_limits<float>::infinity());
    m_first[0] = -std::numeric_limits<float>::infinity();
    uint32_t from = OrderKey(m_first[0]);  // each step lies at or above the last one
    for (int k = 1; k < 256 && entry(greatest) >= k; ++k) {  // no value reaches k: nor any step above it
        uint32_t lo = from, hi = greatest;  // entry(hi) >= k; the step lies in [lo, hi]
        while (lo < hi) {
            const uint32_t mid = lo + (hi - lo) / 2;
            if (entry(mid) >= k) hi = mid;
            else lo = mid + 1;
        }
        m_first[k] = FromOrderKey(lo);
        from = lo;
    }
}

uint8_t ColourScale::Direct(float value) const { return static_cast<uint8_t>(EntryOf(m_normalize(value))); }

Normalizer::Normalizer(Range range, bool log_scale) : m_range(range), m_log_scale(log_scale) {
    if (log_scale) m_lo = std::log10(std::max(range.min, 1e-6f)), m_hi = std::log10(std::max(range.max, 1e-6f));
}

float Normalizer::operator()(float value) const {
    if (m_log_scale) {
        const float v = std::log10(std::max(value, 1e-6f));
        return m_hi > m_lo ? std::clamp((v - m_lo) / (m_hi - m_lo), 0.0f, 1.0f) : 0.0f;
    }
    const Range& r = m_range;
    return r.max > r.min ? std::clamp((value - r.min) / (r.max - r.min), 0.0f, 1.0f) : 0.0f;
}

float Normalize(float value, Range range, bool log_scale) { return Normalizer(range, log_scale)(value); }

ScalePart PartOfScale(Range scale, Range part, bool log_scale) {
    part.min = std::clamp(part.min, scale.min, scale.max);
    part.max = std::clamp(part.max, scale.min, scale.max);
    if (!(part.max > part.min)) return {scale};
    return {part, Normalize(part.min, scale, log_scale), Normalize(part.max, scale, log_scale)};
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
