#include "model/nn/attention_maps_torch.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <mutex>
#include <optional>

#include <ATen/Parallel.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/InferenceMode.h>

#include "model/nn/forward.h"
#ifdef SSAVIZ_CUDA_KERNELS
#include "model/nn/metrics_cuda.h"
#endif
#include "model/nn/runtime_torch.h"

namespace model {
namespace {

class HostMaps final : public AttentionMaps {
public:
    HostMaps(int heads, int tokens, std::vector<float> ssa, std::vector<float> compare)
        : m_heads(heads), m_tokens(tokens), m_ssa(std::move(ssa)), m_compare(std::move(compare)) {}
    HeadMap Head(MapSide side, int l, int h) const override {
        if (side == MapSide::Base) return nullptr;
        const std::vector<float>& all = side == MapSide::Ssa ? m_ssa : m_compare;
        const size_t cells = static_cast<size_t>(m_tokens) * m_tokens, at = (static_cast<size_t>(l) * m_heads + h) * cells;
        if (all.size() < at + cells) return nullptr;
        return m_cache.Get({static_cast<int>(side), l, h},
                           [&] { return std::make_shared<const std::vector<float>>(all.begin() + at, all.begin() + at + cells); });
    }

private:
    int m_heads, m_tokens;
    std::vector<float> m_ssa, m_compare;
    mutable MapCache m_cache;
};

// PoolThumbnails' difference: a row of two keys has d and -d, and rounding must not choose the sign.
constexpr float kTieTolerance = 1e-5f;
at::Tensor LargestMagnitude(const at::Tensor& up, const at::Tensor& down) {  // block max of d and of -d
    return at::where(up >= down * (1 - kTieTolerance), up, -down);
}

}  // namespace

namespace {

// Band `first` (rows first..first + kMapBandRows - 1, cut at T) of head h's map, over the keys
// 0..its last row: where the model ran, float32.
MapBandPtr ComputeBand(const RecomputedMaps::Layer& x, int h, int64_t first) {
    const int64_t T = x.k.size(1), rows = std::min(kMapBandRows, T - first), width = first + rows;
    const at::Tensor tau = x.tau_q.defined() ? x.tau_q[h].narrow(0, first, rows) : at::Tensor();
    const at::Tensor keys = x.k[h * x.k.size(0) / x.q.size(0)].narrow(0, 0, width);
    return std::make_shared<MapBand>(first, AttentionRows(x.q[h].narrow(0, first, rows), keys, tau, first, x.window), /*diverging=*/false);
}

}  // namespace

const RecomputedMaps::Layer* RecomputedMaps::Find(MapSide side, int l, int h) const {
    const std::vector<Layer>& layers = m_layers[static_cast<int>(side)];
    if (l < 0 || l >= static_cast<int>(layers.size()) || h < 0 || h >= layers[l].q.size(0)) return nullptr;
    return &layers[l];
}

BandedMapPtr RecomputedMaps::Banded(MapSide side, int l, int h) const {
    const Layer* found = Find(side, l, h);
    if (!found) return nullptr;
    const Key key{static_cast<int>(side), l, h};
    return m_cache.Get(key, [&] {
        c10::InferenceMode guard;
        const Layer& x = *found;
        BindThreadToDevice(x.q.device());  // the UI thread, the worker or an export thread
        const int64_t T = x.k.size(1);
        int64_t stable = 0;
        const BandedMapPtr seed = TakeSeed(key, &stable);
        std::vector<MapBandPtr> bands;
        for (int64_t first = 0; first < T; first += kMapBandRows) {
            const size_t b = static_cast<size_t>(first / kMapBandRows);
            // A whole band above the edit is the last analysis's: the same rows of the same keys.
            if (seed && first + kMapBandRows <= std::min(stable, T) && b < seed->Bands().size() && seed->Bands()[b]->rows() == kMapBandRows)
                bands.push_back(seed->Bands()[b]);
            else
                bands.push_back(ComputeBand(x, h, first));
        }
        return std::make_shared<const BandedMap>(std::move(bands), T, /*diverging=*/false);
    });
}

HeadMap RecomputedMaps::Head(MapSide side, int l, int h) const {
    if (!Find(side, l, h)) return nullptr;
    return m_host_maps.Get({static_cast<int>(side), l, h}, [&] {
        const BandedMapPtr map = Banded(side, l, h);
        const int T = map->Tokens();
        return std::make_shared<const std::vector<float>>(map->Cells(0, 0, 0, T, T));  // from a device, one transfer
    });
}

MapCellsPtr RecomputedMaps::Cells(MapSide side, int l, int h) const { return Banded(side, l, h); }

MapCellsPtr AttentionMaps::Cells(MapSide side, int l, int h) const {
    HeadMap map = Head(side, l, h);
    if (!map) return nullptr;
    const int T = static_cast<int>(std::llround(std::sqrt(static_cast<double>(map->size()))));
    return HostMapCells(std::move(map), T);
}

MapCellsPtr HostMapCells(HeadMap map, int tokens) {
    if (!map || map->size() != static_cast<size_t>(tokens) * static_cast<size_t>(tokens)) return nullptr;
    at::Tensor t = at::from_blob(const_cast<float*>(map->data()), {tokens, tokens}, at::kFloat);  // read, never written
    return TensorMapCells(std::move(t), /*diverging=*/false, std::move(map));
}

at::Tensor PoolByTwoOps(const at::Tensor& map, bool diverging) {
    auto block_max = [](const at::Tensor& m) {  // 2 x 2 blocks, the last ones partial
        return at::max_pool2d(m.unsqueeze(0), {2, 2}, {2, 2}, {0, 0}, {1, 1}, /*ceil_mode=*/true).squeeze(0);
    };
    if (!diverging) return block_max(map);
    // The value of largest magnitude is the block's maximum or its minimum; the maximum on a tie.
    const at::Tensor up = block_max(map), down = block_max(-map);
    return at::where(up >= down, up, -down);
}

at::Tensor PoolByTwo(const at::Tensor& map, bool diverging) {
    if (!map.is_cpu()) return PoolByTwoOps(map, diverging);
    // On the CPU one pass (the ops above take 30 ms for a 1,801-token difference, this loop ~3).
    const at::Tensor src = map.to(at::kFloat).contiguous();
    const int64_t n = src.size(0), c = src.size(1), m = (n + 1) / 2, w = (c + 1) / 2;
    at::Tensor out = at::empty({m, w}, at::kFloat);
    const float* in = src.data_ptr<float>();
    float* o = out.data_ptr<float>();
    auto stronger = [diverging](float a, float b) {
        if (!diverging) return a > b ? a : b;
        const float fa = std::abs(a), fb = std::abs(b);
        return fa > fb || (fa == fb && a > b) ? a : b;
    };
    at::parallel_for(0, m, 16, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
            const float* r0 = in + 2 * i * c;
            const float* r1 = 2 * i + 1 < n ? r0 + c : r0;
            for (int64_t j = 0; j < w; ++j) {
                const int64_t c0 = 2 * j, c1 = std::min(2 * j + 1, c - 1);
                o[i * w + j] = stronger(stronger(r0[c0], r0[c1]), stronger(r1[c0], r1[c1]));
            }
        }
    });
    return out;
}

