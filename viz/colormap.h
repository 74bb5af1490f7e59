// Colour maps for heatmaps and token chips: a few key colours expanded once into a 256-entry
// lookup table, sampled with clamping. viz/ takes plain floats and knows nothing of torch.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
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

// A part of a scale as a colour bar shows it in the scale's colours (a temperature scale's half
// that the values reach): the part clamped into the scale, and t0..t1, where its ends lie on the
// colour map. An empty or NaN part is the whole scale (0..1).
struct ScalePart {
    Range range;
    float t0 = 0.0f, t1 = 1.0f;
};
ScalePart PartOfScale(Range scale, Range part, bool log_scale);

// Normalize for many values of one range: the range's logarithms taken once.
class Normalizer {
public:
    Normalizer(Range range, bool log_scale);
    float operator()(float value) const;

private:
    Range m_range;
    bool m_log_scale;
    float m_lo = 0, m_hi = 0;  // log10 of the range's ends (log scale)
};

const char* ColormapName(Colormap map);

// SampleColormap(map, Normalize(value, range, log_scale)) for many values (a heatmap's cells): the
// same colour for every value, without a logarithm per value. The entry a value samples is a
// non-decreasing step function of the value (log10f is monotone: checked over every positive float
// of glibc 2.36's FMA and SSE2 variants), so where each of its 255 steps lies (the least float that
// reaches it) is found once, by bisection over the floats in order. A value's entry is then guessed
// by cheap arithmetic (a logarithm from the float's bits) and moved to the step it lies on by
// comparing it with those floats: a step or two (where the guess can be further off, a narrow
// range, the steps are bisected instead). NaN samples entry 0, as SampleColormap has it.
// Fewer than kFewValues values (`values`: how many the caller will sample), a range that is not
// finite or as wide as no float (its ends' difference overflows) are sampled value by value: the
// bisection costs some 8,000 logarithms, and Normalize is no longer non-decreasing at the
// infinities of such a range.
class ColourScale {
public:
    static constexpr size_t kFewValues = 32768;
    ColourScale(Colormap map, Range range, bool log_scale, size_t values);
    uint8_t Index(float value) const {
        if (m_direct) return Direct(value);
        int i = 0;
        if (m_narrow) {  // the last step at or below the value, by bisection (NaN: none)
            for (int step = 128; step > 0; step /= 2) i += value >= m_first[i + step] ? step : 0;
            return static_cast<uint8_t>(i);
        }
        i = Guess(value);  // 0..255: right or one off
        i += value >= m_first[i + 1];  // a step either way, without a branch
        i -= static_cast<int>((i > 0) & !(value >= m_first[i]));  // NaN ends at 0
        return static_cast<uint8_t>(i);
    }
    Rgba8 operator()(float value) const { return (*m_table)[Index(value)]; }
    // For a GPU that colours the cells where they are (model::TexelScale): the least value of each
    // entry 1..255 (NaN for one no value reaches), so that a value's entry is how many of them it
    // is at or above; false where the scale samples value by value (few values, a range that is
    // not finite) and has no steps.
    bool Steps(std::array<float, 255>* out) const {
        if (m_direct) return false;
        std::memcpy(out->data(), m_first.data() + 1, sizeof(float) * 255);
        return true;
    }
    const std::array<Rgba8, 256>& Colours() const { return *m_table; }

private:
    uint8_t Direct(float value) const;
    int Guess(float value) const {
        float x = value;
        if (m_log_scale) {  // log2 of max(value, 1e-6) to within 0.0077: the exponent, and the mantissa's by a parabola
            uint32_t bits;
            const float v = value > 1e-6f ? value : 1e-6f;  // normal and positive; NaN stays NaN
            std::memcpy(&bits, &v, sizeof bits);
            const uint32_t mantissa_bits = (bits & 0x7fffffu) | 0x3f800000u;
            float m;  // in [1, 2)
            std::memcpy(&m, &mantissa_bits, sizeof m);
            x = static_cast<float>(static_cast<int>((bits >> 23) & 0xff) - 127) + (m - 1.0f) * (1.3466f - 0.3466f * (m - 1.0f));
        }
        const float entry = (x - m_origin) * m_per_entry;
        return entry >= 0.0f ? (entry < 255.0f ? static_cast<int>(entry + 0.5f) : 255) : 0;  // NaN: 0
    }
    Normalizer m_normalize;
    bool m_log_scale, m_direct;
    bool m_narrow = false;  // the guess can be more than one entry off (0.0077 of an octave is half an entry or more): bisect
    float m_origin = 0, m_per_entry = 0;  // the guess: entry = (x - m_origin) * m_per_entry, x the value or its log2
    // m_first[k], k >= 1: the least value whose entry is k or above; NaN where no value reaches k
    // (no comparison with NaN holds), and at 256. m_first[0] is -inf.
    std::array<float, 257> m_first;
    const std::array<Rgba8, 256>* m_table;
};

}  // namespace viz
