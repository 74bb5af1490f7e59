// The engine: one loaded model (and optionally its twin) on one device, and Engine::Analyze,
// which runs it and its comparison layer by layer into an Analysis. Loading is model_folder.cpp,
// the forward pass forward.cpp, the maps attention_maps.cpp, the what-ifs interventions.cpp and
// generation sampling.cpp.
//
// Index of this file:
// [SECTION] Analysis: lookups and per-head summaries
// [SECTION] What the engine keeps between analyses
// [SECTION] Opening models, the comparison and the what-ifs
// [SECTION] Tokenizing
// [SECTION] Pieces of Analyze: predictions, edits, joining kept and new rows
// [SECTION] Engine::Analyze

#include "model/nn/analysis.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <tuple>
#include <utility>

#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include "model/io/files.h"
#include "model/nn/attention_maps_torch.h"
#include "model/nn/forward.h"
#include "model/nn/metrics.h"
#include "model/nn/model_folder_torch.h"
#include "model/nn/row_buffers.h"
#include "model/nn/runtime_torch.h"

namespace model {

//-----------------------------------------------------------------------------
// [SECTION] Analysis: lookups and per-head summaries
//-----------------------------------------------------------------------------

const char* ToString(Comparison c) {
    switch (c) {
        case Comparison::Counterfactual: return "counterfactual";
        case Comparison::LayerLocal: return "local";
        case Comparison::Twin: return "twin";
        case Comparison::Unedited: return "unedited";
    }
    return "?";
}

HeadMap Analysis::Map(MapSide side, int l, int h) const {
    if (!maps || l < 0 || l >= n_layer || h < 0 || h >= n_head) return nullptr;
    return maps->Head(side, l, h);
}

const std::vector<float>* MapMetrics::Find(const std::string& name) const {
    for (const auto& r : rows)
        if (r.name == name) return &r.values;
    return nullptr;
}

const std::vector<float>& MapMetrics::Get(const std::string& name) const {
    const std::vector<float>* values = Find(name);
    assert(values && "unknown metric");
    return *values;
}

float HeadRowMean(const std::vector<float>& rows, const Analysis& a, int l, int h) {
    if (a.n_tokens < 2) return NAN;
    double sum = 0;
    const float* row = rows.data() + a.RowIndex(l, h);
    for (int i = 1; i < a.n_tokens; ++i) sum += row[i];
    return static_cast<float>(sum / (a.n_tokens - 1));
}

HeadStats HeadTokenStats(const std::vector<float>& values, const Analysis& a, int l, int h) {
    HeadStats s;
    const size_t at = a.RowIndex(l, h);
    if (a.n_tokens == 0 || values.size() < at + a.n_tokens) return s;
    double sum = 0;
    s.min = s.max = values[at];
    for (int i = 0; i < a.n_tokens; ++i) {
        sum += values[at + i];
        s.min = std::min(s.min, values[at + i]);
        s.max = std::max(s.max, values[at + i]);
    }
    s.mean = static_cast<float>(sum / a.n_tokens);
    return s;
}

float MeanLoss(const std::vector<float>& loss) {
    if (loss.empty()) return NAN;
    double sum = 0;
    for (float v : loss) sum += v;
    return static_cast<float>(sum / static_cast<double>(loss.size()));
}

//-----------------------------------------------------------------------------
// [SECTION] What the engine keeps between analyses
//-----------------------------------------------------------------------------

namespace {

// What one position left behind in one layer, for every position so far: the analysis of a text
// that agrees with the last one up to position p takes rows < p from here. Tensors on the device.
struct SideRows {
    at::Tensor q, k, vs;       // [H, T, D] in the compute dtype; vs = v * tau_v
    at::Tensor tau_q, tau_v;   // [H, T] as the forward pass used them
    RowMetricTensors metrics;  // [H, T] float32
};
struct LayerRows {
    SideRows side[2];                        // SSA, comparison; k and vs views of the runs' below
    at::Tensor k[2], vs[2];                  // a forward pass each (Analyze's Run): [sides, H, T, D]
    at::Tensor tau_q_position, tau_q_token;  // [H, T], SSA side
    at::Tensor js, l1;                       // [H, T]
    // The rows of the last thumbnail block (from (T - 1) / pool * pool), each pooled along its keys
    // alone: typing at the end pools that block again from these instead of recomputing its rows.
    KeyPooled tail;                          // [H, rows, cells]; undefined when not computed
};
// One side's predictions: the last layer's output and what it predicts, every position so far.
struct SidePredictions {
    at::Tensor hidden;              // [1, T, E]
    at::Tensor loss, rank;          // [T - 1] float32, int64
    at::Tensor top_ids, top_probs;  // [T, K] int64, float32
};
struct AnalysisCache {
    std::vector<int32_t> ids;
    int pool = 0;
    std::vector<LayerRows> layers;
    SidePredictions predictions[2];  // none for the layer-local comparison
    std::shared_ptr<const RecomputedMaps> maps;
    Thumbnails thumbnails;  // on the host, its bands shared with the analyses handed out
    RowBuffers buffers;     // what the layers' q, k and vs are views of (RowSlot)
};

// The slots of AnalysisCache::buffers: per layer, each forward pass's keys and values, each
// side's queries.
enum class RowKind { Keys, Values, Queries };
int RowSlot(int layer, RowKind kind, int index) { return layer * 6 + static_cast<int>(kind) * 2 + index; }

}  // namespace

struct Engine::Impl {
    at::Device device{at::kCPU};
    LoadedModel model;
    QkSpectrum spectrum;  // the model's, computed once
    std::unique_ptr<LoadedModel> twin;
    Comparison comparison = Comparison::Counterfactual;  // without a twin
    std::vector<Intervention> interventions;
    AnalysisCache cache;
};

//-----------------------------------------------------------------------------
// [SECTION] Opening models, the comparison and the what-ifs
//-----------------------------------------------------------------------------

Engine::Engine() : m_impl(std::make_unique<Impl>()) {}
Engine::~Engine() = default;

Result<std::unique_ptr<Engine>> Engine::Open(const std::string& model_dir, const std::string& device_name, const ConfigHints& hints,
                                             const std::string& dtype_name) {
    KeepFreedMemoryForReuse();  // the analysis's blocks of rows come and go by the thousand
    auto device = ResolveDevice(device_name);
    if (!device) return Fail(device.error());
    auto compute = ResolveComputeDtype(dtype_name, *device);
    if (!compute) return Fail(compute.error());
    BindThreadToDevice(*device);
    auto model = LoadModel(model_dir, *device, hints, *compute, true);
    if (!model) return Fail(model.error());
    std::unique_ptr<Engine> engine(new Engine());
    engine->m_impl->device = *device;
    engine->m_impl->spectrum = ComputeQkSpectrum(model->gpt);
    engine->m_impl->model = std::move(*model);
    return engine;
}

Status Engine::OpenTwin(const std::string& twin_dir, const ConfigHints& hints) {
    BindThreadToDevice(m_impl->device);
    auto twin = LoadModel(twin_dir, m_impl->device, hints, m_impl->model.gpt.dtype(), true);
    if (!twin) return Fail(twin.error());
    const ModelConfig &a = m_impl->model.info.config, &b = twin->info.config;
    if (a.n_layer != b.n_layer || a.n_head != b.n_head)
        return Fail("twin '" + twin_dir + "' has " + std::to_string(b.n_layer) + " layers x " + std::to_string(b.n_head) +
                    " heads; the model has " + std::to_string(a.n_layer) + " x " + std::to_string(a.n_head));
    const Tokenizer &mine = *m_impl->model.tokenizer, &theirs = *twin->tokenizer;
    if (theirs.Kind() != mine.Kind() || theirs.VocabSize() != mine.VocabSize())
        return Fail("twin '" + EscapeForMessage(twin_dir) + "' uses a different tokenizer (" + theirs.Kind() + ", " +
                    std::to_string(theirs.VocabSize()) + " tokens)");
    // Same kind and size is not the same tokenizer: the twin would read other tokens under the same ids.
    if (theirs.ContentHash() != mine.ContentHash())
        return Fail("twin '" + EscapeForMessage(twin_dir) + "' uses a different tokenizer: the same kind (" + theirs.Kind() + ") and size (" +
                    std::to_string(theirs.VocabSize()) + " tokens), but other pieces or merges");
    m_impl->twin = std::make_unique<LoadedModel>(std::move(*twin));
    m_impl->cache = {};
    return Ok{};
}

void Engine::CloseTwin() {
    m_impl->twin.reset();
    m_impl->cache = {};
}

Status Engine::SetComparison(Comparison comparison) {
    if (comparison == Comparison::Twin) return Fail("open a twin to compare with one");
    if (comparison != m_impl->comparison) m_impl->cache = {};
    m_impl->comparison = comparison;
    return Ok{};
}

Comparison Engine::comparison() const { return m_impl->twin ? Comparison::Twin : m_impl->comparison; }

Status Engine::SetInterventions(std::vector<Intervention> interventions) {
    const ModelConfig& c = m_impl->model.info.config;
    for (const Intervention& x : interventions)
        if (x.layer < 0 || x.layer >= c.n_layer || x.head < -1 || x.head >= c.n_head || (x.kind == Intervention::Kind::Scale && !std::isfinite(x.scale)))
            return Fail("intervention '" + Describe(x) + "' does not fit the model (" + std::to_string(c.n_layer) + " layers x " +
                        std::to_string(c.n_head) + " heads)");
    if (auto s = CheckCombinedScales(interventions); !s) return s;
    if (interventions != m_impl->interventions) m_impl->cache = {};
    m_impl->interventions = std::move(interventions);
    return Ok{};
}

const std::vector<Intervention>& Engine::interventions() const { return m_impl->interventions; }
const ModelInfo& Engine::Info() const { return m_impl->model.info; }
const ModelInfo* Engine::TwinInfo() const { return m_impl->twin ? &m_impl->twin->info : nullptr; }
const Tokenizer& Engine::tokenizer() const { return *m_impl->model.tokenizer; }

//-----------------------------------------------------------------------------
// [SECTION] Tokenizing
//-----------------------------------------------------------------------------

namespace {

// The first tokens of a long text without encoding all of it. Tokenizers decide a token from the
// bytes around it, so a prefix's tokens equal the whole text's except near where the prefix was
// cut: tokens that end kStableMargin bytes or more before the cut are kept. The prefix doubles
// until `count` such tokens are found or it is the whole text.
constexpr size_t kStableMargin = 1024;

void KeepFirst(Tokenization* tokens, size_t count) {
    tokens->ids.resize(count);
    tokens->pieces.resize(count);
    tokens->offsets.resize(count);
}

Result<Tokenization> EncodePrefix(const Tokenizer& tokenizer, std::string_view text, size_t count) {
    for (size_t length = std::max<size_t>(count * 16, 4 * kStableMargin);; length *= 2) {
        if (length >= text.size()) return tokenizer.Encode(text);
        size_t cut = length;
        while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // a character boundary
        auto tokens = tokenizer.Encode(text.substr(0, cut));
        if (!tokens) {
            // The prefix may be fine where the whole text is not: the whole text's error names the byte.
            if (FindInvalidUtf8(text.substr(0, cut)) != std::string_view::npos) return tokens;
            continue;
        }
        size_t stable = 0;
        while (stable < tokens->ids.size() && tokens->offsets[stable].second + kStableMargin <= cut) ++stable;
        if (stable >= count) {
            KeepFirst(&*tokens, count);
            return tokens;
        }
    }
}

}  // namespace

Result<Tokenization> Engine::Tokenize(std::string_view text, bool truncate) const {
    if (text.empty()) return Fail("text is empty");
    // A twin with a shorter context bounds the text too, and is the one the message names.
    const int own = m_impl->model.info.config.n_positions, twin = m_impl->twin ? m_impl->twin->info.config.n_positions : own;
    const size_t context = static_cast<size_t>(std::min(own, twin));
    const std::string whose = twin < own ? "the twin's context" : "the model's context";
    // One token more than the context tells "too long" from "fits" without encoding a long text whole.
    auto tokens = EncodePrefix(*m_impl->model.tokenizer, text, context + 1);
    if (!tokens) return tokens;
    if (tokens->ids.size() > context) {
        if (!truncate) {
            const bool whole = tokens->offsets.back().second == text.size();
            return Fail("text is " + std::string(whole ? "" : "more than ") + std::to_string(whole ? tokens->ids.size() : context) +
                        " tokens, longer than " + whose + " of " + std::to_string(context) + " (truncating keeps the first " +
                        std::to_string(context) + ")");
        }
        KeepFirst(&*tokens, context);
    }
    return tokens;
}

//-----------------------------------------------------------------------------
// [SECTION] Pieces of Analyze: predictions, edits, joining kept and new rows
//-----------------------------------------------------------------------------

namespace {

double MillisecondsSince(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// Every field of RowMetricTensors with its name in MapMetrics, for code that treats them alike.
struct RowMetricField {
    const char* name;
    at::Tensor RowMetricTensors::*tensor;
};
constexpr RowMetricField kRowMetricFields[] = {
    {"entropy", &RowMetricTensors::entropy},     {"normalized_entropy", &RowMetricTensors::normalized_entropy},
    {"spikiness", &RowMetricTensors::spikiness}, {"max_weight", &RowMetricTensors::max_weight},
    {"top5_mass", &RowMetricTensors::top5_mass}, {"effective_support", &RowMetricTensors::effective_support},
    {"sink_mass", &RowMetricTensors::sink_mass}};

// One tensor a layer, [H, T] each, as one host array [L, H, T] in float32. On the CPU each layer
// is copied straight into the array (stacking first would copy everything twice); elsewhere the
// layers are stacked on the device and copied over once.
std::vector<float> LayersToHost(const std::vector<at::Tensor>& layers) {
    if (layers.empty() || !layers[0].is_cpu()) return layers.empty() ? std::vector<float>() : ToHost(at::stack(layers));
    size_t total = 0;
    for (const at::Tensor& t : layers) total += static_cast<size_t>(t.numel());
    std::vector<float> out(total);
    float* to = out.data();
    for (const at::Tensor& t : layers) {
        at::from_blob(to, t.sizes(), at::kFloat).copy_(t);
        to += t.numel();
    }
    return out;
}

// What a block of logits rows [n, V] says: each row's log-sum-exp and top kTopK (ids, logits);
// for the first m rows, whose next token is targets[r], that token's logit and how many logits
// exceed it (its 0-based rank). On the CPU one scan a row beside ATen's vectorised logsumexp
// (log_softmax, topk and a comparison tensor took 2.5x as long); elsewhere torch ops.
struct RowPredictions {
    at::Tensor log_sum_exp;          // [n]
    at::Tensor top_ids, top_logits;  // [n, K] int64, float32
    at::Tensor actual, rank;         // [m] float32, int64
};

RowPredictions PredictRows(const at::Tensor& logits, const at::Tensor& targets) {
    const int64_t n = logits.size(0), V = logits.size(1), m = targets.size(0), K = std::min<int64_t>(Analysis::kTopK, V);
    RowPredictions out;
    out.log_sum_exp = at::logsumexp(logits, -1);
    if (!logits.is_cpu()) {
        auto top = at::topk(logits, K, -1);
        out.top_logits = std::get<0>(top);
        out.top_ids = std::get<1>(top);
        const at::Tensor head = logits.narrow(0, 0, m);
        const at::Tensor actual = head.gather(1, targets.unsqueeze(1));  // [m, 1]
        out.actual = actual.squeeze(1);
        out.rank = (head > actual).sum(1);
        return out;
    }
    out.top_ids = at::empty({n, K}, at::kLong);
    out.top_logits = at::empty({n, K}, at::kFloat);
    out.actual = at::empty({m}, at::kFloat);
    out.rank = at::empty({m}, at::kLong);
    const at::Tensor target = targets.to(at::kCPU, at::kLong).contiguous();
    const float* x = logits.data_ptr<float>();
    const int64_t* t = target.data_ptr<int64_t>();
    int64_t *top_ids = out.top_ids.data_ptr<int64_t>(), *rank = out.rank.data_ptr<int64_t>();
    float *top = out.top_logits.data_ptr<float>(), *actual = out.actual.data_ptr<float>();
    at::parallel_for(0, n, 1, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
            const float* row = x + r * V;
            float* best = top + r * K;  // descending; a later equal logit does not pass an earlier one
            int64_t* best_id = top_ids + r * K;
            std::fill(best, best + K, -std::numeric_limits<float>::infinity());
            std::fill(best_id, best_id + K, int64_t{0});
            const float a = r < m ? row[t[r]] : std::numeric_limits<float>::infinity();
            int64_t above = 0;
            for (int64_t j = 0; j < V; ++j) {
                const float v = row[j];
                above += v > a;
                if (!(v > best[K - 1])) continue;
                int64_t i = K - 1;
                for (; i > 0 && best[i - 1] < v; --i) best[i] = best[i - 1], best_id[i] = best_id[i - 1];
                best[i] = v;
                best_id[i] = j;
            }
            if (r < m) actual[r] = a, rank[r] = above;
        }
    });
    return out;
}

// What one batch row of a forward pass does to the temperatures: nothing, the what-ifs, or all of
// them off (tau_q = tau_v = 1: the counterfactual).
enum class RowEdit { None, Interventions, Vanilla };

// Per-layer edits on the device for a batch of rows, [H, 1] each for one row and [B, H, 1] for
// more; a layer no row edits has undefined tensors. Every term dropped and the value side off
// make tau_q = position 1 + token 0 and tau_v = 1 exactly, as a vanilla pass has them, so a
// batch can hold the SSA side and its counterfactual.
std::vector<TemperatureEdit> MakeEdits(const std::vector<Intervention>& interventions, const ModelConfig& c, at::Device device,
                                       const std::vector<RowEdit>& rows) {
    std::vector<TemperatureEdit> edits(c.n_layer);
    const size_t B = rows.size(), H = static_cast<size_t>(c.n_head);
    for (int l = 0; l < c.n_layer; ++l) {
        std::vector<uint8_t> position(B * H, 1), token(B * H, 1), value_off(B * H, 0);
        std::vector<float> scale(B * H, 1.0f);
        bool any = false;
        for (size_t b = 0; b < B; ++b) {
            if (rows[b] == RowEdit::Vanilla) {
                any = true;
                std::fill_n(position.begin() + b * H, H, 0);
                std::fill_n(token.begin() + b * H, H, 0);
                std::fill_n(value_off.begin() + b * H, H, 1);
                continue;
            }
            if (rows[b] != RowEdit::Interventions) continue;
            for (const Intervention& x : interventions) {
                if (x.layer != l) continue;
                any = true;
                for (size_t h = 0; h < H; ++h) {
                    if (x.head >= 0 && static_cast<size_t>(x.head) != h) continue;
                    const size_t i = b * H + h;
                    switch (x.kind) {
                        case Intervention::Kind::Ablate: position[i] = token[i] = 0; value_off[i] = 1; break;
                        case Intervention::Kind::PositionOnly: token[i] = 0; break;
                        case Intervention::Kind::TokenOnly: position[i] = 0; break;
                        case Intervention::Kind::Scale: scale[i] *= x.scale; break;
                    }
                }
            }
        }
        if (!any) continue;
        const std::vector<int64_t> shape = B == 1 ? std::vector<int64_t>{c.n_head, 1} : std::vector<int64_t>{static_cast<int64_t>(B), c.n_head, 1};
        auto mask = [&](const std::vector<uint8_t>& v) { return at::tensor(at::ArrayRef<uint8_t>(v), at::kByte).to(device, at::kBool).view(shape); };
        const at::Tensor s = at::tensor(at::ArrayRef<float>(scale)).view(shape);
        edits[l] = {mask(position), mask(token), mask(value_off), s.to(device), (s != 1).to(device)};
    }
    return edits;
}

// The logits computed at once, [sides, rows, V] floats: the heap's largest block (see
// KeepFreedMemoryForReuse). Each product with the head reads (and sgemm packs) all of it, [V, E],
// so the fewer the blocks the better: 8 MB blocks (20 rows a side of GPT-2) took 1.9 s of a full
// analysis of 1,024 tokens of GPT-2 small, 32 MB ones 1.5 s.
constexpr size_t kLogitsBytes = size_t{32} << 20;

// Rows < p of `old` followed by `rows`, along dimension 1 (positions): [H, p + R, ...].
at::Tensor Join(const at::Tensor& old, int64_t p, const at::Tensor& rows) {
    return p > 0 ? at::cat({old.narrow(1, 0, p), rows}, 1) : rows.contiguous();
}

std::vector<float> LayersToHost(const std::vector<LayerRows>& layers, const std::function<const at::Tensor&(const LayerRows&)>& field) {
    std::vector<at::Tensor> parts;
    for (const LayerRows& l : layers) parts.push_back(field(l));
    return LayersToHost(parts);
}

MapMetrics MetricsToHost(const std::vector<LayerRows>& layers, int side) {
    MapMetrics m;
    for (const RowMetricField& field : kRowMetricFields)
        m.rows.push_back({field.name, LayersToHost(layers, [&](const LayerRows& l) -> const at::Tensor& { return l.side[side].metrics.*field.tensor; })});
    return m;
}

}  // namespace

