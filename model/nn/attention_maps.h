// Attention maps as the app gets them: one head's full [T, T] map on demand, and every head's
// map pooled into thumbnails. Free of LibTorch types; what the engine builds them with on its
// device is attention_maps_torch.h. Row-major. L = layers, H = heads, T = tokens.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace model {

// Compare: what the SSA model is compared with (analysis.h's Comparison); Base: a fine-tune's base
// model, a third side beside the SSA weights at tau = 1 (Comparison::Base).
enum class MapSide { Ssa, Compare, Base };
constexpr int kMapSides = 3;  // the values of MapSide
using HeadMap = std::shared_ptr<const std::vector<float>>;  // one head's [T, T] map, row-major

// One head's map as the window's heatmap reads it: kept where the engine built it (a GPU's
// memory on CUDA, the host map otherwise) and read in parts, so that a head switch at 8,192
// tokens copies a screen's worth of cells to the host instead of 256 MB a side. Levels of detail
// are pooled where the map is, a sharp weight surviving: level k's cell is the strongest of its
// 2^k x 2^k block (the largest; for a difference, the value of largest magnitude, the positive
// one on a tie); level 0 is the map. Thread-safe.
struct MapExtent {              // over the causal cells (j <= i) with finite values
    float max = 0.0f;           // the largest value (0 when none is above it)
    float min_positive = 1.0f;  // the smallest positive value (1 when none is below it)
    float max_abs = 0.0f;       // the largest magnitude
};
// The colours of a map's texels, made where the map is (the window hands over viz::ColourScale's):
// a cell's colour is table[k], k the number of steps at or below its value (the steps are
// non-decreasing; those no value reaches are NaN, and last); a NaN cell's is table[0]; a cell
// right of the diagonal (j > i, in the level's own indices) is `blank`. RGBA8, as a texture holds them.
struct TexelScale {
    std::array<float, 255> steps;
    std::array<uint32_t, 256> table;
    uint32_t blank = 0;
};
class MapCells {
public:
    virtual ~MapCells() = default;
    virtual int Tokens() const = 0;
    // The cells [row0, row0 + rows) x [col0, col0 + cols) of `level` (ceil(T / 2^level) a side),
    // row-major, clipped to the level; empty for a level or window outside it.
    virtual std::vector<float> Cells(int level, int row0, int col0, int rows, int cols) const = 0;
    virtual float At(int i, int j) const = 0;        // cell (i, j); NaN outside the map
    virtual std::vector<float> Row(int i) const = 0; // row i's T cells; empty outside the map
    virtual MapExtent Extent() const = 0;
    // This map minus `other` (of the same head and size), cell by cell where they are, pooled as a
    // difference; null when the two cannot be subtracted (sizes differ).
    virtual std::shared_ptr<const MapCells> Minus(const MapCells& other) const = 0;
    // Whether the map is kept on a device (a GPU's memory), where Texels colours it.
    virtual bool OnDevice() const { return false; }
    // Cells' window in `scale`'s colours, row-major and clipped as Cells, made where the map is: from
    // a GPU only the texture's bytes cross, with no colour pass on the host.
    virtual std::vector<uint32_t> Texels(int level, int row0, int col0, int rows, int cols, const TexelScale& scale) const;
};
using MapCellsPtr = std::shared_ptr<const MapCells>;
// Cells of a map already on the host (the synthetic analyses, a CPU engine's maps): no copy.
MapCellsPtr HostMapCells(HeadMap map, int tokens);
// The extent of a map [T, T] on the host (what MapCells::Extent gives for it), and of rows
// first..first + rows - 1 of a map given as [rows, width] (row r's causal cells: j <= first + r).
MapExtent HostMapExtent(const float* map, int tokens);
MapExtent HostMapExtent(const float* map, int64_t rows, int64_t width, int64_t first);

