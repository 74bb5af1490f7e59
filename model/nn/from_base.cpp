// A fine-tune's drift undone in one place (from_base.h, from_base_torch.h).
#include "model/nn/from_base_torch.h"

#include <algorithm>
#include <string>

#include <c10/core/InferenceMode.h>

#include "model/nn/analysis.h"

namespace model {

std::string Describe(const BasePart& part) {
    const std::string layer = "L" + std::to_string(part.layer);
    switch (part.kind) {
        case BasePart::Kind::Head: return layer + " H" + std::to_string(part.head);
        case BasePart::Kind::Attention: return layer + " attention";
        case BasePart::Kind::Mlp: return layer + " MLP";
        case BasePart::Kind::Embeddings: return "embeddings";
        case BasePart::Kind::All: return "every weight";
    }
    return "?";
}

namespace {

std::string Shape(const at::Tensor& t) {
    std::string s = "[";
    for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
    return s + "]";
}

// The two models hold a tensor alike: both or neither, of one shape.
Status Alike(const std::string& name, const at::Tensor& mine, const at::Tensor& theirs) {
    if (mine.defined() != theirs.defined()) return Fail(name + ": " + (mine.defined() ? "the base has none" : "the base has one, the model none"));
    if (mine.defined() && mine.sizes() != theirs.sizes())
        return Fail(name + " is " + Shape(mine) + " in the model and " + Shape(theirs) + " in the base");
    return Ok{};
}

// A whole tensor from the base: the base's own, shared (the forward pass takes either dtype).
Status Take(const std::string& name, at::Tensor* mine, const at::Tensor& theirs) {
    if (auto s = Alike(name, *mine, theirs); !s) return s;
    *mine = theirs;
    return Ok{};
}

// A copy of `mine` to write some of the base's columns or rows into: in float32 where the two hold
// other dtypes (a BF16 file's matrices are kept as stored), so that neither side is rounded.
at::Tensor Writable(const at::Tensor& mine, const at::Tensor& theirs) {
    if (!mine.defined()) return mine;
    const at::ScalarType dtype = mine.scalar_type() == theirs.scalar_type() ? mine.scalar_type() : at::kFloat;
    return mine.to(dtype, /*non_blocking=*/false, /*copy=*/true).contiguous();
}

// The learned positions of a base of another context (a fine-tune may lengthen it): the base's
// rows for the positions both have, the model's own past the base's.
at::Tensor MixedPositions(const at::Tensor& mine, const at::Tensor& theirs) {
    const int64_t rows = std::min(mine.size(0), theirs.size(0));
    if (rows == mine.size(0)) return theirs.narrow(0, 0, rows);
    at::Tensor mixed = Writable(mine, theirs);
    mixed.narrow(0, 0, rows).copy_(theirs.narrow(0, 0, rows));
    return mixed;
}

Status TakeEmbeddings(SsaGpt* m, const SsaGpt& base) {
    const bool other_context = m->wpe.defined() && base.wpe.defined() && m->wpe.dim() == 2 && base.wpe.dim() == 2 &&
                               m->wpe.size(1) == base.wpe.size(1) && m->wpe.size(0) != base.wpe.size(0);
    if (other_context) m->wpe = MixedPositions(m->wpe, base.wpe);
    else if (auto s = Take("wpe", &m->wpe, base.wpe); !s) return s;
    for (auto [name, mine, theirs] : {std::tuple{"wte", &m->wte, &base.wte}, {"ln_f.weight", &m->ln_f_w, &base.ln_f_w},
                                      {"ln_f.bias", &m->ln_f_b, &base.ln_f_b}, {"lm_head", &m->lm_head, &base.lm_head},
                                      {"lm_head.bias", &m->lm_head_b, &base.lm_head_b}})
        if (auto s = Take(name, mine, *theirs); !s) return s;
    return Ok{};
}

Status TakeMlp(LayerWeights* w, const LayerWeights& base, const std::string& layer) {
    for (auto [name, mine, theirs] : {std::tuple{"ln_2.weight", &w->ln2_w, &base.ln2_w}, {"ln_2.bias", &w->ln2_b, &base.ln2_b},
                                      {"mlp.fc.weight", &w->fc_w, &base.fc_w}, {"mlp.fc.bias", &w->fc_b, &base.fc_b},
                                      {"mlp.proj.weight", &w->mlp_proj_w, &base.mlp_proj_w}, {"mlp.proj.bias", &w->mlp_proj_b, &base.mlp_proj_b}})
        if (auto s = Take(layer + name, mine, *theirs); !s) return s;
    return Ok{};
}

Status TakeAttention(LayerWeights* w, const LayerWeights& base, const std::string& layer) {
    for (auto [name, mine, theirs] : {std::tuple{"ln_1.weight", &w->ln1_w, &base.ln1_w}, {"ln_1.bias", &w->ln1_b, &base.ln1_b},
                                      {"attn.weight", &w->attn_w, &base.attn_w}, {"attn.bias", &w->attn_b, &base.attn_b},
                                      {"attn.proj.weight", &w->proj_w, &base.proj_w}, {"attn.proj.bias", &w->proj_b, &base.proj_b},
                                      {"attn.q_norm.weight", &w->q_norm_w, &base.q_norm_w}, {"attn.k_norm.weight", &w->k_norm_w, &base.k_norm_w}})
        if (auto s = Take(layer + name, mine, *theirs); !s) return s;
    return Ok{};
}

// Head h's columns of the joint q, k, v projection (its query head's, its kv head's keys and
// values) and its rows of the output projection. `owned`: the layer's matrices are copies already.
Status TakeHead(const ModelConfig& c, LayerWeights* w, const LayerWeights& base, int h, char* owned, const std::string& layer) {
    for (auto [name, mine, theirs] : {std::tuple{"attn.weight", &w->attn_w, &base.attn_w}, {"attn.bias", &w->attn_b, &base.attn_b},
                                      {"attn.proj.weight", &w->proj_w, &base.proj_w}})
        if (auto s = Alike(layer + name, *mine, *theirs); !s) return s;
    if (!*owned) {
        w->attn_w = Writable(w->attn_w, base.attn_w);
        w->attn_b = Writable(w->attn_b, base.attn_b);
        w->proj_w = Writable(w->proj_w, base.proj_w);
        *owned = 1;
    }
    const int64_t H = c.n_head, G = c.KvHeads(), D = c.HeadSize(), g = h / std::max<int64_t>(1, H / G);
    for (const int64_t column : {h * D, (H + g) * D, (H + G + g) * D}) {
        w->attn_w.narrow(1, column, D).copy_(base.attn_w.narrow(1, column, D));
        if (w->attn_b.defined()) w->attn_b.narrow(0, column, D).copy_(base.attn_b.narrow(0, column, D));
    }
    w->proj_w.narrow(0, h * D, D).copy_(base.proj_w.narrow(0, h * D, D));
    return Ok{};
}

}  // namespace

Result<SsaGpt> WithBaseWeights(const SsaGpt& ssa, const SsaGpt& base, const std::vector<BasePart>& parts) {
    const ModelConfig& c = ssa.config;
    if (base.layers.size() != ssa.layers.size()) return Fail("the base has " + std::to_string(base.layers.size()) + " layers, the model " + std::to_string(ssa.layers.size()));
    c10::InferenceMode guard;
    SsaGpt m = ssa;  // the tensors shared; a part replaces its own
    std::vector<char> owned(m.layers.size(), 0);  // a layer whose matrices are copies already
    for (const BasePart& part : parts) {
        const bool in_layers = part.layer >= 0 && part.layer < c.n_layer;
        const std::string layer = "layer " + std::to_string(part.layer) + "'s ";
        Status s = Ok{};
        switch (part.kind) {
            case BasePart::Kind::Head:
                if (!in_layers || part.head < 0 || part.head >= c.n_head) return Fail(Describe(part) + " is not a head of the model");
                s = TakeHead(c, &m.layers[part.layer], base.layers[part.layer], part.head, &owned[part.layer], layer);
                break;
            case BasePart::Kind::Attention:
                if (!in_layers) return Fail(Describe(part) + " is not a layer of the model");
                s = TakeAttention(&m.layers[part.layer], base.layers[part.layer], layer);
                owned[part.layer] = 0;  // the base's own matrices now: a head after it copies them first
                break;
            case BasePart::Kind::Mlp:
                if (!in_layers) return Fail(Describe(part) + " is not a layer of the model");
                s = TakeMlp(&m.layers[part.layer], base.layers[part.layer], layer);
                break;
            case BasePart::Kind::Embeddings: s = TakeEmbeddings(&m, base); break;
            case BasePart::Kind::All:
                s = TakeEmbeddings(&m, base);
                for (int l = 0; l < c.n_layer && s; ++l) {
                    const std::string name = "layer " + std::to_string(l) + "'s ";
                    s = TakeAttention(&m.layers[l], base.layers[l], name);
                    if (s) s = TakeMlp(&m.layers[l], base.layers[l], name);
                    owned[l] = 0;
                }
                break;
        }
        if (!s) return Fail(Describe(part) + " from the base: " + s.error());
    }
    return m;
}

bool SameWeights(const SsaGpt& ssa, const SsaGpt& mixed) {
    c10::InferenceMode guard;
    auto same = [](const at::Tensor& a, const at::Tensor& b) {
        if (a.defined() != b.defined()) return false;
        return !a.defined() || a.is_same(b) || (a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() && at::equal(a, b));
    };
    for (auto [a, b] : {std::pair{&ssa.wte, &mixed.wte}, {&ssa.wpe, &mixed.wpe}, {&ssa.ln_f_w, &mixed.ln_f_w}, {&ssa.ln_f_b, &mixed.ln_f_b},
                        {&ssa.lm_head, &mixed.lm_head}, {&ssa.lm_head_b, &mixed.lm_head_b}})
        if (!same(*a, *b)) return false;
    if (ssa.layers.size() != mixed.layers.size()) return false;
    for (size_t l = 0; l < ssa.layers.size(); ++l) {
        const LayerWeights &x = ssa.layers[l], &y = mixed.layers[l];
        for (auto [a, b] : {std::pair{&x.ln1_w, &y.ln1_w}, {&x.ln1_b, &y.ln1_b}, {&x.attn_w, &y.attn_w}, {&x.attn_b, &y.attn_b},
                            {&x.proj_w, &y.proj_w}, {&x.proj_b, &y.proj_b}, {&x.ln2_w, &y.ln2_w}, {&x.ln2_b, &y.ln2_b}, {&x.fc_w, &y.fc_w},
                            {&x.fc_b, &y.fc_b}, {&x.mlp_proj_w, &y.mlp_proj_w}, {&x.mlp_proj_b, &y.mlp_proj_b}, {&x.q_norm_w, &y.q_norm_w},
                            {&x.k_norm_w, &y.k_norm_w}})
            if (!same(*a, *b)) return false;
    }
    return true;
}

Result<std::vector<float>> LossOfIds(const SsaGpt& m, const std::vector<int32_t>& ids, const std::vector<TemperatureEdit>& edits,
                                     const std::atomic<bool>* cancel) {
    const ModelConfig& c = m.config;
    if (auto valid = CheckIds(c, ids); !valid) return Fail(valid.error());
    const int64_t T = static_cast<int64_t>(ids.size()), L = c.n_layer;
    if (T < 2) return Fail("a text of one token has no loss");
    c10::InferenceMode guard;
    const at::Tensor index = at::tensor(at::ArrayRef<int32_t>(ids), at::kInt).to(m.device(), at::kLong).unsqueeze(0);  // [1, T]
    // Positions a block at a time, each against the keys and values the blocks before left (as a
    // generation's cache): [H, rows, T] of attention at once, not [H, T, T].
    const int64_t rows = 256, logit_rows = std::clamp<int64_t>((int64_t{32} << 20) / (4 * std::max<int64_t>(1, m.lm_head.size(0))), 1, rows);
    std::vector<KeyValues> kept(static_cast<size_t>(L));
    std::vector<float> loss;
    loss.reserve(static_cast<size_t>(T - 1));
    for (int64_t first = 0; first < T; first += rows) {
        const int64_t n = std::min(rows, T - first);
        at::Tensor x = Embed(m, index.narrow(1, first, n), first);  // [1, n, E]
        for (int64_t l = 0; l < L; ++l) {
            if (cancel && cancel->load()) return Fail("cancelled");
            const TemperatureEdit* edit = static_cast<size_t>(l) < edits.size() && edits[l].keep_position.defined() ? &edits[l] : nullptr;
            BlockCapture capture;
            x = Block(c, m.layers[l], x, /*vanilla=*/false, &capture, first, first > 0 ? &kept[l] : nullptr, edit);
            kept[l] = {capture.k, capture.vs};
        }
        // Position t predicts token t + 1: the last position predicts nothing.
        for (int64_t at = first; at < std::min(first + n, T - 1); at += logit_rows) {
            const int64_t k = std::min({logit_rows, first + n - at, T - 1 - at});
            const at::Tensor logits = Logits(m, x.narrow(1, at - first, k))[0].to(at::kFloat);  // [k, V]
            const at::Tensor next = index[0].narrow(0, at + 1, k).unsqueeze(1);
            const at::Tensor part = (at::logsumexp(logits, -1) - logits.gather(1, next).squeeze(1)).contiguous().cpu();
            loss.insert(loss.end(), part.data_ptr<float>(), part.data_ptr<float>() + k);
        }
    }
    return loss;
}

}  // namespace model
