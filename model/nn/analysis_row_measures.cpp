// The row measures of an analysis (analysis_row_measures_torch.h).
#include "model/nn/analysis_row_measures_torch.h"

#include <algorithm>

namespace model {

RowMeasures::RowMeasures(const AnalysisPlan& plan, const MeasuredRows& old, int layers, int heads)
    : m_plan(plan),
      m_old(old),
      m_thumbnails(old.thumbnails, static_cast<int>(plan.first_block_row / plan.pool), static_cast<int>(plan.cells), plan.pool, layers,
                   heads) {}

void RowMeasures::BeginLayer(int l) {
    m_layer = l;
    m_was = m_plan.p > 0 ? &m_old.layers[l] : nullptr;
    LetGoOfLayer();
}

void RowMeasures::LetGoOfLayer() {
    for (Side s : m_plan.sides) m_metrics[s].clear();
    for (int k = 0; k < kSidePairCount; ++k) m_js[k].clear(), m_l1[k].clear();
    for (std::vector<at::Tensor>& kind : m_thumbs) kind.clear();
    m_tail = {};
}

void RowMeasures::AddBlock(int64_t a, int64_t b, const PerSide<at::Tensor>& rows, const LayerPass& pass) {
    const int64_t T = m_plan.T, from = std::max(a, m_plan.p);  // rows [from, b) are new
    const int pool = m_plan.pool;
    const at::Tensor &ssa = rows[Side::Ssa], &compare = rows[Side::Compare];
    if (from < b) {
        auto add = [&](SidePair pair, const at::Tensor& js, const at::Tensor& l1) {
            m_js[static_cast<int>(pair)].push_back(js);
            m_l1[static_cast<int>(pair)].push_back(l1);
        };
        if (m_plan.pairs == 1) {
            MapComparison m = CompareMaps(ssa, compare, from);
            m_metrics[Side::Ssa].push_back(std::move(m.p));
            m_metrics[Side::Compare].push_back(std::move(m.q));
            add(SidePair::SsaCompare, m.js, m.l1);
        } else {  // a base
            ThreeWayComparison m = CompareThreeMaps(ssa, compare, rows[Side::Base], from);
            m_metrics[Side::Ssa].push_back(std::move(m.pq.p));
            m_metrics[Side::Compare].push_back(std::move(m.pq.q));
            m_metrics[Side::Base].push_back(std::move(m.r));
            add(SidePair::SsaCompare, m.pq.js, m.pq.l1);
            add(SidePair::SsaBase, m.js_pr, m.l1_pr);
            add(SidePair::CompareBase, m.js_qr, m.l1_qr);
        }
    }
    // Rows [a, from) of the block were kept from the last analysis; their thumbnail block rows are
    // pooled again with the new ones: from the last analysis's tail when it holds them (typing at
    // the end), else recomputed from the kept q and k.
    const int64_t kept = std::min(from, b), cells = (b + pool - 1) / pool;
    Pooled pooled;
    KeyPooled block_rows;  // rows [a, b) pooled along their keys, where the block has kept rows
    if (a < kept) {
        if (m_was->tail.defined() && m_plan.old_tail_first <= a) {
            block_rows = NarrowRows(m_was->tail, a - m_plan.old_tail_first, kept - a);
        } else {
            const at::Tensor kept_ssa = pass.KeptAttention(Side::Ssa, a, kept, b);
            const at::Tensor kept_compare = pass.KeptAttention(Side::Compare, a, kept, b);
            block_rows = PoolKeys(kept_ssa, kept_compare, pool);
        }
        block_rows = JoinRows(block_rows, from < b ? PoolKeys(ssa, compare, pool) : KeyPooled{}, cells);
        pooled = PoolRows(block_rows, pool);
    } else {
        pooled = PoolThumbnails(ssa, compare, pool);
    }
    if (b == T) {  // the last block: keep its last thumbnail block's rows for the next edit
        const int64_t first = (T - 1) / pool * pool;
        m_tail = a < kept ? NarrowRows(block_rows, first - a, T - first)
                          : PoolKeys(ssa.narrow(1, first - a, T - first), compare.narrow(1, first - a, T - first), pool);
    }
    const at::Tensor* parts[3] = {&pooled.p, &pooled.q, &pooled.difference};
    for (int k = 0; k < 3; ++k) {  // padded to the layer's width (constant_pad_nd copies even when it adds nothing)
        const int64_t pad = m_plan.cells - parts[k]->size(-1);
        m_thumbs[k].push_back(pad > 0 ? at::constant_pad_nd(*parts[k], {0, pad}) : *parts[k]);
    }
}

const LayerMeasures& RowMeasures::EndLayer() {
    LayerMeasures now;
    for (Side s : m_plan.sides)
        for (const RowMetricField& field : kRowMetricFields) {
            std::vector<at::Tensor> parts;
            for (const RowMetricTensors& m : m_metrics[s]) parts.push_back(m.*field.tensor);
            now.metrics[s].*field.tensor = NewRows(parts);
        }
    for (int k = 0; k < m_plan.pairs; ++k) {
        now.pairs[k].js = NewRows(m_js[k]);
        now.pairs[k].l1 = NewRows(m_l1[k]);
    }
    now.tail = m_tail;
    if (!m_thumbs[0].empty()) {  // block rows first_block_row / pool.. of the layer: [H, cells - first_block_row / pool, cells] each
        at::Tensor rows[3];
        for (int k = 0; k < 3; ++k) rows[k] = m_thumbs[k].size() == 1 ? m_thumbs[k][0] : at::cat(m_thumbs[k], 1);
        m_thumbnails.AddLayer(m_layer, rows);
    }
    m_layers.push_back(std::move(now));
    LetGoOfLayer();
    return m_layers.back();
}

MeasuredRows RowMeasures::Finish() { return {std::move(m_layers), m_thumbnails.Finish()}; }

}  // namespace model
