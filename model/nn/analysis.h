// The model layer as the app sees it, free of LibTorch types: open a model folder, tokenize text,
// and analyse it into plain host arrays (attention maps, temperatures, metrics) with explicit
// shapes. Row-major everywhere. L = layers, H = heads, T = tokens.
#pragma once

#include <atomic>
#include <cmath>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "model/io/config.h"
#include "model/io/result.h"
#include "model/text/tokenizer.h"
#include "model/io/weights.h"

namespace model {

struct ModelInfo {
    std::string dir;
    ModelConfig config;
    int64_t parameters = 0;
    std::string layout;          // "conv1d" or "linear"
    std::string device;          // "cpu", "cuda:0"
    std::string compute_dtype = "f32";  // what the forward pass computes in: f32, bf16, f16
    std::string tokenizer_kind;  // "gpt2-bpe"
    size_t tokenizer_vocab = 0;
    std::string tokenizer_source;     // "vocab.json + merges.txt", "tokenizer.json", "tokenizer.model", or GPT-2's and why
    std::vector<std::string> unused_tensors;
    std::string weights_path;         // the file the weights came from
    std::string weights_format;       // "safetensors" or "torch.save"
    std::string stored_dtype;         // "F32", "F16", "F16+F32", ...
    std::vector<std::string> notes;   // what the loader inferred (no config.json, GPT-2 tokenizer, ...)
};

struct NamedArray {
    std::string name;
    std::vector<float> values;
};

// Per-row metrics of one set of maps, each [L, H, T]: entropy, normalized_entropy, spikiness,
// max_weight, top5_mass, effective_support, sink_mass (SPEC section 2).
struct MapMetrics {
    std::vector<NamedArray> rows;
    const std::vector<float>* Find(const std::string& name) const;  // null when absent
    const std::vector<float>& Get(const std::string& name) const;   // asserts the name exists
};

enum class MapSide { Ssa, Compare };
using HeadMap = std::shared_ptr<const std::vector<float>>;  // one head's [T, T] map, row-major

// Every head's full attention map, on demand. At thousands of tokens L*H*T*T floats do not fit
// the host (GPT-2 small at 2,048 tokens: 2.4 GB a side), so the engine keeps each layer's q, k
// and tau_q where the model ran and rebuilds a head's map when it is shown or exported; the most
// recently used maps stay on the host up to kMapCacheBytes. Thread-safe.
class AttentionMaps {
public:
    virtual ~AttentionMaps() = default;
    virtual HeadMap Head(MapSide side, int layer, int head) const = 0;
};
constexpr size_t kMapCacheBytes = size_t{128} << 20;

// Maps already on the host, [L, H, T, T] a side: synthetic analyses for the demo and tests.
std::shared_ptr<const AttentionMaps> HostAttentionMaps(int layers, int heads, int tokens, std::vector<float> ssa,
                                                       std::vector<float> compare);

// Every head's map max-pooled to at most kThumbnailCells a side, for the heads grid and its
// shared colour scale: a cell holds the largest weight of its pool x pool block of tokens (the
// difference: the value of largest magnitude, the positive one when the magnitudes agree to 1e-5), so a sharp weight survives. Exact (pool 1) up to
// kThumbnailCells tokens.
constexpr int kThumbnailCells = 256;
struct Thumbnails {
    int side = 0;  // cells a side: ceil(T / pool)
    int pool = 1;  // tokens a cell covers, a side
    std::vector<float> ssa, compare, difference;  // [L, H, side, side]
    size_t Index(int l, int h, int n_head) const { return (static_cast<size_t>(l) * n_head + h) * side * side; }
};
// From host maps [L, H, T, T] (the synthetic analyses; the engine pools on its device).
Thumbnails MakeThumbnails(const std::vector<float>& ssa, const std::vector<float>& compare, int layers, int heads, int tokens);

// What the SSA model is compared with. The counterfactual runs the same weights with tau = 1 in
// every layer, a whole second forward pass, so its later layers see a different residual stream;
// the layer-local one asks only what each layer's temperatures do to that layer: at each layer
// the SSA model's own q and k (the same input), with tau = 1. A twin is a separately trained model.
enum class Comparison { Counterfactual, LayerLocal, Twin, Unedited };
const char* ToString(Comparison c);  // "counterfactual", "local", "twin", "unedited"

// A what-if on the SSA side's temperatures, for one head or a whole layer (issue 17). With the
// Unedited comparison, the difference views and the delta loss show its effect alone.
struct Intervention {
    enum class Kind {
        Ablate,        // tau_q = tau_v = 1: the head without SSA
        PositionOnly,  // tau_q keeps its position term only (the token term 0)
        TokenOnly,     // tau_q keeps its token term only (the position term 1)
        Scale,         // tau_q = 1 + scale (tau_q - 1)
    };
    Kind kind = Kind::Ablate;
    int layer = 0;
    int head = -1;      // -1: every head of the layer
    float scale = 0.0f; // Scale only
    bool operator==(const Intervention& o) const {
        return kind == o.kind && layer == o.layer && head == o.head && (kind != Kind::Scale || scale == o.scale);
    }
};
// "L1 H2: tau = 1", "L0 all heads: position term only", "L2 H0: (tau_q - 1) x 0.5"
std::string Describe(const Intervention& intervention);
// The --ablate syntax: comma-separated "L:H" or "L:*" (every head of layer L), each optionally
// followed by "=pos" (position term only), "=tok" (token term only) or "=xS" (scale tau_q - 1 by
// S, a finite number); plain is tau = 1. Errors name the item and the model's shape.
Result<std::vector<Intervention>> ParseInterventions(std::string_view spec, int n_layer, int n_head);
std::string FormatInterventions(const std::vector<Intervention>& interventions);  // the inverse

struct Analysis {
    int n_layer = 0, n_head = 0, n_tokens = 0;
    Tokenization tokens;
    Comparison comparison = Comparison::Counterfactual;
    std::string compare_label;                   // "vanilla" (either tau = 1 comparison) or the twin's folder
    std::shared_ptr<const AttentionMaps> maps;   // null: no maps (an empty analysis)
    Thumbnails thumbnails;
    std::vector<float> tau_q, tau_v;             // [L, H, T]
    std::vector<float> tau_q_compare, tau_v_compare;  // [L, H, T] (ones for the counterfactual)
    // The two terms of tau_q (SSA side), [L, H, T]: 1 + s ln i (ones without a position term) and
    // tanh(w . z + b) (zeros without a token term); tau_q = position + token or position * (1 + token).
    std::vector<float> tau_q_position, tau_q_token;
    MapMetrics metrics, metrics_compare;
    std::vector<float> js, l1;                   // [L, H, T] each SSA row against its comparison row
    std::vector<float> qk_opnorm, qk_eig_mean, qk_eig_var;  // [L, H]
    std::vector<float> effective_qk_norm;        // [L, H, T] tau_q(i) * ||W_qk||_2
    double forward_ms = 0, metrics_ms = 0;  // forward: both passes and the predictions' logits
    int reused_rows = 0;  // positions taken from the previous analysis (its ids agreed up to here)
    std::vector<Intervention> interventions;  // applied to the SSA side

