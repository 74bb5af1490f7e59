// The model layer as the app sees it, free of LibTorch types: open a model folder, tokenize text,
// and analyse it into plain host arrays (attention maps, temperatures, metrics) with explicit
// shapes. Row-major everywhere. L = layers, H = heads, T = tokens.
#pragma once

#include <atomic>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "model/io/config.h"
#include "model/io/result.h"
#include "model/io/weights.h"
#include "model/text/tokenizer.h"
// The rest of the app-facing model layer, here so that including this header is enough.
#include "model/nn/attention_maps.h"
#include "model/nn/from_base.h"
#include "model/nn/interventions.h"
#include "model/nn/lens.h"
#include "model/nn/model_folder.h"
#include "model/nn/row_array.h"
#include "model/nn/runtime.h"
#include "model/nn/sampling.h"

namespace model {

struct NamedArray {
    std::string name;
    RowArray values;  // [L, H, T]
};

// Per-row metrics of one set of maps, each [L, H, T]: entropy, normalized_entropy, spikiness,
// max_weight, top5_mass, effective_support, sink_mass (SPEC section 2).
struct MapMetrics {
    std::vector<NamedArray> rows;
    const RowArray* Find(const std::string& name) const;  // null when absent
    const RowArray& Get(const std::string& name) const;   // asserts the name exists
};

// What the SSA model is compared with. The counterfactual runs the same weights with tau = 1 in
// every layer, a whole second forward pass, so its later layers see a different residual stream;
// the layer-local one asks only what each layer's temperatures do to that layer: at each layer
// the SSA model's own q and k (the same input), with tau = 1. A twin is a separately trained model.
// Base: a fine-tune against the model it was fine-tuned from (SPEC section 9), three sides: SSA,
// the counterfactual ("tau1": the SSA weights with every temperature 1) as the comparison side,
// and the base (MapSide::Base).
enum class Comparison { Counterfactual, LayerLocal, Twin, Unedited, Base };
const char* ToString(Comparison c);  // "counterfactual", "local", "twin", "unedited", "base"

struct Analysis {
    int n_layer = 0, n_head = 0, n_tokens = 0;
    Tokenization tokens;
    Comparison comparison = Comparison::Counterfactual;
    std::string compare_label;                   // "vanilla" (a tau = 1 comparison, the base's too) or the twin's folder
    std::string base_label;                      // the base's folder; empty without a base
    // What the base differs in that is no weight and still changes how the text runs, the
    // fine-tune's against the base's: SettingsDifference's (sliding windows, RoPE's base and
    // scaling, the activation's form) and the rows of the output head; empty where none.
    std::string base_difference;
    std::shared_ptr<const AttentionMaps> maps;   // null: no maps (an empty analysis)
    Thumbnails thumbnails;
    RowArray tau_q, tau_v;                      // [L, H, T]
    RowArray tau_q_compare, tau_v_compare;       // [L, H, T] (ones for the counterfactual)
    // The two terms of tau_q (SSA side), [L, H, T]: 1 + s ln i (ones without a position term) and
    // tanh(w . z + b) (zeros without a token term); tau_q = position + token or position * (1 + token).
    RowArray tau_q_position, tau_q_token;
    MapMetrics metrics, metrics_compare;
    RowArray js, l1;                            // [L, H, T] each SSA row against its comparison row
    // With a base (Comparison::Base; empty without one): its tau_q and tau_v (ones for a vanilla
    // base), its row metrics, and each row against the base's: the SSA side's (the total change)
    // and the comparison's (tau = 1: the weights' drift). JS in nats as js.
    RowArray tau_q_base, tau_v_base;            // [L, H, T]
    MapMetrics metrics_base;
    RowArray js_total, l1_total;                // [L, H, T] SSA against base
    RowArray js_drift, l1_drift;                // [L, H, T] tau = 1 against base
    std::vector<float> qk_opnorm, qk_eig_mean, qk_eig_var;  // [L, H]
    RowArray effective_qk_norm;                 // [L, H, T] tau_q(i) * ||W_qk||_2
    // With a base: its QK spectrum, and how far fine-tuning moved each head's weights from it
    // (WeightDrift: ||W - W_base||_F / ||W_base||_F of the head's slice of W_q, W_k, W_v, W_o),
    // each layer's MLP and norms, and the embeddings: the drift's weights beside what they did (js_drift).
    std::vector<float> qk_opnorm_base, qk_eig_mean_base, qk_eig_var_base;    // [L, H]
    std::vector<float> weights_q, weights_k, weights_v, weights_o;            // [L, H]
    std::vector<float> weights_mlp;                                           // [L]
    std::vector<float> weights_norm_attention, weights_norm_mlp;              // [L] the norms before each (NaN: shared)
    float weights_norm_final = NAN;
    float weights_embeddings = NAN, weights_head = NAN;                       // head: an untied output head's
    std::string weights_rounded_to;  // WeightDrift::rounded_to
    double forward_ms = 0, metrics_ms = 0;  // forward: both passes and the predictions' logits (on a device: AnalyzeOptions::phase_timings)
    int reused_rows = 0;  // positions taken from the previous analysis (its ids agreed up to here)
    std::vector<Intervention> interventions;  // applied to the SSA side

