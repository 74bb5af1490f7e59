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
#include <memory>
#include <optional>
#include <vector>

#include "model/io/result.h"

namespace model {

struct SsaGpt;

// The run a lens reads: the model as trained; the tau = 1 counterfactual (tau_q = tau_v = 1
// everywhere, a whole second pass); or layer-local: each layer run again at tau = 1 on SSA's own
// input (SSA's residual before it), as the layer-local maps are, while the stream goes on with
// SSA's. Layer-local lens row l + 1 is SSA's residual before layer l plus what layer l writes
// without its temperatures; its parts are what each head and MLP writes so, through the final norm
// with SSA's final scale (the same direction as SSA's parts), so a head's SSA and layer-local parts
// differ only by its own layer's temperatures. They sum to a logit no single pass computes, and
// that sum is the side's `logit`.
enum class LensRun { Ssa, Vanilla, LayerLocal };

struct LensOptions {
    LensRun run = LensRun::Ssa;
    int top_k = 5;          // pieces a layer and position keeps
    int64_t block_rows = 256;  // positions whose [rows, V] logits are held at once
    const std::atomic<bool>* cancel = nullptr;  // checked between layers and blocks
    std::atomic<float>* progress = nullptr;     // the fraction done, as progress_from + progress_span * this run's
    float progress_from = 0, progress_span = 1;  // (a caller running several sides: one fraction over them all)
    // Every position from the ids alone, not from a cache's stream and lens (an export's: a run from
    // a cache computes the new rows as products of their own, whose sums round otherwise, so the
    // same text gave other last digits after an earlier lens of it); the cache still keeps this run.
    bool whole = false;
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
    std::vector<float> dla_divisor;   // [T - 1]: the final norm's divisor the parts were read through, frozen at the final
                                      // residual (layer-local: SSA's): sqrt(var + eps), RMSNorm sqrt(mean of squares + eps)
    std::vector<float> dla_free;      // [T - 1]: dla_const's part that does not pass through the divisor (the final norm's
                                      // bias, the head's bias); the rest of the parts scale as 1 / divisor
    std::vector<float> logit;         // [T - 1]: token t's logit at position t - 1, as the model computes it (layer-local: the parts' sum)
};

// What a lens keeps for the next text through the same model and side (the engine keeps one a
// side): the residual stream with each layer's keys and values, and the last whole lens. A text
// that shares its first p tokens with it runs only positions p.. through the layers, and the
// lens's products only from position p - 1 (whose target, token p, changed): an edit at the end of
// a long text costs its own rows.
struct LensStream;
struct LensCache {
    std::shared_ptr<const LensStream> stream;
    std::optional<Lens> lens;  // the whole lens of the stream's ids, when one ran
};

// Runs `ids` (checked as CheckIds does) on `model`; memory holds the residual stream and the heads'
// outputs ([L + 1, T, E] and [L, T, E]), each layer's keys and values (layer-local: SSA's stream
// and values too), and one block of logits, never [L, T, V]. With `cache`: starts from it where it fits (LensCache), and keeps this one in it.
Result<Lens> RunLens(const SsaGpt& model, const std::vector<int32_t>& ids, const LensOptions& options = {}, LensCache* cache = nullptr);

// The residual stream of one run of a text (each layer's input and the last layer's output, and
// each layer's heads' outputs before the projection: (2 L + 1) T E floats; layer-local: L T E more), kept so that one
// position's lens and attribution (LensAtPosition) cost only that position's products.
// `previous`: a stream of the same model and side to start from, as RunLens's cache (its positions
// below the shared prefix are taken, not run).
Result<std::shared_ptr<const LensStream>> RunLensStream(const SsaGpt& model, const std::vector<int32_t>& ids, LensRun run = LensRun::Ssa,
                                                        const std::atomic<bool>* cancel = nullptr, const LensStream* previous = nullptr);
const std::vector<int32_t>& LensStreamIds(const LensStream& stream);
// The cache's stream made `ids`'s (RunLensStream from it; its lens let go when the ids change).
Result<std::shared_ptr<const LensStream>> KeepLensStream(const SsaGpt& model, const std::vector<int32_t>& ids, LensRun run, LensCache* cache);
size_t LensStreamBytes(const LensStream& stream);

// One position t of the lens and its attribution: what RunLens holds at t, and the parts of the
// target's logit (by default the next token; at the last position, a target must be given).
struct LensAt {
    int64_t position = 0;
    int32_t target = -1;            // the token the parts and `logit` are of; -1: none (the last position)
    int top_k = 0;
    std::vector<float> loss;        // [L + 1]: the next token's loss read after each layer (empty at the last position)
    std::vector<int32_t> top_ids;   // [L + 1, top_k]
    std::vector<float> top_probs;   // [L + 1, top_k]
    std::vector<float> parts;       // [L H + L + 2] as Attribute's: heads (layer-major), MLPs, embeddings, constants
    float logit = 0;                // the target's logit as the model computes it (layer-local: the parts' sum); the parts sum to it
    float divisor = 0, free = 0;    // as Lens's dla_divisor and dla_free at the position
};

// One side's parts [L H + L + 2] (LensAt's order), read through divisor `to` instead of its own
// `divisor`: every part times divisor / to, the constants' `free` share as it is. Two sides' parts
// through one divisor differ only where what the parts wrote (or the weights reading it) differ:
// through their own, a part that wrote the same vector reads apart by the ratio of the divisors.
// The side's logit less the result's sum is what its own divisor adds (its "final norm" part).
std::vector<float> PartsThroughDivisor(const std::vector<float>& parts, float divisor, float free, float to);
// The same on parts held by kind (heads [L H], MLPs [L], the embeddings, the constants), in place;
// returns what the side's own divisor adds to its `logit` (the logit less the parts' new sum).
float ReadThroughDivisor(std::vector<float>* heads, std::vector<float>* mlp, float* embed, float* constants, float divisor, float free, float to,
                         float logit);
// `stream` must be RunLensStream's of the same model and ids. (L + 1) rows through the final norm
// and the head: about 1 GFLOP for GPT-2 small's shape, whatever the text's length.
Result<LensAt> LensAtPosition(const SsaGpt& model, const LensStream& stream, const std::vector<int32_t>& ids, int64_t position,
                              int32_t token = -1, int top_k = 5);

// One part's attribution to another target: position t's parts for token `token` (the same
// parts as Lens's, for any token of the vocabulary). `parts` [L H + L + 2]: heads (layer-major),
// MLPs, embeddings, constants.
Result<std::vector<float>> Attribute(const SsaGpt& model, const std::vector<int32_t>& ids, int64_t position, int32_t token,
                                     LensRun run = LensRun::Ssa);

}  // namespace model
