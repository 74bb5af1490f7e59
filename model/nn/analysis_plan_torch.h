// Engine::Analyze (analysis.cpp) runs in stages, each in its own file and each keeping its own
// slice of what the engine holds between analyses:
//   plan        this header: which rows the last analysis already holds, which forward passes
//               compute which sides, the blocks of rows
//   layer pass  analysis_layer_pass_torch.h: the forward passes layer by layer, what every
//               position leaves behind in a layer (LayerRows)
//   measures    analysis_row_measures_torch.h: row metrics, divergences and thumbnails of each
//               block of attention rows (the thumbnails, the last thumbnail block's rows)
//   predictions analysis_predictions_torch.h: the last layer's rows times the head (SidePredictions)
//   assembly    analysis_assembly_torch.h: the host arrays of an Analysis, every position's rows
//               of them (HostRows), and its maps
// Tensors are row-major; shapes are given as [dims] comments. H = heads, G = kv heads, T = tokens,
// D = head size, E = n_embd, p = the rows kept from the last analysis.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "model/nn/analysis.h"
#include "model/nn/forward.h"

namespace model {

// The sides of an analysis are the sides of its maps: the SSA model, what it is compared with,
// and a fine-tune's base model. Every stage keeps a value a side in a PerSide and visits the sides
// a plan lists, so a side is a value of MapSide, a row of the assembly's kSideFields and a batch
// row or run in PlanAnalysis.
using Side = MapSide;
constexpr int kSideCount = kMapSides;
template <class T>
struct PerSide {
    T of[kSideCount];
    T& operator[](Side s) { return of[static_cast<int>(s)]; }
    const T& operator[](Side s) const { return of[static_cast<int>(s)]; }
};

// The RowBuffers slots of an analysis (row_buffers.h): per layer, each run's keys and values and
// each side's queries (the layer pass); after the last layer, each side's last stream (the predictions).
enum class RowKind { Keys, Values, Queries };
inline int RowSlot(int layer, RowKind kind, int index) { return (layer * 3 + static_cast<int>(kind)) * kSideCount + index; }
inline int StreamSlot(int layers, Side s) { return RowSlot(layers, RowKind::Keys, static_cast<int>(s)); }

// The pairs of sides whose rows are compared (JS and L1 of each row), in CompareThreeMaps's order:
// the SSA side against its comparison in every analysis; with a base, the SSA side (the total
// change) and the comparison (the weights' drift) each against the base.
enum class SidePair { SsaCompare, SsaBase, CompareBase };
constexpr int kSidePairCount = 3;

// One forward pass: a model and the sides it computes, one batch row each. The SSA side and its
// comparison run as one batch of two when they share the weights (the counterfactual and the
// unedited comparison, and tau = 1 beside a base), so every layer's weights and the head are read
// once for both: typing at the end of a text is a pass of one row a side, which costs what reading
// the weights costs. A twin or a base runs on its own; the layer-local comparison has no forward pass.
struct Run {
    const SsaGpt* model = nullptr;
    std::vector<Side> sides;             // its batch rows, in order
    std::vector<TemperatureEdit> edits;  // a layer each; undefined tensors where no row is edited
    int Rows() const { return static_cast<int>(sides.size()); }
    const TemperatureEdit* Edit(int layer) const { return edits[layer].keep_position.defined() ? &edits[layer] : nullptr; }
};

// Where a side's rows come from: batch row `row` of run `run`; for the layer-local comparison, the
// queries and keys of that row (the SSA side's) with tau = 1 and no forward pass of its own.
struct SideSource {
    int run = 0, row = 0;
    bool layer_local = false;
};

struct AnalysisPlan {
    int64_t T = 0;  // tokens
    int64_t p = 0;  // rows below p are the last analysis's (its ids agree up to there); p..T-1 are computed
    // Thumbnail blocks are pool x pool tokens: rows from the start of p's block are pooled again
    // (all of them when T changes the pool).
    int pool = 1;                 // ThumbnailPool(T)
    int64_t cells = 0;            // thumbnail cells a side: ceil(T / pool)
    int64_t first_block_row = 0;  // the first row pooled again: p / pool * pool, or 0
    int64_t old_tail_first = 0;   // the first row of the last analysis's LayerMeasures::tail; kNoTail: unusable
    static constexpr int64_t kNoTail = INT64_MAX;
    // Rows a block of attention rows, a multiple of the pool (so blocks pool on their own), whose
    // [H, rows, T] floats stay under BlockBytes(device) a side.
    int64_t block = 0;
    // The same where the rows are never written (fused_attention_torch.h): a block's largest
    // tensor is then a pair's cells along the keys, [4, H, rows, cells] floats, under
    // BlockBytes(device); never fewer rows than `block`. At 8,192 tokens of GPT-2 small's shape on a
    // device, 5,440 rows where `block` is 672: the kernel's launches fill the device (each row
    // block of 64 rows and a head is one of its blocks: 132 of them in 672 rows, one an H100's SM).
    int64_t fused_block = 0;
    bool whole_layer_products = false;  // AnalyzeOptions::LayerProducts::Whole
    // There, the rows a run's weight products take at once: its widest temporary (q, k and v, or
    // the MLP's hidden rows) of every batch row stays under ProductBytes(device). A GPU's take every
    // row of GPT-2 small's and TinyLlama's shapes at 8,192 tokens; a 7 B model's at 32,768 in parts.
    int64_t product_rows = 0;
    std::vector<Run> runs;
    std::vector<Side> sides;  // the sides computed, the SSA side first
    int pairs = 1;            // the first `pairs` values of SidePair are compared (all with a base)
    PerSide<SideSource> source;
    at::Device device{at::kCPU};

