#include "model/nn/model_weights.h"

#include <cassert>
#include <cmath>
#include <cstring>
#include <set>

#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/InferenceMode.h>
#include <nlohmann/json.hpp>

#include "model/io/files.h"
#include "model/io/safetensors.h"
#include "model/io/torch_save.h"
#include "model/io/weights.h"

namespace model {
namespace {

// Reads tensors out of a weights file by model-relative name ("h.0.ln_1.weight"), whatever the
// prefix, checking shapes, converting to the compute dtype on the device.
class TensorReader {
public:
    // `keep_bf16`: weight matrices stored BF16 stay bfloat16 (ReadMatrix), when the compute dtype
    // is float32 on the CPU, where MatmulRows and at::matmul widen them exactly.
    TensorReader(const WeightFile& file, at::Device device, at::ScalarType compute, bool keep_bf16)
        : m_file(file), m_device(device), m_compute(compute), m_keep_bf16(keep_bf16 && compute == at::kFloat && device.is_cpu()) {}

    const StoredTensor* Find(const std::string& name) const { return m_file.Find(name); }
    std::string OuterName(const std::string& name) const { return m_file.outer_prefix + name; }  // a name outside the root

    // A weight matrix as the forward pass multiplies by it, [in, out] and contiguous: the file's
    // [out, in] (torch.nn.Linear's layout, `linear_layout`) transposed, else its [in, out] (HF
    // Conv1D's). Converted and transposed in one copy, and the file's pages dropped after.
    Result<at::Tensor> ReadMatrix(const std::string& name, int64_t in, int64_t out, bool linear_layout, const std::string& why) {
        return Read(name, {linear_layout ? std::vector<int64_t>{out, in} : std::vector<int64_t>{in, out}}, why, true, linear_layout);
    }
    bool KeptBf16() const { return m_kept_bf16; }

    // Any of `shapes` is accepted; an empty list accepts any shape. `matrix`: a weight matrix
    // (see keep_bf16), `transpose`d as it is read.
    Result<at::Tensor> Read(const std::string& name, const std::vector<std::vector<int64_t>>& shapes, const std::string& why,
                            bool matrix = false, bool transpose = false) {
        const StoredTensor* info = Find(name);
        if (!info) return Fail(m_file.Missing(name) + " (" + why + ")");
        m_used.insert(info->name);
        bool shape_ok = shapes.empty();
        for (const auto& s : shapes) shape_ok = shape_ok || s == info->shape;
        if (!shape_ok) {
            std::string expected;
            for (const auto& s : shapes) expected += (expected.empty() ? "" : " or ") + ShapeString(s);
            return Fail("tensor '" + info->name + "' has shape " + ShapeString(info->shape) + ", expected " + expected + " (" + why + ")");
        }
        at::ScalarType type;
        switch (info->dtype) {
            case Dtype::F32: type = at::kFloat; break;
            case Dtype::F16: type = at::kHalf; break;
            case Dtype::BF16: type = at::kBFloat16; break;
            case Dtype::F64: type = at::kDouble; break;
            default:
                return Fail("tensor '" + info->name + "' has dtype " + ToString(info->dtype) + "; weights must be F32, F16, BF16 or F64");
        }
        const at::ScalarType want = matrix && m_keep_bf16 && type == at::kBFloat16 ? at::kBFloat16 : m_compute;
        m_kept_bf16 = m_kept_bf16 || (want == at::kBFloat16 && want != m_compute);
        auto converted = [&](const at::Tensor& stored) {  // in `want` on the device, transposed if asked, contiguous
            const at::Tensor view = transpose ? stored.t() : stored;
            at::Tensor out = at::empty(view.sizes(), at::TensorOptions(m_device).dtype(want));
            return out.copy_(view);
        };
        const bool aligned = reinterpret_cast<uintptr_t>(info->data) % DtypeSize(info->dtype) == 0;
        at::Tensor t;
        if (aligned) {
            // Read the mapping in place (strided views too); the tensor keeps its shard's mapping alive.
            auto keep = m_file.FileOf(*info);
            at::Tensor stored = at::from_blob(const_cast<uint8_t*>(info->data), info->shape, info->strides, [keep](void*) {},
                                              at::TensorOptions(type));
            const bool zero_copy = type == want && m_device.is_cpu() && info->Contiguous() && !transpose;
            t = zero_copy ? stored : converted(stored);
            if (!zero_copy) m_file.DropPages(*info);  // converted: the file's copy need not stay resident
        } else {
            // safetensors offsets need not be aligned to the dtype: copy the bytes out first.
            if (!info->Contiguous()) return Fail("tensor '" + info->name + "' is a strided view at a misaligned address");
            at::Tensor raw = at::empty(info->shape, at::TensorOptions(type));
            std::memcpy(raw.data_ptr(), info->data, raw.numel() * DtypeSize(info->dtype));
            t = converted(raw);
            m_file.DropPages(*info);
        }
        if (t.numel() > 0 && !at::isfinite(t).all().item<bool>())
            return Fail("tensor '" + info->name + "' contains NaN or infinite values" +
                        (type != want ? std::string(" once converted to ") + c10::toString(want) : std::string()));
        return t;
    }

