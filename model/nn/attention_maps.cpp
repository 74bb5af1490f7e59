#include "model/nn/attention_maps_torch.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

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

HeadMap RecomputedMaps::Head(MapSide side, int l, int h) const {
    const std::vector<Layer>& layers = m_layers[static_cast<int>(side)];
    if (l < 0 || l >= static_cast<int>(layers.size()) || h < 0 || h >= layers[l].q.size(0)) return nullptr;
    const MapCache::Key key{static_cast<int>(side), l, h};
    return m_cache.Get(key, [&] {  // under the cache's lock, which also guards m_seeds
        c10::InferenceMode guard;
        const Layer& x = layers[l];
        BindThreadToDevice(x.q.device());  // the UI thread or an export thread
        const int64_t T = x.k.size(1);
        auto map = std::make_shared<std::vector<float>>(static_cast<size_t>(T * T), 0.0f);
        int64_t from = 0;
        if (HeadMap old = TakeSeed(key)) {
            const int64_t old_t = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(old->size()))));
            from = std::min({m_stable, old_t, T});
            const int64_t columns = std::min(old_t, T);  // row i < from is zero past column i anyway
            for (int64_t i = 0; i < from; ++i)
                std::copy_n(old->data() + i * old_t, columns, map->data() + i * T);
        }
        // In blocks of rows, so the temporaries stay small (see BlockBytes).
        const int64_t block = std::max<int64_t>(1, static_cast<int64_t>(BlockBytes(x.q.device()) / (sizeof(float) * static_cast<size_t>(T))));
        for (int64_t a = from; a < T; a += block) {
            const int64_t n = std::min(block, T - a);
            const at::Tensor tau = x.tau_q.defined() ? x.tau_q[h].narrow(0, a, n) : at::Tensor();
            const at::Tensor rows = AttentionRows(x.q[h].narrow(0, a, n), x.k[h * x.k.size(0) / x.q.size(0)], tau, a, x.window);
            // Straight into the map's memory: from a GPU one transfer, no host tensor between.
            at::from_blob(map->data() + a * T, {n, T}, at::kFloat).copy_(rows);
        }
        return HeadMap(std::move(map));
    });
}