//-----------------------------------------------------------------------------
// [SECTION] Engine::Analyze
//-----------------------------------------------------------------------------

bool Engine::ReserveForEdits(const std::function<bool()>& stop) {
    c10::InferenceMode guard;
    BindThreadToDevice(m_impl->device);
    return m_impl->cache.buffers.Reserve(stop);
}

Result<Analysis> Engine::Analyze(const Tokenization& tokens, const AnalyzeOptions& options) {
    c10::InferenceMode guard;
    BindThreadToDevice(m_impl->device);
    const ModelConfig& c = m_impl->model.info.config;
    const int64_t T = static_cast<int64_t>(tokens.ids.size());
    const SsaGpt& ssa = m_impl->model.gpt;
    const SsaGpt& other = m_impl->twin ? m_impl->twin->gpt : ssa;
    if (m_impl->twin && T > other.config.n_positions)
        return Fail(std::to_string(T) + " tokens exceed the twin's context of " + std::to_string(other.config.n_positions));
    for (const SsaGpt* model : {&ssa, &other})
        if (auto valid = CheckIds(model->config, tokens.ids); !valid) return Fail(valid.error());
    const Comparison comparison = this->comparison();

    // p: the positions the previous analysis already holds (its ids agree up to there).
    const AnalysisCache& old = m_impl->cache;
    RowBuffers& buffers = m_impl->cache.buffers;
    buffers.Begin();
    int64_t p = 0;
    if (options.reuse && !old.layers.empty()) {
        const size_t n = std::min(old.ids.size(), tokens.ids.size());
        while (p < static_cast<int64_t>(n) && old.ids[p] == tokens.ids[p]) ++p;
    }
    // Thumbnail blocks are pool x pool tokens: rows from the start of p's block are pooled again
    // (all of them when T changes the pool).
    const int pool = ThumbnailPool(static_cast<int>(T));
    const int64_t side = (T + pool - 1) / pool;
    const int64_t r0 = pool == old.pool ? p / pool * pool : 0;
    const int64_t old_tail_first = old.ids.empty() ? 0 : (static_cast<int64_t>(old.ids.size()) - 1) / pool * pool;  // its tail's first row

    // The model and its comparison run layer by layer side by side, rows p..T-1 only, in blocks
    // of rows whose [H, rows, T] attention stays under kBlockBytes; each block's attention rows
    // are measured, pooled into thumbnails and dropped. So no [H, T, T] tensor ever exists, and
    // the temporaries stay small enough for the heap to reuse (a fresh 64 MB mapping a tensor
    // cost ~0.3 s of page faults on this project's VM: 8 s for 2,048 tokens, against 1.3 s in blocks).
    const bool cuda = m_impl->device.is_cuda();
    auto sync = [&](const at::Tensor& t) {
        if (cuda && t.defined()) t.sum().item<float>();  // wait for the kernels, so the timings are honest
    };
    const bool local = comparison == Comparison::LayerLocal;
    const at::Device device = m_impl->device;
    // The forward passes. The SSA side and its comparison run as one batch of two when they share
    // the weights (the counterfactual and the unedited comparison), so every layer's weights and
    // the head are read once for both: typing at the end of a text is a pass of one row a side,
    // which costs what reading the weights costs. A twin runs on its own; the layer-local
    // comparison has no forward pass.
    struct Run {
        const SsaGpt* model;
        int first_side, sides;               // sides first_side.., one batch row each
        std::vector<TemperatureEdit> edits;  // a layer each
        at::Tensor stream;                   // the rows' residual streams: [sides, T - p, E]
    };
    std::vector<Run> runs;
    if (!local && !m_impl->twin)
        runs.push_back({&ssa, 0, 2, MakeEdits(m_impl->interventions, c, device,
                                              {RowEdit::Interventions, comparison == Comparison::Counterfactual ? RowEdit::Vanilla : RowEdit::None}),
                        {}});
    else
        runs.push_back({&ssa, 0, 1, MakeEdits(m_impl->interventions, c, device, {RowEdit::Interventions}), {}});
    if (m_impl->twin) runs.push_back({&other, 1, 1, MakeEdits({}, c, device, {RowEdit::None}), {}});
    // Side s is batch row row_of[s] of runs[run_of[s]] (the layer-local side: the SSA side's row).
    const int run_of[2] = {0, local ? 0 : static_cast<int>(runs.size()) - 1}, row_of[2] = {0, runs[0].sides == 2 ? 1 : 0};
    auto edit_of = [&](size_t r, int l) -> const TemperatureEdit* {  // run r's what-ifs in layer l, if any
        return runs[r].edits[l].keep_position.defined() ? &runs[r].edits[l] : nullptr;
    };
    if (p < T) {
        const std::vector<int32_t> rows(tokens.ids.begin() + p, tokens.ids.end());
        const at::Tensor index = at::tensor(at::ArrayRef<int32_t>(rows), at::kInt).to(device, at::kLong).unsqueeze(0);
        for (Run& run : runs) run.stream = Embed(*run.model, index, p).repeat({run.sides, 1, 1});
    }
    // Rows a block: a multiple of the pool, so blocks pool on their own.
    const int64_t fit = static_cast<int64_t>(kBlockBytes / (sizeof(float) * static_cast<size_t>(c.n_head) * static_cast<size_t>(T)));
    const int64_t block = std::max<int64_t>(pool, fit / pool * pool);

    AnalysisCache next;
    next.ids = tokens.ids;
    next.pool = pool;
    ThumbnailBuilder thumbnails(old.thumbnails, static_cast<int>(r0 / pool), static_cast<int>(side), pool, c.n_layer, c.n_head);
    auto maps = std::make_shared<RecomputedMaps>();
    double forward_ms = 0, metrics_ms = 0;
    for (int l = 0; l < c.n_layer; ++l) {
        if (options.cancel && options.cancel->load()) return Fail("cancelled");
        const LayerRows* was = p > 0 ? &old.layers[l] : nullptr;
        // Per run: every key and scaled value so far [B, H, rows, D], and the new rows' outputs.
        at::Tensor keys[2], values[2];
        std::vector<at::Tensor> out[2];
        // Per side: the new rows' parts.
        std::vector<at::Tensor> q[2], tau_q[2], tau_v[2], position, token, js, l1, thumbs[3];
        std::vector<RowMetricTensors> metrics[2];
        KeyPooled tail;
        for (size_t r = 0; r < runs.size() && was; ++r) {
            keys[r] = was->k[r].narrow(2, 0, std::min(p, T));
            values[r] = was->vs[r].narrow(2, 0, std::min(p, T));
        }
        // Where the new rows go: buffers whose rows below p are the last analysis's (RowBuffers).
        KeyValues room[2];
        at::Tensor room_q[2];
        for (size_t r = 0; r < runs.size() && p < T; ++r) {
            const ModelConfig& rc = runs[r].model->config;
            const auto options = runs[r].stream.options();
            const int index = static_cast<int>(r);
            room[r].k = buffers.Acquire(RowSlot(l, RowKind::Keys, index), {runs[r].sides, rc.KvHeads(), T, rc.HeadSize()}, 2, options,
                                        was ? was->k[r] : at::Tensor(), p, rc.n_positions);
            room[r].vs = buffers.Acquire(RowSlot(l, RowKind::Values, index), {runs[r].sides, ValueHeads(rc, false, edit_of(r, l)), T, rc.HeadSize()}, 2,
                                         options, was ? was->vs[r] : at::Tensor(), p, rc.n_positions);
            for (int i = 0; i < runs[r].sides; ++i) {
                const int s = runs[r].first_side + i;
                room_q[s] = buffers.Acquire(RowSlot(l, RowKind::Queries, s), {rc.n_head, T, rc.HeadSize()}, 1, options,
                                            was ? was->side[s].q : at::Tensor(), p, rc.n_positions);
            }
        }
        // Side s's keys so far, [H, rows, D] (the layer-local side's are the SSA side's).
        auto side_keys = [&](int s) { return keys[run_of[s]][row_of[s]]; };
        auto window_of = [&](int s) { return runs[run_of[s]].model->layers[l].window; };  // side s's sliding window
        for (int64_t a = r0; a < T; a += block) {
            const int64_t b = std::min(T, a + block), from = std::max(a, p);  // rows [from, b) are new
            auto start = std::chrono::steady_clock::now();
            at::Tensor rows[2];  // attention rows [a, b) over keys [0, b): [H, b - a, b]
            for (size_t r = 0; r < runs.size() && from < b; ++r) {
                const Run& run = runs[r];
                BlockCapture capture;
                out[r].push_back(Block(run.model->config, run.model->layers[l], run.stream.narrow(1, from - p, b - from), /*vanilla=*/false,
                                       &capture, from, &room[r], edit_of(r, l)));
                keys[r] = capture.k;
                values[r] = capture.vs;
                for (int i = 0; i < run.sides; ++i) {
                    const int s = run.first_side + i;
                    room_q[s].narrow(1, from, b - from).copy_(capture.q[i]);
                    q[s].push_back(capture.q[i]);
                    tau_q[s].push_back(capture.tau_q[i]);
                    tau_v[s].push_back(capture.tau_v[i]);
                    rows[s] = capture.attention[i].to(at::kFloat);
                }
                if (r == 0) {
                    position.push_back(capture.tau_q_terms.position[0]);
                    token.push_back(capture.tau_q_terms.token[0]);
                }
            }
            // The layer-local comparison: the SSA side's own q and k with tau = 1.
            if (local && from < b) rows[1] = AttentionRows(q[0].back(), side_keys(0), at::Tensor(), from, window_of(0)).to(at::kFloat);
            sync(rows[0]);
            forward_ms += MillisecondsSince(start);

            start = std::chrono::steady_clock::now();
            if (from < b) {
                MapComparison m = CompareMaps(rows[0], rows[1], from);
                metrics[0].push_back(std::move(m.p));
                metrics[1].push_back(std::move(m.q));
                js.push_back(m.js);
                l1.push_back(m.l1);
            }
            // Rows [a, from) of the block were kept from the last analysis; their thumbnail block
            // rows are pooled again with the new ones: from the last analysis's tail when it
            // holds them (typing at the end), else recomputed from the kept q and k.
            const int64_t kept = std::min(from, b), cells = (b + pool - 1) / pool;
            Pooled pooled;
            KeyPooled block_rows;  // rows [a, b) pooled along their keys, where the block has kept rows
            if (a < kept) {
                const LayerRows& w = *was;
                if (old.pool == pool && w.tail.p.defined() && old_tail_first <= a) {
                    block_rows = NarrowRows(w.tail, a - old_tail_first, kept - a);
                } else {
                    at::Tensor before[2];
                    for (int s = 0; s < 2; ++s) {
                        const bool plain = s == 1 && local;
                        const at::Tensor& q_kept = plain ? w.side[0].q : w.side[s].q;
                        before[s] = AttentionRows(q_kept.narrow(1, a, kept - a), side_keys(s).narrow(1, 0, b),
                                                  plain ? at::Tensor() : w.side[s].tau_q.narrow(1, a, kept - a), a, window_of(s))
                                        .to(at::kFloat);
                    }
                    block_rows = PoolKeys(before[0], before[1], pool);
                }
                block_rows = JoinRows(block_rows, from < b ? PoolKeys(rows[0], rows[1], pool) : KeyPooled{}, cells);
                pooled = PoolRows(block_rows, pool);
            } else {
                pooled = PoolThumbnails(rows[0], rows[1], pool);
            }
            if (b == T) {  // the last block: keep its last thumbnail block's rows for the next edit
                const int64_t first = (T - 1) / pool * pool;
                tail = a < kept ? NarrowRows(block_rows, first - a, T - first)
                                : PoolKeys(rows[0].narrow(1, first - a, T - first), rows[1].narrow(1, first - a, T - first), pool);
            }
            const at::Tensor* parts[3] = {&pooled.p, &pooled.q, &pooled.difference};
            for (int k = 0; k < 3; ++k) thumbs[k].push_back(at::constant_pad_nd(*parts[k], {0, side - parts[k]->size(-1)}));
            sync(thumbs[2].back());
            metrics_ms += MillisecondsSince(start);
        }

        // The layer: rows < p kept, the new ones after them.
        LayerRows now;
        auto join = [&](const at::Tensor& old, std::vector<at::Tensor>& parts) {
            if (parts.empty()) return old.narrow(1, 0, T);
            at::Tensor rows = parts.size() == 1 ? parts[0] : at::cat(parts, 1);
            return Join(old, p, rows);
        };
        auto join_metrics = [&](const RowMetricTensors& old, std::vector<RowMetricTensors>& parts) {
            RowMetricTensors r;
            for (const RowMetricField& field : kRowMetricFields) {
                std::vector<at::Tensor> f;
                for (const RowMetricTensors& m : parts) f.push_back(m.*field.tensor);
                r.*field.tensor = join(was ? old.*field.tensor : at::Tensor(), f);
            }
            return r;
        };
        static const RowMetricTensors kNone;
        for (size_t r = 0; r < runs.size(); ++r) {
            now.k[r] = keys[r].narrow(2, 0, T);
            now.vs[r] = values[r].narrow(2, 0, T);
            if (!out[r].empty()) runs[r].stream = out[r].size() == 1 ? out[r][0] : at::cat(out[r], 1);
        }
        for (int s = 0; s < 2; ++s) {
            SideRows& side_rows = now.side[s];
            const int src = s == 1 && local ? 0 : s;  // the layer-local side shares the SSA side's q and k
            side_rows.q = q[src].empty() ? was->side[src].q.narrow(1, 0, T) : room_q[src].narrow(1, 0, T);
            side_rows.k = now.k[run_of[src]][row_of[src]];
            if (s == 1 && local) {
                side_rows.tau_q = at::ones_like(now.side[0].tau_q);
                side_rows.tau_v = side_rows.tau_q;
            } else {
                side_rows.vs = now.vs[run_of[s]][row_of[s]];
                side_rows.tau_q = join(was ? was->side[s].tau_q : at::Tensor(), tau_q[s]);
                side_rows.tau_v = join(was ? was->side[s].tau_v : at::Tensor(), tau_v[s]);
            }
            side_rows.metrics = join_metrics(was ? was->side[s].metrics : kNone, metrics[s]);
        }
        now.tau_q_position = join(was ? was->tau_q_position : at::Tensor(), position);
        now.tau_q_token = join(was ? was->tau_q_token : at::Tensor(), token);
        now.js = join(was ? was->js : at::Tensor(), js);
        now.l1 = join(was ? was->l1 : at::Tensor(), l1);
        now.tail = tail;
        if (!thumbs[0].empty()) {  // block rows r0 / pool.. of the layer: [H, side - r0 / pool, side] each
            at::Tensor rows[3];
            for (int k = 0; k < 3; ++k) rows[k] = thumbs[k].size() == 1 ? thumbs[k][0] : at::cat(thumbs[k], 1);
            thumbnails.AddLayer(l, rows);
        }
        // tau_q as the forward pass used it: ones multiply exactly, so the vanilla maps rebuild bit for bit too.
        maps->Add(MapSide::Ssa, {now.side[0].q, now.side[0].k, now.side[0].tau_q, runs[0].model->layers[l].window});
        maps->Add(MapSide::Compare, {now.side[1].q, now.side[1].k, local ? at::Tensor() : now.side[1].tau_q,
                                     runs[run_of[1]].model->layers[l].window});
        next.layers.push_back(std::move(now));
        if (options.progress) options.progress->store(static_cast<float>(l + 1) / (c.n_layer + 1));  // the predictions: one step more
    }
    if (p > 0 && old.maps) maps->Reuse(*old.maps, p);

    const auto start = std::chrono::steady_clock::now();
    Analysis a;
    a.n_layer = c.n_layer;
    a.n_head = c.n_head;
    a.n_tokens = static_cast<int>(T);
    a.tokens = tokens;
    a.device = device.str();
    a.comparison = comparison;
    a.compare_label = m_impl->twin ? m_impl->twin->info.dir : "vanilla";
    const std::vector<LayerRows>& layers = next.layers;
    a.metrics = MetricsToHost(layers, 0);
    a.metrics_compare = MetricsToHost(layers, 1);
    a.js = LayersToHost(layers, [](const LayerRows& l) -> const at::Tensor& { return l.js; });
    a.l1 = LayersToHost(layers, [](const LayerRows& l) -> const at::Tensor& { return l.l1; });
    a.tau_q = LayersToHost(layers, [](const LayerRows& l) -> const at::Tensor& { return l.side[0].tau_q; });
    a.tau_v = LayersToHost(layers, [](const LayerRows& l) -> const at::Tensor& { return l.side[0].tau_v; });
    a.tau_q_compare = LayersToHost(layers, [](const LayerRows& l) -> const at::Tensor& { return l.side[1].tau_q; });
    a.tau_v_compare = LayersToHost(layers, [](const LayerRows& l) -> const at::Tensor& { return l.side[1].tau_v; });
    a.tau_q_position = LayersToHost(layers, [](const LayerRows& l) -> const at::Tensor& { return l.tau_q_position; });
    a.tau_q_token = LayersToHost(layers, [](const LayerRows& l) -> const at::Tensor& { return l.tau_q_token; });
    next.thumbnails = thumbnails.Finish();
    a.thumbnails = next.thumbnails;
    const QkSpectrum& spectrum = m_impl->spectrum;
    a.qk_opnorm = ToHost(spectrum.opnorm);
    a.qk_eig_mean = ToHost(spectrum.eig_mean);
    a.qk_eig_var = ToHost(spectrum.eig_var);
    a.effective_qk_norm.resize(a.tau_q.size());
    for (size_t row = 0; row < a.qk_opnorm.size(); ++row)  // [L, H] rows of T
        for (size_t t = row * T; t < (row + 1) * T && t < a.tau_q.size(); ++t) a.effective_qk_norm[t] = a.tau_q[t] * a.qk_opnorm[row];
    a.maps = maps;
    a.reused_rows = static_cast<int>(p);
    a.interventions = m_impl->interventions;
    a.forward_ms = forward_ms;
    a.metrics_ms = metrics_ms + MillisecondsSince(start);
    if (options.before_predictions) options.before_predictions(a);

    // Predictions from the last layer's output, rows from p - 1 on (row p - 1 predicts token p),
    // a run's sides in one product with the head; counted in forward_ms.
    const auto predict_start = std::chrono::steady_clock::now();
    const at::Tensor next_ids = at::tensor(at::ArrayRef<int32_t>(tokens.ids), at::kInt).to(device, at::kLong);
    const int64_t lo = std::max<int64_t>(p - 1, 0);
    at::Tensor next_logits;
    for (size_t r = 0; r < runs.size(); ++r) {
        const Run& run = runs[r];
        const SsaGpt& model = *run.model;
        const int64_t V = model.config.vocab_size;
        for (int i = 0; i < run.sides; ++i) {
            const int s = run.first_side + i;
            const SidePredictions* was = p > 0 ? &old.predictions[s] : nullptr;
            next.predictions[s].hidden = p < T ? Join(was ? was->hidden : at::Tensor(), p, run.stream.narrow(0, i, 1)) : was->hidden.narrow(1, 0, T);
        }
        const int64_t rows = std::max<int64_t>(1, static_cast<int64_t>(kLogitsBytes / (sizeof(float) * static_cast<size_t>(V) * run.sides)));
        std::vector<at::Tensor> loss[2], rank[2], ids[2], probs[2];
        for (int64_t first = lo; first < T; first += rows) {
            const int64_t n = std::min(rows, T - first), m = std::min(n, T - 1 - first);  // m rows have a next token
            std::vector<at::Tensor> hidden;
            for (int i = 0; i < run.sides; ++i) hidden.push_back(next.predictions[run.first_side + i].hidden.narrow(1, first, n));
            const at::Tensor logits = Logits(model, hidden.size() == 1 ? hidden[0] : at::cat(hidden, 0)).to(at::kFloat);  // [sides, n, V]
            for (int i = 0; i < run.sides; ++i) {
                const at::Tensor side_logits = logits[i].contiguous();  // [n, V]
                const RowPredictions rp = PredictRows(side_logits, next_ids.narrow(0, first + 1, m));
                ids[i].push_back(rp.top_ids);
                probs[i].push_back(at::exp(rp.top_logits - rp.log_sum_exp.unsqueeze(1)));
                if (m > 0) {
                    loss[i].push_back(rp.log_sum_exp.narrow(0, 0, m) - rp.actual);
                    rank[i].push_back(rp.rank);
                }
                if (run.first_side + i == 0 && first + n == T) next_logits = side_logits[n - 1];
            }
            if (options.progress)
                options.progress->store((c.n_layer + (r + static_cast<float>(first + n - lo) / (T - lo)) / runs.size()) / (c.n_layer + 1));
        }
        for (int i = 0; i < run.sides; ++i) {
            const int s = run.first_side + i;
            const SidePredictions* was = p > 0 ? &old.predictions[s] : nullptr;
            SidePredictions& now = next.predictions[s];
            auto join0 = [&](const at::Tensor& old_rows, int64_t keep, std::vector<at::Tensor>& parts) {
                at::Tensor fresh = parts.empty() ? at::Tensor() : at::cat(parts, 0);
                if (!was || keep == 0) return fresh.defined() ? fresh : at::empty({0}, old_rows.defined() ? old_rows.options() : at::TensorOptions());
                const at::Tensor kept = old_rows.narrow(0, 0, keep);
                return fresh.defined() ? at::cat({kept, fresh}, 0) : kept.contiguous();
            };
            now.loss = join0(was ? was->loss : at::Tensor(), lo, loss[i]);
            now.rank = join0(was ? was->rank : at::Tensor(), lo, rank[i]);
            now.top_ids = join0(was ? was->top_ids : at::Tensor(), lo, ids[i]);
            now.top_probs = join0(was ? was->top_probs : at::Tensor(), lo, probs[i]);
        }
    }
    if (next_logits.defined()) sync(next_logits);
    auto to_ints = [](const at::Tensor& t) {
        const at::Tensor c = t.to(at::kCPU, at::kInt).contiguous();
        return std::vector<int32_t>(c.data_ptr<int32_t>(), c.data_ptr<int32_t>() + c.numel());
    };
    for (int s = 0; s < 2; ++s) {
        const SidePredictions& pr = next.predictions[s];
        if (!pr.hidden.defined()) continue;
        (s == 0 ? a.loss : a.loss_compare) = ToHost(pr.loss);
        (s == 0 ? a.rank : a.rank_compare) = to_ints(pr.rank);
        (s == 0 ? a.top_ids : a.top_ids_compare) = to_ints(pr.top_ids);
        (s == 0 ? a.top_probs : a.top_probs_compare) = ToHost(pr.top_probs);
    }
    if (next_logits.defined()) a.next_logits = ToHost(next_logits);
    a.forward_ms += MillisecondsSince(predict_start);
    if (options.progress) options.progress->store(1.0f);

    next.maps = maps;
    next.buffers = std::move(buffers);
    next.buffers.Commit(p, T);
    m_impl->cache = std::move(next);
    return a;
}

}  // namespace model