    std::vector<std::string> Unused() const {
        std::vector<std::string> names;
        for (const auto& t : m_file.tensors) {
            // Buffers, not parameters: causal masks, RoPE frequencies (arch.h).
            bool buffer = false;
            for (const char* suffix : BufferSuffixes()) {
                const size_t n = std::strlen(suffix);
                buffer = buffer || (t.name.size() >= n && t.name.compare(t.name.size() - n, n, suffix) == 0);
            }
            if (!m_used.count(t.name) && !buffer) names.push_back(t.name);
        }
        return names;
    }

private:
    const WeightFile& m_file;
    at::Device m_device;
    at::ScalarType m_compute;
    bool m_keep_bf16, m_kept_bf16 = false;
    std::set<std::string> m_used;
};

// A [] / [1] / [H] parameter becomes [1] or [H] so it broadcasts against [H, T] after reshape.
Result<at::Tensor> ReadPerHead(TensorReader& reader, const std::string& name, int H, const std::string& why) {
    auto t = reader.Read(name, {{}, {1}, {H}}, why);
    if (!t) return t;
    return t->reshape({-1});
}

//-------------------------------------------------------------------------------------------------
// [SECTION] Parts: how a stored tensor holds a slice of its role (arch.h Part)
//-------------------------------------------------------------------------------------------------

// A matrix role's [in, out] as LayerWeights holds it.
struct MatrixDims {
    int64_t in, out;
};
MatrixDims DimsOf(Role role, const ModelConfig& c) {
    const std::vector<int64_t> shape = c.Shape(role);
    return {shape[0], shape[1]};
}

// The outputs a stored part holds.
int64_t PartWidth(Role role, Part part, const ModelConfig& c) {
    switch (part) {
        case Part::Query: return int64_t{c.n_head} * c.HeadSize();
        case Part::Key: case Part::Value: return int64_t{c.KvHeads()} * c.HeadSize();
        case Part::Gate: case Part::Up: return c.MlpWidth();
        case Part::Whole: case Part::Grouped: break;
    }
    return DimsOf(role, c).out;
}

// A fused projection [E, (H + 2G) D] (or its bias [(H + 2G) D]) grouped as lit-gpt's attn.attn
// and GPT-NeoX's query_key_value store it, per kv group [H / G queries | key | value] of D
// columns each -> LayerWeights' layout: all queries, then all keys, then all values.
at::Tensor SplitGroupedQkv(const at::Tensor& t, int64_t H, int64_t G, int64_t D) {
    const int64_t Q = H / G;
    at::Tensor g = t.reshape({-1, G, Q + 2, D});  // [E or 1, G, Q + 2, D]
    at::Tensor parts = at::cat({g.narrow(2, 0, Q).reshape({g.size(0), H * D}), g.select(2, Q).reshape({g.size(0), G * D}),
                                g.select(2, Q + 1).reshape({g.size(0), G * D})}, 1);
    return t.dim() == 1 ? parts.reshape({(H + 2 * G) * D}) : parts.contiguous();
}

// The inverse: [all queries | all keys | all values] -> per kv group [Q queries | key | value].
at::Tensor GroupQkv(const at::Tensor& t, int64_t H, int64_t G, int64_t D) {
    const int64_t Q = H / G;
    const at::Tensor x = t.dim() == 1 ? t.unsqueeze(0) : t;
    const int64_t rows = x.size(0);
    at::Tensor q = x.narrow(1, 0, H * D).reshape({rows, G, Q, D});
    at::Tensor k = x.narrow(1, H * D, G * D).reshape({rows, G, 1, D});
    at::Tensor v = x.narrow(1, (H + G) * D, G * D).reshape({rows, G, 1, D});
    at::Tensor grouped = at::cat({q, k, v}, 2).reshape({rows, (H + 2 * G) * D});
    return t.dim() == 1 ? grouped.reshape({-1}) : grouped;
}

// What a stored part holds of a role's weight [in, out] or bias [out], as the file orders it.
at::Tensor PartOf(const at::Tensor& t, Part part, const ModelConfig& c) {
    const int64_t H = c.n_head, G = c.KvHeads(), D = c.HeadSize(), I = c.MlpWidth();
    const int64_t last = t.dim() - 1;
    switch (part) {
        case Part::Whole: return t;
        case Part::Grouped: return GroupQkv(t, H, G, D);
        case Part::Query: return t.narrow(last, 0, H * D);
        case Part::Key: return t.narrow(last, H * D, G * D);
        case Part::Value: return t.narrow(last, (H + G) * D, G * D);
        case Part::Gate: return t.narrow(last, 0, I);
        case Part::Up: return t.narrow(last, I, I);
    }
    return t;
}

// The official code's form of tau_q: a position term alone, exp_exp or linear, whose one
// parameter a layer it stores as attn.beta.
bool IsOfficialQuery(const TemperatureForm& f) {
    return (f.position == PositionForm::ExpExp || f.position == PositionForm::Linear) && f.token == TokenForm::None;
}

//-------------------------------------------------------------------------------------------------
// [SECTION] Loading: every role of the model from its format's names
//-------------------------------------------------------------------------------------------------

// Reads the model role by role in one format (arch.h): each role's stored parts, in the format's
// orientation, joined into LayerWeights' layout; errors name the tensor and the config's keys.
class FormatLoader {
public:
    FormatLoader(TensorReader& reader, const ModelConfig& c, Format format, at::TensorOptions zeros, SsaGpt* m)
        : m_reader(reader), m_c(c), m_f(GetFormat(format)), m_zeros(zeros), m_m(m) {}

