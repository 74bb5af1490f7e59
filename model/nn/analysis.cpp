#include "model/nn/analysis.h"

#include <algorithm>
#include <dlfcn.h>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <cassert>
#include <limits>
#include <list>
#include <mutex>
#include <tuple>
#include <utility>

#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include "model/io/files.h"
#include "model/nn/metrics.h"
#include "model/io/safetensors.h"
#include "model/nn/ssa_gpt.h"

namespace model {
namespace fs = std::filesystem;

namespace {

struct LoadedModel {
    ModelInfo info;
    SsaGpt gpt;
    std::unique_ptr<Tokenizer> tokenizer;
    QkSpectrum spectrum;  // computed once per model
};

// GPT-2's own vocabulary ships with ssaviz; a checkpoint without tokenizer files whose vocabulary
// has GPT-2's size (nanoGPT pads it to 50,304) gets it.
// The folder's own tokenizer files, whatever state they are in (broken is an error naming the
// file); only a folder with none at all and GPT-2's vocab_size gets GPT-2's bundled tokenizer.
// `source` says which, for `info` and the Model panel.
Result<std::unique_ptr<Tokenizer>> LoadTokenizerFor(const std::string& dir, const ModelConfig& config, std::string* source,
                                                    std::vector<std::string>* notes) {
    *source = TokenizerFilesIn(dir);
    if (!source->empty() || (config.vocab_size != 50257 && config.vocab_size != 50304)) return LoadTokenizer(dir);
    const fs::path exe = ExecutableDir();
    for (const fs::path& candidate : {exe / ".." / "assets" / "tokenizers" / "gpt2", exe / "models" / "default"}) {
        if (!fs::exists(candidate / "vocab.json")) continue;
        auto gpt2 = LoadGpt2Tokenizer((candidate / "vocab.json").string(), (candidate / "merges.txt").string());
        if (gpt2) notes->push_back("no tokenizer files: GPT-2's (vocab_size " + std::to_string(config.vocab_size) + ")");
        *source = "GPT-2's, bundled: the folder has no tokenizer files";
        return gpt2;
    }
    return LoadTokenizer(dir);
}

Result<LoadedModel> LoadModelFolder(const std::string& dir, at::Device device, const ConfigHints& hints, at::ScalarType compute) {
    auto gpt = LoadSsaGptFolder(dir, device, hints, compute);
    if (!gpt) return Fail(gpt.error());
    const ModelConfig config = gpt->config;
    auto files = FindModelFiles(dir);
    if (!files) return Fail(files.error());
    std::string tokenizer_source;
    auto tokenizer = LoadTokenizerFor(files->dir, config, &tokenizer_source, &gpt->notes);
    if (!tokenizer) return Fail(tokenizer.error());
    if ((*tokenizer)->VocabSize() > static_cast<size_t>(config.vocab_size))
        return Fail(dir + ": tokenizer has " + std::to_string((*tokenizer)->VocabSize()) + " tokens but the model's vocab_size is " +
                    std::to_string(config.vocab_size));

    LoadedModel m;
    m.gpt = std::move(*gpt);
    m.tokenizer = std::move(*tokenizer);
    m.spectrum = ComputeQkSpectrum(m.gpt);
    m.info.dir = dir;
    m.info.config = config;
    m.info.parameters = m.gpt.ParameterCount();
    m.info.layout = m.gpt.layout;
    m.info.device = device.str();
    m.info.compute_dtype = compute == at::kFloat ? "f32" : compute == at::kBFloat16 ? "bf16" : "f16";
    m.info.tokenizer_kind = m.tokenizer->Kind();
    m.info.tokenizer_vocab = m.tokenizer->VocabSize();
    m.info.tokenizer_source = tokenizer_source;
    m.info.unused_tensors = m.gpt.unused_tensors;
    m.info.weights_path = m.gpt.weights_path;
    m.info.weights_format = m.gpt.weights_format;
    m.info.stored_dtype = m.gpt.stored_dtype;
    m.info.notes = m.gpt.notes;
    return m;
}

std::vector<float> ToHost(const at::Tensor& t) {
    at::Tensor c = t.to(at::kCPU, at::kFloat).contiguous();
    return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

MapMetrics ToHost(const RowMetricTensors& r) {
    MapMetrics m;
    m.rows = {{"entropy", ToHost(r.entropy)},       {"normalized_entropy", ToHost(r.normalized_entropy)},
              {"spikiness", ToHost(r.spikiness)},   {"max_weight", ToHost(r.max_weight)},
              {"top5_mass", ToHost(r.top5_mass)},   {"effective_support", ToHost(r.effective_support)},
              {"sink_mass", ToHost(r.sink_mass)}};
    return m;
}

double MillisecondsSince(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// The most recently used head maps, up to kMapCacheBytes (at least one map is always kept).
class MapCache {
public:
    using Key = std::tuple<int, int, int>;  // side, layer, head
    template <class Make>
    HeadMap Get(const Key& key, const Make& make) {
        std::lock_guard<std::mutex> lock(m_mutex);
        for (auto it = m_entries.begin(); it != m_entries.end(); ++it)
            if (it->first == key) {
                m_entries.splice(m_entries.begin(), m_entries, it);
                return it->second;
            }
        HeadMap map = make();  // under the lock: two threads asking for one head compute it once
        m_bytes += map->size() * sizeof(float);
        m_entries.emplace_front(key, map);
        while (m_bytes > kMapCacheBytes && m_entries.size() > 1) {
            m_bytes -= m_entries.back().second->size() * sizeof(float);
            m_entries.pop_back();
        }
        return map;
    }

private:
    std::mutex m_mutex;
    std::list<std::pair<Key, HeadMap>> m_entries;  // most recent first
    size_t m_bytes = 0;
};

class HostMaps final : public AttentionMaps {
public:
    HostMaps(int heads, int tokens, std::vector<float> ssa, std::vector<float> compare)
        : m_heads(heads), m_tokens(tokens), m_ssa(std::move(ssa)), m_compare(std::move(compare)) {}
    HeadMap Head(MapSide side, int l, int h) const override {
        const std::vector<float>& all = side == MapSide::Ssa ? m_ssa : m_compare;
        const size_t cells = static_cast<size_t>(m_tokens) * m_tokens, at = (static_cast<size_t>(l) * m_heads + h) * cells;
        if (all.size() < at + cells) return nullptr;
        return m_cache.Get({static_cast<int>(side), l, h},
                           [&] { return std::make_shared<const std::vector<float>>(all.begin() + at, all.begin() + at + cells); });
    }

private:
    int m_heads, m_tokens;
    std::vector<float> m_ssa, m_compare;
    mutable MapCache m_cache;
};

// Rebuilds a head's map from the layer's q, k and tau_q where the model ran (CPU or GPU) with the
// forward pass's own AttentionWeights, and copies only that [T, T] map to the host.
class RecomputedMaps final : public AttentionMaps {
public:
    struct Layer {
        at::Tensor q, k;  // [H, T, D] in the compute dtype
        at::Tensor tau_q; // [H, T]
    };
    void Add(MapSide side, Layer layer) { m_layers[static_cast<int>(side)].push_back(std::move(layer)); }
    HeadMap Head(MapSide side, int l, int h) const override {
        const std::vector<Layer>& layers = m_layers[static_cast<int>(side)];
        if (l < 0 || l >= static_cast<int>(layers.size()) || h < 0 || h >= layers[l].q.size(0)) return nullptr;
        return m_cache.Get({static_cast<int>(side), l, h}, [&] {
            c10::InferenceMode guard;
            const Layer& x = layers[l];
            BindThreadToDevice(x.q.device());  // the UI thread or an export thread
            const at::Tensor map = AttentionWeights(x.q[h], x.k[h], x.tau_q[h]).to(at::kCPU, at::kFloat).contiguous();
            return std::make_shared<const std::vector<float>>(map.data_ptr<float>(), map.data_ptr<float>() + map.numel());
        });
    }

private:
    std::vector<Layer> m_layers[2];
    mutable MapCache m_cache;
};

struct Pooled {
    at::Tensor p, q, difference;  // [..., side, side]
};

// Maps p and q [..., T, T] pooled into pool x pool blocks (the last ones partial): the block
// maxima of p and q, and the value of p - q of largest magnitude (the positive one on a tie). On
// the CPU one pass over both maps; elsewhere torch ops.
Pooled PoolThumbnails(const at::Tensor& p, const at::Tensor& q, int pool) {
    if (pool == 1) return {p, q, p - q};
    if (!p.is_cpu()) {
        auto block_max = [&](const at::Tensor& m) { return at::max_pool2d(m, {pool, pool}, {pool, pool}, {0, 0}, {1, 1}, true); };
        const at::Tensor d = p - q, up = block_max(d), down = block_max(-d);
        return {block_max(p), block_max(q), at::where(up >= down, up, -down)};
    }
    const at::Tensor pc = p.contiguous(), qc = q.contiguous();
    const int64_t T = p.size(-1), side = (T + pool - 1) / pool, maps = p.numel() / (T * T);
    std::vector<int64_t> shape = p.sizes().vec();
    shape[shape.size() - 2] = shape[shape.size() - 1] = side;
    Pooled out{at::full(shape, -std::numeric_limits<float>::infinity()), at::full(shape, -std::numeric_limits<float>::infinity()),
               at::zeros(shape)};
    const float *pp = pc.data_ptr<float>(), *qq = qc.data_ptr<float>();
    float *op = out.p.data_ptr<float>(), *oq = out.q.data_ptr<float>(), *od = out.difference.data_ptr<float>();
    for (int64_t m = 0; m < maps; ++m)
        for (int64_t i = 0; i < T; ++i) {
            const size_t in = static_cast<size_t>((m * T + i) * T), at = static_cast<size_t>((m * side + i / pool) * side);
            for (int64_t j = 0; j < T; ++j) {
                const float x = pp[in + j], y = qq[in + j], d = x - y;
                const size_t k = at + static_cast<size_t>(j / pool);
                op[k] = std::max(op[k], x);
                oq[k] = std::max(oq[k], y);
                const float best = od[k];
                if (std::abs(d) > std::abs(best) || (std::abs(d) == std::abs(best) && d > best)) od[k] = d;
            }
        }
    return out;
}

int ThumbnailPool(int tokens) { return std::max(1, (tokens + kThumbnailCells - 1) / kThumbnailCells); }

RowMetricTensors StackLayers(const std::vector<RowMetricTensors>& layers) {
    auto stack = [&](at::Tensor RowMetricTensors::*field) {
        std::vector<at::Tensor> parts;
        for (const RowMetricTensors& r : layers) parts.push_back(r.*field);
        return at::stack(parts);
    };
    RowMetricTensors out;
    for (auto field : {&RowMetricTensors::entropy, &RowMetricTensors::normalized_entropy, &RowMetricTensors::spikiness,
                       &RowMetricTensors::max_weight, &RowMetricTensors::top5_mass, &RowMetricTensors::effective_support,
                       &RowMetricTensors::sink_mass})
        out.*field = stack(field);
    return out;
}

std::vector<float> StackToHost(const std::vector<at::Tensor>& layers) { return ToHost(at::stack(layers)); }

}  // namespace

std::shared_ptr<const AttentionMaps> HostAttentionMaps(int layers, int heads, int tokens, std::vector<float> ssa,
                                                       std::vector<float> compare) {
    assert(ssa.size() == static_cast<size_t>(layers) * heads * tokens * tokens && compare.size() == ssa.size());
    (void)layers;  // the shape check only
    return std::make_shared<HostMaps>(heads, tokens, std::move(ssa), std::move(compare));
}

Thumbnails MakeThumbnails(const std::vector<float>& ssa, const std::vector<float>& compare, int layers, int heads, int tokens) {
    c10::InferenceMode guard;
    Thumbnails t;
    t.pool = ThumbnailPool(tokens);
    t.side = (tokens + t.pool - 1) / t.pool;
    const int64_t maps = static_cast<int64_t>(layers) * heads;
    const size_t cells = static_cast<size_t>(maps) * tokens * tokens;
    if (tokens == 0 || ssa.size() != cells || compare.size() != cells) return {};
    // from_blob does not copy; the pooled results are new tensors.
    const at::Tensor p = at::from_blob(const_cast<float*>(ssa.data()), {maps, tokens, tokens});
    const at::Tensor q = at::from_blob(const_cast<float*>(compare.data()), {maps, tokens, tokens});
    const Pooled pooled = PoolThumbnails(p, q, t.pool);
    t.ssa = ToHost(pooled.p);
    t.compare = ToHost(pooled.q);
    t.difference = ToHost(pooled.difference);
    return t;
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

struct Engine::Impl {
    at::Device device{at::kCPU};
    LoadedModel model;
    std::unique_ptr<LoadedModel> twin;
};

Engine::Engine() : m_impl(std::make_unique<Impl>()) {}
Engine::~Engine() = default;

Result<std::unique_ptr<Engine>> Engine::Open(const std::string& model_dir, const std::string& device_name, const ConfigHints& hints,
                                             const std::string& dtype_name) {
    auto device = ResolveDevice(device_name);
    if (!device) return Fail(device.error());
    auto compute = ResolveComputeDtype(dtype_name, *device);
    if (!compute) return Fail(compute.error());
    BindThreadToDevice(*device);
    auto model = LoadModelFolder(model_dir, *device, hints, *compute);
    if (!model) return Fail(model.error());
    std::unique_ptr<Engine> engine(new Engine());
    engine->m_impl->device = *device;
    engine->m_impl->model = std::move(*model);
    return engine;
}

Status Engine::OpenTwin(const std::string& twin_dir, const ConfigHints& hints) {
    BindThreadToDevice(m_impl->device);
    auto twin = LoadModelFolder(twin_dir, m_impl->device, hints, m_impl->model.gpt.dtype());
    if (!twin) return Fail(twin.error());
    const ModelConfig &a = m_impl->model.info.config, &b = twin->info.config;
    if (a.n_layer != b.n_layer || a.n_head != b.n_head)
        return Fail("twin '" + twin_dir + "' has " + std::to_string(b.n_layer) + " layers x " + std::to_string(b.n_head) +
                    " heads; the model has " + std::to_string(a.n_layer) + " x " + std::to_string(a.n_head));
    if (twin->tokenizer->Kind() != m_impl->model.tokenizer->Kind() ||
        twin->tokenizer->VocabSize() != m_impl->model.tokenizer->VocabSize())
        return Fail("twin '" + twin_dir + "' uses a different tokenizer (" + twin->tokenizer->Kind() + ", " +
                    std::to_string(twin->tokenizer->VocabSize()) + " tokens)");
    m_impl->twin = std::make_unique<LoadedModel>(std::move(*twin));
    return Ok{};
}

void Engine::CloseTwin() { m_impl->twin.reset(); }
const ModelInfo& Engine::Info() const { return m_impl->model.info; }
const ModelInfo* Engine::TwinInfo() const { return m_impl->twin ? &m_impl->twin->info : nullptr; }
const Tokenizer& Engine::tokenizer() const { return *m_impl->model.tokenizer; }

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
    const size_t context = static_cast<size_t>(m_impl->model.info.config.n_positions);
    // One token more than the context tells "too long" from "fits" without encoding a long text whole.
    auto tokens = EncodePrefix(*m_impl->model.tokenizer, text, context + 1);
    if (!tokens) return tokens;
    if (tokens->ids.size() > context) {
        if (!truncate) {
            const bool whole = tokens->offsets.back().second == text.size();
            return Fail("text is " + std::string(whole ? "" : "more than ") + std::to_string(whole ? tokens->ids.size() : context) +
                        " tokens, longer than the model's context of " + std::to_string(context) + " (truncating keeps the first " +
                        std::to_string(context) + ")");
        }
        KeepFirst(&*tokens, context);
    }
    return tokens;
}

Result<Analysis> Engine::Analyze(const Tokenization& tokens, const AnalyzeOptions& options) {
    c10::InferenceMode guard;
    BindThreadToDevice(m_impl->device);
    const ModelConfig& c = m_impl->model.info.config;
    const int T = static_cast<int>(tokens.ids.size());
    Analysis a;
    a.n_layer = c.n_layer;
    a.n_head = c.n_head;
    a.n_tokens = T;
    a.tokens = tokens;
    a.device = m_impl->device.str();
    const SsaGpt& ssa = m_impl->model.gpt;
    const SsaGpt& other = m_impl->twin ? m_impl->twin->gpt : ssa;
    for (const SsaGpt* model : {&ssa, &other})
        if (auto valid = CheckIds(model->config, tokens.ids); !valid) return Fail(valid.error());

    // The model and its comparison (the twin, or the same weights with tau = 1) run layer by
    // layer side by side; each layer's maps are measured, pooled into thumbnails and dropped, so
    // only one layer's [H, T, T] maps exist at a time, and on the model's device.
    const bool vanilla = !m_impl->twin;
    a.compare_label = vanilla ? "vanilla" : m_impl->twin->info.dir;
    const bool cuda = m_impl->device.is_cuda();
    auto sync = [&](const at::Tensor& t) {
        if (cuda) t.sum().item<float>();  // wait for the kernels, so the timings are honest
    };

    const at::Tensor index = at::tensor(at::ArrayRef<int32_t>(tokens.ids), at::kInt).to(m_impl->device, at::kLong).unsqueeze(0);
    at::Tensor x = Embed(ssa, index), y = Embed(other, index);  // [1, T, E]
    auto maps = std::make_shared<RecomputedMaps>();
    std::vector<RowMetricTensors> metrics_p, metrics_q;
    std::vector<at::Tensor> js, l1, tau_q, tau_v, tau_q_cmp, tau_v_cmp, thumb_p, thumb_q, thumb_d;
    const int pool = ThumbnailPool(T);
    double forward_ms = 0, metrics_ms = 0;
    for (int l = 0; l < c.n_layer; ++l) {
        if (options.cancel && options.cancel->load()) return Fail("cancelled");
        auto start = std::chrono::steady_clock::now();
        BlockCapture p, q;
        x = Block(ssa.config, ssa.layers[l], x, false, &p);
        y = Block(other.config, other.layers[l], y, vanilla, &q);
        sync(y);
        forward_ms += MillisecondsSince(start);

        start = std::chrono::steady_clock::now();
        const at::Tensor pa = p.attention[0].to(at::kFloat), qa = q.attention[0].to(at::kFloat);  // [H, T, T]
        MapComparison m = CompareMaps(pa, qa);
        metrics_p.push_back(std::move(m.p));
        metrics_q.push_back(std::move(m.q));
        js.push_back(m.js);
        l1.push_back(m.l1);
        Pooled pooled = PoolThumbnails(pa, qa, pool);
        thumb_p.push_back(std::move(pooled.p));
        thumb_q.push_back(std::move(pooled.q));
        thumb_d.push_back(std::move(pooled.difference));
        tau_q.push_back(p.tau_q[0].to(at::kFloat));
        tau_v.push_back(p.tau_v[0].to(at::kFloat));
        tau_q_cmp.push_back(q.tau_q[0].to(at::kFloat));
        tau_v_cmp.push_back(q.tau_v[0].to(at::kFloat));
        // tau_q as the forward pass used it: ones multiply exactly, so the vanilla maps rebuild bit for bit too.
        maps->Add(MapSide::Ssa, {p.q[0].contiguous(), p.k[0].contiguous(), p.tau_q[0]});
        maps->Add(MapSide::Compare, {q.q[0].contiguous(), q.k[0].contiguous(), q.tau_q[0]});
        sync(thumb_d.back());
        metrics_ms += MillisecondsSince(start);
        if (options.progress) options.progress->store(static_cast<float>(l + 1) / c.n_layer);
    }

    const auto start = std::chrono::steady_clock::now();
    a.metrics = ToHost(StackLayers(metrics_p));
    a.metrics_compare = ToHost(StackLayers(metrics_q));
    a.js = StackToHost(js);
    a.l1 = StackToHost(l1);
    a.tau_q = StackToHost(tau_q);
    a.tau_v = StackToHost(tau_v);
    a.tau_q_compare = StackToHost(tau_q_cmp);
    a.tau_v_compare = StackToHost(tau_v_cmp);
    a.thumbnails.pool = pool;
    a.thumbnails.side = (T + pool - 1) / pool;
    a.thumbnails.ssa = StackToHost(thumb_p);
    a.thumbnails.compare = StackToHost(thumb_q);
    a.thumbnails.difference = StackToHost(thumb_d);
    const QkSpectrum& spectrum = m_impl->model.spectrum;
    a.qk_opnorm = ToHost(spectrum.opnorm);
    a.qk_eig_mean = ToHost(spectrum.eig_mean);
    a.qk_eig_var = ToHost(spectrum.eig_var);
    a.effective_qk_norm = ToHost(at::stack(tau_q) * spectrum.opnorm.to(m_impl->device).unsqueeze(-1));
    a.maps = std::move(maps);
    a.forward_ms = forward_ms;
    a.metrics_ms = metrics_ms + MillisecondsSince(start);
    return a;
}

void SetComputeThreads(int threads) {
    threads = std::max(1, threads);
    at::set_num_threads(threads);
    // LibTorch's setting does not reach OpenBLAS's own pool (Debian's libblas.so.3 alternative);
    // call it by name when that is the BLAS in use.
    using SetThreads = void (*)(int);
    if (auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) set(threads);
}

int ComputeThreadsFromEnvironment(int fallback) {
    const char* value = std::getenv("SSAVIZ_THREADS");
    if (!value || !*value) return fallback;
    char* end = nullptr;
    const long threads = std::strtol(value, &end, 10);
    return *end == '\0' && threads >= 1 && threads <= 1024 ? static_cast<int>(threads) : fallback;
}

Status WriteRandomModel(const ModelConfig& config, uint64_t seed, const std::string& tokenizer_dir, const std::string& out_dir) {
    std::error_code ec;
    fs::create_directories(out_dir, ec);
    if (ec) return Fail(out_dir + ": cannot create (" + ec.message() + ")");
    for (const char* name : {"vocab.json", "merges.txt"}) {
        fs::copy_file(fs::path(tokenizer_dir) / name, fs::path(out_dir) / name, fs::copy_options::overwrite_existing, ec);
        if (ec) return Fail(tokenizer_dir + "/" + name + ": cannot copy (" + ec.message() + ")");
    }
    auto tokenizer = LoadTokenizer(out_dir);
    if (!tokenizer) return Fail(tokenizer.error());
    ModelConfig c = config;
    c.vocab_size = static_cast<int>((*tokenizer)->VocabSize());
    return SaveModelFolder(RandomSsaGpt(c, seed), out_dir);
}

}  // namespace model
