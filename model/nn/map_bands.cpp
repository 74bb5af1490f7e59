// A head's map in bands (attention_maps_torch.h's MapBand and BandedMap): each band's levels of
// detail, extent and difference made once, when first read, and a map read in parts across them.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>

#include <c10/core/InferenceMode.h>

#include "model/nn/attention_maps_torch.h"
#include "model/nn/runtime_torch.h"

namespace model {

MapBand::MapBand(int64_t first, at::Tensor rows, bool diverging)
    : m_first(first), m_diverging(diverging), m_cells(rows.to(at::kFloat).contiguous()) {}

at::Tensor MapBand::Level(int k) const {
    if (k == 0) return m_cells;
    std::lock_guard<std::mutex> lock(m_mutex);
    while (static_cast<int>(m_levels.size()) < k) m_levels.push_back(PoolByTwo(m_levels.empty() ? m_cells : m_levels.back(), m_diverging));
    return m_levels[static_cast<size_t>(k - 1)];
}

bool MapBand::KnownExtent(MapExtent* out) const {
    std::lock_guard<std::mutex> lock(m_mutex);
    if (!m_extent && m_cells.is_cpu())  // the host reads its own cells; a device's come in ExtentBitsTensor
        m_extent = HostMapExtent(m_cells.data_ptr<float>(), m_cells.size(0), m_cells.size(1), m_first);
    if (m_extent) *out = *m_extent;
    return m_extent.has_value();
}

at::Tensor MapBand::ExtentBitsTensor() const {
    std::lock_guard<std::mutex> lock(m_mutex);
    if (!m_extent_bits.defined()) m_extent_bits = ExtentBits(m_cells, m_first);
    return m_extent_bits;
}

void MapBand::SetExtent(const MapExtent& e) const {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_extent = e;
    m_extent_bits = at::Tensor();  // read: the device's memory can go
}

MapBandPtr MapBand::Minus(const MapBandPtr& other) const {
    if (!other || other->first() != first() || other->rows() != rows() || other->width() != width()) return nullptr;
    std::lock_guard<std::mutex> lock(m_mutex);  // only this band's: the other's cells are immutable
    if (m_minus && m_minus_of.lock() == other) return m_minus;
    m_minus = std::make_shared<const MapBand>(m_first, m_cells - other->m_cells, /*diverging=*/true);
    m_minus_of = other;
    return m_minus;
}

BandedMap::BandedMap(std::vector<MapBandPtr> bands, int64_t tokens, bool diverging)
    : m_bands(std::move(bands)), m_tokens(tokens), m_diverging(diverging) {}

size_t BandedMap::Bytes() const {
    size_t bytes = 0;
    for (const MapBandPtr& band : m_bands) bytes += band->Bytes();
    return bytes / 3 * 4;
}

namespace {

constexpr int kMaxLevel = 31;  // past ceil(T / 2^k) = 1 a level is its own 1 x 1 pool

int64_t LevelSide(int64_t n, int level) { return (n + (int64_t{1} << level) - 1) >> level; }

}  // namespace

at::Tensor BandedMap::Coarse(int level) const {
    std::lock_guard<std::mutex> lock(m_mutex);
    if (m_coarse.empty()) {  // level kMapBandDepth whole: a row a band, at most ceil(T / 256) a side
        const int64_t n = LevelSide(m_tokens, kMapBandDepth);
        std::vector<at::Tensor> rows;
        for (const MapBandPtr& band : m_bands) {
            const at::Tensor cells = band->Level(kMapBandDepth);
            rows.push_back(at::constant_pad_nd(cells, {0, n - cells.size(1)}));
        }
        m_coarse.push_back(PoolByTwo(at::cat(rows, 0), m_diverging));
    }
    while (static_cast<int>(m_coarse.size()) < level - kMapBandDepth) m_coarse.push_back(PoolByTwo(m_coarse.back(), m_diverging));
    return m_coarse[static_cast<size_t>(level - kMapBandDepth - 1)];
}

at::Tensor BandedMap::Window(int level, int64_t row0, int64_t col0, int64_t rows, int64_t cols) const {
    const int64_t n = LevelSide(m_tokens, level);
    rows = std::min(rows, n - row0);
    cols = std::min(cols, n - col0);
    if (level > kMapBandDepth) return Coarse(level).narrow(0, row0, rows).narrow(1, col0, cols);
    // Each band's rows of the level in the window, its cells past the band's width zero.
    std::vector<at::Tensor> parts;
    for (const MapBandPtr& band : m_bands) {
        const int64_t first = band->first() >> level, count = LevelSide(band->rows(), level);
        const int64_t a = std::max(row0, first), b = std::min(row0 + rows, first + count);
        if (a >= b) continue;
        const at::Tensor cells = band->Level(level).narrow(0, a - first, b - a);
        const int64_t have = std::clamp<int64_t>(cells.size(1) - col0, 0, cols);
        const at::Tensor part = have > 0 ? cells.narrow(1, col0, have) : cells.narrow(1, 0, 0);
        parts.push_back(have < cols ? at::constant_pad_nd(part, {0, cols - have}) : part);
    }
    return parts.size() == 1 ? parts[0] : at::cat(parts, 0);
}

std::vector<float> BandedMap::Cells(int level, int row0, int col0, int rows, int cols) const {
    if (level < 0 || level > kMaxLevel || row0 < 0 || col0 < 0 || rows <= 0 || cols <= 0) return {};
    const int64_t n = LevelSide(m_tokens, level);
    if (row0 >= n || col0 >= n) return {};
    c10::InferenceMode guard;
    BindThreadToDevice(m_bands.front()->Cells().device());
    if (level > kMapBandDepth || !m_bands.front()->Cells().is_cpu()) return ToHost(Window(level, row0, col0, rows, cols));
    // On the host the cells are copied straight into the answer (the window's rows are zeroed past each band's width).
    const int64_t r_end = std::min<int64_t>(row0 + rows, n), c_end = std::min<int64_t>(col0 + cols, n), width = c_end - col0;
    std::vector<float> out(static_cast<size_t>((r_end - row0) * width), 0.0f);
    for (const MapBandPtr& band : m_bands) {
        const int64_t first = band->first() >> level, count = LevelSide(band->rows(), level);
        const int64_t a = std::max<int64_t>(row0, first), b = std::min(r_end, first + count);
        if (a >= b) continue;
        const at::Tensor cells = band->Level(level);
        const int64_t w = cells.size(1), have = std::clamp<int64_t>(w - col0, 0, width);
        const float* in = cells.data_ptr<float>();
        for (int64_t i = a; i < b; ++i)
            std::memcpy(out.data() + (i - row0) * width, in + (i - first) * w + col0, static_cast<size_t>(have) * sizeof(float));
    }
    return out;
}

std::vector<uint32_t> BandedMap::Texels(int level, int row0, int col0, int rows, int cols, const TexelScale& scale) const {
    if (!OnDevice()) return MapCells::Texels(level, row0, col0, rows, cols, scale);  // the host's cells, coloured in place
    if (level < 0 || level > kMaxLevel || row0 < 0 || col0 < 0 || rows <= 0 || cols <= 0) return {};
    const int64_t n = LevelSide(m_tokens, level);
    if (row0 >= n || col0 >= n) return {};
    c10::InferenceMode guard;
    BindThreadToDevice(m_bands.front()->Cells().device());
    return TexelsToHost(ColourTexels(Window(level, row0, col0, rows, cols), row0, col0, scale));
}

float BandedMap::At(int i, int j) const {
    if (i < 0 || j < 0 || i >= m_tokens || j >= m_tokens) return std::numeric_limits<float>::quiet_NaN();
    const at::Tensor& cells = m_bands[static_cast<size_t>(i / kMapBandRows)]->Cells();
    if (j >= cells.size(1)) return 0.0f;
    const int64_t r = i % kMapBandRows;
    if (cells.is_cpu()) return cells.data_ptr<float>()[r * cells.size(1) + j];
    c10::InferenceMode guard;
    BindThreadToDevice(cells.device());
    return cells[r][j].item<float>();
}

std::vector<float> BandedMap::Row(int i) const {
    if (i < 0 || i >= m_tokens) return {};
    return Cells(0, i, 0, 1, static_cast<int>(m_tokens));
}

MapExtent BandedMap::Extent() const {
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        if (m_extent) return *m_extent;
    }
    c10::InferenceMode guard;
    MapExtent e;
    std::vector<const MapBand*> unknown;  // a device's bands whose figures the host has not read
    std::vector<at::Tensor> bits;
    for (const MapBandPtr& band : m_bands) {
        MapExtent known;
        if (band->KnownExtent(&known)) {
            e = MergeExtents(e, known);
        } else {
            unknown.push_back(band.get());
            bits.push_back(band->ExtentBitsTensor());
        }
    }
    if (!bits.empty()) {  // every band's figures in one copy
        BindThreadToDevice(bits.front().device());
        const at::Tensor host = at::cat(bits).to(at::kCPU).contiguous();
        for (size_t b = 0; b < unknown.size(); ++b) {
            const MapExtent figures = ExtentFromBits(host.data_ptr<int32_t>() + 3 * b);
            unknown[b]->SetExtent(figures);
            e = MergeExtents(e, figures);
        }
    }
    std::lock_guard<std::mutex> lock(m_mutex);
    m_extent = e;
    return e;
}

MapCellsPtr BandedMap::Minus(const MapCells& other) const {
    const auto* o = dynamic_cast<const BandedMap*>(&other);
    if (!o || o->m_tokens != m_tokens || o->m_bands.size() != m_bands.size()) return nullptr;
    if (!m_bands.empty() && m_bands.front()->Cells().device() != o->m_bands.front()->Cells().device()) return nullptr;
    c10::InferenceMode guard;
    if (!m_bands.empty()) BindThreadToDevice(m_bands.front()->Cells().device());
    std::vector<MapBandPtr> bands;
    for (size_t b = 0; b < m_bands.size(); ++b) {
        MapBandPtr band = m_bands[b]->Minus(o->m_bands[b]);
        if (!band) return nullptr;
        bands.push_back(std::move(band));
    }
    return std::make_shared<const BandedMap>(std::move(bands), m_tokens, /*diverging=*/true);
}

}  // namespace model