    // A file of a format that allows it with no bias at all is a bias-free model (nanoGPT's
    // bias=False): its biases are zeros.
    void CheckBiasFree() {
        if (!m_f.zero_biases) return;
        for (Role role : {Role::AttnNorm, Role::AttnQkv})
            if (m_reader.Find(FirstLayerName(m_f.format, role) + ".bias")) return;
        m_zero_biases = true;
        m_m->notes.push_back("no biases in the file (nanoGPT bias=False): zeros");
    }

    Status Read(const RoleTensors& t) {
        const RoleInfo& info = GetRole(t.role);
        if (info.kind == RoleKind::Parameter || info.kind == RoleKind::Temperature) return ReadTemperature(t);
        const auto names = NamesOf(m_f.format, t.role, m_c.mlp);
        if (!m_c.Has(t.role)) {
            // A norm the config shares or does not have, left in the file, would be silently unused.
            for (const TensorName& n : names)
                if (const StoredTensor* s = m_reader.Find(LayerName(n.name, t.layer) + ".weight"); s && info.kind == RoleKind::Vector)
                    return Fail("tensor '" + s->name + "' is in the file but " + m_f.words.config + " " + m_c.family + " has no " + info.what);
            return Ok{};
        }
        if (names.empty()) return Fail(std::string(m_f.name) + "'s tensor names have no " + info.what + " (" + m_c.family + ")");
        if (t.role == Role::Output) return ReadHead(names.front(), t);
        if (info.kind == RoleKind::Matrix) return ReadMatrix(names, t);
        return ReadVector(names.front(), t);
    }

    // A config's n_layer short of the file's layers would analyse part of the model.
    Status CheckNoMoreLayers() const {
        if (m_reader.Find(LayerName(NamesOf(m_f.format, Role::AttnNorm, m_c.mlp).front().name, m_c.n_layer) + ".weight"))
            return Fail(std::string("the file has more layers than ") + m_f.words.config + " " + m_f.words.layers + " " + std::to_string(m_c.n_layer));
        return Ok{};
    }

private:
    std::string Why(const RoleTensors& t) const {
        const std::string width = m_f.words.width;
        switch (t.role) {
            case Role::TokenEmbedding: return "token embedding, vocab_size x " + width;
            case Role::PositionEmbedding: return "position embedding, n_positions x " + width;
            case Role::OutputNorm: return "final norm";
            case Role::Output: return "output head, vocab_size x " + width;
            default: break;
        }
        return "layer " + std::to_string(t.layer) + " of " + m_f.words.layers + " " + std::to_string(m_c.n_layer);
    }
    // What the config says a matrix part's size is, in the config's words.
    std::string Detail(Role role, Part part) const {
        const std::string rows = m_f.linear ? " rows" : " columns", columns = m_f.linear ? " columns" : " rows";
        const std::string heads = std::string(m_f.words.heads) + " " + std::to_string(m_c.n_head);
        const std::string kv = std::string(m_f.words.kv_heads) + " " + std::to_string(m_c.KvHeads());
        const std::string head = std::string(" x ") + m_f.words.head_size + " " + std::to_string(m_c.HeadSize());
        switch (role) {
            case Role::AttnQkv:
                if (part == Part::Query) return heads + head + rows;
                if (part == Part::Key || part == Part::Value) return kv + head + rows;
                return (m_f.kv_groups ? "(" + heads + " + 2 x " + kv + ")" : "3 x " + heads) + head + rows;
            case Role::AttnOut: return heads + head + columns;
            case Role::MlpUp: return "intermediate_size " + std::to_string(m_c.MlpWidth()) + rows;
            default: return "";
        }
    }