    // Predictions (issue 17). Position t's logits predict token t + 1.
    static constexpr int kTopK = 10;
    std::vector<float> loss, loss_compare;          // [T - 1]: entry t - 1 is -ln p(token t | tokens < t), nats
    std::vector<int32_t> rank, rank_compare;        // [T - 1]: token t's 0-based rank among its predictions
    std::vector<int32_t> top_ids, top_ids_compare;  // [T, TopK()]: each position's most likely next tokens
    std::vector<float> top_probs, top_probs_compare;  // [T, TopK()]
    // The base's, as the others' (empty without a base).
    std::vector<float> loss_base;                   // [T - 1]
    std::vector<int32_t> rank_base;                 // [T - 1]
    std::vector<int32_t> top_ids_base;              // [T, TopK()]
    std::vector<float> top_probs_base;              // [T, TopK()]
    std::vector<float> next_logits;                 // [V]: the SSA side's logits after the last token
    // The predictions a position keeps: kTopK, or the whole vocabulary of a smaller one (the graph's 8).
    int TopK() const { return n_tokens > 0 && !top_ids.empty() ? static_cast<int>(top_ids.size() / n_tokens) : kTopK; }
    // The comparison's predictions are empty for the layer-local comparison (no forward pass of its own).
    bool HasComparePredictions() const { return !loss_compare.empty() || (n_tokens == 1 && !top_ids_compare.empty()); }
    std::string device;

