#include "model/nn/model_weights.h"

#include <cassert>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>

#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/InferenceMode.h>
#include <nlohmann/json.hpp>

#include "model/io/safetensors.h"
#include "model/io/weights.h"

namespace model {
namespace {

// Reads tensors out of a weights file by model-relative name ("h.0.ln_1.weight"), whatever the
// prefix, checking shapes, converting to the compute dtype on the device.
class TensorReader {
public:
    TensorReader(const WeightFile& file, at::Device device, at::ScalarType compute)
        : m_file(file), m_device(device), m_compute(compute) {}

    const StoredTensor* Find(const std::string& name) const { return m_file.Find(name); }

    // Any of `shapes` is accepted; an empty list accepts any shape.
    Result<at::Tensor> Read(const std::string& name, const std::vector<std::vector<int64_t>>& shapes, const std::string& why) {
        const StoredTensor* info = Find(name);
        if (!info) return Fail("no tensor '" + m_file.prefix + name + "' (" + why + ")");
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
        const bool aligned = reinterpret_cast<uintptr_t>(info->data) % DtypeSize(info->dtype) == 0;
        at::Tensor t;
        if (aligned) {
            // Read the mapping in place (strided views too); the tensor keeps the mapping alive.
            auto keep = m_file.file;
            at::Tensor stored = at::from_blob(const_cast<uint8_t*>(info->data), info->shape, info->strides, [keep](void*) {},
                                              at::TensorOptions(type));
            const bool zero_copy = type == m_compute && m_device.is_cpu() && info->Contiguous();
            t = zero_copy ? stored : stored.to(m_device, m_compute).contiguous();
        } else {
            // safetensors offsets need not be aligned to the dtype: copy the bytes out first.
            if (!info->Contiguous()) return Fail("tensor '" + info->name + "' is a strided view at a misaligned address");
            at::Tensor raw = at::empty(info->shape, at::TensorOptions(type));
            std::memcpy(raw.data_ptr(), info->data, raw.numel() * DtypeSize(info->dtype));
            t = raw.to(m_device, m_compute);
        }
        if (t.numel() > 0 && !at::isfinite(t).all().item<bool>())
            return Fail("tensor '" + info->name + "' contains NaN or infinite values" +
                        (type != m_compute ? std::string(" once converted to ") + c10::toString(m_compute) : std::string()));
        return t.to(m_device);
    }