    const SsaGpt& Model(Side s) const { return *runs[source[s].run].model; }  // the model side s runs (or reads)
    // A tensor of every position, [H, T, ...]: rows < p of the last analysis's `old` (undefined
    // when p == 0), then `rows` (p..T-1).
    at::Tensor Join(const at::Tensor& old, const at::Tensor& rows) const;
    // The same from the new rows in parts, block by block; none when p == T (then `old` cut to T rows).
    at::Tensor Join(const at::Tensor& old, const std::vector<at::Tensor>& parts) const;
};

// The new rows (p..T-1) from their parts, block by block, [H, T - p, ...]; undefined when there are
// none (p == T).
at::Tensor NewRows(const std::vector<at::Tensor>& parts);

// What one batch row of a forward pass does to the temperatures: nothing, the what-ifs, or all of
// them off (tau_q = tau_v = 1: the counterfactual).
enum class RowEdit { None, Interventions, Vanilla };

// A run's TemperatureEdits (a layer each), kept between analyses. They depend on the what-ifs, the
// model's layers and heads, the device and the batch rows, never on the text, so typing makes none:
// each analysis made them anew, 145 host ops and two copies to the device on GPT-2 small's shape
// (issue 37: on a GPU the copies wait for the device and each op costs the host microseconds).
class TemperatureEditsMemo {
public:
    const std::vector<TemperatureEdit>& Get(const std::vector<Intervention>& interventions, const ModelConfig& config, at::Device device,
                                            const std::vector<RowEdit>& rows);

private:
    struct Entry {
        std::vector<Intervention> interventions;
        int64_t layers = 0, heads = 0;
        at::Device device{at::kCPU};
        std::vector<RowEdit> rows;
        std::vector<TemperatureEdit> edits;
    };
    static constexpr size_t kEntries = 4;  // an analysis's runs (up to 3) and the what-ifs just left
    std::vector<Entry> m_entries;          // the most recently used first
};

// Which comparison and what-ifs the engine runs, with which models, and what of the last analysis
// (ids `old_ids`, thumbnails of `old_pool`) may be kept: nothing unless `reuse`.
struct PlanInputs {
    const SsaGpt* ssa = nullptr;
    const SsaGpt* twin = nullptr;  // null without one
    const SsaGpt* base = nullptr;  // null without one (a twin and a base are exclusive)
    Comparison comparison = Comparison::Counterfactual;  // Base with a base
    const std::vector<Intervention>* interventions = nullptr;
    at::Device device{at::kCPU};
    AnalyzeOptions::LayerProducts layer_products = AnalyzeOptions::LayerProducts::Auto;
    TemperatureEditsMemo* edits = nullptr;  // the engine's; null: made anew
};
AnalysisPlan PlanAnalysis(const PlanInputs& in, const std::vector<int32_t>& ids, const std::vector<int32_t>& old_ids, int old_pool, bool reuse);

// The attention rows the analysis computes at once, a side: [H, rows, T] floats. On the CPU small
// blocks, which the heap reuses (a fresh mapping costs page faults). On a GPU large ones, so that
// the kernels are few and each big: 8 MB blocks made 512 blocks a layer of GPT-2 small at 8,192
// tokens, and the analysis took 6.3 s on an H200, launching kernels. Larger is not always better:
// a block's rows are multiplied with every key up to its last row, so the masked upper triangle
// computed grows with the block's rows squared (at 8,192 tokens, 13 blocks a layer compute 54% of
// the square, 3 blocks 67%), while the host's ops shrink with their count (about a hundred a block
// where the layer's whole forward pass runs a block of rows at a time, some twenty where only the
// attention does: AnalyzeOptions::LayerProducts). A GPU's block is 256 MB unless
// $SSAVIZ_DEVICE_BLOCK_MB says otherwise (bench/gpu.sh's blocks stage compares sizes).
constexpr size_t kBlockBytes = size_t{8} << 20, kDeviceBlockBytes = size_t{256} << 20;
// AnalysisPlan::product_rows's budget: the CPU's block, a GPU's 1 GB.
constexpr size_t kDeviceProductBytes = size_t{1} << 30;
inline size_t ProductBytes(const at::Device& device) { return device.is_cpu() ? kBlockBytes : kDeviceProductBytes; }
size_t BlockBytes(const at::Device& device);
// A GPU's block from $SSAVIZ_DEVICE_BLOCK_MB's text (null: unset): a whole number of MB from 1 to
// 65536, else kDeviceBlockBytes with `*unreadable` set. Apart from BlockBytes for tests.
size_t DeviceBlockBytes(const char* setting, bool* unreadable);

// $SSAVIZ_LAYER_PRODUCTS's text (null: unset) as a setting of AnalyzeOptions::layer_products:
// whole or blocks; Auto when unset, and for anything else with `*unreadable` set.
AnalyzeOptions::LayerProducts LayerProductsSetting(const char* setting, bool* unreadable);

// $SSAVIZ_LAYER_PRODUCTS as LayerProductsSetting reads it, once a process (a setting it cannot
// read is one line on stderr, and Auto).
AnalyzeOptions::LayerProducts LayerProductsOfEnvironment();

// What the environment's settings (README's device settings) change in how an analysis on
// `device` computes, a line each ("SSAVIZ_PRODUCTS=tf32x3: ..."), for ModelInfo::settings: `info`,
// metrics.json and the Model panel say them, so numbers computed another way than the default
// say so. Empty where every setting that applies to the device is at its default.
std::vector<std::string> ComputeSettings(const at::Device& device);

// Waits for the device's kernels to finish (nothing on the CPU): AnalyzeOptions::phase_timings.
void WaitForDevice(const at::Device& device);

}  // namespace model