    // Predictions (issue 17). Position t's logits predict token t + 1.
    static constexpr int kTopK = 10;
    std::vector<float> loss, loss_compare;          // [T - 1]: entry t - 1 is -ln p(token t | tokens < t), nats
    std::vector<int32_t> rank, rank_compare;        // [T - 1]: token t's 0-based rank among its predictions
    std::vector<int32_t> top_ids, top_ids_compare;  // [T, kTopK]: each position's most likely next tokens
    std::vector<float> top_probs, top_probs_compare;  // [T, kTopK]
    std::vector<float> next_logits;                 // [V]: the SSA side's logits after the last token
    // The comparison's predictions are empty for the layer-local comparison (no forward pass of its own).
    bool HasComparePredictions() const { return !loss_compare.empty() || (n_tokens == 1 && !top_ids_compare.empty()); }
    std::string device;

    // Head (l, h)'s full map on one side; null without maps or for a head outside the model.
    HeadMap Map(MapSide side, int l, int h) const;
    size_t RowIndex(int l, int h) const { return (static_cast<size_t>(l) * n_head + h) * n_tokens; }
};

// The mean of a [L, H, T] array over rows 1..T-1 of one head (the single-key row is skipped);
// NaN for T == 1.
float HeadRowMean(const std::vector<float>& rows, const Analysis& a, int l, int h);
// The mean of a loss array (NaN when empty): mean loss in nats; exp of it is the perplexity.
float MeanLoss(const std::vector<float>& loss);

// Mean, min and max of one head's [T] slice of a [L, H, T] array over every token (the first
// included), as for temperatures; NaN when the array is too short or T == 0.
struct HeadStats {
    float mean = NAN, min = NAN, max = NAN;
};
HeadStats HeadTokenStats(const std::vector<float>& values, const Analysis& a, int l, int h);

struct AnalyzeOptions {
    const std::atomic<bool>* cancel = nullptr;     // checked between layers
    std::atomic<float>* progress = nullptr;        // set to the fraction of layers done
    bool reuse = true;  // recompute only the positions from the first id that differs from the last analysis
};

// Owns a loaded model (and optionally its twin) on one device. Not thread-safe: one thread (the
// inference worker, or the command line) uses it.
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
    // Without a twin, which comparison to run (Counterfactual by default; Twin is refused).
    Status SetComparison(Comparison comparison);
    // What-ifs on the SSA side (none by default); each must name a layer and head of the model.
    Status SetInterventions(std::vector<Intervention> interventions);
    const std::vector<Intervention>& interventions() const;
    Comparison comparison() const;  // Twin while a twin is open