    std::vector<std::string> Unused() const {
        std::vector<std::string> names;
        for (const auto& t : m_file.tensors) {
            bool mask_buffer = t.name.size() > 10 && (t.name.compare(t.name.size() - 10, 10, ".attn.bias") == 0 ||
                                                      t.name.find(".attn.masked_bias") != std::string::npos);
            if (!m_used.count(t.name) && !mask_buffer) names.push_back(t.name);
        }
        return names;
    }

private:
    const WeightFile& m_file;
    at::Device m_device;
    at::ScalarType m_compute;
    std::set<std::string> m_used;
};

// A [] / [1] / [H] parameter becomes [1] or [H] so it broadcasts against [H, T] after reshape.
Result<at::Tensor> ReadPerHead(TensorReader& reader, const std::string& name, int H, const std::string& why) {
    auto t = reader.Read(name, {{}, {1}, {H}}, why);
    if (!t) return t;
    return t->reshape({-1});
}

Result<TemperatureParams> ReadTemperature(TensorReader& reader, const ModelConfig& c, const TemperatureForm& form, int layer,
                                          bool query) {
    TemperatureParams p;
    const int H = c.n_head, D = c.HeadSize(), E = c.n_embd;
    const std::string base = "h." + std::to_string(layer) + ".attn." + (query ? "ssa_q_" : "ssa_v_");
    const std::string side = query ? "tau_q" : "tau_v";
    if (form.position != PositionForm::None) {
        std::string name = base + "pos";
        // The official code stores the query's exp_exp position parameter as attn.beta.
        std::string beta = "h." + std::to_string(layer) + ".attn.beta";
        if (query && form.position == PositionForm::ExpExp && !reader.Find(name) && reader.Find(beta)) name = beta;
        auto pos = ReadPerHead(reader, name, H, side + " " + ToString(form.position) + " position, layer " + std::to_string(layer));
        if (!pos) return Fail(pos.error());
        p.pos = *pos;
    }
    if (form.token != TokenForm::None) {
        const int64_t n = form.token == TokenForm::Shared ? D : E;
        std::string why = side + " " + ToString(form.token) + " token term, layer " + std::to_string(layer);
        auto w = reader.Read(base + "tok.weight", {{n}, {H, n}}, why);
        if (!w) return Fail(w.error());
        p.tok_w = *w;
        if (reader.Find(base + "tok.bias")) {
            auto b = ReadPerHead(reader, base + "tok.bias", H, why);
            if (!b) return Fail(b.error());
            p.tok_b = *b;
        }
    }
    return p;
}

Result<at::Tensor> ReadLinear(TensorReader& reader, const std::string& name, int64_t in, int64_t out, bool linear_layout,
                              const std::string& why) {
    // HF Conv1D stores [in, out] (y = x @ W); torch.nn.Linear stores [out, in]. Keep [in, out].
    auto w = reader.Read(name, {linear_layout ? std::vector<int64_t>{out, in} : std::vector<int64_t>{in, out}}, why);
    if (!w) return w;
    return linear_layout ? w->t().contiguous() : *w;
}

}  // namespace

int64_t SsaGpt::ParameterCount() const {
    int64_t n = wte.numel() + wpe.numel() + ln_f_w.numel() + ln_f_b.numel();
    if (!lm_head.is_same(wte)) n += lm_head.numel();
    for (const auto& l : layers) {
        for (const at::Tensor* t : {&l.ln1_w, &l.ln1_b, &l.attn_w, &l.attn_b, &l.proj_w, &l.proj_b, &l.ln2_w, &l.ln2_b,
                                    &l.fc_w, &l.fc_b, &l.mlp_proj_w, &l.mlp_proj_b, &l.q.pos, &l.q.tok_w, &l.q.tok_b,
                                    &l.v.pos, &l.v.tok_w, &l.v.tok_b})
            if (t->defined()) n += t->numel();
    }
    return n;
}

Result<SsaGpt> LoadSsaGpt(const ModelConfig& c, const WeightFile& file, at::Device device, at::ScalarType compute) {
    c10::InferenceMode guard;
    TensorReader reader(file, device, compute);
    const auto zeros_options = at::TensorOptions(device).dtype(compute);
    const int64_t E = c.n_embd, V = c.vocab_size, P = c.n_positions;
    SsaGpt m;
    m.config = c;

    auto wte = reader.Read("wte.weight", {{V, E}}, "token embedding, vocab_size x n_embd");
    if (!wte) return Fail(wte.error());
    m.wte = *wte;
    auto wpe = reader.Read("wpe.weight", {{P, E}}, "position embedding, n_positions x n_embd");
    if (!wpe) return Fail(wpe.error());
    m.wpe = *wpe;

    // Layout from the first layer's c_attn, whose two orientations differ ([E, 3E] vs [3E, E]).
    const StoredTensor* attn0 = reader.Find("h.0.attn.c_attn.weight");
    bool linear_layout = attn0 && attn0->shape == std::vector<int64_t>{3 * E, E};
    m.layout = linear_layout ? "linear" : "conv1d";
    // nanoGPT's bias=False models have no biases in LayerNorms and Linears: zeros are the same.
    const bool bias = reader.Find("h.0.ln_1.bias") || reader.Find("h.0.attn.c_attn.bias");
    if (!bias) m.notes.push_back("no biases in the file (nanoGPT bias=False): zeros");

    for (int l = 0; l < c.n_layer; ++l) {
        const std::string h = "h." + std::to_string(l) + ".";
        const std::string why = "layer " + std::to_string(l) + " of n_layer " + std::to_string(c.n_layer);
        LayerWeights w;
        struct { at::Tensor* dst; std::string name; std::vector<int64_t> shape; } vectors[] = {
            {&w.ln1_w, h + "ln_1.weight", {E}},          {&w.ln1_b, h + "ln_1.bias", {E}},
            {&w.attn_b, h + "attn.c_attn.bias", {3 * E}}, {&w.proj_b, h + "attn.c_proj.bias", {E}},
            {&w.ln2_w, h + "ln_2.weight", {E}},          {&w.ln2_b, h + "ln_2.bias", {E}},
            {&w.fc_b, h + "mlp.c_fc.bias", {4 * E}},     {&w.mlp_proj_b, h + "mlp.c_proj.bias", {E}},
        };
        for (auto& v : vectors) {
            const bool is_bias = v.name.size() > 5 && v.name.compare(v.name.size() - 5, 5, ".bias") == 0;
            if (is_bias && !bias) {
                *v.dst = at::zeros(v.shape, zeros_options);
                continue;
            }
            auto t = reader.Read(v.name, {v.shape}, why);
            if (!t) return Fail(t.error());
            *v.dst = *t;
        }
        struct { at::Tensor* dst; std::string name; int64_t in, out; } matrices[] = {
            {&w.attn_w, h + "attn.c_attn.weight", E, 3 * E}, {&w.proj_w, h + "attn.c_proj.weight", E, E},
            {&w.fc_w, h + "mlp.c_fc.weight", E, 4 * E},      {&w.mlp_proj_w, h + "mlp.c_proj.weight", 4 * E, E},
        };
        for (auto& mat : matrices) {
            auto t = ReadLinear(reader, mat.name, mat.in, mat.out, linear_layout, why);
            if (!t) return Fail(t.error());
            *mat.dst = *t;
        }
        auto q = ReadTemperature(reader, c, c.query, l, true);
        if (!q) return Fail(q.error());
        auto v = ReadTemperature(reader, c, c.value, l, false);
        if (!v) return Fail(v.error());
        w.q = *q;
        w.v = *v;
        m.layers.push_back(std::move(w));
    }
    if (reader.Find("h." + std::to_string(c.n_layer) + ".ln_1.weight"))
        return Fail("the file has more layers than config.json's n_layer " + std::to_string(c.n_layer));

    auto ln_f_w = reader.Read("ln_f.weight", {{E}}, "final layer norm");
    if (!ln_f_w) return Fail(ln_f_w.error());
    auto ln_f_b = bias ? reader.Read("ln_f.bias", {{E}}, "final layer norm") : Result<at::Tensor>(at::zeros({E}, zeros_options));
    if (!ln_f_b) return Fail(ln_f_b.error());
    m.ln_f_w = *ln_f_w;
    m.ln_f_b = *ln_f_b;
    m.lm_head = m.wte;
    if (reader.Find("lm_head.weight")) {
        auto head = reader.Read("lm_head.weight", {{V, E}}, "output projection");
        if (!head) return Fail(head.error());
        if (!at::equal(*head, m.wte)) m.lm_head = *head;
    }
    m.unused_tensors = reader.Unused();
    return m;
}

SsaGpt RandomSsaGpt(const ModelConfig& c, uint64_t seed) {
    c10::InferenceMode guard;
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    const int64_t E = c.n_embd, H = c.n_head, D = c.HeadSize();
    auto normal = [&](std::vector<int64_t> shape, double std) { return at::normal(0.0, std, shape, gen); };
    auto ones = [](int64_t n) { return at::ones({n}); };
    auto zeros = [](int64_t n) { return at::zeros({n}); };
    auto temperature = [&](const TemperatureForm& form) {
        TemperatureParams p;
        if (form.position != PositionForm::None) p.pos = normal({H}, 1.0);
        if (form.token != TokenForm::None) {
            int64_t n = form.token == TokenForm::Shared ? D : E;
            p.tok_w = normal({H, n}, 1.0 / std::sqrt(static_cast<double>(n)));
            p.tok_b = normal({H}, 0.5);
        }
        return p;
    };

    SsaGpt m;
    m.config = c;
    m.layout = "conv1d";
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
        w.q = temperature(c.query);
        w.v = temperature(c.value);
        m.layers.push_back(std::move(w));
    }
    m.ln_f_w = ones(E);
    m.ln_f_b = zeros(E);
    m.lm_head = m.wte;
    return m;
}

