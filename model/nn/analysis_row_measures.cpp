// The row measures of an analysis (analysis_row_measures_torch.h).
#include "model/nn/analysis_row_measures_torch.h"

#include <algorithm>

namespace model {

RowMeasures::RowMeasures(const AnalysisPlan& plan, const MeasuredRows& old, int layers, int heads)
    : m_plan(plan),
      m_old(old),
      m_heads(heads),
      m_thumbnails(old.thumbnails, static_cast<int>(plan.first_block_row / plan.pool), static_cast<int>(plan.cells), plan.pool, layers,
                   heads, plan.pairs > 1 ? kThumbnailKinds : 3) {}

void RowMeasures::BeginLayer(int l) {
    m_layer = l;
    m_was = m_plan.p > 0 ? &m_old.layers[l] : nullptr;
    LetGoOfLayer();
}

void RowMeasures::LetGoOfLayer() {
    m_measures.clear();
    for (std::vector<at::Tensor>& kind : m_thumbs) kind.clear();
    m_tail[0] = m_tail[1] = {};
}

void RowMeasures::AddBlock(int64_t a, int64_t b, const BlockRows& block, const LayerPass& pass) {
    const int64_t from = std::max(a, m_plan.p);  // rows [from, b) are new
    const PerSide<at::Tensor>& rows = block.rows;
    const at::Tensor &ssa = rows[Side::Ssa], &compare = rows[Side::Compare];
    if (from < b) {  // CompareMapsStacked's pairs are SidePair's, in its order
        m_measures.push_back(block.measures.defined() ? block.measures
                                                      : CompareMapsStacked(ssa, compare, m_plan.pairs > 1 ? rows[Side::Base] : at::Tensor(), from));
        const Side maps[] = {Side::Ssa, Side::Compare, Side::Base};  // its maps
        for (int m = 0; m < (m_plan.pairs > 1 ? 3 : 2); ++m)
            CountKeysThroughWindow(m_measures.back(), m, from, m_plan.Model(maps[m]).layers[m_layer].window);
    }
    // Thumbnails of SSA against its comparison, and with a base against the base too (its map
    // and SSA - base; the second pooling's SSA maxima are the first's again, dropped).
    const Pooled pooled = PoolPair(a, b, Side::Compare, ssa, compare, block.cells[0], pass, &m_tail[0]);
    std::vector<at::Tensor> parts = {pooled.p, pooled.q, pooled.difference};
    if (m_plan.pairs > 1) {
        const Pooled base = PoolPair(a, b, Side::Base, ssa, rows[Side::Base], block.cells[1], pass, &m_tail[1]);
        parts.push_back(base.q);
        parts.push_back(base.difference);
    }
    for (size_t k = 0; k < parts.size(); ++k) {  // padded to the layer's width (constant_pad_nd copies even when it adds nothing)
        const int64_t pad = m_plan.cells - parts[k].size(-1);
        m_thumbs[k].push_back(pad > 0 ? at::constant_pad_nd(parts[k], {0, pad}) : parts[k]);
    }
}

Pooled RowMeasures::PoolPair(int64_t a, int64_t b, Side other, const at::Tensor& ssa, const at::Tensor& q, const KeyPooled& fused,
                             const LayerPass& pass, KeyPooled* tail) const {
    // Rows [a, from) of the block were kept from the last analysis; their thumbnail block rows are
    // pooled again with the new ones: from the last analysis's tail when it holds them (typing at
    // the end), else recomputed from the kept q and k.
    const int64_t T = m_plan.T, from = std::max(a, m_plan.p), pool = m_plan.pool;
    const int64_t kept = std::min(from, b), cells = (b + pool - 1) / pool;
    const KeyPooled* old_tail = m_was ? &m_was->tail[other == Side::Base ? 1 : 0] : nullptr;
    Pooled pooled;
    KeyPooled block_rows;  // rows [a, b) pooled along their keys, where the block has kept rows
    if (a < kept) {
        if (old_tail->defined() && m_plan.old_tail_first <= a) {
            block_rows = NarrowRows(*old_tail, a - m_plan.old_tail_first, kept - a);
        } else {
            const at::Tensor kept_ssa = pass.KeptAttention(Side::Ssa, a, kept, b);
            const at::Tensor kept_q = pass.KeptAttention(other, a, kept, b);
            block_rows = PoolKeys(kept_ssa, kept_q, static_cast<int>(pool));
        }
        const KeyPooled new_rows = from >= b ? KeyPooled{} : fused.defined() ? fused : PoolKeys(ssa, q, static_cast<int>(pool));
        block_rows = JoinRows(block_rows, new_rows, cells);
        pooled = PoolRows(block_rows, static_cast<int>(pool));
    } else if (fused.defined()) {  // the rows were never written: the kernel pooled them along the keys
        block_rows = fused;
        pooled = PoolRows(block_rows, static_cast<int>(pool));
    } else {
        pooled = PoolThumbnails(ssa, q, static_cast<int>(pool));
    }
    if (b == T) {  // the last block: keep its last thumbnail block's rows for the next edit
        const int64_t first = (T - 1) / pool * pool;
        *tail = block_rows.defined() ? NarrowRows(block_rows, first - a, T - first)
                         : PoolKeys(ssa.narrow(1, first - a, T - first), q.narrow(1, first - a, T - first), static_cast<int>(pool));
    }
    return pooled;
}

const LayerMeasures& RowMeasures::EndLayer() {
    LayerMeasures now;
    now.heads = m_heads;
    if (!m_measures.empty()) {  // [fields, H, rows] a block, joined along the rows, one field's heads after another
        const at::Tensor joined = m_measures.size() == 1 ? m_measures[0] : at::cat(m_measures, -1);
        now.measures = joined.view({-1, joined.size(-1)});
    }
    now.tail[0] = m_tail[0];
    now.tail[1] = m_tail[1];
    if (!m_thumbs[0].empty()) {  // block rows first_block_row / pool.. of the layer: [H, cells - first_block_row / pool, cells] each
        std::vector<at::Tensor> rows;
        for (const std::vector<at::Tensor>& kind : m_thumbs)
            if (!kind.empty()) rows.push_back(kind.size() == 1 ? kind[0] : at::cat(kind, 1));
        m_thumbnails.AddLayer(m_layer, std::move(rows));
    }
    m_layers.push_back(std::move(now));
    LetGoOfLayer();
    return m_layers.back();
}

MeasuredRows RowMeasures::Finish() { return {std::move(m_layers), m_thumbnails.Finish()}; }

}  // namespace model