namespace {

// Four cells at a time in each of two sets of lanes (GCC's vector extension, one SSE register: a
// 32-byte vector without AVX lowers to slower code than the scalar loop), each lane keeping its own
// maximum, smallest positive value and largest magnitude, merged at the end: 2,048 tokens in ~1.5
// ms instead of ~4.5. A cell is finite when v - v == 0.
typedef float Floats4 __attribute__((vector_size(16)));
typedef int32_t Mask4 __attribute__((vector_size(16)));

struct ExtentLanes {
    Floats4 hi = {}, lo = Floats4{} + 1.0f, magnitude = {};  // as MapExtent starts

    void Add(Floats4 v) {
        const Floats4 zero = {};
        const Mask4 finite = (v - v) == zero;
        const Floats4 a = reinterpret_cast<Floats4>(reinterpret_cast<Mask4>(v) & (Mask4{} + 0x7fffffff));  // |v|
        hi = (finite & (v > hi)) ? v : hi;
        lo = (finite & (v > zero) & (v < lo)) ? v : lo;
        magnitude = (finite & (a > magnitude)) ? a : magnitude;
    }
};

void AddToExtent(MapExtent* e, float v) {
    if (!std::isfinite(v)) return;
    e->max = std::max(e->max, v);
    if (v > 0.0f) e->min_positive = std::min(e->min_positive, v);
    e->max_abs = std::max(e->max_abs, std::abs(v));
}

}  // namespace

MapExtent HostMapExtent(const float* map, int tokens) { return HostMapExtent(map, tokens, tokens, 0); }

MapExtent HostMapExtent(const float* map, int64_t rows, int64_t width, int64_t first) {
    ExtentLanes x, y;
    MapExtent e;
    for (int64_t r = 0; r < rows; ++r) {
        const float* row = map + static_cast<size_t>(r * width);
        const int64_t end = std::min(first + r + 1, width);  // the causal cells
        int64_t j = 0;
        for (; j + 8 <= end; j += 8) {
            Floats4 v, w;
            std::memcpy(&v, row + j, sizeof v);
            std::memcpy(&w, row + j + 4, sizeof w);
            x.Add(v);
            y.Add(w);
        }
        for (; j < end; ++j) AddToExtent(&e, row[j]);
    }
    for (const ExtentLanes& lanes : {x, y})
        for (int k = 0; k < 4; ++k) {  // each lane's figures are cells' values, or where MapExtent starts
            AddToExtent(&e, lanes.hi[k]);
            if (lanes.lo[k] < 1.0f) AddToExtent(&e, lanes.lo[k]);
            e.max_abs = std::max(e.max_abs, lanes.magnitude[k]);
        }
    return e;
}