    Status NoBias(const std::string& name) const {
        if (const StoredTensor* s = m_reader.Find(name + ".bias"))
            return Fail("tensor '" + s->name + "' is in the file but " + m_f.words.config + " " + m_c.family + " has no bias there");
        return Ok{};
    }

    // A matrix role's parts, each [out, in] or [in, out] as the format stores it, joined along the
    // outputs; a grouped part regrouped as LayerWeights holds it.
    Status ReadMatrix(const std::vector<TensorName>& names, const RoleTensors& t) {
        const int64_t H = m_c.n_head, G = m_c.KvHeads(), D = m_c.HeadSize();
        const bool bias = m_c.HasBias(t.role);
        std::vector<at::Tensor> weights, biases;
        for (const TensorName& n : names) {
            const std::string name = LayerName(n.name, t.layer);
            const std::string detail = Detail(t.role, n.part);
            const std::string why = Why(t) + (detail.empty() ? "" : ": " + detail);
            const int64_t out = PartWidth(t.role, n.part, m_c);
            auto w = m_reader.ReadMatrix(name + ".weight", DimsOf(t.role, m_c).in, out, m_f.linear, why);
            if (!w) return Fail(w.error());
            weights.push_back(n.part == Part::Grouped ? SplitGroupedQkv(*w, H, G, D) : *w);
            if (!bias) {
                if (Status s = NoBias(name); !s) return s;
                continue;
            }
            if (m_zero_biases) {
                biases.push_back(at::zeros({out}, m_zeros));
                continue;
            }
            auto b = m_reader.Read(name + ".bias", {{out}}, why + ", its bias");
            if (!b) return Fail(b.error());
            biases.push_back(n.part == Part::Grouped ? SplitGroupedQkv(*b, H, G, D) : *b);
        }
        *t.weight = weights.size() == 1 ? weights.front() : at::cat(weights, 1).contiguous();
        if (bias) *t.bias = biases.size() == 1 ? biases.front() : at::cat(biases, 0);
        return Ok{};
    }

    // An embedding or a norm: NAME.weight, and NAME.bias where the config has one.
    Status ReadVector(const TensorName& n, const RoleTensors& t) {
        const std::vector<int64_t> shape = m_c.Shape(t.role);
        const std::string name = LayerName(n.name, t.layer);
        std::string why = Why(t);
        if (t.role == Role::QNorm || t.role == Role::KNorm) why += std::string(": the ") + GetRole(t.role).what + " over " + m_f.words.head_size;
        auto w = m_reader.Read(name + ".weight", {shape}, why);
        if (!w) return Fail(w.error());
        *t.weight = *w;
        if (!t.bias || !m_c.HasBias(t.role)) return Ok{};
        auto b = m_zero_biases ? Result<at::Tensor>(at::zeros(shape, m_zeros)) : m_reader.Read(name + ".bias", {shape}, why);
        if (!b) return Fail(b.error());
        *t.bias = *b;
        return Ok{};
    }