    bool HasBase() const { return comparison == Comparison::Base; }
    // Head (l, h)'s full map on one side; null without maps, for a head outside the model, or for
    // the base side without a base.
    HeadMap Map(MapSide side, int l, int h) const;
    // The same map for a view that reads parts of it, kept where the engine built it (MapCells).
    MapCellsPtr Cells(MapSide side, int l, int h) const;
    size_t RowIndex(int l, int h) const { return (static_cast<size_t>(l) * n_head + h) * n_tokens; }
};

// The mean of a [L, H, T] array over rows 1..T-1 of one head (the single-key row is skipped),
// added in token order; NaN for T == 1 or an array of another shape. It reads the figures the
// array's bands keep (RowArray::Figures), so it costs a few reads whatever T.
float HeadRowMean(const RowArray& rows, const Analysis& a, int l, int h);
// The mean of a loss array (NaN when empty): mean loss in nats; exp of it is the perplexity.
float MeanLoss(const std::vector<float>& loss);

// What a fine-tune changed, per head (SPEC section 9): each [L, H] value is HeadRowMean of an
// Analysis array (rows 2..T), so it agrees with the other per-head figures. Jensen-Shannon in
// nats; the total change (SSA against base) beside its two parts, the temperatures' effect (SSA
// against tau = 1) and the weights' drift (tau = 1 against base). The parts need not add up to
// the total: a divergence is not additive.
struct Decomposition {
    int n_layer = 0, n_head = 0;                             // 0 without a base
    std::vector<float> js_total, js_temperature, js_drift;  // [L, H]: js_total, js, js_drift
    std::vector<float> l1_total, l1_temperature, l1_drift;  // [L, H]: l1_total, l1, l1_drift
    float loss_mean = NAN, loss_mean_tau1 = NAN, loss_mean_base = NAN;  // MeanLoss of loss, loss_compare, loss_base
    bool empty() const { return js_total.empty(); }
};
Decomposition Decompose(const Analysis& a);  // empty without a base

// Mean, min and max of one head's [T] slice of a [L, H, T] array over every token (the first
// included), as for temperatures; NaN when the array has another shape or T == 0.
struct HeadStats {
    float mean = NAN, min = NAN, max = NAN;
};
HeadStats HeadTokenStats(const RowArray& values, const Analysis& a, int l, int h);

// HeadRowMean and HeadTokenStats of every head, [L * H].
std::vector<float> HeadRowMeans(const RowArray& rows, const Analysis& a);
std::vector<HeadStats> HeadTokenStatsAll(const RowArray& values, const Analysis& a);

struct AnalyzeOptions {
    const std::atomic<bool>* cancel = nullptr;     // checked between layers
    std::atomic<float>* progress = nullptr;        // the fraction done: each layer a step, the predictions one more
    bool reuse = true;  // recompute only the positions from the first id that differs from the last analysis
    // Called once the maps, temperatures and metrics are ready, with the analysis as Analyze will
    // return it but without its predictions (empty), before they are computed: they cost [T, V]
    // logits a side, much of a long analysis with a large vocabulary, so a caller can show the rest first.
    std::function<void(const Analysis&)> before_predictions;
    // On a device, wait for each block's kernels so that forward_ms and metrics_ms split the time
    // exactly. Slower (the host cannot queue the next block while the device works), so off by
    // default: then the device's work is counted where the host waits for it, mostly in the
    // assembly's copies (metrics_ms), and only the sum forward_ms + metrics_ms is exact.
    bool phase_timings = false;
    // How the layer pass runs a layer's weight products (the norms, q, k and v, the temperatures,
    // the projection, the MLP). Blocks: with each block of attention rows, the CPU's way (small
    // temporaries the heap reuses). Whole: over all the layer's new rows at once, before and after
    // its blocks of attention rows, a device's way: fewer, larger products (a block's rows alone
    // leave most of a GPU's cores idle in a large model's products) and some sixty ops fewer a block.
    // Auto: Whole on a device and Blocks on the CPU, unless $SSAVIZ_LAYER_PRODUCTS says whole or
    // blocks. The same numbers within float32's rounding (products of other shapes).
    enum class LayerProducts { Auto, Blocks, Whole };
    LayerProducts layer_products = LayerProducts::Auto;
};

// Owns a loaded model (and optionally its twin or its base) on one device. Not thread-safe: one
// thread (the inference worker, or the command line) uses it.
class Engine {
public:
    // device: "auto", "cpu" or "cuda".
    // `model_path`: a model folder or a checkpoint file; `hints` fill in what a checkpoint without
    // config.json cannot tell (see InferConfig).
    // `dtype`: what the forward pass computes in, "f32", "bf16" or "f16" (CUDA only).
    static Result<std::unique_ptr<Engine>> Open(const std::string& model_path, const std::string& device, const ConfigHints& hints = {},
                                                const std::string& dtype = "f32");
    ~Engine();

    // A separately trained twin to compare against instead of the tau = 1 counterfactual. It must
    // have the same layers, heads and tokenizer.
    Status OpenTwin(const std::string& twin_dir, const ConfigHints& hints = {});
    void CloseTwin();
    // The model a fine-tune started from, for the three-way comparison (Comparison::Base). It must
    // have the same layers, heads and tokenizer. A base and a twin are exclusive: opening one
    // closes the other.
    Status OpenBase(const std::string& base_dir, const ConfigHints& hints = {});
    void CloseBase();
    // Without a twin or a base, which comparison to run (Counterfactual by default; Twin and Base
    // are refused).
    Status SetComparison(Comparison comparison);
    // What-ifs on the SSA side (none by default); each must name a layer and head of the model.
    Status SetInterventions(std::vector<Intervention> interventions);
    const std::vector<Intervention>& interventions() const;
    Comparison comparison() const;  // Twin while a twin is open, Base while a base is