at::Tensor ExtentBits(const at::Tensor& rows, int64_t first) {
    c10::InferenceMode guard;
    BindThreadToDevice(rows.device());
    const int64_t n = rows.size(0), width = rows.size(1);
    const float start[3] = {0.0f, 1.0f, 0.0f};  // as MapExtent starts
    int32_t bits[3];
    std::memcpy(bits, start, sizeof bits);
#ifdef SSAVIZ_CUDA_KERNELS
    if (rows.is_cuda() && rows.scalar_type() == at::kFloat) {  // one pass and no [n, width] temporaries
        const at::Tensor m = rows.contiguous();
        const c10::DeviceGuard on_its_device(rows.device());
        const at::Tensor out = at::tensor(at::ArrayRef<int32_t>(bits, 3), at::kInt).to(rows.device());
        const char* error = cuda::MapExtentBits(CurrentStream(m), m.data_ptr<float>(), n, width, first, reinterpret_cast<unsigned*>(out.data_ptr<int32_t>()));
        TORCH_CHECK(error == nullptr, "the map extent kernel failed: ", error);
        return out;
    }
#endif
    if (n == 0 || width == 0) return at::tensor(at::ArrayRef<int32_t>(bits, 3), at::kInt).to(rows.device());
    const float inf = std::numeric_limits<float>::infinity();
    const at::Tensor counted = at::ones({n, width}, rows.options().dtype(at::kBool)).tril_(first) & at::isfinite(rows);
    const at::Tensor largest = at::where(counted, rows, -inf).max();
    const at::Tensor hi = at::where(largest > 0, largest, 0.0f);  // not clamp_min, which keeps a -0 (the kernel's never wins)
    const at::Tensor lo = at::where(counted & (rows > 0), rows, inf).min().clamp_max(1.0f);
    const at::Tensor magnitude = at::where(counted, rows.abs(), 0.0f).max();
    return at::stack({hi, lo, magnitude}).to(at::kFloat).view(at::kInt);  // the figures' bits, as the kernel gives them
}

MapExtent ExtentFromBits(const int32_t* bits) {
    float figures[3];
    std::memcpy(figures, bits, sizeof figures);
    return {figures[0], figures[1], figures[2]};
}

MapExtent MergeExtents(MapExtent a, const MapExtent& b) {
    a.max = std::max(a.max, b.max);
    a.min_positive = std::min(a.min_positive, b.min_positive);
    a.max_abs = std::max(a.max_abs, b.max_abs);
    return a;
}

MapExtent TensorMapExtent(const at::Tensor& map) {
    if (map.size(0) == 0) return {};
    const at::Tensor host = ExtentBits(map, 0).to(at::kCPU).contiguous();
    return ExtentFromBits(host.data_ptr<int32_t>());
}

at::Tensor ColourTexels(const at::Tensor& window, int64_t row0, int64_t col0, const TexelScale& scale) {
    // The steps (NaN ones, which no value reaches, as +inf and counted out after), the table and
    // the blank in one copy to the window's device.
    std::array<int32_t, 512> params;
    int64_t reachable = 0;
    for (size_t k = 0; k < scale.steps.size(); ++k) {
        const float step = std::isnan(scale.steps[k]) ? std::numeric_limits<float>::infinity() : scale.steps[k];
        reachable += !std::isnan(scale.steps[k]);
        std::memcpy(&params[k], &step, sizeof step);
    }
    std::memcpy(&params[255], scale.table.data(), sizeof scale.table);
    std::memcpy(&params[511], &scale.blank, sizeof scale.blank);
    const at::Tensor on = at::from_blob(params.data(), {512}, at::kInt).to(window.device(), /*non_blocking=*/false, /*copy=*/true);
    const at::Tensor steps = on.narrow(0, 0, 255).view(at::kFloat), table = on.narrow(0, 255, 256);
    at::Tensor entry = at::searchsorted(steps, window.contiguous(), /*out_int32=*/false, /*right=*/true).clamp_max_(reachable);
    entry.masked_fill_(at::isnan(window), 0);
    const at::TensorOptions index = window.options().dtype(at::kLong);
    const at::Tensor above = at::arange(col0, col0 + window.size(1), index).unsqueeze(0) > at::arange(row0, row0 + window.size(0), index).unsqueeze(1);
    return table.index_select(0, entry.flatten()).view(window.sizes()).masked_fill_(above, on[511]);
}