    // The output head, beside the root: the token embedding when tied and the file has no other
    // (or the same one), else its own.
    Status ReadHead(const TensorName& n, const RoleTensors& t) {
        const int64_t V = m_c.vocab_size, E = m_c.n_embd;
        const std::string name = std::string(n.name) + ".weight";
        const bool stored = m_reader.Find(name) != nullptr;
        if (!m_c.tied_head && !stored)  // named as it is stored, outside the root ("model.")
            return Fail("no tensor '" + m_reader.OuterName(name) + "' (" + Why(t) + "; " + m_f.words.untied + ")");
        *t.weight = m_m->wte;
        if (stored) {
            auto head = m_reader.Read(name, {{V, E}}, Why(t));
            if (!head) return Fail(head.error());
            if (!m_c.tied_head || !at::equal(*head, m_m->wte)) *t.weight = *head;
            if (m_c.tied_head && t.weight->data_ptr() != m_m->wte.data_ptr())  // said, not done in silence
                m_m->notes.push_back("the config ties the output head to the token embedding, but the file's " + m_reader.OuterName(name) +
                                     " differs from it: the stored head is used (transformers would tie it)");
        }
        if (!m_c.HasBias(Role::Output)) return Ok{};
        auto b = m_reader.Read(std::string(n.name) + ".bias", {{V}}, "output head bias (lm_head_bias)");
        if (!b) return Fail(b.error());
        *t.bias = *b;
        return Ok{};
    }

    // An SSA parameter under the layer's attention module (SPEC section 3): the query's per head,
    // the value's per kv head. The official code names the query's one position parameter a layer
    // attn.beta: exp_exp in model_finetune_att.py and gpt_2_PTS.py, linear in the _no_func files.
    Status ReadTemperature(const RoleTensors& t) {
        if (!m_c.Has(t.role)) return Ok{};
        const bool query = t.role == Role::QPos || t.role == Role::QTok;
        const TemperatureForm& form = query ? m_c.query : m_c.value;
        const int N = query ? m_c.n_head : m_c.KvHeads();
        const std::string attn = LayerName(m_f.attention, t.layer) + ".", side = query ? "tau_q" : "tau_v";
        std::string name = attn + SsaName(t.role);
        if (GetRole(t.role).kind == RoleKind::Parameter) {
            const bool official = form.position == PositionForm::ExpExp || form.position == PositionForm::Linear;
            if (query && official && !m_reader.Find(name) && m_reader.Find(attn + kOfficialBeta))
                name = attn + kOfficialBeta;
            auto pos = ReadPerHead(m_reader, name, N, side + " " + ToString(form.position) + " position, layer " + std::to_string(t.layer));
            if (!pos) return Fail(pos.error());
            *t.weight = *pos;
            return Ok{};
        }
        const int64_t n = form.token == TokenForm::Shared ? m_c.HeadSize() : m_c.n_embd;
        const std::string why = side + " " + ToString(form.token) + " token term, layer " + std::to_string(t.layer);
        auto w = m_reader.Read(name + ".weight", {{n}, {N, n}}, why);
        if (!w) return Fail(w.error());
        *t.weight = *w;
        if (m_reader.Find(name + ".bias")) {  // optional
            auto b = ReadPerHead(m_reader, name + ".bias", N, why);
            if (!b) return Fail(b.error());
            *t.bias = *b;
        }
        return Ok{};
    }