    const ModelInfo& Info() const;
    const ModelInfo* TwinInfo() const;  // null without a twin
    const Tokenizer& tokenizer() const;

    // Tokenizes for this model: rejects empty and non-UTF-8 text, and text longer than the
    // context unless `truncate` (then keeps the first n_positions tokens).
    Result<Tokenization> Tokenize(std::string_view text, bool truncate) const;
    // Every map, temperature and metric of the tokens. The engine keeps what each position left
    // behind (per layer and side: q, k, values, temperatures, row metrics, thumbnail blocks), so
    // an analysis whose ids agree with the previous one's up to position p computes only the rows
    // from p (from the start of p's thumbnail block): typing at the end of a long text costs
    // O(T) a layer, not O(T^2). Results equal a full analysis to float rounding (tests: 1e-5).
    // Opening a twin, closing it or changing the comparison starts afresh; a cancelled or failed
    // analysis leaves the previous one's state as it was.
    Result<Analysis> Analyze(const Tokenization& tokens, const AnalyzeOptions& options = {});

private:
    Engine();
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

// The next token from a position's logits: the most likely (lowest id on a tie) at temperature 0,
// else drawn from softmax(logits / temperature) over the `top_k` most likely (0: all) with `rng`.
// Only ids below `vocab` (the tokenizer's size; a padded vocabulary has unused logits) are drawn.
// The same seed draws the same tokens on every platform (the generator and the arithmetic are ours).
int32_t NextToken(const std::vector<float>& logits, size_t vocab, float temperature, int top_k, uint64_t* rng_state);

// Makes freed blocks of up to 32 MB (a head's map at 2,048 tokens is 16 MB) go back to the
// process's heap for the next tensor instead of to the system: each new mapping of such a block
// costs a page fault per 4 KiB, which made rebuilding one head's map ~4x slower (136 ms against
// 38 ms at 2,048 tokens on this project's 2-core VM). Engine::Open calls it (glibc; no-op elsewhere).
void KeepFreedMemoryForReuse();

// Threads LibTorch uses for one operation (process-wide). The GUI leaves a core to the UI.
void SetComputeThreads(int threads);
// $SSAVIZ_THREADS when it is a whole number from 1 to 1024, else `fallback` (0: none set). OpenBLAS
// splits its sums by thread count, so two runs agree to the last bit only with the same count:
// the window and `ssaviz export` both honour it.
int ComputeThreadsFromEnvironment(int fallback);

// Writes a random SSA model folder (fixed seed) with the tokenizer files from `tokenizer_dir`.
Status WriteRandomModel(const ModelConfig& config, uint64_t seed, const std::string& tokenizer_dir, const std::string& out_dir);

}  // namespace model
