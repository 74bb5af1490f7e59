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
            // Buffers, not parameters: GPT-2's and GPT-NeoX's causal masks, HF's RoPE frequencies.
            auto ends = [&](const char* suffix) {
                const size_t n = std::strlen(suffix);
                return t.name.size() >= n && t.name.compare(t.name.size() - n, n, suffix) == 0;
            };
            const bool mask_buffer = ends(".attn.bias") || ends(".attn.masked_bias") || ends(".attention.bias") ||
                                     ends(".attention.masked_bias") || ends(".rotary_emb.inv_freq");
            if (!m_used.count(t.name) && !mask_buffer) names.push_back(t.name);
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

// `attn` is the layer's attention module: "h.{l}.attn." (GPT-2, lit-gpt), "layers.{l}.self_attn."
// or "layers.{l}.attention." (HF's RoPE families).
Result<TemperatureParams> ReadTemperature(TensorReader& reader, const ModelConfig& c, const TemperatureForm& form, int layer,
                                          const std::string& attn, bool query) {
    TemperatureParams p;
    const int H = query ? c.n_head : c.KvHeads(), D = c.HeadSize(), E = c.n_embd;  // a value temperature is a kv head's
    const std::string base = attn + (query ? "ssa_q_" : "ssa_v_");
    const std::string side = query ? "tau_q" : "tau_v";
    if (form.position != PositionForm::None) {
        std::string name = base + "pos";
        // The official code stores the query's position parameter as attn.beta: exp_exp in
        // model_finetune_att.py and gpt_2_PTS.py, linear in the _no_func files.
        std::string beta = attn + "beta";
        const bool official = form.position == PositionForm::ExpExp || form.position == PositionForm::Linear;
        if (query && official && !reader.Find(name) && reader.Find(beta)) name = beta;
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

// Both sides' temperatures of layer `layer`, whatever the family; `attn` as ReadTemperature's.
Status ReadTemperatures(TensorReader& reader, const ModelConfig& c, int layer, LayerWeights* w, const std::string& attn = "") {
    const std::string module = attn.empty() ? "h." + std::to_string(layer) + ".attn." : attn;
    auto q = ReadTemperature(reader, c, c.query, layer, module, true);
    if (!q) return Fail(q.error());
    auto v = ReadTemperature(reader, c, c.value, layer, module, false);
    if (!v) return Fail(v.error());
    w->q = *q;
    w->v = *v;
    return Ok{};
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

}  // namespace

int64_t SsaGpt::ParameterCount() const {
    int64_t n = 0;
    for (const at::Tensor* t : {&wte, &wpe, &ln_f_w, &ln_f_b, &lm_head_b})
        if (t->defined()) n += t->numel();
    if (!lm_head.is_same(wte)) n += lm_head.numel();
    for (const auto& l : layers) {
        for (const at::Tensor* t : {&l.ln1_w, &l.ln1_b, &l.attn_w, &l.attn_b, &l.proj_w, &l.proj_b, &l.ln2_w, &l.ln2_b,
                                    &l.fc_w, &l.fc_b, &l.mlp_proj_w, &l.mlp_proj_b, &l.q_norm_w, &l.k_norm_w, &l.q.pos, &l.q.tok_w, &l.q.tok_b,
                                    &l.v.pos, &l.v.tok_w, &l.v.tok_b})
            if (t->defined()) n += t->numel();
    }
    return n;
}

// lit-gpt's names and layout (SPEC section 7): h.{l}.norm_1, .attn.attn (fused, per kv group
// q_per_kv query heads, then a key head, then a value head, D rows each), .attn.proj, .norm_2,
// .mlp.fc or .mlp.fc_1 / .mlp.fc_2, .mlp.proj, ln_f, lm_head; every matrix torch.nn.Linear's
// [out, in]. Laid out here as LayerWeights says: [in, out], queries, then keys, then values.
Result<SsaGpt> LoadLitGpt(const ModelConfig& c, TensorReader& reader, SsaGpt m) {
    const int64_t E = c.n_embd, V = c.vocab_size, H = c.n_head, G = c.KvHeads(), D = c.HeadSize(), I = c.MlpWidth();
    const int64_t qkv = (H + 2 * G) * D;
    const bool layer_norm = c.norm == NormKind::LayerNorm;
    m.layout = "lit-gpt";
    auto read = [&](const std::string& name, std::vector<int64_t> shape, const std::string& why, at::Tensor* out) -> Status {
        auto t = reader.Read(name, {shape}, why);
        if (!t) return Fail(t.error());
        *out = *t;
        return Ok{};
    };
    // Linear [out, in] -> [in, out]
    auto linear = [&](const std::string& name, int64_t in, int64_t out, const std::string& why, at::Tensor* w, at::Tensor* b) -> Status {
        auto t = reader.ReadMatrix(name + ".weight", in, out, true, why);
        if (!t) return Fail(t.error());
        *w = *t;
        if (c.bias) return read(name + ".bias", {out}, why, b);
        if (reader.Find(name + ".bias")) return Fail("tensor '" + name + ".bias' is in the file but the config says bias false (" + why + ")");
        return Ok{};
    };
    auto norm = [&](const std::string& name, const std::string& why, at::Tensor* w, at::Tensor* b) -> Status {
        if (Status s = read(name + ".weight", {E}, why, w); !s) return s;
        return layer_norm ? read(name + ".bias", {E}, why, b) : Ok{};
    };
    for (int l = 0; l < c.n_layer; ++l) {
        const std::string h = "h." + std::to_string(l) + ".";
        const std::string why = "layer " + std::to_string(l) + " of n_layer " + std::to_string(c.n_layer);
        LayerWeights w;
        if (Status s = norm(h + "norm_1", why, &w.ln1_w, &w.ln1_b); !s) return Fail(s.error());
        if (!c.shared_attention_norm) {
            if (Status s = norm(h + "norm_2", why, &w.ln2_w, &w.ln2_b); !s) return Fail(s.error());
        } else if (reader.Find(h + "norm_2.weight")) {
            return Fail("tensor '" + h + "norm_2.weight' is in the file but the config says shared_attention_norm (" + why + ")");
        }
        // The fused projection: per kv group [Q queries | key | value] -> [all queries | all keys | all values].
        at::Tensor fused, fused_b;
        const std::string attn_why = why + ": (n_head " + std::to_string(H) + " + 2 x n_query_groups " + std::to_string(G) + ") x head size " +
                                     std::to_string(D) + " rows";
        if (Status s = linear(h + "attn.attn", E, qkv, attn_why, &fused, &fused_b); !s) return Fail(s.error());
        w.attn_w = SplitGroupedQkv(fused, H, G, D);
        if (fused_b.defined()) w.attn_b = SplitGroupedQkv(fused_b, H, G, D);
        if (Status s = linear(h + "attn.proj", H * D, E, why, &w.proj_w, &w.proj_b); !s) return Fail(s.error());
        if (c.mlp == MlpKind::SwiGlu) {
            at::Tensor w1, b1, w2, b2;
            if (Status s = linear(h + "mlp.fc_1", E, I, why, &w1, &b1); !s) return Fail(s.error());
            if (Status s = linear(h + "mlp.fc_2", E, I, why, &w2, &b2); !s) return Fail(s.error());
            w.fc_w = at::cat({w1, w2}, 1);
            if (b1.defined()) w.fc_b = at::cat({b1, b2}, 0);
        } else if (Status s = linear(h + "mlp.fc", E, I, why, &w.fc_w, &w.fc_b); !s) {
            return Fail(s.error());
        }
        if (Status s = linear(h + "mlp.proj", I, E, why, &w.mlp_proj_w, &w.mlp_proj_b); !s) return Fail(s.error());
        if (Status s = ReadTemperatures(reader, c, l, &w); !s) return Fail(s.error());
        m.layers.push_back(std::move(w));
    }
    if (reader.Find("h." + std::to_string(c.n_layer) + ".norm_1.weight"))
        return Fail("the file has more layers than the config's n_layer " + std::to_string(c.n_layer));
    if (Status s = norm("ln_f", "final norm", &m.ln_f_w, &m.ln_f_b); !s) return Fail(s.error());
    if (Status s = read("lm_head.weight", {V, E}, "output head, padded vocabulary x n_embd", &m.lm_head); !s) return Fail(s.error());
    if (c.lm_head_bias) {
        if (Status s = read("lm_head.bias", {V}, "output head bias (lm_head_bias)", &m.lm_head_b); !s) return Fail(s.error());
    }
    m.unused_tensors = reader.Unused();
    return m;
}

// HF's names and layouts of the RoPE families (transformers' modeling_llama, _mistral, _qwen2,
// _qwen3 and _gpt_neox), every matrix torch.nn.Linear's [out, in], under the prefix WeightFile
// found ("model." or "gpt_neox."; lm_head / embed_out outside it):
//   llama-like  embed_tokens, layers.{l}.input_layernorm, .self_attn.{q,k,v,o}_proj (q [H D, E],
//               k and v [G D, E], o [E, H D]; HF and lit-gpt both turn rotate-half pairs, so no
//               permutation), .self_attn.{q,k}_norm [D] (Qwen 3), .post_attention_layernorm,
//               .mlp.{gate,up,down}_proj (gate is fc_1 under silu, up fc_2), norm, lm_head
//               (absent when tied: embed_tokens).
//   gpt_neox    embed_in, layers.{l}.input_layernorm / .post_attention_layernorm (LayerNorm),
//               .attention.query_key_value (fused, per head [q | k | v] of D rows each: lit-gpt's
//               grouping with G = H), .attention.dense, .mlp.dense_h_to_4h, .mlp.dense_4h_to_h,
//               final_layer_norm, embed_out.
// SSA parameters sit under the attention module (self_attn. / attention.), as SPEC section 3 names them.
Result<SsaGpt> LoadHf(const ModelConfig& c, TensorReader& reader, SsaGpt m, bool neox) {
    const int64_t E = c.n_embd, V = c.vocab_size, H = c.n_head, G = c.KvHeads(), D = c.HeadSize(), I = c.MlpWidth();
    const std::string type = c.hf_model_type;
    m.layout = "hf";
    auto read = [&](const std::string& name, std::vector<int64_t> shape, const std::string& why, at::Tensor* out) -> Status {
        auto t = reader.Read(name, {shape}, why);
        if (!t) return Fail(t.error());
        *out = *t;
        return Ok{};
    };
    // Linear [out, in] -> [in, out], with its bias when the config says the layer has one.
    auto linear = [&](const std::string& name, int64_t in, int64_t out, bool bias, const std::string& why, at::Tensor* w,
                      at::Tensor* b) -> Status {
        auto t = reader.ReadMatrix(name + ".weight", in, out, true, why);
        if (!t) return Fail(t.error());
        *w = *t;
        if (bias) return read(name + ".bias", {out}, why + ", its bias", b);
        if (const StoredTensor* t = reader.Find(name + ".bias"))
            return Fail("tensor '" + t->name + "' is in the file but config.json's " + type + " has no bias there");
        return Ok{};
    };
    auto norm = [&](const std::string& name, const std::string& why, at::Tensor* w, at::Tensor* b) -> Status {
        if (Status s = read(name + ".weight", {E}, why, w); !s) return s;
        return neox ? read(name + ".bias", {E}, why, b) : Ok{};
    };
    const std::string heads = "num_attention_heads " + std::to_string(H) + " x head_dim " + std::to_string(D);
    const std::string kv = "num_key_value_heads " + std::to_string(G) + " x head_dim " + std::to_string(D);
    for (int l = 0; l < c.n_layer; ++l) {
        const std::string h = "layers." + std::to_string(l) + ".";
        const std::string why = "layer " + std::to_string(l) + " of num_hidden_layers " + std::to_string(c.n_layer);
        const std::string attn = h + (neox ? "attention." : "self_attn.");
        LayerWeights w;
        if (Status s = norm(h + "input_layernorm", why, &w.ln1_w, &w.ln1_b); !s) return Fail(s.error());
        if (Status s = norm(h + "post_attention_layernorm", why, &w.ln2_w, &w.ln2_b); !s) return Fail(s.error());
        if (neox) {
            at::Tensor fused, fused_b;
            if (Status s = linear(attn + "query_key_value", E, 3 * H * D, c.QkvBias(), why + ": 3 x " + heads + " rows", &fused, &fused_b); !s)
                return Fail(s.error());
            w.attn_w = SplitGroupedQkv(fused, H, H, D);
            if (fused_b.defined()) w.attn_b = SplitGroupedQkv(fused_b, H, H, D);
            if (Status s = linear(attn + "dense", H * D, E, c.OutBias(), why, &w.proj_w, &w.proj_b); !s) return Fail(s.error());
            if (Status s = linear(h + "mlp.dense_h_to_4h", E, I, c.MlpBias(), why + ": intermediate_size rows", &w.fc_w, &w.fc_b); !s)
                return Fail(s.error());
            if (Status s = linear(h + "mlp.dense_4h_to_h", I, E, c.MlpBias(), why, &w.mlp_proj_w, &w.mlp_proj_b); !s) return Fail(s.error());
        } else {
            at::Tensor qw, qb, kw, kb, vw, vb;
            if (Status s = linear(attn + "q_proj", E, H * D, c.QkvBias(), why + ": " + heads + " rows", &qw, &qb); !s) return Fail(s.error());
            if (Status s = linear(attn + "k_proj", E, G * D, c.QkvBias(), why + ": " + kv + " rows", &kw, &kb); !s) return Fail(s.error());
            if (Status s = linear(attn + "v_proj", E, G * D, c.QkvBias(), why + ": " + kv + " rows", &vw, &vb); !s) return Fail(s.error());
            w.attn_w = at::cat({qw, kw, vw}, 1).contiguous();  // [E, (H + 2G) D]
            if (qb.defined()) w.attn_b = at::cat({qb, kb, vb}, 0);
            if (Status s = linear(attn + "o_proj", H * D, E, c.OutBias(), why + ": " + heads + " columns", &w.proj_w, &w.proj_b); !s)
                return Fail(s.error());
            if (c.qk_norm) {
                if (Status s = read(attn + "q_norm.weight", {D}, why + ": the query heads' RMSNorm over head_dim", &w.q_norm_w); !s) return Fail(s.error());
                if (Status s = read(attn + "k_norm.weight", {D}, why + ": the key heads' RMSNorm over head_dim", &w.k_norm_w); !s) return Fail(s.error());
            } else if (const StoredTensor* t = reader.Find(attn + "q_norm.weight")) {
                return Fail("tensor '" + t->name + "' is in the file but config.json's " + type + " has no q/k norm (Qwen 3 has)");
            }
            at::Tensor gw, gb, uw, ub;
            const std::string mlp_why = why + ": intermediate_size " + std::to_string(I) + " rows";
            if (Status s = linear(h + "mlp.gate_proj", E, I, c.MlpBias(), mlp_why, &gw, &gb); !s) return Fail(s.error());
            if (Status s = linear(h + "mlp.up_proj", E, I, c.MlpBias(), mlp_why, &uw, &ub); !s) return Fail(s.error());
            w.fc_w = at::cat({gw, uw}, 1).contiguous();  // [E, 2I]: silu(gate) * up as fc_1, fc_2
            if (gb.defined()) w.fc_b = at::cat({gb, ub}, 0);
            if (Status s = linear(h + "mlp.down_proj", I, E, c.MlpBias(), why, &w.mlp_proj_w, &w.mlp_proj_b); !s) return Fail(s.error());
        }
        if (Status s = ReadTemperatures(reader, c, l, &w, attn); !s) return Fail(s.error());
        m.layers.push_back(std::move(w));
    }
    if (reader.Find("layers." + std::to_string(c.n_layer) + ".input_layernorm.weight"))
        return Fail("the file has more layers than config.json's num_hidden_layers " + std::to_string(c.n_layer));
    if (Status s = norm(neox ? "final_layer_norm" : "norm", "final norm", &m.ln_f_w, &m.ln_f_b); !s) return Fail(s.error());
    const std::string head = neox ? "embed_out.weight" : "lm_head.weight";
    m.lm_head = m.wte;
    if (!c.tied_head && !reader.Find(head))  // outside the root ("model."), so named as it is stored
        return Fail("no tensor '" + reader.OuterName(head) + "' (output head, vocab_size x hidden_size; tie_word_embeddings is false)");
    if (!c.tied_head || reader.Find(head)) {
        at::Tensor t;
        if (Status s = read(head, {V, E}, c.tied_head ? "output head (tie_word_embeddings)" : "output head, vocab_size x hidden_size", &t); !s)
            return Fail(s.error());
        if (!c.tied_head || !at::equal(t, m.wte)) m.lm_head = t;
    }
    m.unused_tensors = reader.Unused();
    return m;
}

// Whichever names the file has; LoadSsaGpt then sets what every family's layers share.
Result<SsaGpt> LoadAnySsaGpt(TensorReader& reader, const ModelConfig& c, const WeightFile& file, at::Device device,
                             at::ScalarType compute) {
    c10::InferenceMode guard;
    const auto zeros_options = at::TensorOptions(device).dtype(compute);
    const int64_t E = c.n_embd, V = c.vocab_size, P = c.n_positions;
    SsaGpt m;
    m.config = c;
    if (Status s = c.Validate(file.path); !s) return Fail(s.error());

    // HF's RoPE families by their first layer's names; their config.json must say which.
    const bool hf_neox = reader.Find("layers.0.attention.query_key_value.weight") != nullptr;
    const bool hf_llama = reader.Find("layers.0.self_attn.q_proj.weight") != nullptr;
    if (hf_neox || hf_llama || !c.hf_model_type.empty()) {
        const char* names = hf_neox ? "GPT-NeoX's (layers.0.attention.query_key_value.weight)" : "Llama's (layers.0.self_attn.q_proj.weight)";
        if (c.hf_model_type.empty())
            return Fail(std::string("HF ") + names + " tensor names with a " + c.family + " config; give the folder's config.json");
        if (!hf_neox && !hf_llama)
            return Fail("config.json says model_type " + c.hf_model_type + " but the file has no " +
                        (c.hf_model_type == "gpt_neox" ? "layers.0.attention.query_key_value.weight" : "layers.0.self_attn.q_proj.weight") +
                        " (under model. or gpt_neox.)");
        if (hf_neox != (c.hf_model_type == "gpt_neox"))
            return Fail("config.json says model_type " + c.hf_model_type + " but the tensors have " + names + " names");
        auto wte = reader.Read(hf_neox ? "embed_in.weight" : "embed_tokens.weight", {{V, E}}, "token embedding, vocab_size x hidden_size");
        if (!wte) return Fail(wte.error());
        m.wte = *wte;
        return LoadHf(c, reader, std::move(m), hf_neox);
    }
    auto wte = reader.Read("wte.weight", {{V, E}}, "token embedding, vocab_size x n_embd");
    if (!wte) return Fail(wte.error());
    m.wte = *wte;
    if (reader.Find("h.0.attn.attn.weight")) {
        if (!c.Rope()) return Fail("lit-gpt names (h.0.attn.attn.weight) with a GPT-2 config (learned positions); give the lit_config.json");
        return LoadLitGpt(c, reader, std::move(m));
    }
    if (c.Rope() || c.KvHeads() != c.n_head || c.norm != NormKind::LayerNorm || c.mlp != MlpKind::Gelu || c.parallel_residual)
        return Fail("the config describes a " + c.family + " model but the tensors have GPT-2's names (no h.0.attn.attn.weight)");
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
            auto t = reader.ReadMatrix(mat.name, mat.in, mat.out, linear_layout, why);
            if (!t) return Fail(t.error());
            *mat.dst = *t;
        }
        if (Status s = ReadTemperatures(reader, c, l, &w); !s) return Fail(s.error());
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

Result<SsaGpt> LoadSsaGpt(const ModelConfig& c, const WeightFile& file, at::Device device, at::ScalarType compute, bool keep_bf16) {
    TensorReader reader(file, device, compute, keep_bf16);
    auto m = LoadAnySsaGpt(reader, c, file, device, compute);
    if (!m) return m;
    if (reader.KeptBf16()) m->notes.push_back("weight matrices held in BF16 as stored (half the memory), widened exactly to float32 as they are used");
    for (int l = 0; l < static_cast<int>(m->layers.size()); ++l) m->layers[l].window = c.AttentionWindow(l);
    return m;
}

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
    if (c.Rope()) {  // a lit-gpt family: no learned positions, grouped kv heads, its own norms, MLP and head
        const int64_t G = c.KvHeads(), I = c.MlpWidth(), L = c.n_layer;
        const bool layer_norm = c.norm == NormKind::LayerNorm;
        auto bias = [&](bool on, int64_t n) { return on ? zeros(n) : at::Tensor(); };
        m.layout = c.hf_model_type.empty() ? "lit-gpt" : "hf";
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
        w.q = temperature(c.query, H);
        w.v = temperature(c.value, H);
        m.layers.push_back(std::move(w));
    }
    m.ln_f_w = ones(E);
    m.ln_f_b = zeros(E);
    m.lm_head = m.wte;
    return m;
}

Status SaveModelFolder(const SsaGpt& m, const std::string& dir) { return SaveModelFolder(m, dir, Dtype::F32); }

namespace {

// A layer's temperature parameters under its attention module (SPEC section 3's names); with
// `official_beta` the query's one position parameter as the official code's attn.beta.
template <typename Add>
void AddTemperatures(Add& add, const std::string& attn, const LayerWeights& w, bool official_beta) {
    add(attn + (official_beta ? "beta" : "ssa_q_pos"), official_beta ? w.q.pos.reshape({}) : w.q.pos);
    add(attn + "ssa_q_tok.weight", w.q.tok_w);
    add(attn + "ssa_q_tok.bias", w.q.tok_b);
    add(attn + "ssa_v_pos", w.v.pos);
    add(attn + "ssa_v_tok.weight", w.v.tok_w);
    add(attn + "ssa_v_tok.bias", w.v.tok_b);
}

// The form of the official code's attn.beta: a position term alone, exp_exp or linear.
bool IsOfficialQuery(const TemperatureForm& f) {
    return (f.position == PositionForm::ExpExp || f.position == PositionForm::Linear) && f.token == TokenForm::None;
}

// A lit-gpt family in lit-gpt's names and Linear layout (the inverse of LoadLitGpt), in
// model.safetensors, with the complete lit_config.json.
template <typename Add>
Status SaveLitFolder(const SsaGpt& m, const std::string& dir, Add& add, const std::vector<TensorToWrite>& tensors, bool pth) {
    const ModelConfig& c = m.config;
    const int64_t H = c.n_head, G = c.KvHeads(), D = c.HeadSize(), Q = H / G, I = c.MlpWidth();
    auto linear = [&](const std::string& name, const at::Tensor& w, const at::Tensor& b) {
        add(name + ".weight", w.t());
        add(name + ".bias", b);
    };
    auto ungroup = [&](const at::Tensor& t) {  // [all queries | all keys | all values] -> per kv group [Q queries | key | value]
        const at::Tensor x = t.dim() == 1 ? t.unsqueeze(0) : t;
        const int64_t rows = x.size(0);
        at::Tensor q = x.narrow(1, 0, H * D).reshape({rows, G, Q, D});
        at::Tensor k = x.narrow(1, H * D, G * D).reshape({rows, G, 1, D});
        at::Tensor v = x.narrow(1, (H + G) * D, G * D).reshape({rows, G, 1, D});
        at::Tensor grouped = at::cat({q, k, v}, 2).reshape({rows, (H + 2 * G) * D});
        return t.dim() == 1 ? grouped.reshape({-1}) : grouped;
    };
    // The official code's temperature: one position parameter a layer, attn.beta, with no "ssa"
    // block in the config (its form is how the reader reads beta: exp_exp unless told linear).
    const bool official = IsOfficialQuery(c.query) && !m.layers.empty() && m.layers[0].q.pos.numel() == 1;
    ModelConfig written = c;
    if (official) written.query = {};
    add("transformer.wte.weight", m.wte);
    for (size_t l = 0; l < m.layers.size(); ++l) {
        const LayerWeights& w = m.layers[l];
        const std::string h = "transformer.h." + std::to_string(l) + ".";
        add(h + "norm_1.weight", w.ln1_w);  add(h + "norm_1.bias", w.ln1_b);
        add(h + "norm_2.weight", w.ln2_w);  add(h + "norm_2.bias", w.ln2_b);
        linear(h + "attn.attn", ungroup(w.attn_w), w.attn_b.defined() ? ungroup(w.attn_b) : at::Tensor());
        linear(h + "attn.proj", w.proj_w, w.proj_b);
        if (c.mlp == MlpKind::SwiGlu) {
            linear(h + "mlp.fc_1", w.fc_w.narrow(1, 0, I), w.fc_b.defined() ? w.fc_b.narrow(0, 0, I) : at::Tensor());
            linear(h + "mlp.fc_2", w.fc_w.narrow(1, I, I), w.fc_b.defined() ? w.fc_b.narrow(0, I, I) : at::Tensor());
        } else {
            linear(h + "mlp.fc", w.fc_w, w.fc_b);
        }
        linear(h + "mlp.proj", w.mlp_proj_w, w.mlp_proj_b);
        AddTemperatures(add, h + "attn.", w, official);
    }
    add("transformer.ln_f.weight", m.ln_f_w);
    add("transformer.ln_f.bias", m.ln_f_b);
    add("lm_head.weight", m.lm_head);
    add("lm_head.bias", m.lm_head_b);
    std::ofstream config(dir + "/lit_config.json");
    if (!config) return Fail(dir + "/lit_config.json: cannot write");
    config << LitConfigToJson(written).dump(2) << "\n";
    if (pth) return WriteTorchSave(dir + "/lit_model.pth", "lit_model", tensors);
    return WriteSafetensors(dir + "/model.safetensors", tensors, {{"format", "pt"}});
}

}  // namespace

Status SaveModelFolder(const SsaGpt& m, const std::string& dir, Dtype storage) { return SaveModelFolder(m, dir, storage, false); }

Status SaveModelFolder(const SsaGpt& m, const std::string& dir, Dtype storage, bool lit_checkpoint) {
    assert(storage == Dtype::F32 || storage == Dtype::F16 || storage == Dtype::BF16);
    const at::ScalarType type = storage == Dtype::F16 ? at::kHalf : storage == Dtype::BF16 ? at::kBFloat16 : at::kFloat;
    std::vector<at::Tensor> keep;  // contiguous CPU copies, alive until written
    std::vector<TensorToWrite> tensors;
    auto add = [&](const std::string& name, const at::Tensor& t) {
        if (!t.defined()) return;
        keep.push_back(t.detach().to(at::kCPU, type).contiguous());
        tensors.push_back({name, storage, keep.back().sizes().vec(), keep.back().data_ptr()});
    };
    if (m.config.HfOnly())
        return Fail(dir + ": a " + m.config.family + " model with HF-only features (head_dim, q/k norm, llama3 RoPE scaling, sliding window, "
                    "split biases or HF names) is not written by ssaviz; lit-gpt's layout cannot hold them");
    if (m.config.Rope()) return SaveLitFolder(m, dir, add, tensors, lit_checkpoint);
    if (lit_checkpoint) return Fail("GPT-2 is written in HF's layout; lit-gpt checkpoints are for the RoPE families");
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
        AddTemperatures(add, h + "attn.", w, false);
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
