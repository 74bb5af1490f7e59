// How the engine builds the attention maps of attention_maps.h on its device: a head's map
// rebuilt from the layer's q, k and tau_q with the forward pass's own AttentionRows, a cache of
// the most recently used maps, and the pooling of maps into thumbnails.
// Tensors are row-major; shapes are given as [dims] comments. H = heads, T = tokens, D = head size.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "model/nn/attention_maps.h"

namespace model {

// The most recently used head maps, up to `budget` bytes (at least one map is always kept): host
// maps (HeadMap) or a device's (MapCellsPtr).
inline size_t MapBytes(const HeadMap& map) { return map->size() * sizeof(float); }
inline size_t MapBytes(const MapCellsPtr& cells) {  // a float map and its levels of detail (a third more)
    const size_t T = static_cast<size_t>(cells->Tokens());
    return T * T * sizeof(float) / 3 * 4;
}
template <class Map>
class LruMaps {
public:
    using Key = std::tuple<int, int, int>;  // side, layer, head
    // `keep`: how many of the most recent maps stay whatever their size (the view's sides of one
    // head, so that the next analysis after an edit finds each of them to keep rows from).
    explicit LruMaps(size_t budget, size_t keep = 1) : m_budget(budget), m_keep(keep) {}
    void SetBudget(size_t budget) {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_budget = budget;
    }
    // The map of `key`, made by `make()` when it is not kept. It is made outside the lock, so a
    // thread reading a kept map never waits for another one making a map; two threads asking for
    // one map make it once (the second waits for the first).
    template <class Make>
    Map Get(const Key& key, const Make& make) {
        std::unique_lock<std::mutex> lock(m_mutex);
        for (;;) {
            for (auto it = m_entries.begin(); it != m_entries.end(); ++it)
                if (it->first == key) {
                    m_entries.splice(m_entries.begin(), m_entries, it);
                    return it->second;
                }
            if (std::find(m_making.begin(), m_making.end(), key) == m_making.end()) break;
            m_made.wait(lock);  // another thread makes it
        }
        m_making.push_back(key);
        lock.unlock();
        Map map;
        try {
            map = make();
        } catch (...) {
            lock.lock();
            m_making.erase(std::find(m_making.begin(), m_making.end(), key));
            m_made.notify_all();
            throw;
        }
        lock.lock();
        m_making.erase(std::find(m_making.begin(), m_making.end(), key));
        m_made.notify_all();
        if (!map) return map;
        m_bytes += MapBytes(map);
        m_entries.emplace_front(key, map);
        while (m_bytes > m_budget && m_entries.size() > m_keep) {
            m_bytes -= MapBytes(m_entries.back().second);
            m_entries.pop_back();
        }
        return map;
    }
    std::vector<std::pair<Key, Map>> Entries() const {
        std::lock_guard<std::mutex> lock(m_mutex);
        return {m_entries.begin(), m_entries.end()};
    }

private:
    mutable std::mutex m_mutex;
    std::condition_variable m_made;            // a map in m_making was made (or failed)
    std::vector<Key> m_making;                 // maps being made, outside the lock
    std::list<std::pair<Key, Map>> m_entries;  // most recent first
    size_t m_bytes = 0;
    size_t m_budget;
    const size_t m_keep;
};
class MapCache : public LruMaps<HeadMap> {
public:
    MapCache() : LruMaps<HeadMap>(kMapCacheBytes) {}
};

// A float32 map [T, T] where it lives as MapCells: levels pooled there (kept once built),
// windows, values and rows copied out. `keep` holds the memory of a map wrapped from the host.
MapCellsPtr TensorMapCells(at::Tensor map, bool diverging, HeadMap keep = nullptr);
// One level of detail coarser (MapCells' rule), in torch ops on the map's device: [n, m] ->
// [ceil(n / 2), ceil(m / 2)], the last row and column pooling the cells they have.
at::Tensor PoolByTwo(const at::Tensor& map, bool diverging);
at::Tensor PoolByTwoOps(const at::Tensor& map, bool diverging);  // the device's way (PoolByTwo elsewhere), for tests on the CPU
// MapCells::Extent in torch ops on the map's device, one copy to the host (a CPU map's cells use HostMapExtent).
MapExtent TensorMapExtent(const at::Tensor& map);
// The extent of rows [first, first + n) of a map, given as [n, width] (row r's causal cells are
// j <= first + r), where they are: int32 [3], the bits of MapExtent's three figures (a CUDA kernel
// where the build has one, else torch ops), so that many parts' figures cross in one copy.
at::Tensor ExtentBits(const at::Tensor& rows, int64_t first);
MapExtent ExtentFromBits(const int32_t* bits);
// A window of a level, [rows, cols] float32 whose cell (0, 0) is the level's (row0, col0), as
// texels in `scale`'s colours (MapCells::Texels), where the window is: int32 [rows, cols].
at::Tensor ColourTexels(const at::Tensor& window, int64_t row0, int64_t col0, const TexelScale& scale);
std::vector<uint32_t> TexelsToHost(const at::Tensor& texels);
MapExtent MergeExtents(MapExtent a, const MapExtent& b);

// A head's map in bands of kMapBandRows rows where the engine keeps it. A band of a causal map is
// only as wide as its last row's keys (the cells right of that are hidden keys and read as 0), so it stays valid while
// the text grows, and a map shares with the last analysis's map of the head every band above an
// edit: typing at the end of 8,192 tokens computes one band of 32 instead of the whole map, and
// its levels of detail, extent and difference are the new band's. A band is immutable; its levels
// (kMapBandRows is a power of two, so level k <= kMapBandDepth of the map is its bands' level k
// one under another) and figures are made when first read.
constexpr int64_t kMapBandRows = 256;
constexpr int kMapBandDepth = 8;  // log2(kMapBandRows)
class MapBand {
public:
    MapBand(int64_t first, at::Tensor rows, bool diverging);  // rows: [n, width] float32 where the map is
    int64_t first() const { return m_first; }
    int64_t rows() const { return m_cells.size(0); }
    int64_t width() const { return m_cells.size(1); }
    const at::Tensor& Cells() const { return m_cells; }  // level 0
    // Level k <= kMapBandDepth: [ceil(rows / 2^k), ceil(width / 2^k)] (MapCells' pooling rule).
    at::Tensor Level(int k) const;
    // The extent: KnownExtent gives it when the host has it (a host band's is found on the spot);
    // a device band's bits are made there once (ExtentBitsTensor), and SetExtent keeps what they say.
    bool KnownExtent(MapExtent* out) const;
    at::Tensor ExtentBitsTensor() const;
    void SetExtent(const MapExtent& e) const;
    // This band minus `other` (the same rows), as a difference band; kept with this band while
    // `other` lives, so a view showing the difference after an edit subtracts only the new bands.
    std::shared_ptr<const MapBand> Minus(const std::shared_ptr<const MapBand>& other) const;
    size_t Bytes() const { return static_cast<size_t>(rows() * width()) * sizeof(float); }

private:
    const int64_t m_first;
    const bool m_diverging;
    const at::Tensor m_cells;    // [n, width] float32, contiguous
    mutable std::mutex m_mutex;  // guards what follows
    mutable std::vector<at::Tensor> m_levels;  // [k - 1]: level k
    mutable at::Tensor m_extent_bits;
    mutable std::optional<MapExtent> m_extent;
    mutable std::weak_ptr<const MapBand> m_minus_of;
    mutable std::shared_ptr<const MapBand> m_minus;
};
using MapBandPtr = std::shared_ptr<const MapBand>;

// MapCells over bands: rows 0..T-1 in order, band b holding rows b * kMapBandRows on.
class BandedMap final : public MapCells {
public:
    BandedMap(std::vector<MapBandPtr> bands, int64_t tokens, bool diverging);
    const std::vector<MapBandPtr>& Bands() const { return m_bands; }
    size_t Bytes() const;  // the bands' cells and their levels (a third more)

