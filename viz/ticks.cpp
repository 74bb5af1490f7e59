#include "viz/ticks.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <string>

namespace viz {
namespace {

constexpr float kLogFloor = 1e-6f;  // Normalize() clamps log values to this, so ticks do too

}  // namespace

std::vector<float> NiceTicks(Range range, bool log_scale, int max_ticks) {
    std::vector<float> ticks;
    max_ticks = std::max(2, max_ticks);
    if (!std::isfinite(range.min) || !std::isfinite(range.max)) return ticks;
    if (log_scale) {
        const double lo = std::log10(std::max(range.min, kLogFloor)), hi = std::log10(std::max(range.max, kLogFloor));
        const int first = static_cast<int>(std::ceil(lo - 1e-6)), last = static_cast<int>(std::floor(hi + 1e-6));
        if (last < first) return ticks;
        const int count = last - first + 1;
        const int stride = (count + max_ticks - 1) / max_ticks;
        for (int d = first; d <= last; ++d)
            if (d % stride == 0) ticks.push_back(static_cast<float>(std::pow(10.0, d)));
        return ticks;
    }
    const double span = static_cast<double>(range.max) - range.min;
    if (!(span > 0)) {
        ticks.push_back(range.min);
        return ticks;
    }
    const double raw = span / 5.0;
    const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
    for (double factor : {1.0, 2.0, 2.5, 5.0, 10.0, 20.0}) {
        const double step = factor * magnitude;
        if (step < raw * 0.999) continue;
        const double first = std::ceil(range.min / step - 1e-9), last = std::floor(range.max / step + 1e-9);
        if (last - first + 1 > max_ticks) continue;
        for (double k = first; k <= last; ++k) {
            double v = k * step;
            if (std::abs(v) < step * 1e-6) v = 0;  // no "-1.4e-17" for zero
            // A step below float's spacing there gives one float twice: one tick (a run's curve whose
            // values differ in their last digit printed "1.67826319" over itself).
            if (ticks.empty() || static_cast<float>(v) != ticks.back()) ticks.push_back(static_cast<float>(v));
        }
        break;
    }
    return ticks;
}

namespace {

// snprintf follows LC_NUMERIC; figures must read the same under a comma locale.
std::string Print(const char* format, double value) {
    char buf[32];
    std::snprintf(buf, sizeof buf, format, value);
    for (char* c = buf; *c; ++c)
        if (*c == ',') *c = '.';
    return buf;
}

bool NeighboursDiffer(const std::vector<std::string>& labels) {
    for (size_t k = 1; k < labels.size(); ++k)
        if (labels[k] == labels[k - 1]) return false;
    return true;
}

// Whether some labels are in scientific notation and others, 0 aside, are not ("5e-04" beside "0.001").
bool MixedNotation(const std::vector<std::string>& labels) {
    int sci = 0, plain = 0;
    for (const std::string& l : labels)
        if (l != "0") ++(l.find('e') != std::string::npos ? sci : plain);
    return sci > 0 && plain > 0;
}

// The power of ten a tick is, to float's rounding (a log axis's decades); none for any other value.
bool DecadeOf(float v, int* exponent) {
    if (!(v > 0) || !std::isfinite(v)) return false;
    const double e = std::round(std::log10(static_cast<double>(v)));
    if (std::abs(static_cast<double>(v) / std::pow(10.0, e) - 1.0) > 1e-5) return false;
    *exponent = static_cast<int>(e);
    return true;
}

// "10" and the exponent raised: "10⁻⁴", "10⁰" (DejaVu Sans, the figures' and the window's font, has
// the superscript digits and minus).
std::string PowerOfTen(int exponent) {
    static const char* const kDigits[] = {"\xE2\x81\xB0", "\xC2\xB9", "\xC2\xB2", "\xC2\xB3", "\xE2\x81\xB4",
                                          "\xE2\x81\xB5", "\xE2\x81\xB6", "\xE2\x81\xB7", "\xE2\x81\xB8", "\xE2\x81\xB9"};
    std::string digits;
    for (int e = std::abs(exponent); digits.empty() || e > 0; e /= 10) digits = kDigits[e % 10] + digits;
    return "10" + std::string(exponent < 0 ? "\xE2\x81\xBB" : "") + digits;
}

// A log axis's labels in one notation where its own mix ("1e-06, 1e-05, 1e-04, 0.001, 0.01, 0.1, 1"):
// its decades as powers of ten, another value (a bar's end) as a multiple of one ("3.2×10⁻⁷"), in
// as many digits as tell it from its neighbours (9.97e-5 beside 10⁻⁴: "9.97×10⁻⁵"). A log axis's
// ticks between its ends are decades: a linear one's (2.5e-4, 5e-4 between 1e-4 and 1e-3) are not.
bool DecadeLabels(const std::vector<float>& ticks, std::vector<std::string>* labels) {
    int decades = 0, e = 0;
    for (size_t k = 0; k < ticks.size(); ++k) {
        if (!(ticks[k] > 0) || !std::isfinite(ticks[k])) return false;
        const bool decade = DecadeOf(ticks[k], &e);
        if (!decade && k > 0 && k + 1 < ticks.size()) return false;
        decades += decade;
    }
    if (decades < 2) return false;
    for (int digits = 2; digits <= 6; ++digits) {
        for (size_t k = 0; k < ticks.size(); ++k) {
            if (DecadeOf(ticks[k], &e)) {
                (*labels)[k] = PowerOfTen(e);
                continue;
            }
            int exponent = static_cast<int>(std::floor(std::log10(static_cast<double>(ticks[k]))));
            std::string mantissa = Print(("%." + std::to_string(digits) + "g").c_str(), ticks[k] / std::pow(10.0, exponent));
            if (mantissa == "10") mantissa = "1", ++exponent;  // 9.97 rounds up
            (*labels)[k] = (mantissa == "1" ? "" : mantissa + "\xC3\x97") + PowerOfTen(exponent);
        }
        if (NeighboursDiffer(*labels)) break;
    }
    return true;
}

// Evenly spaced ticks (a linear axis's), their step; 0 where they are not.
double EvenStep(const std::vector<float>& ticks) {
    if (ticks.size() < 3) return ticks.size() == 2 ? std::abs(static_cast<double>(ticks[1]) - ticks[0]) : 0;
    const double step = static_cast<double>(ticks[1]) - ticks[0];
    for (size_t k = 2; k < ticks.size(); ++k)
        if (std::abs((static_cast<double>(ticks[k]) - ticks[k - 1]) - step) > 1e-3 * std::abs(step)) return 0;
    return std::abs(step);
}

}  // namespace

std::vector<std::string> FormatTicks(const std::vector<float>& ticks) {
    std::vector<std::string> labels;
    for (float v : ticks) labels.push_back(FormatTick(v));
    if (MixedNotation(labels) && DecadeLabels(ticks, &labels)) return labels;  // a log axis's
    // A linear axis in one notation: its step's decimals, trailing zeros dropped ("0, 0.0005, 0.001,
    // 0.0015", not "0, 5e-04, 0.001, 0.0015").
    // Whole numbers past a million the same way ("0, 500000, 1000000", not "1e+06").
    // A bar's ends beside its round values are not spaced as they are: the step of those between.
    double step = EvenStep(ticks);
    if (step == 0 && ticks.size() >= 4) step = EvenStep(std::vector<float>(ticks.begin() + 1, ticks.end() - 1));
    if (MixedNotation(labels) && step >= 1 && std::all_of(ticks.begin(), ticks.end(), [](float v) { return std::abs(v) < 1e15f && v == std::round(v); }))
        for (size_t k = 0; k < ticks.size(); ++k) labels[k] = Print("%.0f", ticks[k]);
    if (MixedNotation(labels) && step > 1e-9 && step < 1) {
        const int decimals = std::min(9, static_cast<int>(std::ceil(-std::log10(step) - 1e-9)) + 1);
        for (size_t k = 0; k < ticks.size(); ++k) {
            std::string s = ticks[k] == 0.0f ? "0" : Print(("%." + std::to_string(decimals) + "f").c_str(), ticks[k]);
            if (s.find('.') != std::string::npos) {
                while (s.back() == '0') s.pop_back();
                if (s.back() == '.') s.pop_back();
            }
            labels[k] = SignlessZero(s);
        }
    }
    for (int digits = 4; digits <= 9 && !NeighboursDiffer(labels); ++digits) {
        const std::string format = "%." + std::to_string(digits) + "g";
        for (size_t k = 0; k < ticks.size(); ++k) labels[k] = ticks[k] == 0.0f ? "0" : Print(format.c_str(), ticks[k]);
    }
    return labels;
}

std::string SignlessZero(std::string printed) {
    if (printed.size() < 2 || (printed[0] != '-' && printed[0] != '+')) return printed;
    for (size_t i = 1; i < printed.size(); ++i)
        if (printed[i] != '0' && printed[i] != '.') return printed;
    return printed.substr(1);
}

std::string FormatTick(float value) {
    char buf[32];
    auto print = [&](const char* format) { std::snprintf(buf, sizeof buf, "%s", Print(format, value).c_str()); };
    const float a = std::abs(value);
    if (value == 0.0f) return "0";
    if (a >= 1e3f && a < 1e6f) {
        print(value == std::round(value) ? "%.0f" : "%.6g");  // "1000", "250000": an axis of positions
    } else if (a >= 1e-3f && a < 1e3f) {
        print("%.3g");
    } else {
        print("%.1e");
        if (std::strstr(buf, ".0e")) print("%.0e");  // "1e-04", not "1.0e-04"
    }
    return buf;
}

Range PaddedRange(float lo, float hi, float fraction) {
    if (!(lo <= hi) || (lo == 0 && hi == 0)) return {0.0f, 1.0f};
    const float d = hi > lo ? (hi - lo) * fraction : std::abs(lo) * 0.1f;
    Range r{lo - d, hi + d};
    if (lo >= 0) r.min = std::max(r.min, 0.0f);  // data from 0 up (bars from 0 among them): the axis too
    if (hi <= 0) r.max = std::min(r.max, 0.0f);
    return r;
}

std::vector<float> SpreadLabels(const std::vector<float>& at, float gap, float lo, float hi) {
    hi = std::max(hi, lo);
    std::vector<float> y(at.size());
    for (size_t i = 0; i < at.size(); ++i) y[i] = std::isfinite(at[i]) ? std::clamp(at[i], lo, hi) : lo;
    std::vector<size_t> order(at.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return y[a] < y[b]; });
    if (order.empty()) return y;
    // Down from the top, each at least a gap below the one before; then up from the bottom edge
    // (where that ran past it), each at least a gap above the one after.
    for (size_t k = 1; k < order.size(); ++k) y[order[k]] = std::max(y[order[k]], y[order[k - 1]] + gap);
    y[order.back()] = std::min(y[order.back()], hi);
    for (size_t k = order.size() - 1; k-- > 0;) y[order[k]] = std::min(y[order[k]], y[order[k + 1]] - gap);
    return y;
}

}  // namespace viz
