// The forward pass of SPEC sections 1 and 7 on an SSA model's weights (model_weights.h): embeddings,
// one pre-norm block at a time with its temperatures, and the logits. The seam the model
// families will share: weights and config in; per layer q, k, values, temperatures and attention
// out (BlockCapture), with the hidden state Block returns.
// Tensors are row-major; shapes are given as [dims] comments. L = layers, H = heads, T = tokens,
// E = n_embd, D = head size, V = vocabulary, B = batch, R = rows run.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include <ATen/ATen.h>

#include "model/io/config.h"
#include "model/io/result.h"
#include "model/nn/model_weights.h"

namespace model {

struct ForwardOptions {
    bool vanilla = false;        // the counterfactual: tau_q = tau_v = 1 everywhere
    bool want_logits = true;
    const std::atomic<bool>* cancel = nullptr;  // checked between layers
};

struct ForwardOutput {
    at::Tensor logits;     // [T, V] (undefined unless want_logits)
    at::Tensor attention;  // [L, H, T, T], zero above the diagonal
    at::Tensor tau_q;      // [L, H, T]
    at::Tensor tau_v;      // [L, H, T]
};

// Token ids a model with this config can run: at least one, at most n_positions, each below
// vocab_size; the error names the first that is not.
Status CheckIds(const ModelConfig& config, const std::vector<int32_t>& ids);
// Runs token ids (checked by CheckIds) under InferenceMode.
Result<ForwardOutput> Forward(const SsaGpt& model, const std::vector<int32_t>& ids, const ForwardOptions& options = {});

// tau for one side and layer: [..., H, T]. `z_heads` is q or v split into heads [..., H, T, D];
// `x` is the LayerNorm-1 output [..., T, E]. Leading (batch) dimensions are optional. The rows are
// positions first..first+T-1 (the position term counts i = first + 1, ...).
at::Tensor Temperature(const TemperatureForm& form, const TemperatureParams& params,
                       const at::Tensor& z_heads, const at::Tensor& x, int64_t first = 0);

// The two terms tau combines, [..., H, T] each, for the legend of what a temperature is made of:
// the position term (1 + s ln i, or ones without one) and the token term (tanh(w . z + b), or
// zeros without one). tau = position + token (Combine::Sum) or position * (1 + token).
struct TemperatureTerms {
    at::Tensor position, token;
};
TemperatureTerms TemperatureParts(const TemperatureForm& form, const TemperatureParams& params, const at::Tensor& z_heads,
                                  const at::Tensor& x, int64_t first = 0);
at::Tensor CombineTemperature(const TemperatureForm& form, const TemperatureTerms& terms);  // contiguous
struct TemperatureEdit;
// tau_q as BlockIn makes it [..., H, R]: its terms with a batch's what-ifs (`edit`, null: none) in
// `terms`, combined, and scaled where a what-if scales it.
at::Tensor EditedTemperature(const TemperatureForm& form, const TemperatureParams& params, const at::Tensor& z_heads, const at::Tensor& x,
                             int64_t first, const TemperatureEdit* edit, TemperatureTerms* terms);
// The same in one pass of temperature_rows.h's arithmetic over [..., H, R]: one kernel on a CUDA
// device where the torch ops are some fifteen
// (BlockIn takes it there with SSAVIZ_CUDA_TEMPERATURES=1, until a device has checked it), a loop
// on the CPU (for tests). Sets `terms` (null: not wanted) to the two terms as BlockIn keeps them.
// Undefined where it does not apply: float32 inference only, z_heads [B, H, R, D] with unit stride
// along D, x [B, R, E] contiguous.
at::Tensor FusedTemperature(const TemperatureForm& form, const TemperatureParams& params, const at::Tensor& z_heads, const at::Tensor& x,
                            int64_t first, const TemperatureEdit* edit, TemperatureTerms* terms);

// The pieces of the forward pass on a batch, shared by Forward (inference, with capture) and the
// trainer (autograd). None of them sets a grad mode; callers choose.
//
// A block can run only rows first..first+R-1 of a longer text against the keys and values the
// earlier rows left behind (the model is causal: nothing of a row depends on later rows), which is
// how the analysis recomputes only what an edit changed.
// G is the kv heads (n_query_groups): query head h reads kv head h / (H / G). Values are per
// query head (G = H) while a what-if turns off some of a group's value temperatures.
// The keys and values of positions 0..first-1 a block's rows attend to, in tensors of P >= first
// rows. With room for the rows run (P >= first + R, and vs of ValueHeads heads), Block writes the
// rows' own into rows first.. of them (the caller owns those rows: see RowBuffers); without, it
// joins them into new tensors.
struct KeyValues {
    at::Tensor k;   // [B, G, P, D]: the keys (after RoPE)
    at::Tensor vs;  // [B, G, P, D]: the values times tau_v, as attention sums them
};
struct BlockCapture {
    bool keep_scores = false;  // asks for `scores`
    at::Tensor attention;  // [B, H, R, T]: the rows run, over every key
    at::Tensor scores;     // [B, H, R, T]: (q k^T) / sqrt(D) before tau_q and the mask, where the CPU computed them so
                           // (AttentionRows' scores_before_tau; undefined elsewhere): the layer-local side's
    at::Tensor q;          // [B, H, R, D], the rows run (after RoPE); with k, what AttentionRows rebuilds a map from
    at::Tensor k, vs;      // [B, G, T, D], every position: the prefix's and the rows'
    at::Tensor tau_q;      // [B, H, R] (ones when the side is off or vanilla)
    at::Tensor tau_v;      // [B, H, R]: the tau_v each query head's values are scaled by
    TemperatureTerms tau_q_terms;  // [B, H, R] each: ones and zeros when the side is off or vanilla
};
// The causal attention weights softmax(tau_q (q k^T) / sqrt(D)) of SPEC section 1 for rows
// first..first+R-1: q [..., R, D], k [..., T, D] with T >= first + R, tau_q [..., R] (undefined:
// 1) -> [..., R, T], zero right of each row's own position. With heads, q [..., H, R, D] may read
// k [..., G, T, D] of fewer heads, query head h reading kv head h / (H / G). Block uses it, and so does the
// analysis that rebuilds one head's map (or its changed rows) from the captured q and k.
// `window` > 0 (a sliding window, LayerWeights::window) also hides keys j <= i - window from row i.
// `scores_before_tau` (null: not wanted) gets (q k^T) / sqrt(D) before tau_q where the CPU computes
// them in that order (with tau_q defined): MaskedSoftmax of them is AttentionRows at tau = 1, bit
// for bit, without a second product.
at::Tensor AttentionRows(const at::Tensor& q, const at::Tensor& k, const at::Tensor& tau_q, int64_t first, int64_t window = 0,
                         at::Tensor* scores_before_tau = nullptr);
// AttentionRows in two steps, where q's rows take the scale and tau_q before the product (a
// device's way, which AttentionRows takes on a device): q / sqrt(D) * tau_q [..., R, D] on any
// device, undefined where tau_q has another dtype; then the rows from it. A caller that attends to
// q's rows a block at a time scales them once (the analysis's whole-layer products, on any device).
at::Tensor ScaledQueries(const at::Tensor& q, const at::Tensor& tau_q);
at::Tensor AttentionRowsScaled(const at::Tensor& scaled_q, const at::Tensor& k, int64_t first, int64_t window = 0);
// The causal softmax of scores [..., R, T] for rows first..first+R-1 (and a sliding `window`), as
// AttentionRows ends; the scores are overwritten.
at::Tensor MaskedSoftmax(at::Tensor scores, int64_t first, int64_t window = 0);
inline at::Tensor AttentionWeights(const at::Tensor& q, const at::Tensor& k, const at::Tensor& tau_q) {
    return AttentionRows(q, k, tau_q, 0);  // every row: [..., T, T]
}
// Per-head changes to one layer's temperatures (the what-ifs of model::Intervention), [H] each on
// the model's device: the query temperature keeps or drops each term (a dropped position term is
// 1, a dropped token term 0), then tau_q = 1 + scale (tau_q - 1); value_off sets tau_v = 1.
struct TemperatureEdit {
    at::Tensor keep_position, keep_token, value_off;  // bool [H, 1]
    at::Tensor scale;                                 // [H, 1]
    at::Tensor scaled;                                // bool [H, 1]: scale != 1
    bool any_value_off = false;                       // value_off anywhere: known on the host, so no read from a device
    bool any_scaled = false;                          // scaled anywhere (else the scale's four ops are skipped)
};
// The heads of a block's values (KeyValues::vs): G, or H while `edit` turns off some of a group's
// value temperatures.
int64_t ValueHeads(const ModelConfig& config, bool vanilla, const TemperatureEdit* edit);
// Each of `t`'s entries along `dim` n times in a row (kv head g -> query heads g n .. g n + n - 1),
// as repeat_interleave(n, dim) gives them; LibTorch's reads a count back from its tensor of
// repeats, which on a GPU waits for the device.
at::Tensor RepeatHeads(const at::Tensor& t, int64_t n, int64_t dim);
at::Tensor Embed(const SsaGpt& model, const at::Tensor& ids, int64_t first = 0);  // ids [B, R] int64 at positions first.. -> [B, R, E]
// One pre-LayerNorm block: x [B, R, E] (positions first..first+R-1) -> [B, R, E]; `vanilla` sets
// tau_q = tau_v = 1. `prefix` holds positions 0..first-1's keys and values (null when first is 0
// and there is no room to write the rows into).
// `edit` (null: none) changes the temperatures of some heads.
at::Tensor Block(const ModelConfig& config, const LayerWeights& weights, const at::Tensor& x, bool vanilla,
                 BlockCapture* capture = nullptr, int64_t first = 0, const KeyValues* prefix = nullptr,
                 const TemperatureEdit* edit = nullptr);
// Block in its parts, for a caller that runs a layer's weights over many rows at once and its
// attention a block of rows at a time (the analysis on a device): BlockIn (the first norm, q, k
// and v, the temperatures and RoPE), then the attention over every key (AttentionRows and its
// product with vs), then BlockOut (the projection, the MLP and the residuals). Block is the three.
struct BlockInput {
    at::Tensor h;           // [B, R, E]: the first norm's output
    at::Tensor q, k;        // [B, H, R, D], [B, G, R, D]: after RoPE
    at::Tensor vs;          // [B, ValueHeads, R, D]: the values times tau_v
    at::Tensor tau_q, tau_v;  // [B, H, R]; undefined where the side is off (or vanilla)
    TemperatureTerms terms;   // tau_q's two terms, where tau_q is defined
};
BlockInput BlockIn(const ModelConfig& config, const LayerWeights& weights, const at::Tensor& x, bool vanilla, int64_t first = 0,
                   const TemperatureEdit* edit = nullptr);
// Rows x [B, R, E], with `h` their BlockIn's and `y` their attention's output [B, H, R, D] -> [B, R, E].
at::Tensor BlockOut(const ModelConfig& config, const LayerWeights& weights, const at::Tensor& x, const at::Tensor& h, const at::Tensor& y);
// BlockCapture's tau_q, tau_v and terms from BlockIn's (ones and zeros where a side is off).
void CaptureTemperatures(const BlockInput& in, BlockCapture* capture);
at::Tensor Logits(const SsaGpt& model, const at::Tensor& x);  // final norm and the head: [B, T, V]
// The family's norm (config.norm): LayerNorm, or RMSNorm w * x / sqrt(mean(x^2) + eps) computed in
// float32 as lit-gpt does; `b` undefined for RMSNorm.
at::Tensor Norm(const ModelConfig& config, const at::Tensor& x, const at::Tensor& w, const at::Tensor& b);
// RoPE (config.Rope()): the first rope_n_elem dims of x [..., R, D] at positions first..first+R-1
// turned rotate-half style, pair (d, d + n/2) by (position / condense_ratio) * f_d, f_d =
// base^(-2d/n) rescaled by Llama 3.1's rule when config.rope_llama3 says (RopeFrequencies, [n / 2]
// float64).
at::Tensor Rope(const ModelConfig& config, const at::Tensor& x, int64_t first);
at::Tensor RopeFrequencies(const ModelConfig& config, const at::TensorOptions& options);

}  // namespace model