// Every head's full attention map, on demand. At thousands of tokens L*H*T*T floats do not fit
// the host (GPT-2 small at 2,048 tokens: 2.4 GB a side), so the engine keeps each layer's q, k
// and tau_q where the model ran and rebuilds a head's map when it is shown or exported; the most
// recently used maps stay on the host up to kMapCacheBytes. Thread-safe.
class AttentionMaps {
public:
    virtual ~AttentionMaps() = default;
    virtual HeadMap Head(MapSide side, int layer, int head) const = 0;
    // The same map for a view that reads parts of it (MapCells): on the host, Head's map; the
    // engine on a GPU keeps it there, the most recently used up to kDeviceMapCacheBytes.
    virtual MapCellsPtr Cells(MapSide side, int layer, int head) const;
};
constexpr size_t kDeviceMapCacheBytes = size_t{1} << 30;
constexpr size_t kMapCacheBytes = size_t{128} << 20;
// About what one side of a head's map holds where it is kept: the causal half of [T, T] floats in
// bands of 256 rows (each as wide as its last row) and their levels of detail (a third more).
inline size_t HeadMapBytes(int tokens) {
    const size_t T = tokens > 0 ? static_cast<size_t>(tokens) : 0;
    return T * (T + 256) / 2 * sizeof(float) / 3 * 4;
}

// Maps already on the host, [L, H, T, T] a side: synthetic analyses for the demo and tests (no base side).
std::shared_ptr<const AttentionMaps> HostAttentionMaps(int layers, int heads, int tokens, std::vector<float> ssa,
                                                       std::vector<float> compare);

// Every head's map max-pooled to at most kThumbnailCells a side, for the heads grid and its
// shared colour scale: a cell holds the largest weight of its pool x pool block of tokens (the
// difference: the value of largest magnitude, the positive one when the magnitudes agree to
// 1e-5), so a sharp weight survives. Exact (pool 1) up to kThumbnailCells tokens.
//
// Stored in bands of kThumbnailBandRows block rows, every head's rows of a band together. A block
// row has nothing right of its own cell (the maps are causal), so a band is only as wide as its
// last row and stays valid while the text grows: an edit rebuilds the bands from its block row
// on, and the analyses before and after it share the bands above (typing at the end of 1,024
// tokens of GPT-2 small rebuilds 1 band of 32, instead of copying 113 MB).
constexpr int kThumbnailCells = 256;
constexpr int kThumbnailBandRows = 8;
// With a base (Comparison::Base), the base's map and SSA - base are pooled too.
enum class ThumbnailKind { Ssa, Compare, Difference, Base, BaseDifference };
constexpr int kThumbnailKinds = 5;
constexpr bool IsDifference(ThumbnailKind kind) { return kind == ThumbnailKind::Difference || kind == ThumbnailKind::BaseDifference; }
struct ThumbnailBand {
    int first = 0, rows = 0, width = 0;         // block rows first..first+rows-1, cells 0..width-1 of each
    std::vector<float> cells[kThumbnailKinds];  // by ThumbnailKind: [L, H, rows, width]; the first Thumbnails::kinds only
    float max_abs[kThumbnailKinds] = {};        // the largest |difference| here, for the difference kinds (NaN never wins)
};
struct Thumbnails {
    int side = 0;   // cells a side: ceil(T / pool)
    int pool = 1;   // tokens a cell covers, a side
    int layers = 0, heads = 0;
    int kinds = 3;  // the ThumbnailKinds held: the first three, all five with a base
    std::vector<std::shared_ptr<const ThumbnailBand>> bands;  // block rows 0..side-1, in order; immutable, shared

    bool Holds(ThumbnailKind kind) const { return static_cast<int>(kind) < kinds; }
    // One head's [side, side] cells, row-major (zero right of each row's own cell); empty outside
    // the model or for a kind not held.
    std::vector<float> Head(ThumbnailKind kind, int l, int h) const;
    std::vector<float> All(ThumbnailKind kind) const;  // [L, H, side, side]; empty for a kind not held
    float MaxAbs(ThumbnailKind kind) const;            // a difference kind's, over every cell; 0 without any
};
// From host maps [L, H, T, T] (the synthetic analyses; the engine pools on its device).
Thumbnails MakeThumbnails(const std::vector<float>& ssa, const std::vector<float>& compare, int layers, int heads, int tokens);

}  // namespace model