std::vector<uint32_t> TexelsToHost(const at::Tensor& texels) {
    const at::Tensor host = texels.to(at::kCPU).contiguous();
    std::vector<uint32_t> out(static_cast<size_t>(host.numel()));
    if (!out.empty()) std::memcpy(out.data(), host.data_ptr<int32_t>(), out.size() * sizeof(uint32_t));
    return out;
}

std::vector<uint32_t> MapCells::Texels(int level, int row0, int col0, int rows, int cols, const TexelScale& scale) const {
    if (level < 0 || level > 31) return {};  // past ceil(T / 2^k) = 1 a level is its own 1 x 1 pool
    std::vector<float> cells = Cells(level, row0, col0, rows, cols);
    if (cells.empty()) return {};
    const int64_t n = (static_cast<int64_t>(Tokens()) + (int64_t{1} << level) - 1) >> level;
    const int64_t r = std::min<int64_t>(rows, n - row0), c = std::min<int64_t>(cols, n - col0);
    c10::InferenceMode guard;
    return TexelsToHost(ColourTexels(at::from_blob(cells.data(), {r, c}, at::kFloat), row0, col0, scale));
}

namespace {

class TensorCells final : public MapCells {
public:
    TensorCells(at::Tensor map, bool diverging, HeadMap keep) : m_map(std::move(map)), m_diverging(diverging), m_keep(std::move(keep)) {}

    int Tokens() const override { return static_cast<int>(m_map.size(0)); }

    std::vector<float> Cells(int level, int row0, int col0, int rows, int cols) const override {
        c10::InferenceMode guard;
        const at::Tensor window = Window(level, row0, col0, rows, cols);
        return window.defined() ? ToHost(window) : std::vector<float>{};
    }

    bool OnDevice() const override { return !m_map.is_cpu(); }

    std::vector<uint32_t> Texels(int level, int row0, int col0, int rows, int cols, const TexelScale& scale) const override {
        if (!OnDevice()) return MapCells::Texels(level, row0, col0, rows, cols, scale);
        c10::InferenceMode guard;
        const at::Tensor window = Window(level, row0, col0, rows, cols);
        return window.defined() ? TexelsToHost(ColourTexels(window, row0, col0, scale)) : std::vector<uint32_t>{};
    }

    float At(int i, int j) const override {
        const int T = Tokens();
        if (i < 0 || j < 0 || i >= T || j >= T) return std::numeric_limits<float>::quiet_NaN();
        if (m_map.is_cpu()) return m_map.data_ptr<float>()[static_cast<size_t>(i) * T + j];
        c10::InferenceMode guard;
        BindThreadToDevice(m_map.device());
        return m_map[i][j].item<float>();
    }

    std::vector<float> Row(int i) const override {
        if (i < 0 || i >= Tokens()) return {};
        c10::InferenceMode guard;
        BindThreadToDevice(m_map.device());
        return ToHost(m_map[i]);
    }

    MapExtent Extent() const override {
        std::lock_guard<std::mutex> lock(m_mutex);
        if (!m_extent) m_extent = m_map.is_cpu() ? HostMapExtent(m_map.data_ptr<float>(), Tokens()) : TensorMapExtent(m_map);
        return *m_extent;
    }

    MapCellsPtr Minus(const MapCells& other) const override {
        const auto* o = dynamic_cast<const TensorCells*>(&other);
        if (!o || o->m_map.sizes() != m_map.sizes() || o->m_map.device() != m_map.device()) return nullptr;
        c10::InferenceMode guard;
        BindThreadToDevice(m_map.device());
        return TensorMapCells(m_map - o->m_map, /*diverging=*/true);
    }

private:
    static constexpr int kMaxLevel = 31;  // past ceil(T / 2^k) = 1 a level is its own 1 x 1 pool

    // Cells' window where the map is (this thread bound to its device); undefined outside the level.
    at::Tensor Window(int level, int row0, int col0, int rows, int cols) const {
        if (level < 0 || level > kMaxLevel || row0 < 0 || col0 < 0 || rows <= 0 || cols <= 0) return {};
        BindThreadToDevice(m_map.device());
        const at::Tensor cells = Level(level);
        const int64_t n = cells.size(0);
        if (row0 >= n || col0 >= n) return {};
        return cells.narrow(0, row0, std::min<int64_t>(rows, n - row0)).narrow(1, col0, std::min<int64_t>(cols, n - col0));
    }

