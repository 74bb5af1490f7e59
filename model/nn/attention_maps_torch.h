// How the engine builds the attention maps of attention_maps.h on its device: a head's map
// rebuilt from the layer's q, k and tau_q with the forward pass's own AttentionRows, a cache of
// the most recently used maps, and the pooling of maps into thumbnails.
// Tensors are row-major; shapes are given as [dims] comments. H = heads, T = tokens, D = head size.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "model/nn/attention_maps.h"

namespace model {

// The attention rows the analysis computes at once, a side: [H, rows, T] floats. On the CPU small
// blocks, which the heap reuses (a fresh mapping costs page faults); on a GPU large ones, so that
// the kernels are few and each is big: 8 MB blocks made 512 blocks a layer of GPT-2 small at 8,192
// tokens, and the analysis took 6.3 s on an H200, launching kernels.
constexpr size_t kBlockBytes = size_t{8} << 20;
constexpr size_t kDeviceBlockBytes = size_t{256} << 20;
inline size_t BlockBytes(const at::Device& device) { return device.is_cpu() ? kBlockBytes : kDeviceBlockBytes; }

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
    explicit LruMaps(size_t budget) : m_budget(budget) {}
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
        while (m_bytes > m_budget && m_entries.size() > 1) {
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
    const size_t m_budget;
};
class MapCache : public LruMaps<HeadMap> {
public:
    MapCache() : LruMaps<HeadMap>(kMapCacheBytes) {}
};

// A float32 map [T, T] where it lives as MapCells: levels pooled there (kept once built),
// windows, values and rows copied out. `keep` holds the memory of a map wrapped from the host.
MapCellsPtr TensorMapCells(at::Tensor map, bool diverging, HeadMap keep = nullptr);
// One level of detail coarser (MapCells' rule), in torch ops on the map's device: [n, n] ->
// ceil(n / 2) a side, the last row and column pooling the cells they have.
at::Tensor PoolByTwo(const at::Tensor& map, bool diverging);
at::Tensor PoolByTwoOps(const at::Tensor& map, bool diverging);  // the device's way (PoolByTwo elsewhere), for tests on the CPU
// MapCells::Extent in torch ops on the map's device, one copy to the host (a CPU map's cells use HostMapExtent).
MapExtent TensorMapExtent(const at::Tensor& map);

// Rebuilds a head's map from the layer's q, k and tau_q where the model ran (CPU or GPU) with the
// forward pass's own AttentionRows, and copies only that [T, T] map to the host. After an edit, a
// head the previous analysis had built keeps its rows before the edit and computes only the rest.
class RecomputedMaps final : public AttentionMaps {
public:
    struct Layer {
        at::Tensor q, k;  // [H, T, D] in the compute dtype
        at::Tensor tau_q; // [H, T]; undefined: 1
        int window = 0;   // the layer's sliding window (LayerWeights::window); 0: none
    };
    void Add(MapSide side, Layer layer) { m_layers[static_cast<int>(side)].push_back(std::move(layer)); }
    // `previous` answered for ids whose first `stable` equal these ones'.
    void Reuse(const RecomputedMaps& previous, int64_t stable) {
        std::lock_guard<std::mutex> lock(m_seeds_mutex);
        m_seeds = previous.m_cache.Entries();
        m_stable = stable;
    }
    HeadMap Head(MapSide side, int l, int h) const override;
    MapCellsPtr Cells(MapSide side, int l, int h) const override;

private:
    HeadMap TakeSeed(const MapCache::Key& key, int64_t* stable) const;  // and the rows it keeps
    const Layer* Find(MapSide side, int l, int h) const;

    std::vector<Layer> m_layers[kMapSides];
    mutable MapCache m_cache;
    mutable LruMaps<MapCellsPtr> m_device_cache{kDeviceMapCacheBytes};  // Cells' maps on a GPU, with their levels
    mutable std::mutex m_seeds_mutex;  // guards the two below (a map is made outside the cache's lock)
    mutable std::vector<std::pair<MapCache::Key, HeadMap>> m_seeds;
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
    ThumbnailBuilder(const Thumbnails& old, int kept, int side, int pool, int layers, int heads);
    // Layer l's block rows kept..side-1 [H, side - kept, side] by kind (SSA, comparison,
    // difference), on any device, any float dtype; not called when kept == side. A device's
    // rows are copied to the host in Finish, every layer's in one transfer: a copy per layer would
    // stop the host from queuing the next layer's kernels while the device works.
    void AddLayer(int l, const at::Tensor (&rows)[3]);
    Thumbnails Finish();

private:
    void CopyLayer(int l, const at::Tensor (&rows)[3]);

    Thumbnails m_thumbnails;
    int m_kept;
    std::vector<std::shared_ptr<ThumbnailBand>> m_new;  // the bands being built
    struct DeviceLayer {
        int l;
        at::Tensor rows[3];
    };
    std::vector<DeviceLayer> m_device_layers;  // added, not yet copied
};
// Tokens a thumbnail cell covers, a side, for a text of `tokens`.
int ThumbnailPool(int tokens);

}  // namespace model
