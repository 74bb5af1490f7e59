// The layer pass of an analysis (analysis_layer_pass_torch.h).
#include "model/nn/analysis_layer_pass_torch.h"

#include <algorithm>

#include "model/nn/linear.h"
#include "model/nn/metrics.h"
#include "model/nn/runtime_torch.h"

namespace model {

LayerPass::LayerPass(const AnalysisPlan& plan, const std::vector<int32_t>& ids, const std::vector<LayerRows>& old, RowBuffers& buffers)
    : m_plan(plan), m_old(old), m_buffers(buffers), m_streams(plan.runs.size()) {
    if (plan.p == plan.T) return;
    const std::vector<int32_t> rows(ids.begin() + plan.p, ids.end());
    const at::Tensor index = at::tensor(at::ArrayRef<int32_t>(rows), at::kInt).to(plan.device, at::kLong).unsqueeze(0);
    for (size_t r = 0; r < plan.runs.size(); ++r) m_streams[r] = Embed(*plan.runs[r].model, index, plan.p).repeat({plan.runs[r].Rows(), 1, 1});
}

void LayerPass::BeginLayer(int l) {
    const int64_t p = m_plan.p, T = m_plan.T;
    const size_t runs = m_plan.runs.size();
    m_layer = l;
    m_was = p > 0 ? &m_old[l] : nullptr;
    LetGoOfLayer();
    m_keys.resize(runs);
    m_values.resize(runs);
    m_room.resize(runs);
    m_out.resize(runs);
    for (size_t r = 0; r < runs && m_was; ++r) {
        m_keys[r] = m_was->k[r].narrow(2, 0, std::min(p, T));
        m_values[r] = m_was->vs[r].narrow(2, 0, std::min(p, T));
    }
    // Where the new rows go: buffers whose rows below p are the last analysis's (RowBuffers).
    for (size_t r = 0; r < runs && p < T; ++r) {
        const Run& run = m_plan.runs[r];
        const ModelConfig& rc = run.model->config;
        const auto options = m_streams[r].options();
        const int index = static_cast<int>(r);
        m_room[r].k = m_buffers.Acquire(RowSlot(l, RowKind::Keys, index), {run.Rows(), rc.KvHeads(), T, rc.HeadSize()}, 2, options,
                                        m_was ? m_was->k[r] : at::Tensor(), p, rc.n_positions);
        m_room[r].vs = m_buffers.Acquire(RowSlot(l, RowKind::Values, index), {run.Rows(), ValueHeads(rc, false, run.Edit(l)), T, rc.HeadSize()},
                                         2, options, m_was ? m_was->vs[r] : at::Tensor(), p, rc.n_positions);
        for (Side s : run.sides)
            m_room_q[s] = m_buffers.Acquire(RowSlot(l, RowKind::Queries, static_cast<int>(s)), {rc.n_head, T, rc.HeadSize()}, 1, options,
                                            m_was ? m_was->side[s].q : at::Tensor(), p, rc.n_positions);
    }
}

at::Tensor LayerPass::Keys(Side s) const { return m_keys[m_plan.source[s].run][m_plan.source[s].row]; }

int LayerPass::Window(Side s) const { return m_plan.Model(s).layers[m_layer].window; }

void LayerPass::KeepTemperatures(const Run& run, const BlockCapture& capture) {
    for (int i = 0; i < run.Rows(); ++i) {
        const Side s = run.sides[i];
        m_tau_q[s].push_back(capture.tau_q[i]);
        m_tau_v[s].push_back(capture.tau_v[i]);
        if (s == Side::Ssa) {
            m_position.push_back(capture.tau_q_terms.position[i]);
            m_token.push_back(capture.tau_q_terms.token[i]);
        }
    }
}

void LayerPass::RunLayerIn() {
    const int64_t p = m_plan.p, T = m_plan.T;
    if (!m_plan.whole_layer_products || p >= T) return;
    m_in.resize(m_plan.runs.size());
    m_scores.resize(m_plan.runs.size());
    m_y.resize(m_plan.runs.size());
    for (size_t r = 0; r < m_plan.runs.size(); ++r) {
        const Run& run = m_plan.runs[r];
        std::vector<BlockInput> parts;  // the plan's product_rows at a time
        for (int64_t first = p; first < T; first += m_plan.product_rows) {
            const int64_t n = std::min(m_plan.product_rows, T - first);
            BlockInput in = BlockIn(run.model->config, run.model->layers[m_layer], Narrow(m_streams[r], 1, first - p, n), /*vanilla=*/false,
                                    first, run.Edit(m_layer));
            TORCH_CHECK(in.vs.size(1) == m_room[r].vs.size(1), "the values' heads differ from their room's");
            m_room[r].k.narrow(2, first, n).copy_(in.k);
            m_room[r].vs.narrow(2, first, n).copy_(in.vs);
            for (int i = 0; i < run.Rows(); ++i) m_room_q[run.sides[i]].narrow(1, first, n).copy_(in.q[i]);
            BlockCapture capture;
            CaptureTemperatures(in, &capture);
            KeepTemperatures(run, capture);
            in.k = in.vs = in.tau_v = at::Tensor();  // k and vs in their room now
            in.terms = {};
            parts.push_back(std::move(in));
        }
        BlockInput& in = m_in[r];
        in = parts[0];
        if (parts.size() > 1) {  // every new row's q, tau_q and first norm
            std::vector<at::Tensor> h, q, tau_q;
            for (const BlockInput& part : parts) {
                h.push_back(part.h);
                q.push_back(part.q);
                if (part.tau_q.defined()) tau_q.push_back(part.tau_q);
            }
            in.h = at::cat(h, 1);
            in.q = at::cat(q, 2);
            if (!tau_q.empty()) in.tau_q = at::cat(tau_q, 2);
        }
        m_keys[r] = Narrow(m_room[r].k, 2, 0, T);
        // Once a layer rather than once a block: the scaled queries, and the TF32 parts of them and the keys.
        m_scores[r] = WithTf32Parts(ScaledQueries(in.q, in.tau_q), m_keys[r]);
        m_values[r] = Narrow(m_room[r].vs, 2, 0, T);
    }
}

void LayerPass::RunLayerOut() {
    if (m_in.empty()) return;
    const int64_t p = m_plan.p, T = m_plan.T;
    for (size_t r = 0; r < m_plan.runs.size(); ++r) {
        const Run& run = m_plan.runs[r];
        const at::Tensor y = m_y[r].size() == 1 ? m_y[r][0] : at::cat(m_y[r], 2);
        for (int64_t first = p; first < T; first += m_plan.product_rows) {
            const int64_t n = std::min(m_plan.product_rows, T - first);
            m_out[r].push_back(BlockOut(run.model->config, run.model->layers[m_layer], Narrow(m_streams[r], 1, first - p, n),
                                        Narrow(m_in[r].h, 1, first - p, n), Narrow(y, 2, first - p, n)));
        }
    }
}

void LayerPass::Attend(size_t r, int64_t from, int64_t b, BlockCapture* capture) {
    const BlockInput& in = m_in[r];
    const int64_t p = m_plan.p;
    const int64_t window = m_plan.runs[r].model->layers[m_layer].window;
    capture->q = Narrow(in.q, 2, from - p, b - from);
    if (m_scores[r].q.defined()) {
        capture->attention = MaskedSoftmax(GroupedScoresOf(m_scores[r], from - p, b - from, b), from, window);
    } else {
        const at::Tensor tau_q = in.tau_q.defined() ? Narrow(in.tau_q, 2, from - p, b - from) : at::Tensor();
        capture->attention = AttentionRows(capture->q, Narrow(m_keys[r], 2, 0, b), tau_q, from, window,
                                           capture->keep_scores ? &capture->scores : nullptr);  // [B, H, b - from, b]
    }
    m_y[r].push_back(GroupedMatmul(capture->attention, Narrow(m_values[r], 2, 0, b)));
}

bool LayerPass::AllAtOnce() const {
    if (m_in.empty()) return false;
    const int window = Window(Side::Ssa);
    for (Side s : m_plan.sides) {
        const SideSource& source = m_plan.source[s];
        if (source.layer_local || !m_scores[source.run].q.defined() || Window(s) != window) return false;
    }
    return true;
}

int64_t LayerPass::RowsABlock() const {
    if (!FusedAttention() || m_unfused || !AllAtOnce()) return m_plan.block;
    const SideSource& ssa = m_plan.source[Side::Ssa];
    return FusedAttentionTakes(m_scores[ssa.run].q[ssa.row]) ? m_plan.fused_block : m_plan.block;
}

bool LayerPass::AttendAll(int64_t from, int64_t b, BlockRows* out) {
    if (!AllAtOnce()) return false;
    const int64_t p = m_plan.p;
    const int window = Window(Side::Ssa);
    if (FusedAttention() && !m_unfused && AttendFused(from, b, out)) return true;
    std::vector<at::Tensor> scores;
    for (size_t r = 0; r < m_plan.runs.size(); ++r)  // [B, H, b - from, b]
        scores.push_back(GroupedScoresOf(m_scores[r], from - p, b - from, b));
    auto side_rows = [&](Side s) { return scores[m_plan.source[s].run][m_plan.source[s].row]; };
    std::vector<at::Tensor> maps;  // CompareMapsStacked's order
    for (Side s : {Side::Ssa, Side::Compare, Side::Base})
        if (s != Side::Base || m_plan.pairs > 1) maps.push_back(side_rows(s));
    out->measures = SoftmaxAndCompareStacked(maps, from, window);
    if (!out->measures.defined())
        for (at::Tensor& s : scores) s = MaskedSoftmax(s, from, window);
    for (size_t r = 0; r < m_plan.runs.size(); ++r) m_y[r].push_back(GroupedMatmul(scores[r], Narrow(m_values[r], 2, 0, b)));
    for (Side s : m_plan.sides) out->rows[s] = AsType(side_rows(s), at::kFloat);
    return true;
}

bool LayerPass::AttendFused(int64_t from, int64_t b, BlockRows* out) {
    const int64_t p = m_plan.p;
    std::vector<Side> order = {Side::Ssa, Side::Compare};  // CompareMapsStacked's
    if (m_plan.pairs > 1) order.push_back(Side::Base);
    if (m_fused.empty())
        for (Side s : order) {  // the layer's keys and values to a whole step of the kernel's, once a layer
            const SideSource& source = m_plan.source[s];
            const int64_t T = m_plan.T, rows = (T + kFusedKeyStep - 1) / kFusedKeyStep * kFusedKeyStep;
            auto padded = [&](const at::Tensor& x) {  // [G, T, D]
                if (!x.is_cuda()) return x;
                at::Tensor y = at::zeros({x.size(0), rows, x.size(2)}, x.options());
                y.narrow(1, 0, T).copy_(x.narrow(1, 0, T));
                return y;
            };
            m_fused.push_back({at::Tensor(), padded(m_keys[source.run][source.row]), padded(m_values[source.run][source.row])});
        }
    std::vector<FusedSide> sides = m_fused;
    for (size_t i = 0; i < order.size(); ++i) {
        const SideSource& source = m_plan.source[order[i]];
        sides[i].q = m_scores[source.run].q[source.row].narrow(1, from - p, b - from);  // [H, rows, D]
    }
    FusedRows fused;
    if (!FusedAttentionRows(sides, from, b, Window(Side::Ssa), static_cast<int>(m_plan.pool), &fused)) {
        m_unfused = true;  // the same sides' shapes, dtype and device in every block and layer
        return false;
    }
    out->measures = fused.measures;
    out->cells[0] = fused.cells[0];
    out->cells[1] = fused.cells[1];
    for (size_t r = 0; r < m_plan.runs.size(); ++r) {  // each run's sides in its batch's order
        const Run& run = m_plan.runs[r];
        std::vector<at::Tensor> y;
        for (Side s : run.sides) y.push_back(fused.y[static_cast<size_t>(std::find(order.begin(), order.end(), s) - order.begin())]);
        m_y[r].push_back(at::stack(y));  // [B, H, rows, D]
    }
    return true;
}

BlockRows LayerPass::RunBlock(int64_t a, int64_t b) {
    const int64_t p = m_plan.p, from = std::max(a, p);  // rows [from, b) are new
    BlockRows out;
    if (from >= b) return out;
    if (AttendAll(from, b, &out)) return out;
    PerSide<at::Tensor>& rows = out.rows;
    PerSide<at::Tensor> q, scores;
    for (size_t r = 0; r < m_plan.runs.size(); ++r) {
        const Run& run = m_plan.runs[r];
        BlockCapture capture;
        capture.keep_scores = r == 0 && m_plan.source[Side::Compare].layer_local;  // the SSA run's, for the tau = 1 side
        if (!m_in.empty()) {  // whole_layer_products: the attention alone
            Attend(r, from, b, &capture);
        } else {
            m_out[r].push_back(Block(run.model->config, run.model->layers[m_layer], Narrow(m_streams[r], 1, from - p, b - from),
                                     /*vanilla=*/false, &capture, from, &m_room[r], run.Edit(m_layer)));
            m_keys[r] = capture.k;
            m_values[r] = capture.vs;
            for (int i = 0; i < run.Rows(); ++i) m_room_q[run.sides[i]].narrow(1, from, b - from).copy_(capture.q[i]);
            KeepTemperatures(run, capture);
        }
        for (int i = 0; i < run.Rows(); ++i) {
            const Side s = run.sides[i];
            q[s] = capture.q[i];
            if (capture.scores.defined()) scores[s] = capture.scores[i];
            rows[s] = AsType(capture.attention[i], at::kFloat);
        }
    }
    // The layer-local comparison: the SSA side's own q and k with tau = 1.
    for (Side s : m_plan.sides)
        if (m_plan.source[s].layer_local)  // from the SSA side's product before tau where the CPU kept it
            rows[s] = AsType(scores[Side::Ssa].defined() ? MaskedSoftmax(scores[Side::Ssa], from, Window(s))
                                                          : AttentionRows(q[Side::Ssa], Keys(s).narrow(1, 0, b), at::Tensor(), from, Window(s)),
                             at::kFloat);
    return out;
}

at::Tensor LayerPass::KeptAttention(Side s, int64_t a, int64_t kept, int64_t b) const {
    const SideRows& was = m_was->side[s];  // the layer-local side's q is the SSA side's
    const at::Tensor tau_q = m_plan.source[s].layer_local ? at::Tensor() : was.tau_q.narrow(1, a, kept - a);
    return AsType(AttentionRows(was.q.narrow(1, a, kept - a), Keys(s).narrow(1, 0, b), tau_q, a, Window(s)), at::kFloat);
}

const LayerRows& LayerPass::EndLayer() {
    const int64_t p = m_plan.p, T = m_plan.T;
    LayerRows now;
    for (size_t r = 0; r < m_plan.runs.size(); ++r) {
        now.k.push_back(Narrow(m_keys[r], 2, 0, T));
        now.vs.push_back(Narrow(m_values[r], 2, 0, T));
        if (!m_out[r].empty()) m_streams[r] = m_out[r].size() == 1 ? m_out[r][0] : at::cat(m_out[r], 1);
    }
    for (Side s : m_plan.sides) {
        SideRows& rows = now.side[s];
        const SideSource& source = m_plan.source[s];
        if (source.layer_local) {  // shares the SSA side's q and k, with tau = 1
            const SideRows& ssa = now.side[Side::Ssa];
            rows.q = ssa.q;
            rows.k = ssa.k;
            rows.tau_q = at::ones_like(ssa.tau_q);
            rows.new_tau_v = rows.tau_q.narrow(1, p, T - p);
            continue;
        }
        rows.q = p < T ? m_room_q[s].narrow(1, 0, T) : m_was->side[s].q.narrow(1, 0, T);
        rows.k = now.k[source.run][source.row];
        rows.vs = now.vs[source.run][source.row];
        rows.tau_q = m_plan.Join(m_was ? m_was->side[s].tau_q : at::Tensor(), m_tau_q[s]);
        rows.new_tau_v = NewRows(m_tau_v[s]);
    }
    now.new_tau_q_position = NewRows(m_position);
    now.new_tau_q_token = NewRows(m_token);
    m_layers.push_back(std::move(now));
    LetGoOfLayer();
    return m_layers.back();
}

void LayerPass::LetGoOfLayer() {
    m_keys.clear();
    m_values.clear();
    m_room.clear();
    m_out.clear();
    m_room_q = {};
    for (Side s : m_plan.sides) m_tau_q[s].clear(), m_tau_v[s].clear();
    m_position.clear();
    m_token.clear();
    m_in.clear();
    m_scores.clear();
    m_y.clear();
    m_fused.clear();
}

}  // namespace model
