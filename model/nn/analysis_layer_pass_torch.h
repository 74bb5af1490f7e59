// The layer pass of Engine::Analyze (the stages: analysis_plan_torch.h): every run's forward pass,
// layer by layer, over rows p..T-1 only, in the plan's blocks of rows; each block's attention rows
// go to the row measures and are dropped, so no [H, T, T] tensor ever exists. Per layer it keeps
// what every position left behind (LayerRows), so the next analysis starts where the ids differ.
// What else a later stage needs of a layer (its residual stream, each head's output) is captured
// here, in EndLayer, and kept beside the rest of LayerRows.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/ATen.h>

#include "model/nn/analysis_plan_torch.h"
#include "model/nn/attention_maps_torch.h"
#include "model/nn/forward.h"
#include "model/nn/fused_attention_torch.h"
#include "model/nn/linear.h"
#include "model/nn/row_buffers.h"

namespace model {

// What one side's positions left behind in one layer, every position so far; on the device. What
// only the host arrays need is the new rows' alone (p..T-1, [H, T - p]; undefined when p == T):
// the assembly keeps every row on the host (HostRows).
struct SideRows {
    at::Tensor q, k, vs;  // [H, T, D] in the compute dtype; vs = v * tau_v (undefined for the layer-local side)
    at::Tensor tau_q;     // [H, T] as the forward pass used it (ones for the layer-local side); the maps need it
    at::Tensor new_tau_v;  // the new rows' tau_v as the forward pass used it (ones for the layer-local side)
};
struct LayerRows {
    PerSide<SideRows> side;                          // k and vs are views of the runs' below, q of a RowBuffers buffer
    std::vector<at::Tensor> k, vs;                   // a run each: [sides, G, T, D], views of RowBuffers buffers
    at::Tensor new_tau_q_position, new_tau_q_token;  // the new rows', SSA side

    void ForgetNewRows() {  // once they are on the host
        for (SideRows& s : side.of) s.new_tau_v = at::Tensor();
        new_tau_q_position = new_tau_q_token = at::Tensor();
    }
};

// A block of attention rows (LayerPass::RunBlock): each side's rows max(a, p)..b-1 over keys
// [0, b), [H, b - max(a, p), b] float32, undefined when every row of the block is kept; and where
// the device measured them as it wrote them (SoftmaxAndCompareStacked), their CompareMapsStacked
// tensor, else undefined. Where the rows were never written (fused_attention_torch.h), `rows` is
// undefined and `measures` and `cells` hold what the row measures need of them: the SSA side's
// cells along the keys against its comparison, and against the base with one.
struct BlockRows {
    PerSide<at::Tensor> rows;
    at::Tensor measures;
    KeyPooled cells[2];
};

// One analysis's pass, made for its plan; its layers are run in order, each BeginLayer, the
// RunLayerIn, the plan's blocks from first_block_row (RunBlock), RunLayerOut, EndLayer.
class LayerPass {
public:
    // `old`: the last analysis's layers, whose rows below p this one keeps; `buffers`: where the
    // layers' new keys, values and queries are written (RowBuffers, begun by the caller).
    LayerPass(const AnalysisPlan& plan, const std::vector<int32_t>& ids, const std::vector<LayerRows>& old, RowBuffers& buffers);
    void BeginLayer(int l);
    // With the plan's whole_layer_products, the layer's weights over every new row (p..T-1) at
    // once: before the blocks, BlockIn (writing the keys and values); after them, BlockOut of the
    // blocks' attention outputs. Without, nothing: each block runs the whole Block.
    void RunLayerIn();
    void RunLayerOut();
    // The rows a block of this layer (after RunLayerIn): the plan's fused_block where the fused
    // way will take them (AttendFused), else its block.
    int64_t RowsABlock() const;
    // Rows [a, b) of the layer: rows [max(a, p), b) run forward in every run, their attention rows
    // returned.
    BlockRows RunBlock(int64_t a, int64_t b);
    // Side s's attention rows [a, kept) over keys [0, b) (rows below p, after RunBlock(a, b)),
    // rebuilt from the last analysis's queries and temperatures: [H, kept - a, b] float32.
    at::Tensor KeptAttention(Side s, int64_t a, int64_t kept, int64_t b) const;
    // The layer's rows, kept and new joined; the runs' residual streams move on to the next layer.
    const LayerRows& EndLayer();

    // After the last layer: its output rows p..T-1 a run, [sides, T - p, E] (undefined when p == T).
    const std::vector<at::Tensor>& Streams() const { return m_streams; }
    std::vector<LayerRows> TakeLayers() { return std::move(m_layers); }

private:
    at::Tensor Keys(Side s) const;  // side s's keys so far, [H or G, rows, D]
    int Window(Side s) const;       // side s's sliding window in this layer (0: none)
    void LetGoOfLayer();            // of the layer's parts, as soon as they are joined
    void KeepTemperatures(const Run& run, const BlockCapture& capture);  // the new rows' tau, each side's
    // whole_layer_products: run r's attention rows [from, b) from RunLayerIn's q and temperatures
    // (capture's attention, q and scores), their output kept for RunLayerOut.
    void Attend(size_t r, int64_t from, int64_t b, BlockCapture* capture);
    // The same for every run at once where every side is a run's batch row with its temperatures
    // in its queries (ScaledQueries) and one mask: every run's scores, then every side's softmax
    // (and on a device its measures: SoftmaxAndCompareStacked), then each run's outputs. False,
    // with nothing done, elsewhere.
    bool AttendAll(int64_t from, int64_t b, BlockRows* out);
    bool AllAtOnce() const;  // whether AttendAll takes this layer's blocks
    // AttendAll's work without writing the rows (fused_attention_torch.h), where it is on and
    // takes them; false, with nothing done, elsewhere.
    bool AttendFused(int64_t from, int64_t b, BlockRows* out);

    const AnalysisPlan& m_plan;
    const std::vector<LayerRows>& m_old;
    RowBuffers& m_buffers;
    std::vector<at::Tensor> m_streams;  // a run each: the new rows' residual streams, [sides, T - p, E]
    std::vector<LayerRows> m_layers;    // done

    // The layer under way.
    int m_layer = 0;
    const LayerRows* m_was = nullptr;             // the last analysis's (p > 0)
    std::vector<at::Tensor> m_keys, m_values;     // a run each: every key and scaled value so far, [B, G, rows, D]
    std::vector<KeyValues> m_room;                // a run each: where the new keys and values go
    std::vector<std::vector<at::Tensor>> m_out;   // a run each: the new rows' outputs, block by block
    PerSide<at::Tensor> m_room_q;                 // where each side's new queries go, [H, T, D]
    PerSide<std::vector<at::Tensor>> m_tau_q, m_tau_v;  // each side's new rows, block by block
    std::vector<at::Tensor> m_position, m_token;  // the SSA side's tau_q terms, the same
    std::vector<BlockInput> m_in;                 // whole_layer_products: a run each, every new row's
    std::vector<ScoreOperands> m_scores;          // and its ScaledQueries (a device's way, on any device) and keys
    std::vector<std::vector<at::Tensor>> m_y;     // and its attention's outputs, block by block, [B, H, rows, D]
    std::vector<FusedSide> m_fused;               // AttendFused: each side's keys and values padded once a layer (q empty)
    bool m_unfused = false;                       // AttendFused found no fused way for this analysis's sides
};

}  // namespace model
