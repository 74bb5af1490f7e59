// The engine: one loaded model (and optionally its twin or its base) on one device, and Engine::Analyze,
// which runs it and its comparison into an Analysis in stages (analysis_plan_torch.h lists them:
// plan, layer pass, row measures, predictions, assembly). Loading is model_folder.cpp, the forward
// pass forward.cpp, the maps attention_maps.cpp, the what-ifs interventions.cpp and generation
// sampling.cpp.
//
// Index of this file:
// [SECTION] Analysis: lookups and per-head summaries
// [SECTION] What the engine keeps between analyses
// [SECTION] Opening models, the comparison and the what-ifs
// [SECTION] Tokenizing
// [SECTION] Engine::Analyze

#include "model/nn/analysis.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cmath>
#include <functional>
#include <utility>

#include <ATen/record_function.h>
#include <c10/core/InferenceMode.h>

#include "model/io/files.h"
#include "model/nn/analysis_assembly_torch.h"
#include "model/nn/analysis_layer_pass_torch.h"
#include "model/nn/analysis_plan_torch.h"
#include "model/nn/analysis_predictions_torch.h"
#include "model/nn/analysis_row_measures_torch.h"
#include "model/nn/forward.h"
#include "model/nn/from_base_torch.h"
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
        case Comparison::Base: return "base";
    }
    return "?";
}

HeadMap Analysis::Map(MapSide side, int l, int h) const {
    if (!maps || l < 0 || l >= n_layer || h < 0 || h >= n_head) return nullptr;
    RECORD_USER_SCOPE("ssaviz::head_map");
    return maps->Head(side, l, h);
}

MapCellsPtr Analysis::Cells(MapSide side, int l, int h) const {
    if (!maps || l < 0 || l >= n_layer || h < 0 || h >= n_head) return nullptr;
    RECORD_USER_SCOPE("ssaviz::head_map");
    return maps->Cells(side, l, h);
}

const RowArray* MapMetrics::Find(const std::string& name) const {
    for (const auto& r : rows)
        if (r.name == name) return &r.values;
    return nullptr;
}

const RowArray& MapMetrics::Get(const std::string& name) const {
    const RowArray* values = Find(name);
    assert(values && "unknown metric");
    return *values;
}

namespace {

bool HoldsEveryHead(const RowArray& v, const Analysis& a) {
    return v.rows() == static_cast<int64_t>(a.n_layer) * a.n_head && v.tokens() == a.n_tokens;
}

}  // namespace

// Both read the running figures the array's bands hold (RowArray::Figures): the same additions,
// in token order, as a loop over the head's tokens, made once when the band was.
float HeadRowMean(const RowArray& rows, const Analysis& a, int l, int h) {
    if (a.n_tokens < 2 || !HoldsEveryHead(rows, a) || l < 0 || l >= a.n_layer || h < 0 || h >= a.n_head) return NAN;
    return static_cast<float>(rows.Figures(static_cast<int64_t>(l) * a.n_head + h).sum_after_first / (a.n_tokens - 1));
}

HeadStats HeadTokenStats(const RowArray& values, const Analysis& a, int l, int h) {
    if (a.n_tokens == 0 || !HoldsEveryHead(values, a) || l < 0 || l >= a.n_layer || h < 0 || h >= a.n_head) return {};
    const RowArray::Running f = values.Figures(static_cast<int64_t>(l) * a.n_head + h);
    return {static_cast<float>(f.sum / a.n_tokens), f.min, f.max};
}

std::vector<float> HeadRowMeans(const RowArray& rows, const Analysis& a) {
    std::vector<float> out(static_cast<size_t>(a.n_layer) * a.n_head, NAN);
    for (size_t k = 0; k < out.size(); ++k) out[k] = HeadRowMean(rows, a, static_cast<int>(k / a.n_head), static_cast<int>(k % a.n_head));
    return out;
}