    at::Tensor Level(int level) const {
        std::lock_guard<std::mutex> lock(m_mutex);
        while (static_cast<int>(m_levels.size()) < level)
            m_levels.push_back(PoolByTwo(m_levels.empty() ? m_map : m_levels.back(), m_diverging));
        return level == 0 ? m_map : m_levels[level - 1];
    }

    const at::Tensor m_map;  // [T, T] float32, contiguous
    const bool m_diverging;
    const HeadMap m_keep;
    mutable std::mutex m_mutex;                  // guards the two below
    mutable std::vector<at::Tensor> m_levels;    // [k - 1]: level k
    mutable std::optional<MapExtent> m_extent;
};

}  // namespace

MapCellsPtr TensorMapCells(at::Tensor map, bool diverging, HeadMap keep) {
    return std::make_shared<TensorCells>(map.to(at::kFloat).contiguous(), diverging, std::move(keep));
}

BandedMapPtr RecomputedMaps::TakeSeed(const Key& key, int64_t* stable) const {
    std::lock_guard<std::mutex> lock(m_seeds_mutex);
    *stable = m_stable;
    for (auto it = m_seeds.begin(); it != m_seeds.end(); ++it)
        if (it->first == key) {
            BandedMapPtr map = std::move(it->second);
            m_seeds.erase(it);
            return map;
        }
    return nullptr;
}

Pooled PoolThumbnails(const at::Tensor& p, const at::Tensor& q, int pool) {
    if (pool == 1) return {p, q, p - q};
#ifdef SSAVIZ_CUDA_KERNELS
    if (p.is_cuda() && q.device() == p.device() && p.scalar_type() == at::kFloat && q.scalar_type() == at::kFloat && p.sizes() == q.sizes()) {
        const at::Tensor pc = p.contiguous(), qc = q.contiguous();
        const c10::DeviceGuard on_its_device(p.device());  // the kernel runs on the current device
        const int64_t R = p.size(-2), T = p.size(-1), maps = R * T > 0 ? p.numel() / (R * T) : 0;
        std::vector<int64_t> shape = p.sizes().vec();
        shape[shape.size() - 2] = (R + pool - 1) / pool;
        shape[shape.size() - 1] = (T + pool - 1) / pool;
        Pooled out{at::empty(shape, p.options()), at::empty(shape, p.options()), at::empty(shape, p.options())};
        const char* error = cuda::PoolMaps(CurrentStream(pc), pc.data_ptr<float>(), qc.data_ptr<float>(), maps, R, T, pool, 1 - kTieTolerance, out.p.data_ptr<float>(),
                                           out.q.data_ptr<float>(), out.difference.data_ptr<float>());
        TORCH_CHECK(error == nullptr, "the thumbnail pooling kernel failed: ", error);
        return out;
    }
#endif
    if (!p.is_cpu()) {
        auto block_max = [&](const at::Tensor& m) { return at::max_pool2d(m, {pool, pool}, {pool, pool}, {0, 0}, {1, 1}, true); };
        const at::Tensor d = p - q;
        return {block_max(p), block_max(q), LargestMagnitude(block_max(d), block_max(-d))};
    }
    const at::Tensor pc = p.contiguous(), qc = q.contiguous();
    const int64_t R = p.size(-2), T = p.size(-1), rows = (R + pool - 1) / pool, side = (T + pool - 1) / pool;
    const int64_t maps = R * T > 0 ? p.numel() / (R * T) : 0;
    std::vector<int64_t> shape = p.sizes().vec();
    shape[shape.size() - 2] = rows;
    shape[shape.size() - 1] = side;
    const float lowest = -std::numeric_limits<float>::infinity();
    Pooled out{at::full(shape, lowest), at::full(shape, lowest), at::Tensor()};
    at::Tensor up = at::full(shape, lowest), down = at::full(shape, lowest);
    const float *pp = pc.data_ptr<float>(), *qq = qc.data_ptr<float>();
    float *op = out.p.data_ptr<float>(), *oq = out.q.data_ptr<float>(), *ou = up.data_ptr<float>(), *od = down.data_ptr<float>();
    at::parallel_for(0, maps, 1, [&](int64_t begin, int64_t end) {  // each map writes its own cells
        for (int64_t m = begin; m < end; ++m)
            for (int64_t i = 0; i < R; ++i) {
                const float *x = pp + (m * R + i) * T, *y = qq + (m * R + i) * T;
                const size_t at = static_cast<size_t>((m * rows + i / pool) * side);
                for (int64_t c = 0; c < side; ++c) {  // a cell's keys at a time, its four maxima in registers
                    const size_t k = at + static_cast<size_t>(c);
                    float mp = op[k], mq = oq[k], mu = ou[k], md = od[k];
                    for (int64_t j = c * pool, last = std::min(T, j + pool); j < last; ++j) {
                        mp = std::max(mp, x[j]);
                        mq = std::max(mq, y[j]);
                        mu = std::max(mu, x[j] - y[j]);
                        md = std::max(md, y[j] - x[j]);
                    }
                    op[k] = mp, oq[k] = mq, ou[k] = mu, od[k] = md;
                }
            }
    });
    out.difference = LargestMagnitude(up, down);
    return out;
}

