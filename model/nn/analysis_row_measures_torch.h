// The row measures of Engine::Analyze (the stages: analysis_plan_torch.h): each block of attention
// rows the layer pass computes, measured (SPEC section 2's row metrics a side, JS and L1 of the
// plan's pairs of sides, SidePair) and pooled into thumbnails (the SSA side and its comparison),
// then dropped. Per layer it gives the measures of the new rows and keeps the rows of the last
// thumbnail block (LayerMeasures), and the thumbnails on the host; the assembly keeps the measures
// of every position on the host (HostRows), so the next analysis measures and pools only what
// changed.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/ATen.h>

#include "model/nn/analysis_layer_pass_torch.h"
#include "model/nn/analysis_plan_torch.h"
#include "model/nn/attention_maps_torch.h"
#include "model/nn/metrics.h"

namespace model {

struct LayerMeasures {
    // The new rows' (p..T-1) row metrics of each side and divergences of each pair, as
    // CompareMapsStacked gives them for the plan's sides in order (SSA, the comparison, the base:
    // MapSide's values) and its pairs (SidePair's), each [H, T - p] float32, all in one tensor
    // [RowMeasureCount(sides) * H, T - p]; undefined when p == T. Row(k) is field k's first row.
    at::Tensor measures;
    int64_t heads = 0;
    int64_t Row(int k) const { return k * heads; }
    // The rows of the last thumbnail block (from (T - 1) / pool * pool), each pooled along its keys
    // alone: typing at the end pools that block again from these instead of recomputing its rows.
    // SSA against the comparison, then against the base (undefined without one).
    KeyPooled tail[2];  // [4, H, rows, cells]; undefined when not computed

    // Lets go of the new rows' measures once they are on the host (HostRows): the next analysis
    // needs only the tail.
    void ForgetNewRows() { measures = at::Tensor(); }
};
struct MeasuredRows {
    std::vector<LayerMeasures> layers;
    Thumbnails thumbnails;  // on the host, its bands shared with the analyses handed out
};

// One analysis's measures, made for its plan; fed as the layer pass runs: each layer
// BeginLayer, each block AddBlock, EndLayer; then Finish.
class RowMeasures {
public:
    // `old`: the last analysis's, whose rows below p this one keeps.
    RowMeasures(const AnalysisPlan& plan, const MeasuredRows& old, int layers, int heads);
    void BeginLayer(int l);
    // Block [a, b) as LayerPass::RunBlock gave it (measured here unless the device measured it);
    // `pass` rebuilds the kept rows a < p of the block when the last analysis's tail lacks them.
    void AddBlock(int64_t a, int64_t b, const BlockRows& block, const LayerPass& pass);
    const LayerMeasures& EndLayer();
    MeasuredRows Finish();

private:
    void LetGoOfLayer();  // of the layer's parts, as soon as they are joined
    // The block's thumbnail rows of SSA (`ssa`) against side `other` (`q`), its rows max(a, p)..b-1,
    // or where those were never written their cells along the keys (`fused`, BlockRows::cells); in
    // the last block, sets `tail` (see LayerMeasures::tail).
    Pooled PoolPair(int64_t a, int64_t b, Side other, const at::Tensor& ssa, const at::Tensor& q, const KeyPooled& fused, const LayerPass& pass,
                    KeyPooled* tail) const;

    const AnalysisPlan& m_plan;
    const MeasuredRows& m_old;
    const int64_t m_heads;
    ThumbnailBuilder m_thumbnails;
    std::vector<LayerMeasures> m_layers;  // done

    // The layer under way: its new rows' parts, block by block.
    int m_layer = 0;
    const LayerMeasures* m_was = nullptr;  // the last analysis's (p > 0)
    std::vector<at::Tensor> m_measures;  // CompareMapsStacked of each block, [RowMeasureCount(sides), H, rows]
    std::vector<at::Tensor> m_thumbs[kThumbnailKinds];  // thumbnail block rows by ThumbnailKind, [H, rows, cells]
    KeyPooled m_tail[2];
};

}  // namespace model