std::vector<HeadStats> HeadTokenStatsAll(const RowArray& values, const Analysis& a) {
    std::vector<HeadStats> out(static_cast<size_t>(a.n_layer) * a.n_head);
    for (size_t k = 0; k < out.size(); ++k) out[k] = HeadTokenStats(values, a, static_cast<int>(k / a.n_head), static_cast<int>(k % a.n_head));
    return out;
}

float MeanLoss(const std::vector<float>& loss) {
    if (loss.empty()) return NAN;
    double sum = 0;
    for (float v : loss) sum += v;
    return static_cast<float>(sum / static_cast<double>(loss.size()));
}

Decomposition Decompose(const Analysis& a) {
    Decomposition d;
    if (!a.HasBase() || a.js_total.empty()) return d;
    d.n_layer = a.n_layer;
    d.n_head = a.n_head;
    const struct {
        std::vector<float> Decomposition::*head;
        const RowArray Analysis::*rows;
    } kFields[] = {{&Decomposition::js_total, &Analysis::js_total}, {&Decomposition::js_temperature, &Analysis::js},
                   {&Decomposition::js_drift, &Analysis::js_drift},  {&Decomposition::l1_total, &Analysis::l1_total},
                   {&Decomposition::l1_temperature, &Analysis::l1}, {&Decomposition::l1_drift, &Analysis::l1_drift}};
    for (const auto& f : kFields) d.*f.head = HeadRowMeans(a.*f.rows, a);
    d.loss_mean = MeanLoss(a.loss);
    d.loss_mean_tau1 = MeanLoss(a.loss_compare);
    d.loss_mean_base = MeanLoss(a.loss_base);
    return d;
}

//-----------------------------------------------------------------------------
// [SECTION] What the engine keeps between analyses
//-----------------------------------------------------------------------------

namespace {

// What the engine keeps between analyses, a slice a stage: an analysis whose ids agree with the
// last one's up to position p takes rows < p from here. Tensors on the device, but for the row
// arrays the assembly keeps on the host.
struct AnalysisCache {
    std::vector<int32_t> ids;                    // the plan's: what the next one compares its ids with
    std::vector<LayerRows> layers;               // the layer pass's
    RowBuffers buffers;                          // the layer pass's: what its q, k and vs are views of
    MeasuredRows measures;                       // the row measures', with the thumbnails
    HostRows rows;                               // the assembly's row arrays, on the host
    PerSide<SidePredictions> predictions;        // the predictions'
    std::shared_ptr<const RecomputedMaps> maps;  // the assembly's
};

// Whether model `b` (`named`: "base 'DIR'") can be set beside model `a` as `which`, from their
// configs: the heads compared one for one; a base the model the fine-tuning started from, of its
// architecture (said first: a GPT-2 against a Llama is another family, whatever its widths) and
// shape throughout (a twin is trained on its own, and may be of any width).
Status FitsBeside(Comparison which, const std::string& named, const ModelConfig& a, const ModelConfig& b) {
    const bool base = which == Comparison::Base;
    if (base)
        if (const std::string difference = ArchitectureDifference(a, b, /*shape=*/false); !difference.empty())
            return Fail(named + " is another architecture (" +
                        (a.family != b.family ? "a " + EscapeForMessage(a.family) + " fine-tune against a " + EscapeForMessage(b.family) + " base: " : "") +
                        difference + "): a base is the model the fine-tuning started from");
    if (a.n_layer != b.n_layer || a.n_head != b.n_head)
        return Fail(named + " has " + std::to_string(b.n_layer) + (b.n_layer == 1 ? " layer x " : " layers x ") + std::to_string(b.n_head) +
                    (b.n_head == 1 ? " head" : " heads") + "; the model has " + std::to_string(a.n_layer) + " x " + std::to_string(a.n_head));
    if (base && (a.n_embd != b.n_embd || a.HeadSize() != b.HeadSize() || a.KvHeads() != b.KvHeads() || a.MlpWidth() != b.MlpWidth()))
        return Fail(named + " has width " + std::to_string(b.n_embd) + ", heads of " + std::to_string(b.HeadSize()) + ", " +
                    std::to_string(b.KvHeads()) + " kv heads and an MLP of " + std::to_string(b.MlpWidth()) + "; the model " +
                    std::to_string(a.n_embd) + ", " + std::to_string(a.HeadSize()) + ", " + std::to_string(a.KvHeads()) + " and " +
                    std::to_string(a.MlpWidth()) + ": a base is the model the fine-tuning started from, of its shape");
    if (base)
        if (const std::string difference = ArchitectureDifference(a, b); !difference.empty())
            return Fail(named + " is another architecture (" + difference + "): a base is the model the fine-tuning started from");
    return Ok{};
}

}  // namespace