    int Tokens() const override { return static_cast<int>(m_tokens); }
    std::vector<float> Cells(int level, int row0, int col0, int rows, int cols) const override;
    float At(int i, int j) const override;
    std::vector<float> Row(int i) const override;
    MapExtent Extent() const override;
    MapCellsPtr Minus(const MapCells& other) const override;
    bool OnDevice() const override { return !m_bands.empty() && !m_bands.front()->Cells().is_cpu(); }
    std::vector<uint32_t> Texels(int level, int row0, int col0, int rows, int cols, const TexelScale& scale) const override;

    // Cells' window where the map is (on the host Cells copies the bands' cells straight out).
    at::Tensor Window(int level, int64_t row0, int64_t col0, int64_t rows, int64_t cols) const;

private:
    at::Tensor Coarse(int level) const;  // a level past kMapBandDepth, pooled from the whole level kMapBandDepth

    const std::vector<MapBandPtr> m_bands;
    const int64_t m_tokens;
    const bool m_diverging;
    mutable std::mutex m_mutex;  // guards the two below
    mutable std::vector<at::Tensor> m_coarse;  // [k - kMapBandDepth - 1]: level k
    mutable std::optional<MapExtent> m_extent;
};
using BandedMapPtr = std::shared_ptr<const BandedMap>;
inline size_t MapBytes(const BandedMapPtr& map) { return map->Bytes(); }

// Rebuilds a head's map from the layer's q, k and tau_q where the model ran (CPU or GPU) with the
// forward pass's own AttentionRows, band by band (BandedMap), and keeps it there: Cells reads it in
// parts, Head copies it whole to the host (keeping the most recent copies). After an edit, a head
// the previous analysis had built shares its bands above the edit and computes only the rest.
class RecomputedMaps final : public AttentionMaps {
public:
    struct Layer {
        at::Tensor q, k;  // [H, T, D] in the compute dtype
        at::Tensor tau_q; // [H, T]; undefined: 1
        int window = 0;   // the layer's sliding window (LayerWeights::window); 0: none
    };
    void Add(MapSide side, Layer layer) {
        m_cache.SetBudget(layer.q.is_cpu() ? kMapCacheBytes : kDeviceMapCacheBytes);
        m_layers[static_cast<int>(side)].push_back(std::move(layer));
    }
    // `previous` answered for ids whose first `stable` equal these ones'.
    void Reuse(const RecomputedMaps& previous, int64_t stable) {
        std::lock_guard<std::mutex> lock(m_seeds_mutex);
        m_seeds = previous.m_cache.Entries();
        m_stable = stable;
    }
    HeadMap Head(MapSide side, int l, int h) const override;
    MapCellsPtr Cells(MapSide side, int l, int h) const override;