namespace {

// Max over groups of `pool` along dimension `dim` (the last group partial): -inf pads it.
at::Tensor GroupMax(const at::Tensor& x, int64_t dim, int pool) {
    if (pool == 1) return x;
    const int64_t n = x.size(dim), groups = (n + pool - 1) / pool;
    at::Tensor padded = x.movedim(dim, -1);
    if (groups * pool != n) padded = at::constant_pad_nd(padded, {0, groups * pool - n}, -std::numeric_limits<double>::infinity());
    std::vector<int64_t> shape = padded.sizes().vec();
    shape.back() = groups;
    shape.push_back(pool);
    return std::get<0>(padded.reshape(shape).max(-1)).movedim(-1, dim);
}

}  // namespace

KeyPooled PoolKeys(const at::Tensor& p, const at::Tensor& q, int pool) { return {GroupMax(at::stack({p, q, p - q, q - p}), -1, pool)}; }

KeyPooled NarrowRows(const KeyPooled& x, int64_t first, int64_t count) { return {x.cells.narrow(-2, first, count)}; }

KeyPooled JoinRows(const KeyPooled& x, const KeyPooled& y, int64_t cells) {
    if (!x.defined()) return y;
    const int64_t have = x.cells.size(-1);
    const at::Tensor fit = have >= cells ? x.cells.narrow(-1, 0, cells) : at::constant_pad_nd(x.cells, {0, cells - have});
    return {y.defined() ? at::cat({fit, y.cells}, -2) : fit.contiguous()};
}

Pooled PoolRows(const KeyPooled& x, int pool) {
    const at::Tensor blocks = GroupMax(x.cells, -2, pool);
    return {blocks[0], blocks[1], LargestMagnitude(blocks[2], blocks[3])};
}

ThumbnailBuilder::ThumbnailBuilder(const Thumbnails& old, int kept, int side, int pool, int layers, int heads, int kinds)
    : m_kept(kept) {
    assert(kinds == 3 || kinds == kThumbnailKinds);
    assert(kept == 0 || (old.pool == pool && kept <= old.side && old.layers == layers && old.heads == heads && old.kinds == kinds));
    Thumbnails& t = m_thumbnails;
    t.side = side;
    t.pool = pool;
    t.layers = layers;
    t.heads = heads;
    t.kinds = kinds;
    std::vector<const ThumbnailBand*> was;  // a new band's old one, where it keeps rows of it
    for (int first = 0; first < side; first += kThumbnailBandRows) {
        const int count = std::min(kThumbnailBandRows, side - first);
        const size_t b = static_cast<size_t>(first / kThumbnailBandRows);
        if (first + count <= kept && b < old.bands.size() && old.bands[b]->rows == count) {
            t.bands.push_back(old.bands[b]);  // every row kept
            continue;
        }
        auto band = std::make_shared<ThumbnailBand>();
        band->first = first;
        band->rows = count;
        band->width = first + count;
        was.push_back(first < kept && b < old.bands.size() ? old.bands[b].get() : nullptr);
        t.bands.push_back(band);
        m_new.push_back(std::move(band));
    }
    // The new bands' cells, and the rows they keep of the old ones: a band a task (TinyLlama's shape
    // holds some 280 MB of them, which one thread took ~0.1 s to fill and copy).
    at::parallel_for(0, static_cast<int64_t>(m_new.size()), 1, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
            ThumbnailBand& band = *m_new[static_cast<size_t>(i)];
            const ThumbnailBand* old_band = was[static_cast<size_t>(i)];
            const int first = band.first, count = band.rows;
            const size_t width = static_cast<size_t>(band.width);
            for (int k = 0; k < kinds; ++k) {
                std::vector<float>& cells = band.cells[k];
                cells.assign(static_cast<size_t>(layers) * heads * count * width, 0.0f);
                for (int l = 0; l < layers; ++l)
                    for (int h = 0; h < heads; ++h)
                        for (int row = first; row < std::min(first + count, kept); ++row) {  // from the old band: the same row, its own width
                            assert(old_band && row < old_band->first + old_band->rows);
                            const size_t w = static_cast<size_t>(old_band->width);
                            const float* in =
                                old_band->cells[k].data() + ((static_cast<size_t>(l) * heads + h) * old_band->rows + (row - old_band->first)) * w;
                            std::copy_n(in, std::min(w, width), cells.data() + ((static_cast<size_t>(l) * heads + h) * count + (row - first)) * width);
                        }
            }
        }
    });
}

