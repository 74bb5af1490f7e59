// One value per attention row of every head, [L, H, T]: a temperature, a row metric, a divergence.
// Kept in bands of kBand tokens, band b holding tokens b * kBand.. of every head's row as
// [L * H, kBand] row-major (past the tokens it was made with, unused). Bands are immutable and
// shared, as the thumbnails' are (attention_maps.h): the analysis after an edit keeps every band
// below its first changed row and builds the rest, so typing at the end of 8,192 tokens of GPT-2
// small's shape copies one band of each array (147 KB), not the array (4.7 MB; 22 such arrays, 104 MB).
//
// A band also holds each row's running figures at its end (sum, min, max from token 0, in token
// order), so a head's mean over its T tokens reads one band's figures, not T values: a band is
// shared only with the bands before it, so the figures it was made with hold wherever it is.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <vector>

namespace model {

class RowArray {
public:
    static constexpr int64_t kBand = 256;  // tokens a band

    // A row's figures over its tokens 0..t, added in token order (so the same bits as one loop
    // over them): the sum of all, the sum from token 1 on (row 0 of a map has one key), and the
    // min and max as std::min / std::max from token 0's value (NaN there stays, NaN later never wins).
    struct Running {
        double sum = 0, sum_after_first = 0;
        float min = NAN, max = NAN;
        void Add(const float* values, int64_t first_token, int64_t n);  // tokens first_token..first_token+n-1
    };
    struct Band {
        std::vector<float> values;  // [rows, kBand]
        int64_t filled = 0;         // the tokens it was made with (the running figures' end)
        std::vector<Running> end;   // [rows]: each row's figures after its last filled token
    };

    RowArray() = default;
    // From `values`, [rows, tokens] row-major (asserts its size).
    RowArray(const std::vector<float>& values, int64_t rows, int64_t tokens);
    // From bands made elsewhere (each filled by Seal): ceil(tokens / kBand) of them.
    RowArray(int64_t rows, int64_t tokens, std::vector<std::shared_ptr<const Band>> bands);
    static RowArray Filled(int64_t rows, int64_t tokens, float value);
    // A new band for `rows` rows, its values zero, to write tokens into before Seal.
    static std::shared_ptr<Band> NewBand(int64_t rows);
    // Fills in a band's running figures once its first `filled` tokens are written; `before` is
    // the band before it (null for band 0), whose figures it continues.
    static void Seal(Band* band, int64_t filled, const Band* before);

    int64_t rows() const { return m_rows; }
    int64_t tokens() const { return m_tokens; }
    size_t size() const { return static_cast<size_t>(m_rows * m_tokens); }
    bool empty() const { return size() == 0; }
    float At(int64_t row, int64_t t) const { return m_bands[static_cast<size_t>(t / kBand)]->values[static_cast<size_t>(row * kBand + t % kBand)]; }
    float operator[](size_t i) const { return At(static_cast<int64_t>(i) / m_tokens, static_cast<int64_t>(i) % m_tokens); }  // [rows, tokens]
    std::vector<float> Row(int64_t row) const;  // its `tokens` values
    void CopyRow(int64_t row, float* out) const;
    std::vector<float> Flat() const;  // [rows, tokens]
    // The row's figures over all its tokens (the last band's, or continued from the one before it
    // when this array ends inside a band made longer); undefined for an empty array.
    Running Figures(int64_t row) const;

    // f(t, values, n) for the row's tokens t..t+n-1, band by band in order.
    template <class F>
    void ForEachPart(int64_t row, F&& f) const {
        for (int64_t t = 0; t < m_tokens; t += kBand)
            f(t, m_bands[static_cast<size_t>(t / kBand)]->values.data() + row * kBand, t + kBand < m_tokens ? kBand : m_tokens - t);
    }
    const std::vector<std::shared_ptr<const Band>>& bands() const { return m_bands; }

    // Every value in [rows, tokens] order (operator[] each: for checks and small arrays; a loop
    // over many values goes through ForEachPart).
    class const_iterator {
    public:
        using iterator_category = std::forward_iterator_tag;
        using value_type = float;
        using difference_type = std::ptrdiff_t;
        using pointer = const float*;
        using reference = float;
        const_iterator(const RowArray* v, size_t i) : m_v(v), m_i(i) {}
        float operator*() const { return (*m_v)[m_i]; }
        const_iterator& operator++() { return ++m_i, *this; }
        const_iterator operator++(int) { const_iterator was = *this; return ++m_i, was; }
        bool operator==(const const_iterator& o) const { return m_i == o.m_i; }
        bool operator!=(const const_iterator& o) const { return m_i != o.m_i; }

    private:
        const RowArray* m_v;
        size_t m_i;
    };
    const_iterator begin() const { return {this, 0}; }
    const_iterator end() const { return {this, size()}; }

    // The same shape and values (float ==: NaN equals nothing, as for std::vector<float>).
    friend bool operator==(const RowArray& a, const RowArray& b);
    friend bool operator!=(const RowArray& a, const RowArray& b) { return !(a == b); }

private:
    int64_t m_rows = 0, m_tokens = 0;
    std::vector<std::shared_ptr<const Band>> m_bands;
};

}  // namespace model