    TensorReader& m_reader;
    const ModelConfig& m_c;
    const FormatInfo& m_f;
    at::TensorOptions m_zeros;
    SsaGpt* m_m;
    bool m_zero_biases = false;
};

// The format the config's tensors must be named in, checked against the names the file has (the
// one detector, DetectFormat): a file of another family's names is refused, naming both.
Result<Format> FormatToRead(const ModelConfig& c, const WeightFile& file) {
    const Format want = FormatOf(c);
    const std::optional<Format> got = DetectFormat(file);
    if (!got && want == Format::Gpt2) return want;  // reading names the first tensor missing
    if (got == Format::NanoGpt && want == Format::Gpt2) return *got;
    if (got == want) return want;
    auto marker = [](Format f) { return FirstLayerName(f, Role::AttnQkv) + ".weight"; };
    auto names = [&](Format f) { return std::string(GetFormat(f).name) + "'s (" + marker(f) + ")"; };
    const FormatInfo& w = GetFormat(want);
    if (!c.hf_model_type.empty()) {
        if (got && GetFormat(*got).config == ConfigKind::HfJson)
            return Fail("config.json says model_type " + c.hf_model_type + " but the tensors have " + names(*got) + " names");
        return Fail("config.json says model_type " + c.hf_model_type + " but the file has no " + marker(want) + " (under " + w.root + ")");
    }
    if (got)
        return Fail(names(*got) + " tensor names with a " + c.family + " config, whose tensors are named as " + w.name + " names them; give the " +
                    GetFormat(*got).config_file + " that came with them");
    return Fail("the config describes a " + c.family + " model but the file has no " + marker(want) + " (" + w.name + "'s names)");
}

// Whichever format's names the file has; LoadSsaGpt then sets what every family's layers share.
Result<SsaGpt> LoadAnySsaGpt(TensorReader& reader, const ModelConfig& c, const WeightFile& file, at::Device device,
                             at::ScalarType compute) {
    c10::InferenceMode guard;
    if (Status s = c.Validate(file.path); !s) return Fail(s.error());
    auto format = FormatToRead(c, file);
    if (!format) return Fail(format.error());
    SsaGpt m;
    m.config = c;
    m.layout = GetFormat(*format).layout;
    m.layers.resize(c.n_layer);
    FormatLoader load(reader, c, *format, at::TensorOptions(device).dtype(compute), &m);
    load.CheckBiasFree();
    for (const RoleTensors& t : TensorsByRole(m))
        if (Status s = load.Read(t); !s) return Fail(s.error());
    if (Status s = load.CheckNoMoreLayers(); !s) return Fail(s.error());
    m.unused_tensors = reader.Unused();
    return m;
}

}  // namespace

//-------------------------------------------------------------------------------------------------
// [SECTION] The model by role
//-------------------------------------------------------------------------------------------------

std::vector<RoleTensors> TensorsByRole(SsaGpt& m) {
    std::vector<RoleTensors> out = {{Role::TokenEmbedding, -1, &m.wte, nullptr}, {Role::PositionEmbedding, -1, &m.wpe, nullptr}};
    for (int l = 0; l < static_cast<int>(m.layers.size()); ++l) {
        LayerWeights& w = m.layers[l];
        for (const RoleTensors& t : {RoleTensors{Role::AttnNorm, l, &w.ln1_w, &w.ln1_b}, RoleTensors{Role::AttnQkv, l, &w.attn_w, &w.attn_b},
                                     RoleTensors{Role::QNorm, l, &w.q_norm_w, nullptr}, RoleTensors{Role::KNorm, l, &w.k_norm_w, nullptr},
                                     RoleTensors{Role::AttnOut, l, &w.proj_w, &w.proj_b}, RoleTensors{Role::MlpNorm, l, &w.ln2_w, &w.ln2_b},
                                     RoleTensors{Role::MlpUp, l, &w.fc_w, &w.fc_b}, RoleTensors{Role::MlpDown, l, &w.mlp_proj_w, &w.mlp_proj_b},
                                     RoleTensors{Role::QPos, l, &w.q.pos, nullptr}, RoleTensors{Role::QTok, l, &w.q.tok_w, &w.q.tok_b},
                                     RoleTensors{Role::VPos, l, &w.v.pos, nullptr}, RoleTensors{Role::VTok, l, &w.v.tok_w, &w.v.tok_b}})
            out.push_back(t);
    }
    out.push_back({Role::OutputNorm, -1, &m.ln_f_w, &m.ln_f_b});
    out.push_back({Role::Output, -1, &m.lm_head, &m.lm_head_b});
    return out;
}

int64_t SsaGpt::ParameterCount() const {
    int64_t n = 0;
    for (const RoleTensors& t : TensorsByRole(const_cast<SsaGpt&>(*this))) {
        if (t.role == Role::Output && lm_head.is_same(wte)) continue;  // tied: counted once
        for (const at::Tensor* x : {t.weight, t.bias})
            if (x && x->defined()) n += x->numel();
    }
    return n;
}

Result<SsaGpt> LoadSsaGpt(const ModelConfig& c, const WeightFile& file, at::Device device, at::ScalarType compute, bool keep_bf16) {
    TensorReader reader(file, device, compute, keep_bf16);
    auto m = LoadAnySsaGpt(reader, c, file, device, compute);
    if (!m) return m;
    if (reader.KeptBf16()) m->notes.push_back("weight matrices held in BF16 as stored (half the memory), widened exactly to float32 as they are used");
    for (int l = 0; l < static_cast<int>(m->layers.size()); ++l) m->layers[l].window = c.AttentionWindow(l);
    return m;
}

//-------------------------------------------------------------------------------------------------
// [SECTION] Random weights
//-------------------------------------------------------------------------------------------------

SsaGpt RandomSsaGpt(const ModelConfig& c, uint64_t seed) {
    c10::InferenceMode guard;
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    const int64_t E = c.n_embd, H = c.n_head, D = c.HeadSize();
    auto normal = [&](std::vector<int64_t> shape, double std) { return at::normal(0.0, std, shape, gen); };
    auto ones = [](int64_t n) { return at::ones({n}); };
    auto zeros = [](int64_t n) { return at::zeros({n}); };
    auto temperature = [&](const TemperatureForm& form, int64_t heads) {
        TemperatureParams p;
        if (form.position != PositionForm::None) p.pos = normal({heads}, 1.0);
        if (form.token != TokenForm::None) {
            int64_t n = form.token == TokenForm::Shared ? D : E;
            p.tok_w = normal({heads, n}, 1.0 / std::sqrt(static_cast<double>(n)));
            p.tok_b = normal({heads}, 0.5);
        }
        return p;
    };

    SsaGpt m;
    m.config = c;
    m.layout = GetFormat(FormatOf(c)).layout;
    if (c.Rope()) {  // a lit-gpt family: no learned positions, grouped kv heads, its own norms, MLP and head
        const int64_t G = c.KvHeads(), I = c.MlpWidth(), L = c.n_layer;
        const bool layer_norm = c.norm == NormKind::LayerNorm;
        auto bias = [&](bool on, int64_t n) { return on ? zeros(n) : at::Tensor(); };
        m.wte = normal({c.vocab_size, E}, 0.02);
        for (int l = 0; l < L; ++l) {
            LayerWeights w;
            w.ln1_w = ones(E);
            if (layer_norm) w.ln1_b = zeros(E);
            w.attn_w = at::cat({normal({E, (H + G) * D}, 0.1), normal({E, G * D}, 0.02)}, 1);  // queries and keys sharper, as above
            w.attn_b = bias(c.QkvBias(), (H + 2 * G) * D);
            w.proj_w = normal({H * D, E}, 0.02 / std::sqrt(2.0 * L)); w.proj_b = bias(c.OutBias(), E);
            if (c.qk_norm) {
                w.q_norm_w = ones(D);
                w.k_norm_w = ones(D);
            }
            w.window = c.AttentionWindow(l);
            if (!c.shared_attention_norm) {
                w.ln2_w = ones(E);
                if (layer_norm) w.ln2_b = zeros(E);
            }
            const int64_t fc = c.mlp == MlpKind::SwiGlu ? 2 * I : I;
            w.fc_w = normal({E, fc}, 0.02); w.fc_b = bias(c.MlpBias(), fc);
            w.mlp_proj_w = normal({I, E}, 0.02 / std::sqrt(2.0 * L)); w.mlp_proj_b = bias(c.MlpBias(), E);
            // The official code's form draws its one parameter a layer, as attn.beta is.
            const bool official = (c.query.position == PositionForm::ExpExp || c.query.position == PositionForm::Linear) &&
                                  c.query.token == TokenForm::None;
            w.q = temperature(c.query, official ? 1 : H);
            w.v = temperature(c.value, G);
            m.layers.push_back(std::move(w));
        }
        m.ln_f_w = ones(E);
        if (layer_norm) m.ln_f_b = zeros(E);
        m.lm_head = c.tied_head ? m.wte : normal({c.vocab_size, E}, 0.02);
        if (c.lm_head_bias) m.lm_head_b = zeros(c.vocab_size);
        return m;
    }
    m.wte = normal({c.vocab_size, E}, 0.02);
    m.wpe = normal({c.n_positions, E}, 0.01);
    for (int l = 0; l < c.n_layer; ++l) {
        LayerWeights w;
        w.ln1_w = ones(E); w.ln1_b = zeros(E);
        // Q and K larger than GPT-2's 0.02 so attention rows have structure; V as usual.
        w.attn_w = at::cat({normal({E, 2 * E}, 0.1), normal({E, E}, 0.02)}, 1);
        w.attn_b = zeros(3 * E);
        w.proj_w = normal({E, E}, 0.02 / std::sqrt(2.0 * c.n_layer)); w.proj_b = zeros(E);
        w.ln2_w = ones(E); w.ln2_b = zeros(E);
        w.fc_w = normal({E, 4 * E}, 0.02); w.fc_b = zeros(4 * E);
        w.mlp_proj_w = normal({4 * E, E}, 0.02 / std::sqrt(2.0 * c.n_layer)); w.mlp_proj_b = zeros(E);
        w.q = temperature(c.query, H);
        w.v = temperature(c.value, H);
        m.layers.push_back(std::move(w));
    }
    m.ln_f_w = ones(E);
    m.ln_f_b = zeros(E);
    m.lm_head = m.wte;
    return m;
}


//-------------------------------------------------------------------------------------------------
// [SECTION] Saving: a model folder in a layout, every role under its format's names
//-------------------------------------------------------------------------------------------------

Status SaveModelFolder(const SsaGpt& m, const std::string& dir) { return SaveModelFolder(m, dir, Dtype::F32); }
Status SaveModelFolder(const SsaGpt& m, const std::string& dir, Dtype storage) { return SaveModelFolder(m, dir, storage, Layout::Own); }

Status SaveModelFolder(const SsaGpt& m, const std::string& dir, Dtype storage, Layout layout) {
    assert(storage == Dtype::F32 || storage == Dtype::F16 || storage == Dtype::BF16);
    const ModelConfig& c = m.config;
    if (layout != Layout::Hf && c.HfOnly())
        return Fail(dir + ": a " + c.family + " model with HF-only features (head_dim, q/k norm, llama3 RoPE scaling, sliding window, "
                    "split biases or HF names) is written as an HF folder only; lit-gpt's layout cannot hold them");
    if (layout == Layout::Lit && !c.Rope()) return Fail("GPT-2 is written in HF's layout; lit-gpt checkpoints are for the RoPE families");
    Format format = Format::Gpt2;
    if (c.Rope() && layout != Layout::Hf) {
        format = Format::Lit;
    } else if (c.Rope()) {
        const Family* family = FamilyOf(c);
        if (!family || !*family->model_type) return Fail(dir + ": a " + c.family + " model has no HF model_type ssaviz writes (" + HfModelTypes() + ")");
        format = family->hf_format;
    }
    const FormatInfo& f = GetFormat(format);

    // The official code's temperature: one position parameter a layer, attn.beta, with no "ssa"
    // block in the config (its form is how the reader reads beta: exp_exp unless told linear), save
    // for the linear form (model_finetune_att_no_func.py), which the config names so that it reads back.
    const bool official = f.official_beta && IsOfficialQuery(c.query) && !m.layers.empty() && m.layers[0].q.pos.numel() == 1;
    ModelConfig written = c;
    if (official && c.query.position == PositionForm::ExpExp) written.query = {};
    auto config = ConfigJsonFor(format, written);
    if (!config) return Fail(dir + ": " + config.error());

    const at::ScalarType type = storage == Dtype::F16 ? at::kHalf : storage == Dtype::BF16 ? at::kBFloat16 : at::kFloat;
    std::vector<at::Tensor> keep;  // contiguous CPU copies, alive until written
    std::vector<TensorToWrite> tensors;
    auto add = [&](const std::string& name, const at::Tensor& t) {
        if (!t.defined()) return;
        keep.push_back(t.detach().to(at::kCPU, type).contiguous());
        tensors.push_back({name, storage, keep.back().sizes().vec(), keep.back().data_ptr()});
    };
    for (const RoleTensors& t : TensorsByRole(const_cast<SsaGpt&>(m))) {
        const RoleInfo& info = GetRole(t.role);
        if (!t.weight->defined() || (t.role == Role::Output && m.lm_head.is_same(m.wte))) continue;  // absent, or tied
        const std::string root = f.saved_under_root && !info.beside_root ? f.root : "";
        if (info.kind == RoleKind::Parameter || info.kind == RoleKind::Temperature) {
            const std::string name = root + LayerName(f.attention, t.layer) + "." + (official && t.role == Role::QPos ? kOfficialBeta : SsaName(t.role));
            if (info.kind == RoleKind::Parameter) {
                add(name, official ? t.weight->reshape({}) : *t.weight);
            } else {
                add(name + ".weight", *t.weight);
                add(name + ".bias", *t.bias);
            }
            continue;
        }
        const auto names = NamesOf(format, t.role, c.mlp);
        if (names.empty()) return Fail(dir + ": " + f.name + "'s tensor names have no " + info.what + " (" + c.family + ")");
        for (const TensorName& n : names) {
            const std::string name = root + LayerName(n.name, t.layer);
            const bool matrix = info.kind == RoleKind::Matrix;
            const at::Tensor w = matrix ? PartOf(*t.weight, n.part, c) : *t.weight;
            add(name + ".weight", matrix && f.linear ? w.t() : w);
            if (t.bias && t.bias->defined()) add(name + ".bias", matrix ? PartOf(*t.bias, n.part, c) : *t.bias);
        }
    }

    if (Status s = WriteFileAtomically(dir + "/" + f.config_file, config->dump(2) + "\n"); !s) return s;
    if (layout == Layout::Lit) return WriteTorchSave(dir + "/lit_model.pth", "lit_model", tensors);
    return WriteSafetensors(dir + "/model.safetensors", tensors, {{"format", "pt"}});
}

}  // namespace model