    const ModelInfo& Info() const;
    const ModelInfo* TwinInfo() const;  // null without a twin
    const ModelInfo* BaseInfo() const;  // null without a base
    const Tokenizer& tokenizer() const;

    // Tokenizes for this model: rejects empty and non-UTF-8 text, and text longer than the
    // context unless `truncate` (then keeps the first n_positions tokens).
    Result<Tokenization> Tokenize(std::string_view text, bool truncate) const;
    // Every map, temperature and metric of the tokens. The engine keeps what each position left
    // behind (per layer and side: q, k, values, temperatures, row metrics, thumbnail blocks), so
    // an analysis whose ids agree with the previous one's up to position p computes only the rows
    // from p (from the start of p's thumbnail block): typing at the end of a long text costs
    // O(T) a layer, not O(T^2). Results equal a full analysis to float rounding (tests: 1e-5).
    // Opening or closing a twin or a base, or changing the comparison, starts afresh; a cancelled
    // or failed analysis leaves the previous one's state as it was.
    Result<Analysis> Analyze(const Tokenization& tokens, const AnalyzeOptions& options = {});
    // For a caller about to be idle (the window's worker between keystrokes): readies the memory
    // the next edit's rows go into, so that edit does not pay for mapping it. Checks `stop` every
    // few MB and returns false if it said so (the rest is done on the next call or by the edit).
    bool ReserveForEdits(const std::function<bool()>& stop);

    // The SSA side's mean loss on `ids` (its what-ifs applied) with `parts` of its weights, never its
    // temperatures, from the base (from_base.h): against the same with no parts, what that part of
    // the fine-tune's drift did to the loss. Its own forward pass, a block of positions at a time;
    // fails without a base (unless `parts` is empty) or for a one-token text.
    // `unchanged` (null: not asked): set where the parts' weights are the model's own, value for
    // value (a part the fine-tune left as it was), when their loss is the one with no part and
    // the pass is not run (the loss returned is NaN then: the caller has that one).
    Result<float> MeanLossFromBase(const std::vector<int32_t>& ids, const std::vector<BasePart>& parts,
                                   const std::atomic<bool>* cancel = nullptr, bool* unchanged = nullptr);
    // The same token by token (entry t - 1: token t's loss, as Analysis::loss); empty where `unchanged`.
    Result<std::vector<float>> LossFromBase(const std::vector<int32_t>& ids, const std::vector<BasePart>& parts,
                                            const std::atomic<bool>* cancel = nullptr, bool* unchanged = nullptr);

    // The logit lens and direct logit attribution (lens.h) of `ids` on one side: SSA (with its
    // what-ifs' model as loaded, none applied), or the comparison's: tau = 1 on the same weights
    // (LensRun::Vanilla; with a base too), each layer alone at tau = 1 (LayerLocal: LensRun::LayerLocal),
    // the twin, or the base. Its own forward pass, from the
    // side's kept stream where the text shares a prefix with the last one (LensCache): after an
    // edit only the positions from the first changed token run.
    Result<Lens> RunLens(const std::vector<int32_t>& ids, MapSide side, const LensOptions& options = {});
    // Position `position`'s parts for another target `token` (lens.h's Attribute), on one side.
    Result<std::vector<float>> Attribute(const std::vector<int32_t>& ids, MapSide side, int64_t position, int32_t token);
    // One position's lens and attribution (lens.h's LensAtPosition; token -1: the next token), on
    // one side, from a residual stream kept for `ids` and that side: the first call for a text runs
    // its forward pass; another position or target of the same text costs that position's products
    // alone. The streams (about (2 L + 1) T E floats each, (3 L + 1) layer-local; one kept a side) are let go when a twin or
    // base opens or closes.
    Result<LensAt> RunLensAt(const std::vector<int32_t>& ids, MapSide side, int64_t position, int32_t token = -1);

private:
    Engine();
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

}  // namespace model