struct Engine::Impl {
    at::Device device{at::kCPU};
    LoadedModel model;
    QkSpectrum spectrum;  // the model's, computed once
    // With a base open: its spectrum and how far the model's weights moved from it, computed once.
    QkSpectrum base_spectrum;
    WeightDrift drift;
    // The model that runs beside the SSA one: a twin or a base (`kind` says which), or none.
    std::unique_ptr<LoadedModel> other;
    Comparison kind = Comparison::Twin;  // Twin or Base while `other` is open
    Comparison comparison = Comparison::Counterfactual;  // without one
    std::vector<Intervention> interventions;
    AnalysisCache cache;
    TemperatureEditsMemo edits;  // the plan's, kept while the what-ifs are

    const LoadedModel* Beside(Comparison which) const { return other && kind == which ? other.get() : nullptr; }
    const char* Role() const { return ToString(kind); }  // "twin" or "base", as messages name it
    // Loads a twin or a base (`which`) as the model was loaded, if it has the same layers, heads
    // and tokenizer, in place of the one open before.
    Status OpenBeside(Comparison which, const std::string& dir, const ConfigHints& hints);
    void CloseBeside(Comparison which);
    // The model and the run a side's lens reads; null for a side the engine lacks.
    const SsaGpt* LensModel(MapSide side, LensRun* run) const;
    // The lens's kept residual streams and last lens, one a side (the window shows SSA beside its
    // comparison), for RunLens and RunLensAt: a new text runs from its first changed token. Let
    // go whenever a twin or base opens or closes, so a stream's model is always one still open.
    LensCache lens_caches[kMapSides];  // indexed by MapSide
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

Status Engine::Impl::OpenBeside(Comparison which, const std::string& dir, const ConfigHints& hints) {
    BindThreadToDevice(device);
    const std::string named = std::string(ToString(which)) + " '" + EscapeForMessage(dir) + "'";
    const ModelConfig& a = model.info.config;
    // What its config alone says, before a weight is read (a wrong 7 B base took minutes to refuse).
    std::string refused;
    const AdmitConfig fits = [&](const ModelConfig& b) -> Status {
        if (Status s = FitsBeside(which, named, a, b); !s) {
            refused = s.error();
            return s;
        }
        return Ok{};
    };
    auto loaded = LoadModel(dir, device, hints, model.gpt.dtype(), true, fits);
    if (!refused.empty()) return Fail(refused);
    if (!loaded && which == Comparison::Base) {
        // A base beside a fine-tune of ssaviz's own forms shares its config, whose "ssa" block names
        // temperatures the base never had: read without them, unless its file holds some after all
        // (then the first error stands).
        ConfigHints plain = hints;
        plain.without_temperatures = true;
        auto again = LoadModel(dir, device, plain, model.gpt.dtype(), true, fits);
        if (!refused.empty()) return Fail(refused);
        if (again && std::none_of(again->info.unused_tensors.begin(), again->info.unused_tensors.end(), IsTemperatureTensor))
            loaded = std::move(again);
    }
    if (!loaded) return Fail("the " + std::string(ToString(which)) + ": " + loaded.error());  // which of the two models failed
    if (Status s = FitsBeside(which, named, a, loaded->info.config); !s) return s;  // as read (its config was seen before)
    const Tokenizer &mine = *model.tokenizer, &theirs = *loaded->tokenizer;
    if (theirs.Kind() != mine.Kind() || theirs.VocabSize() != mine.VocabSize())
        return Fail(named + " uses a different tokenizer (" + theirs.Kind() + ", " + std::to_string(theirs.VocabSize()) + " tokens)");
    // Same kind and size is not the same tokenizer: it would read other tokens under the same ids.
    if (theirs.ContentHash() != mine.ContentHash())
        return Fail(named + " uses a different tokenizer: the same kind (" + theirs.Kind() + ") and size (" +
                    std::to_string(theirs.VocabSize()) + " tokens), but other pieces or merges");
    if (which == Comparison::Base) {
        base_spectrum = ComputeQkSpectrum(loaded->gpt);
        drift = ComputeWeightDrift(model.gpt, loaded->gpt);
    }
    other = std::make_unique<LoadedModel>(std::move(*loaded));
    kind = which;
    cache = {};
    for (LensCache& k : lens_caches) k = {};
    return Ok{};
}

void Engine::Impl::CloseBeside(Comparison which) {
    if (Beside(which)) other.reset();
    cache = {};
    for (LensCache& k : lens_caches) k = {};
}

Status Engine::OpenTwin(const std::string& twin_dir, const ConfigHints& hints) { return m_impl->OpenBeside(Comparison::Twin, twin_dir, hints); }
void Engine::CloseTwin() { m_impl->CloseBeside(Comparison::Twin); }
Status Engine::OpenBase(const std::string& base_dir, const ConfigHints& hints) { return m_impl->OpenBeside(Comparison::Base, base_dir, hints); }
void Engine::CloseBase() { m_impl->CloseBeside(Comparison::Base); }

Status Engine::SetComparison(Comparison comparison) {
    if (comparison == Comparison::Twin) return Fail("open a twin to compare with one");
    if (comparison == Comparison::Base) return Fail("open a base to compare with one");
    if (comparison != m_impl->comparison) m_impl->cache = {};
    m_impl->comparison = comparison;
    return Ok{};
}

Comparison Engine::comparison() const { return m_impl->other ? m_impl->kind : m_impl->comparison; }

Status Engine::SetInterventions(std::vector<Intervention> interventions) {
    const ModelConfig& c = m_impl->model.info.config;
    if (interventions.size() > kMaxInterventions)
        return Fail(std::to_string(interventions.size()) + " what-ifs; at most " + std::to_string(kMaxInterventions) +
                    " (one of each kind on every head of any model fits)");
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
const ModelInfo* Engine::TwinInfo() const {
    const LoadedModel* twin = m_impl->Beside(Comparison::Twin);
    return twin ? &twin->info : nullptr;
}
const ModelInfo* Engine::BaseInfo() const {
    const LoadedModel* base = m_impl->Beside(Comparison::Base);
    return base ? &base->info : nullptr;
}
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
    tokens->truncated = true;
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
    // A twin or a base with a shorter context bounds the text too, and is the one the message names.
    const LoadedModel* other = m_impl->other.get();
    const int own = m_impl->model.info.config.n_positions, theirs = other ? other->info.config.n_positions : own;
    const size_t context = static_cast<size_t>(std::min(own, theirs));
    const std::string whose = theirs < own ? std::string("the ") + m_impl->Role() + "'s context" : "the model's context";
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
// [SECTION] Engine::Analyze
//-----------------------------------------------------------------------------

bool Engine::ReserveForEdits(const std::function<bool()>& stop) {
    c10::InferenceMode guard;
    BindThreadToDevice(m_impl->device);
    return m_impl->cache.buffers.Reserve(stop);
}

namespace {

// Milliseconds between laps, for the timings an Analysis reports.
class Stopwatch {
public:
    double Lap() {
        const auto now = std::chrono::steady_clock::now();
        const double ms = std::chrono::duration<double, std::milli>(now - m_start).count();
        m_start = now;
        return ms;
    }

private:
    std::chrono::steady_clock::time_point m_start = std::chrono::steady_clock::now();
};

}  // namespace

Result<Analysis> Engine::Analyze(const Tokenization& tokens, const AnalyzeOptions& options) {
    c10::InferenceMode guard;
    Impl& e = *m_impl;
    BindThreadToDevice(e.device);
    const ModelConfig& c = e.model.info.config;
    const SsaGpt& ssa = e.model.gpt;
    const SsaGpt* other = e.other ? &e.other->gpt : nullptr;  // a twin or a base
    if (other && static_cast<int64_t>(tokens.ids.size()) > other->config.n_positions)
        return Fail(std::to_string(tokens.ids.size()) + " tokens exceed the " + e.Role() + "'s context of " +
                    std::to_string(other->config.n_positions));
    for (const SsaGpt* model : {&ssa, other ? other : &ssa})
        if (auto valid = CheckIds(model->config, tokens.ids); !valid) return Fail(valid.error());

    // The plan: the rows the last analysis already holds, the forward passes and their sides.
    const AnalysisCache& old = e.cache;
    const SsaGpt* twin = e.Beside(Comparison::Twin) ? other : nullptr;
    const SsaGpt* base = e.Beside(Comparison::Base) ? other : nullptr;
    const AnalysisPlan plan = [&] {
        RECORD_USER_SCOPE("ssaviz::plan");  // every op an analysis dispatches falls in one of its scopes
        return PlanAnalysis({&ssa, twin, base, comparison(), &e.interventions, e.device, options.layer_products, &e.edits}, tokens.ids, old.ids,
                            old.measures.thumbnails.pool, options.reuse && !old.layers.empty());
    }();
    e.cache.buffers.Begin();

    // The layer pass and the row measures, layer by layer, rows p..T-1 only, in blocks of rows
    // whose [H, rows, T] attention stays under BlockBytes: each block's attention rows are
    // measured, pooled into thumbnails and dropped. So no [H, T, T] tensor ever exists, and the
    // temporaries stay small enough for the heap to reuse (a fresh 64 MB mapping a tensor cost
    // ~0.3 s of page faults on this project's VM: 8 s for 2,048 tokens, against 1.3 s in blocks).
    // Where the rows are fused, never written, the blocks are as large as their cells allow.
    LayerPass pass = [&] {
        RECORD_USER_SCOPE("ssaviz::plan");  // the embeddings
        return LayerPass(plan, tokens.ids, old.layers, e.cache.buffers);
    }();
    RowMeasures measures = [&] {
        RECORD_USER_SCOPE("ssaviz::plan");  // the thumbnails' new bands
        return RowMeasures(plan, old.measures, c.n_layer, c.n_head);
    }();
    double forward_ms = 0, metrics_ms = 0;
    for (int l = 0; l < c.n_layer; ++l) {
        if (options.cancel && options.cancel->load()) return Fail("cancelled");
        {
            RECORD_USER_SCOPE("ssaviz::begin_layer");
            pass.BeginLayer(l);
            measures.BeginLayer(l);
        }
        Stopwatch layer_watch;
        {
            RECORD_USER_SCOPE("ssaviz::layer_pass");
            pass.RunLayerIn();  // the plan's whole_layer_products: the weights before the attention, every new row
        }
        if (options.phase_timings) WaitForDevice(e.device);
        forward_ms += layer_watch.Lap();
        const int64_t block = pass.RowsABlock();
        for (int64_t a = plan.first_block_row; a < plan.T; a += block) {
            const int64_t b = std::min(plan.T, a + block);
            Stopwatch watch;
            BlockRows rows;
            {
                RECORD_USER_SCOPE("ssaviz::layer_pass");  // scopes for a profiler (ssaviz_bench's SSAVIZ_BENCH_TRACE)
                rows = pass.RunBlock(a, b);
            }
            if (options.phase_timings) WaitForDevice(e.device);
            forward_ms += watch.Lap();
            {
                RECORD_USER_SCOPE("ssaviz::row_measures");
                measures.AddBlock(a, b, rows, pass);
            }
            if (options.phase_timings) WaitForDevice(e.device);
            metrics_ms += watch.Lap();
        }
        layer_watch.Lap();  // the blocks counted their own
        {
            RECORD_USER_SCOPE("ssaviz::layer_pass");
            pass.RunLayerOut();  // and after it
        }
        if (options.phase_timings) WaitForDevice(e.device);
        forward_ms += layer_watch.Lap();
        RECORD_USER_SCOPE("ssaviz::end_layer");
        pass.EndLayer();
        measures.EndLayer();
        if (options.progress) options.progress->store(static_cast<float>(l + 1) / (c.n_layer + 1));  // the predictions: one step more
    }

    // The assembly: host arrays and maps, shown before the predictions when the caller asks.
    Stopwatch watch;
    AnalysisCache next;
    next.ids = tokens.ids;
    Analysis a = [&] {
        next.layers = pass.TakeLayers();
        {
            RECORD_USER_SCOPE("ssaviz::assembly_thumbnails");  // a device's: copied to the host, laid into bands
            next.measures = measures.Finish();
        }
        RECORD_USER_SCOPE("ssaviz::assembly");
        next.maps = AssembleMaps(plan, next.layers, old.maps.get());
        next.rows = std::move(e.cache.rows);  // updated in place: rows below p are kept
        Analysis assembled = AssembleLayers(plan, tokens, next.layers, next.measures, e.spectrum, &next.rows);
        for (LayerRows& l : next.layers) l.ForgetNewRows();  // on the host now
        for (LayerMeasures& l : next.measures.layers) l.ForgetNewRows();
        return assembled;
    }();
    a.maps = next.maps;
    a.device = e.device.str();
    a.comparison = comparison();
    a.compare_label = twin ? e.other->info.dir : "vanilla";
    a.base_label = base ? e.other->info.dir : "";
    if (base) {
        const ModelConfig &mine = e.model.info.config, &theirs = e.other->info.config;
        a.base_difference = SettingsDifference(mine, theirs);
        if (mine.vocab_size != theirs.vocab_size)  // its softmax spreads over rows the model's has not
            a.base_difference += (a.base_difference.empty() ? "" : ", ") + std::string("output rows ") + std::to_string(mine.vocab_size) +
                                 " against " + std::to_string(theirs.vocab_size);
    }
    if (base) {
        auto host = [](const at::Tensor& t) {
            const at::Tensor h = t.to(at::kCPU, at::kFloat).contiguous();
            return std::vector<float>(h.data_ptr<float>(), h.data_ptr<float>() + h.numel());
        };
        a.qk_opnorm_base = host(e.base_spectrum.opnorm), a.qk_eig_mean_base = host(e.base_spectrum.eig_mean), a.qk_eig_var_base = host(e.base_spectrum.eig_var);
        if (e.drift.q.defined()) {
            a.weights_q = host(e.drift.q), a.weights_k = host(e.drift.k), a.weights_v = host(e.drift.v), a.weights_o = host(e.drift.o);
            a.weights_mlp = host(e.drift.mlp);
            a.weights_norm_attention = host(e.drift.norm_attention), a.weights_norm_mlp = host(e.drift.norm_mlp);
        }
        a.weights_norm_final = static_cast<float>(e.drift.norm_final);
        a.weights_embeddings = static_cast<float>(e.drift.embeddings);
        a.weights_head = static_cast<float>(e.drift.head);
        a.weights_rounded_to = e.drift.rounded_to;
    }
    a.interventions = e.interventions;
    a.reused_rows = static_cast<int>(plan.p);
    a.forward_ms = forward_ms;
    a.metrics_ms = metrics_ms + watch.Lap();
    if (options.before_predictions) options.before_predictions(a);

    // The predictions, counted in forward_ms.
    watch.Lap();
    {
        RECORD_USER_SCOPE("ssaviz::predictions");
        at::Tensor next_logits;
        next.predictions = Predict(plan, tokens.ids, pass.Streams(), old.predictions, e.cache.buffers, &next_logits, [&](float done) {
            if (options.progress) options.progress->store((c.n_layer + done) / (c.n_layer + 1));
        });
        AssemblePredictions(plan, next.predictions, next_logits, &a);
    }
    a.forward_ms += watch.Lap();
    if (options.progress) options.progress->store(1.0f);

    {
        RECORD_USER_SCOPE("ssaviz::commit");  // the last analysis's tensors let go
        next.buffers = std::move(e.cache.buffers);
        next.buffers.Commit(plan.p, plan.T);
        e.cache = std::move(next);
    }
    return a;
}

//-----------------------------------------------------------------------------
// [SECTION] The logit lens and attribution, by side
//-----------------------------------------------------------------------------

const SsaGpt* Engine::Impl::LensModel(MapSide side, LensRun* run) const {
    *run = LensRun::Ssa;
    if (side == MapSide::Ssa) return &model.gpt;
    if (side == MapSide::Base) return Beside(Comparison::Base) ? &other->gpt : nullptr;
    if (const LoadedModel* twin = Beside(Comparison::Twin)) return &twin->gpt;
    // The comparison of one model: tau = 1 throughout (a base's tau = 1 side included), or each
    // layer alone at tau = 1 on SSA's input, as the layer-local maps are.
    *run = !other && comparison == Comparison::LayerLocal ? LensRun::LayerLocal : LensRun::Vanilla;
    return &model.gpt;
}

Result<float> Engine::MeanLossFromBase(const std::vector<int32_t>& ids, const std::vector<BasePart>& parts, const std::atomic<bool>* cancel,
                                       bool* unchanged) {
    auto loss = LossFromBase(ids, parts, cancel, unchanged);
    if (!loss) return Fail(loss.error());
    return unchanged && *unchanged ? NAN : MeanLoss(*loss);
}

Result<std::vector<float>> Engine::LossFromBase(const std::vector<int32_t>& ids, const std::vector<BasePart>& parts,
                                                const std::atomic<bool>* cancel, bool* unchanged) {
    if (unchanged) *unchanged = false;
    const Impl& m = *m_impl;
    const LoadedModel* base = m.Beside(Comparison::Base);
    if (!base && !parts.empty()) return Fail("no base model is open");
    const std::vector<TemperatureEdit>& edits = m_impl->edits.Get(m.interventions, m.model.gpt.config, m.device, {RowEdit::Interventions});
    if (parts.empty()) return LossOfIds(m.model.gpt, ids, edits, cancel);
    auto mixed = WithBaseWeights(m.model.gpt, base->gpt, parts);
    if (!mixed) return Fail(mixed.error());
    if (unchanged && SameWeights(m.model.gpt, *mixed)) {
        *unchanged = true;
        return std::vector<float>();
    }
    return LossOfIds(*mixed, ids, edits, cancel);
}

Result<Lens> Engine::RunLens(const std::vector<int32_t>& ids, MapSide side, const LensOptions& options) {
    LensOptions o = options;
    const SsaGpt* gpt = m_impl->LensModel(side, &o.run);
    if (!gpt) return Fail("no base model is open");
    return model::RunLens(*gpt, ids, o, &m_impl->lens_caches[static_cast<int>(side)]);
}

Result<std::vector<float>> Engine::Attribute(const std::vector<int32_t>& ids, MapSide side, int64_t position, int32_t token) {
    LensRun run = LensRun::Ssa;
    const SsaGpt* gpt = m_impl->LensModel(side, &run);
    if (!gpt) return Fail("no base model is open");
    return model::Attribute(*gpt, ids, position, token, run);
}

Result<LensAt> Engine::RunLensAt(const std::vector<int32_t>& ids, MapSide side, int64_t position, int32_t token) {
    LensRun run = LensRun::Ssa;
    const SsaGpt* gpt = m_impl->LensModel(side, &run);
    if (!gpt) return Fail("no base model is open");
    auto stream = KeepLensStream(*gpt, ids, run, &m_impl->lens_caches[static_cast<int>(side)]);
    if (!stream) return Fail(stream.error());
    return LensAtPosition(*gpt, **stream, ids, position, token);
}

}  // namespace model