    BandedMapPtr Banded(MapSide side, int l, int h) const;  // Cells' map as its bands

private:
    using Key = LruMaps<BandedMapPtr>::Key;
    BandedMapPtr TakeSeed(const Key& key, int64_t* stable) const;  // and the rows it keeps
    const Layer* Find(MapSide side, int l, int h) const;

    std::vector<Layer> m_layers[kMapSides];
    // The most recently used maps where the model ran, up to kMapCacheBytes on the host or
    // kDeviceMapCacheBytes on a device, and always the last kMapSides (a head's sides).
    mutable LruMaps<BandedMapPtr> m_cache{kMapCacheBytes, kMapSides};
    mutable MapCache m_host_maps;  // Head's copies, so that a second request is the same memory
    mutable std::mutex m_seeds_mutex;  // guards the two below (a map is made outside the cache's lock)
    mutable std::vector<std::pair<Key, BandedMapPtr>> m_seeds;
    int64_t m_stable = 0;
};

struct Pooled {
    at::Tensor p, q, difference;  // [..., ceil(R / pool), ceil(T / pool)]
};
// Maps p and q [..., R, T] (rows from a multiple of `pool`) pooled into pool x pool blocks (the
// last ones partial): the block maxima of p and q, and the value of p - q of largest magnitude,
// the positive one when the two magnitudes agree to 1e-5 (a row of two keys has d and -d:
// rounding must not choose the sign). On the CPU one pass over both maps, on CUDA a kernel
// (metrics_cuda.cu) where the build has it; elsewhere torch ops.
Pooled PoolThumbnails(const at::Tensor& p, const at::Tensor& q, int pool);
// Thumbnail pooling in two steps, for a block of rows partly kept from the last analysis: each
// row max-pooled along its keys alone (PoolKeys), rows from several sources joined, then blocks
// of `pool` rows (PoolRows, which gives what PoolThumbnails gives for the same rows).
struct KeyPooled {
    // [4, ..., R, ceil(T / pool)]: the largest p, q, p - q and q - p of each cell, as one tensor so
    // that each step is one set of ops for the four (an edit pools a few rows a layer).
    at::Tensor cells;
    bool defined() const { return cells.defined(); }
};
KeyPooled PoolKeys(const at::Tensor& p, const at::Tensor& q, int pool);  // maps [..., R, T]
KeyPooled NarrowRows(const KeyPooled& x, int64_t first, int64_t count);
// `x` cut or zero-padded to `cells` cells a row (a row has nothing right of its own cell), then `y`'s rows after it.
KeyPooled JoinRows(const KeyPooled& x, const KeyPooled& y, int64_t cells);
Pooled PoolRows(const KeyPooled& x, int pool);  // rows from a multiple of `pool` -> [..., ceil(R / pool), cells]

// Thumbnails built layer by layer, each layer's new rows copied to the host bands as soon as they
// are pooled: block rows below `kept` are `old`'s (the same pool; kept 0: none of them), and the
// bands wholly above `kept` are `old`'s own, shared.
class ThumbnailBuilder {
public:
    // `kinds`: 3, or 5 with a base (Thumbnails::kinds); `old` kept only when it holds as many.
    ThumbnailBuilder(const Thumbnails& old, int kept, int side, int pool, int layers, int heads, int kinds = 3);
    // Layer l's block rows kept..side-1 [H, side - kept, side], one tensor a kind in ThumbnailKind
    // order, on any device, any float dtype; not called when kept == side. The host's are laid
    // into the bands at once; a device's are held (HoldLayer).
    void AddLayer(int l, std::vector<at::Tensor> rows);
    // The same rows kept where they lie until Finish, which packs every held layer's where they
    // lie as the bands hold them (each row only as wide as its band: the causal half of the
    // squares) and sends them to the host in one transfer: a copy per layer would stop the host
    // from queuing the next layer's kernels while the device works. A device's way, on any device.
    void HoldLayer(int l, std::vector<at::Tensor> rows);
    Thumbnails Finish();

private:
    void CopyLayer(int l, const std::vector<at::Tensor>& rows);
    at::Tensor PackHeldLayers() const;
    void LayPackedLayers(const float* packed);

    Thumbnails m_thumbnails;
    int m_kept;
    std::vector<std::shared_ptr<ThumbnailBand>> m_new;  // the bands being built
    struct HeldLayer {
        int l;
        std::vector<at::Tensor> rows;
    };
    std::vector<HeldLayer> m_held;  // added, not yet copied
};
// Tokens a thumbnail cell covers, a side, for a text of `tokens`.
int ThumbnailPool(int tokens);

}  // namespace model
