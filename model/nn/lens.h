// What each layer and head writes (SPEC section 10): the logit lens and direct logit attribution of
// one side of a text, from a forward pass of its own that keeps the residual stream.
//
// Lens: the residual after layer l (l = 0: the embeddings; l = L: the final residual) through the
// final norm and the output head, at every position: the loss of the actual next token and the
// top-k pieces. Row L is the model's own prediction.
// Attribution: each part's contribution to the logit of the next token at each position, through
// the final norm with its scale frozen at the final residual (LayerNorm: the part centred, over
// the final residual's standard deviation, times the gain; RMSNorm: over its RMS, times the gain),
// dotted with the token's row of the head. Parts: each head (its attention-weighted values, tau_v
// applied, through its slice of the output projection), each layer's MLP (its whole output, its
// biases included), the embeddings, and the constants together (the output projections' biases,
// the final norm's bias, the head's bias). The parts sum to the logit.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "model/io/result.h"

namespace model {

struct SsaGpt;

struct LensOptions {
    bool vanilla = false;   // the tau = 1 counterfactual (tau_q = tau_v = 1 everywhere)
    int top_k = 5;          // pieces a layer and position keeps
    int64_t block_rows = 256;  // positions whose [rows, V] logits are held at once
    const std::atomic<bool>* cancel = nullptr;  // checked between layers and blocks
    std::atomic<float>* progress = nullptr;     // the fraction done
};

struct Lens {
    int n_layer = 0, n_head = 0, n_tokens = 0, top_k = 0;
    std::vector<float> loss;          // [L + 1, T - 1]: token t's loss read after layer l at position t - 1
    std::vector<int32_t> top_ids;     // [L + 1, T, top_k]: the most likely next pieces after layer l, at each position
    std::vector<float> top_probs;     // [L + 1, T, top_k]
    std::vector<float> dla;           // [L, H, T - 1]: head (l, h)'s part, at position t - 1, of token t's logit
    std::vector<float> dla_mlp;       // [L, T - 1]
    std::vector<float> dla_embed;     // [T - 1]
    std::vector<float> dla_const;     // [T - 1]
    std::vector<float> logit;         // [T - 1]: token t's logit at position t - 1, as the model computes it
};

// Runs `ids` (checked as CheckIds does) on `model`; memory holds the residual stream and the heads'
// outputs ([L + 1, T, E] and [L, T, E]) and one block of logits, never [L, T, V].
Result<Lens> RunLens(const SsaGpt& model, const std::vector<int32_t>& ids, const LensOptions& options = {});

// One part's attribution to another target: position t's parts for token `token` (the same
// parts as Lens's, for any token of the vocabulary). `parts` [L H + L + 2]: heads (layer-major),
// MLPs, embeddings, constants.
Result<std::vector<float>> Attribute(const SsaGpt& model, const std::vector<int32_t>& ids, int64_t position, int32_t token,
                                     bool vanilla = false);

}  // namespace model