Status SaveModelFolder(const SsaGpt& m, const std::string& dir) { return SaveModelFolder(m, dir, Dtype::F32); }

Status SaveModelFolder(const SsaGpt& m, const std::string& dir, Dtype storage) {
    assert(storage == Dtype::F32 || storage == Dtype::F16);
    const at::ScalarType type = storage == Dtype::F16 ? at::kHalf : at::kFloat;
    std::vector<at::Tensor> keep;  // contiguous CPU copies, alive until written
    std::vector<TensorToWrite> tensors;
    auto add = [&](const std::string& name, const at::Tensor& t) {
        if (!t.defined()) return;
        keep.push_back(t.detach().to(at::kCPU, type).contiguous());
        tensors.push_back({name, storage, keep.back().sizes().vec(), keep.back().data_ptr()});
    };
    add("wte.weight", m.wte);
    add("wpe.weight", m.wpe);
    for (size_t l = 0; l < m.layers.size(); ++l) {
        const LayerWeights& w = m.layers[l];
        const std::string h = "h." + std::to_string(l) + ".";
        add(h + "ln_1.weight", w.ln1_w);            add(h + "ln_1.bias", w.ln1_b);
        add(h + "attn.c_attn.weight", w.attn_w);    add(h + "attn.c_attn.bias", w.attn_b);
        add(h + "attn.c_proj.weight", w.proj_w);    add(h + "attn.c_proj.bias", w.proj_b);
        add(h + "ln_2.weight", w.ln2_w);            add(h + "ln_2.bias", w.ln2_b);
        add(h + "mlp.c_fc.weight", w.fc_w);         add(h + "mlp.c_fc.bias", w.fc_b);
        add(h + "mlp.c_proj.weight", w.mlp_proj_w); add(h + "mlp.c_proj.bias", w.mlp_proj_b);
        add(h + "attn.ssa_q_pos", w.q.pos);  add(h + "attn.ssa_q_tok.weight", w.q.tok_w);  add(h + "attn.ssa_q_tok.bias", w.q.tok_b);
        add(h + "attn.ssa_v_pos", w.v.pos);  add(h + "attn.ssa_v_tok.weight", w.v.tok_w);  add(h + "attn.ssa_v_tok.bias", w.v.tok_b);
    }
    add("ln_f.weight", m.ln_f_w);
    add("ln_f.bias", m.ln_f_b);
    if (!m.lm_head.is_same(m.wte)) add("lm_head.weight", m.lm_head);

    std::ofstream config(dir + "/config.json");
    if (!config) return Fail(dir + "/config.json: cannot write");
    config << ConfigToJson(m.config).dump(2) << "\n";
    return WriteSafetensors(dir + "/model.safetensors", tensors, {{"format", "pt"}});
}

}  // namespace model