void ThumbnailBuilder::AddLayer(int l, std::vector<at::Tensor> rows) {
    assert(static_cast<int>(rows.size()) == m_thumbnails.kinds);
    if (rows[0].is_cpu()) return CopyLayer(l, rows);
    HoldLayer(l, std::move(rows));
}

void ThumbnailBuilder::HoldLayer(int l, std::vector<at::Tensor> rows) {
    assert(static_cast<int>(rows.size()) == m_thumbnails.kinds);
    m_held.push_back({l, std::move(rows)});
}

void ThumbnailBuilder::CopyLayer(int l, const std::vector<at::Tensor>& rows) {
    const Thumbnails& t = m_thumbnails;
    const int64_t fresh = t.side - m_kept;
    std::vector<at::Tensor> host;
    for (int k = 0; k < t.kinds; ++k) {
        host.push_back(rows[k].to(at::kCPU, at::kFloat).contiguous());  // [H, side - kept, side]
        assert(host[k].size(0) == t.heads && host[k].size(1) == fresh && host[k].size(2) == t.side);
    }
    at::parallel_for(0, static_cast<int64_t>(m_new.size()), 1, [&](int64_t begin, int64_t end) {  // a band a task
        for (int64_t i = begin; i < end; ++i) {
            ThumbnailBand& band = *m_new[static_cast<size_t>(i)];
            const size_t width = static_cast<size_t>(band.width);
            for (int k = 0; k < t.kinds; ++k) {
                const float* in = host[k].data_ptr<float>();
                for (int h = 0; h < t.heads; ++h)
                    for (int row = std::max(band.first, m_kept); row < band.first + band.rows; ++row)
                        std::copy_n(in + (static_cast<size_t>(h) * fresh + (row - m_kept)) * t.side, width,
                                    band.cells[k].data() + ((static_cast<size_t>(l) * t.heads + h) * band.rows + (row - band.first)) * width);
            }
        }
    });
}

namespace {

// A new band's rows that the layers bring: from its first row not kept.
int NewRowsFrom(const ThumbnailBand& band, int kept) { return std::max(band.first, kept); }
int NewRowCount(const ThumbnailBand& band, int kept) { return std::max(0, band.first + band.rows - NewRowsFrom(band, kept)); }
// Floats a head's new rows of a band take in the packed copy, [new rows, width].
int64_t NewRowFloats(const ThumbnailBand& band, int kept) { return int64_t{NewRowCount(band, kept)} * band.width; }

}  // namespace

at::Tensor ThumbnailBuilder::PackHeldLayers() const {
    const Thumbnails& t = m_thumbnails;
    std::vector<at::Tensor> by_kind;  // [held layers, H, side - kept, side]
    for (int k = 0; k < t.kinds; ++k) {
        std::vector<at::Tensor> layers;
        for (const HeldLayer& held : m_held) layers.push_back(held.rows[static_cast<size_t>(k)]);
        by_kind.push_back(AsType(at::stack(layers), at::kFloat));
    }
    int64_t total = 0;
    for (const auto& band : m_new) total += int64_t{t.kinds} * by_kind[0].size(0) * t.heads * NewRowFloats(*band, m_kept);
    at::Tensor packed = at::empty({total}, by_kind[0].options());
    int64_t at = 0;
    for (const auto& band : m_new) {  // band by band, kind by kind: [held layers, H, new rows, width]
        const int count = NewRowCount(*band, m_kept);
        if (count == 0) continue;
        for (const at::Tensor& rows : by_kind) {
            const at::Tensor part = rows.narrow(2, NewRowsFrom(*band, m_kept) - m_kept, count).narrow(3, 0, band->width);
            packed.narrow(0, at, part.numel()).view(part.sizes()).copy_(part);
            at += part.numel();
        }
    }
    return packed;
}

void ThumbnailBuilder::LayPackedLayers(const float* packed) {
    const Thumbnails& t = m_thumbnails;
    const size_t held = m_held.size(), heads = static_cast<size_t>(t.heads);
    std::vector<size_t> offsets;  // each band's first float in `packed`
    size_t at = 0;
    for (const auto& band : m_new) {
        offsets.push_back(at);
        at += static_cast<size_t>(t.kinds) * held * heads * static_cast<size_t>(NewRowFloats(*band, m_kept));
    }
    at::parallel_for(0, static_cast<int64_t>(m_new.size()), 1, [&](int64_t begin, int64_t end) {  // a band a task
        for (int64_t i = begin; i < end; ++i) {
            ThumbnailBand& band = *m_new[static_cast<size_t>(i)];
            const size_t skip = static_cast<size_t>(NewRowsFrom(band, m_kept) - band.first), rows = static_cast<size_t>(band.rows);
            const size_t n = static_cast<size_t>(NewRowFloats(band, m_kept));  // floats a head
            const float* in = packed + offsets[static_cast<size_t>(i)];
            for (int k = 0; k < t.kinds && n > 0; ++k)
                for (const HeldLayer& layer : m_held)
                    for (size_t h = 0; h < heads; ++h, in += n)
                        std::copy_n(in, n, band.cells[k].data() + ((static_cast<size_t>(layer.l) * heads + h) * rows + skip) * static_cast<size_t>(band.width));
        }
    });
}

