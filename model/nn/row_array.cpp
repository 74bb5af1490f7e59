// Per-row values in shared bands (row_array.h).
#include "model/nn/row_array.h"

#include <algorithm>
#include <cassert>

namespace model {

void RowArray::Running::Add(const float* values, int64_t first_token, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        const float v = values[i];
        if (first_token + i == 0) {
            min = max = v;
        } else {
            sum_after_first += v;
        }
        sum += v;
        min = std::min(min, v);
        max = std::max(max, v);
    }
}

std::shared_ptr<RowArray::Band> RowArray::NewBand(int64_t rows) {
    auto band = std::make_shared<Band>();
    band->values.resize(static_cast<size_t>(rows * kBand));
    band->end.resize(static_cast<size_t>(rows));
    return band;
}

void RowArray::Seal(Band* band, int64_t filled, const Band* before) {
    assert(filled > 0 && filled <= kBand && (!before || before->filled == kBand));
    const int64_t rows = static_cast<int64_t>(band->end.size());
    band->filled = filled;
    // Four rows side by side (each row's additions a chain that waits on itself), each in its
    // token order, as Running::Add takes them; the rows left over one at a time.
    int64_t r = 0;
    for (; r + 4 <= rows; r += 4) {
        Running s[4];
        const float* v = band->values.data() + r * kBand;
        int64_t i = 0;
        for (int j = 0; j < 4; ++j) {
            if (before) {
                s[j] = before->end[static_cast<size_t>(r + j)];
            } else {  // token 0: the min and max start there; the sum from token 1 does not include it
                s[j].min = s[j].max = v[j * kBand];
                s[j].sum += v[j * kBand];
            }
        }
        if (!before) i = 1;
        for (; i < filled; ++i)
            for (int j = 0; j < 4; ++j) {
                const float x = v[j * kBand + i];
                s[j].sum += x;
                s[j].sum_after_first += x;
                s[j].min = std::min(s[j].min, x);
                s[j].max = std::max(s[j].max, x);
            }
        for (int j = 0; j < 4; ++j) band->end[static_cast<size_t>(r + j)] = s[j];
    }
    for (; r < rows; ++r) {
        Running running = before ? before->end[static_cast<size_t>(r)] : Running{};
        running.Add(band->values.data() + r * kBand, before ? kBand : 0, filled);  // Add asks only whether it starts at token 0
        band->end[static_cast<size_t>(r)] = running;
    }
}

RowArray::RowArray(const std::vector<float>& values, int64_t rows, int64_t tokens) : m_rows(rows), m_tokens(tokens) {
    assert(rows >= 0 && tokens >= 0 && values.size() == static_cast<size_t>(rows * tokens));
    for (int64_t t = 0; t < tokens; t += kBand) {
        std::shared_ptr<Band> band = NewBand(rows);
        const int64_t n = std::min(kBand, tokens - t);
        for (int64_t r = 0; r < rows; ++r) std::copy_n(values.data() + r * tokens + t, n, band->values.data() + r * kBand);
        Seal(band.get(), n, m_bands.empty() ? nullptr : m_bands.back().get());
        m_bands.push_back(std::move(band));
    }
}

RowArray::RowArray(int64_t rows, int64_t tokens, std::vector<std::shared_ptr<const Band>> bands)
    : m_rows(rows), m_tokens(tokens), m_bands(std::move(bands)) {
    assert(static_cast<int64_t>(m_bands.size()) == (tokens + kBand - 1) / kBand);
    for (size_t b = 0; b < m_bands.size(); ++b) {
        assert(m_bands[b] && m_bands[b]->values.size() == static_cast<size_t>(rows * kBand));
        assert(m_bands[b]->filled >= std::min(kBand, tokens - static_cast<int64_t>(b) * kBand));
        (void)b;
    }
}

RowArray RowArray::Filled(int64_t rows, int64_t tokens, float value) {
    return RowArray(std::vector<float>(static_cast<size_t>(rows * tokens), value), rows, tokens);
}

std::vector<float> RowArray::Row(int64_t row) const {
    std::vector<float> out(static_cast<size_t>(m_tokens));
    CopyRow(row, out.data());
    return out;
}

void RowArray::CopyRow(int64_t row, float* out) const {
    assert(row >= 0 && row < m_rows);
    ForEachPart(row, [&](int64_t t, const float* values, int64_t n) { std::copy_n(values, n, out + t); });
}

std::vector<float> RowArray::Flat() const {
    std::vector<float> out(size());
    for (int64_t r = 0; r < m_rows; ++r) CopyRow(r, out.data() + r * m_tokens);
    return out;
}

RowArray::Running RowArray::Figures(int64_t row) const {
    assert(row >= 0 && row < m_rows && m_tokens > 0);
    const int64_t last = (m_tokens - 1) / kBand, used = m_tokens - last * kBand;
    const Band& band = *m_bands[static_cast<size_t>(last)];
    if (band.filled == used) return band.end[static_cast<size_t>(row)];
    Running running = last > 0 ? m_bands[static_cast<size_t>(last - 1)]->end[static_cast<size_t>(row)] : Running{};
    running.Add(band.values.data() + row * kBand, last * kBand, used);
    return running;
}

bool operator==(const RowArray& a, const RowArray& b) {
    if (a.m_rows != b.m_rows || a.m_tokens != b.m_tokens) return false;
    for (int64_t r = 0; r < a.m_rows; ++r)
        for (int64_t t = 0; t < a.m_tokens; ++t)
            if (!(a.At(r, t) == b.At(r, t))) return false;
    return true;
}

}  // namespace model
