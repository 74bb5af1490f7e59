#include "model/analysis.h"

#include <algorithm>
#include <dlfcn.h>
#include <chrono>
#include <cmath>
#include <filesystem>

#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include "model/files.h"
#include "model/metrics.h"
#include "model/safetensors.h"
#include "model/ssa_gpt.h"

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
Result<std::unique_ptr<Tokenizer>> LoadTokenizerFor(const std::string& dir, const ModelConfig& config, std::vector<std::string>* notes) {
    auto tokenizer = LoadTokenizer(dir);
    if (tokenizer || (config.vocab_size != 50257 && config.vocab_size != 50304)) return tokenizer;
    const fs::path exe = ExecutableDir();
    for (const fs::path& candidate : {exe / ".." / "assets" / "tokenizers" / "gpt2", exe / "models" / "default"}) {
        if (!fs::exists(candidate / "vocab.json")) continue;
        auto gpt2 = LoadGpt2Tokenizer((candidate / "vocab.json").string(), (candidate / "merges.txt").string());
        if (gpt2) notes->push_back("no tokenizer files: GPT-2's (vocab_size " + std::to_string(config.vocab_size) + ")");
        return gpt2;
    }
    return tokenizer;
}

Result<LoadedModel> LoadModelFolder(const std::string& dir, at::Device device, const ConfigHints& hints, at::ScalarType compute) {
    auto gpt = LoadSsaGptFolder(dir, device, hints, compute);
    if (!gpt) return Fail(gpt.error());
    const ModelConfig config = gpt->config;
    auto files = FindModelFiles(dir);
    if (!files) return Fail(files.error());
    auto tokenizer = LoadTokenizerFor(files->dir, config, &gpt->notes);
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

}  // namespace

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
    auto model = LoadModelFolder(model_dir, *device, hints, *compute);
    if (!model) return Fail(model.error());
    std::unique_ptr<Engine> engine(new Engine());
    engine->m_impl->device = *device;
    engine->m_impl->model = std::move(*model);
    return engine;
}

Status Engine::OpenTwin(const std::string& twin_dir, const ConfigHints& hints) {
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

Result<Tokenization> Engine::Tokenize(std::string_view text, bool truncate) const {
    if (text.empty()) return Fail("text is empty");
    auto tokens = m_impl->model.tokenizer->Encode(text);
    if (!tokens) return tokens;
    const size_t context = static_cast<size_t>(m_impl->model.info.config.n_positions);
    if (tokens->ids.size() > context) {
        if (!truncate)
            return Fail("text is " + std::to_string(tokens->ids.size()) + " tokens, longer than the model's context of " +
                        std::to_string(context) + " (truncating keeps the first " + std::to_string(context) + ")");
        tokens->ids.resize(context);
        tokens->pieces.resize(context);
        tokens->offsets.resize(context);
    }
    return tokens;
}

Result<Analysis> Engine::Analyze(const Tokenization& tokens, const AnalyzeOptions& options) {
    c10::InferenceMode guard;
    const ModelConfig& c = m_impl->model.info.config;
    Analysis a;
    a.n_layer = c.n_layer;
    a.n_head = c.n_head;
    a.n_tokens = static_cast<int>(tokens.ids.size());
    a.tokens = tokens;
    a.device = m_impl->device.str();

    auto start = std::chrono::steady_clock::now();
    ForwardOptions forward;
    forward.want_logits = false;
    forward.cancel = options.cancel;
    auto ssa = Forward(m_impl->model.gpt, tokens.ids, forward);
    if (!ssa) return Fail(ssa.error());

    Result<ForwardOutput> other = Fail("");
    if (m_impl->twin) {
        other = Forward(m_impl->twin->gpt, tokens.ids, forward);
        a.compare_label = m_impl->twin->info.dir;
    } else {
        forward.vanilla = true;
        other = Forward(m_impl->model.gpt, tokens.ids, forward);
        a.compare_label = "vanilla";
    }
    if (!other) return Fail(other.error());
    if (m_impl->device.is_cuda()) ssa->attention.sum().item<float>();  // wait for the kernels, so the timing is honest
    a.forward_ms = MillisecondsSince(start);

    start = std::chrono::steady_clock::now();
    const MapComparison maps = CompareMaps(ssa->attention, other->attention);
    a.metrics = ToHost(maps.p);
    a.metrics_compare = ToHost(maps.q);
    a.js = ToHost(maps.js);
    a.l1 = ToHost(maps.l1);
    const QkSpectrum& spectrum = m_impl->model.spectrum;
    a.qk_opnorm = ToHost(spectrum.opnorm);
    a.qk_eig_mean = ToHost(spectrum.eig_mean);
    a.qk_eig_var = ToHost(spectrum.eig_var);
    a.effective_qk_norm = ToHost(ssa->tau_q * spectrum.opnorm.to(ssa->tau_q.device()).unsqueeze(-1));
    a.metrics_ms = MillisecondsSince(start);

    a.attention = ToHost(ssa->attention);
    a.attention_compare = ToHost(other->attention);
    a.tau_q = ToHost(ssa->tau_q);
    a.tau_v = ToHost(ssa->tau_v);
    a.tau_q_compare = ToHost(other->tau_q);
    a.tau_v_compare = ToHost(other->tau_v);
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