Thumbnails ThumbnailBuilder::Finish() {
    if (!m_held.empty()) {
        const HostTensors host = ToHostJoined({PackHeldLayers()}, at::kFloat);
        LayPackedLayers(host.Of<float>(0));
        m_held.clear();
    }
    at::parallel_for(0, static_cast<int64_t>(m_new.size()), 1, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
            ThumbnailBand& band = *m_new[static_cast<size_t>(i)];
            for (int k = 0; k < m_thumbnails.kinds; ++k)
                if (IsDifference(static_cast<ThumbnailKind>(k)))
                    for (float v : band.cells[k]) band.max_abs[k] = std::max(band.max_abs[k], std::abs(v));  // NaN never wins
        }
    });
    m_new.clear();
    return std::move(m_thumbnails);
}

std::vector<float> Thumbnails::Head(ThumbnailKind kind, int l, int h) const {
    if (l < 0 || l >= layers || h < 0 || h >= heads || !Holds(kind)) return {};
    std::vector<float> out(static_cast<size_t>(side) * side, 0.0f);
    for (const auto& band : bands) {
        const std::vector<float>& cells = band->cells[static_cast<int>(kind)];
        const size_t width = static_cast<size_t>(band->width);
        for (int r = 0; r < band->rows; ++r)
            std::copy_n(cells.data() + ((static_cast<size_t>(l) * heads + h) * band->rows + r) * width, std::min<size_t>(width, side),
                        out.data() + static_cast<size_t>(band->first + r) * side);
    }
    return out;
}

std::vector<float> Thumbnails::All(ThumbnailKind kind) const {
    if (!Holds(kind)) return {};
    const size_t cells = static_cast<size_t>(side) * side;
    std::vector<float> out;
    out.reserve(static_cast<size_t>(layers) * heads * cells);
    for (int l = 0; l < layers; ++l)
        for (int h = 0; h < heads; ++h) {
            const std::vector<float> head = Head(kind, l, h);
            out.insert(out.end(), head.begin(), head.end());
        }
    return out;
}

float Thumbnails::MaxAbs(ThumbnailKind kind) const {
    float top = 0.0f;
    if (Holds(kind))
        for (const auto& band : bands) top = std::max(top, band->max_abs[static_cast<int>(kind)]);
    return top;
}

int ThumbnailPool(int tokens) { return std::max(1, (tokens + kThumbnailCells - 1) / kThumbnailCells); }

std::shared_ptr<const AttentionMaps> HostAttentionMaps(int layers, int heads, int tokens, std::vector<float> ssa,
                                                       std::vector<float> compare) {
    assert(ssa.size() == static_cast<size_t>(layers) * heads * tokens * tokens && compare.size() == ssa.size());
    (void)layers;  // the shape check only
    return std::make_shared<HostMaps>(heads, tokens, std::move(ssa), std::move(compare));
}

Thumbnails MakeThumbnails(const std::vector<float>& ssa, const std::vector<float>& compare, int layers, int heads, int tokens) {
    c10::InferenceMode guard;
    const int pool = ThumbnailPool(tokens), side = (tokens + pool - 1) / pool;
    const size_t cells = static_cast<size_t>(layers) * heads * tokens * tokens;
    if (tokens == 0 || ssa.size() != cells || compare.size() != cells) return {};
    ThumbnailBuilder builder({}, 0, side, pool, layers, heads);
    for (int l = 0; l < layers; ++l) {
        // from_blob does not copy; the pooled results are new tensors.
        const size_t at = static_cast<size_t>(l) * heads * tokens * tokens;
        const at::Tensor p = at::from_blob(const_cast<float*>(ssa.data() + at), {heads, tokens, tokens});
        const at::Tensor q = at::from_blob(const_cast<float*>(compare.data() + at), {heads, tokens, tokens});
        const Pooled pooled = PoolThumbnails(p, q, pool);
        builder.AddLayer(l, {pooled.p, pooled.q, pooled.difference});
    }
    return builder.Finish();
}

}  // namespace model