HeadMap RecomputedMaps::TakeSeed(const MapCache::Key& key) const {
    for (auto it = m_seeds.begin(); it != m_seeds.end(); ++it)
        if (it->first == key) {
            HeadMap map = std::move(it->second);
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
        const char* error = cuda::PoolMaps(pc.data_ptr<float>(), qc.data_ptr<float>(), maps, R, T, pool, 1 - kTieTolerance, out.p.data_ptr<float>(),
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
                const size_t in = static_cast<size_t>((m * R + i) * T), at = static_cast<size_t>((m * rows + i / pool) * side);
                for (int64_t j = 0; j < T; ++j) {
                    const float x = pp[in + j], y = qq[in + j];
                    const size_t k = at + static_cast<size_t>(j / pool);
                    op[k] = std::max(op[k], x);
                    oq[k] = std::max(oq[k], y);
                    ou[k] = std::max(ou[k], x - y);
                    od[k] = std::max(od[k], y - x);
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

KeyPooled PoolKeys(const at::Tensor& p, const at::Tensor& q, int pool) {
    return {GroupMax(p, -1, pool), GroupMax(q, -1, pool), GroupMax(p - q, -1, pool), GroupMax(q - p, -1, pool)};
}

KeyPooled NarrowRows(const KeyPooled& x, int64_t first, int64_t count) {
    const int64_t dim = x.p.dim() - 2;
    return {x.p.narrow(dim, first, count), x.q.narrow(dim, first, count), x.up.narrow(dim, first, count), x.down.narrow(dim, first, count)};
}

KeyPooled JoinRows(const KeyPooled& x, const KeyPooled& y, int64_t cells) {
    auto fit = [&](const at::Tensor& t) {
        const int64_t have = t.size(-1);
        return have >= cells ? t.narrow(-1, 0, cells) : at::constant_pad_nd(t, {0, cells - have});
    };
    auto join = [&](const at::Tensor& a, const at::Tensor& b) {
        if (!a.defined()) return b;
        if (!b.defined()) return fit(a).contiguous();
        return at::cat({fit(a), b}, -2);
    };
    return {join(x.p, y.p), join(x.q, y.q), join(x.up, y.up), join(x.down, y.down)};
}

Pooled PoolRows(const KeyPooled& x, int pool) {
    return {GroupMax(x.p, -2, pool), GroupMax(x.q, -2, pool), LargestMagnitude(GroupMax(x.up, -2, pool), GroupMax(x.down, -2, pool))};
}

ThumbnailBuilder::ThumbnailBuilder(const Thumbnails& old, int kept, int side, int pool, int layers, int heads) : m_kept(kept) {
    assert(kept == 0 || (old.pool == pool && kept <= old.side && old.layers == layers && old.heads == heads));
    Thumbnails& t = m_thumbnails;
    t.side = side;
    t.pool = pool;
    t.layers = layers;
    t.heads = heads;
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
        const size_t width = static_cast<size_t>(band->width);
        const ThumbnailBand* was = first < kept && b < old.bands.size() ? old.bands[b].get() : nullptr;
        for (int k = 0; k < 3; ++k) {
            std::vector<float>& cells = band->cells[k];
            cells.assign(static_cast<size_t>(layers) * heads * count * width, 0.0f);
            for (int l = 0; l < layers; ++l)
                for (int h = 0; h < heads; ++h)
                    for (int row = first; row < std::min(first + count, kept); ++row) {  // from the old band: the same row, its own width
                        assert(was && row < was->first + was->rows);
                        const size_t w = static_cast<size_t>(was->width);
                        const float* in = was->cells[k].data() + ((static_cast<size_t>(l) * heads + h) * was->rows + (row - was->first)) * w;
                        std::copy_n(in, std::min(w, width), cells.data() + ((static_cast<size_t>(l) * heads + h) * count + (row - first)) * width);
                    }
        }
        t.bands.push_back(band);
        m_new.push_back(std::move(band));
    }
}

void ThumbnailBuilder::AddLayer(int l, const at::Tensor (&rows)[3]) {
    if (rows[0].is_cpu()) return CopyLayer(l, rows);
    m_device_layers.push_back({l, {rows[0], rows[1], rows[2]}});
}

void ThumbnailBuilder::CopyLayer(int l, const at::Tensor (&rows)[3]) {
    const Thumbnails& t = m_thumbnails;
    const int64_t fresh = t.side - m_kept;
    for (int k = 0; k < 3; ++k) {
        const at::Tensor host = rows[k].to(at::kCPU, at::kFloat).contiguous();  // [H, side - kept, side]
        assert(host.size(0) == t.heads && host.size(1) == fresh && host.size(2) == t.side);
        const float* in = host.data_ptr<float>();
        for (const auto& band : m_new) {
            const size_t width = static_cast<size_t>(band->width);
            for (int h = 0; h < t.heads; ++h)
                for (int row = std::max(band->first, m_kept); row < band->first + band->rows; ++row)
                    std::copy_n(in + (static_cast<size_t>(h) * fresh + (row - m_kept)) * t.side, width,
                                band->cells[k].data() + ((static_cast<size_t>(l) * t.heads + h) * band->rows + (row - band->first)) * width);
        }
    }
}

Thumbnails ThumbnailBuilder::Finish() {
    for (const DeviceLayer& d : m_device_layers) CopyLayer(d.l, d.rows);
    m_device_layers.clear();
    for (const auto& band : m_new)
        for (float v : band->cells[static_cast<int>(ThumbnailKind::Difference)])
            band->difference_max_abs = std::max(band->difference_max_abs, std::abs(v));  // NaN never wins
    m_new.clear();
    return std::move(m_thumbnails);
}

std::vector<float> Thumbnails::Head(ThumbnailKind kind, int l, int h) const {
    if (l < 0 || l >= layers || h < 0 || h >= heads) return {};
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

float Thumbnails::DifferenceMaxAbs() const {
    float top = 0.0f;
    for (const auto& band : bands) top = std::max(top, band->difference_max_abs);
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
