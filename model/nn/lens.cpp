#include "model/nn/lens.h"

#include <algorithm>
#include <cmath>

#include <c10/core/InferenceMode.h>

#include "model/nn/forward.h"
#include "model/nn/linear.h"
#include "model/nn/model_weights.h"

namespace model {

// The residual stream of one run: r_l before layer l and after the last (r_0 the embeddings), and
// each layer's heads' outputs before the projection, [T, H, D], float32 on the model's device.
// With each layer's keys and values, so that a later text sharing its first p tokens runs only
// positions p.. (RunStream's `previous`).
// Layer-local (LensRun::LayerLocal): `resid` are the lens's rows (r_0, then SSA's input to layer l
// plus what layer l writes at tau = 1) and `heads` the tau = 1 heads; SSA's own stream, which the
// layers read, is `ssa` (after each layer) with SSA's values in `vs` and the tau = 1 values in
// `local_vs` (the keys are the same).
struct LensStream {
    std::vector<at::Tensor> resid;  // [L + 1] x [T, E]
    std::vector<at::Tensor> heads;  // [L] x [T, H, D]
    std::vector<at::Tensor> k, vs;  // [L] x [1, G (or H), T, D]: as Block's capture, in the compute dtype
    std::vector<at::Tensor> ssa;       // layer-local: [L] x [T, E], SSA's residual after layer l; else empty
    std::vector<at::Tensor> local_vs;  // layer-local: [L] x [1, G, T, D]; else empty
    at::ScalarType compute = at::kFloat;  // what the forward pass ran in (the lens's rows go back to it)
    int64_t n_tokens = 0;
    std::vector<int32_t> ids;
    const SsaGpt* model = nullptr;
    LensRun run = LensRun::Ssa;

    // What layer l read (SSA's residual before it), and the final residual whose scale the
    // attribution's final norm holds.
    const at::Tensor& Input(size_t l) const { return ssa.empty() || l == 0 ? resid[l] : ssa[l - 1]; }
    const at::Tensor& Final() const { return ssa.empty() ? resid.back() : ssa.back(); }
};

namespace {

using Stream = LensStream;

// How many leading tokens two texts share.
int64_t SharedPrefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
    const size_t n = std::min(a.size(), b.size());
    return static_cast<int64_t>(std::mismatch(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(n), b.begin()).first - a.begin());
}

// A stream `previous` can start: of the same model and run.
const Stream* Usable(const Stream* previous, const SsaGpt& m, LensRun run) {
    return previous && previous->model == &m && previous->run == run && !previous->k.empty() ? previous : nullptr;
}

void ReportProgress(const LensOptions& options, float done) {
    if (options.progress) options.progress->store(options.progress_from + options.progress_span * done);
}

// `ids` through the model, keeping what the lens reads. With `previous` (Usable), positions below
// the texts' shared prefix p are previous's and only p.. run, each layer's rows attending to
// previous's keys and values below p.
Result<Stream> RunStream(const SsaGpt& m, const std::vector<int32_t>& ids, const LensOptions& options, const Stream* previous = nullptr) {
    const ModelConfig& c = m.config;
    const int64_t H = c.n_head, G = c.KvHeads(), T = static_cast<int64_t>(ids.size());
    previous = Usable(previous, m, options.run);
    const bool local = options.run == LensRun::LayerLocal;
    const int64_t p = previous ? std::min(SharedPrefix(previous->ids, ids), T) : 0;
    // previous's first p rows along `dim`, then the rows run now.
    auto join = [&](const at::Tensor& old, const at::Tensor& fresh, int64_t dim) {
        if (p == 0) return fresh;
        if (p == T) return old.narrow(dim, 0, T);
        return at::cat({old.narrow(dim, 0, p), fresh}, dim);
    };
    at::Tensor index = at::tensor(at::ArrayRef<int32_t>(ids), at::kInt).to(m.device(), at::kLong).unsqueeze(0);
    at::Tensor x = Embed(m, index.slice(1, p), p);  // [1, T - p, E]
    Stream s;
    s.compute = x.scalar_type();
    s.n_tokens = T;
    s.ids = ids;
    s.model = &m;
    s.run = options.run;
    s.resid.push_back(join(previous ? previous->resid[0] : at::Tensor(), x[0].to(at::kFloat), 0));
    for (size_t l = 0; l < m.layers.size(); ++l) {
        if (options.cancel && options.cancel->load()) return Fail("cancelled");
        if (p == T) {  // a text previous's begins with: nothing to run
            s.heads.push_back(previous->heads[l].narrow(0, 0, T));
            s.k.push_back(previous->k[l].narrow(2, 0, T));
            s.vs.push_back(previous->vs[l].narrow(2, 0, T));
            s.resid.push_back(previous->resid[l + 1].narrow(0, 0, T));
            if (local) {
                s.ssa.push_back(previous->ssa[l].narrow(0, 0, T));
                s.local_vs.push_back(previous->local_vs[l].narrow(2, 0, T));
            }
            continue;
        }
        BlockCapture capture;
        KeyValues prefix;  // exactly p rows: Block appends the new rows to a copy, never into previous's
        if (p > 0) prefix = {previous->k[l].narrow(2, 0, p), previous->vs[l].narrow(2, 0, p)};
        const at::Tensor input = x;
        x = Block(c, m.layers[l], input, options.run == LensRun::Vanilla, &capture, p, p > 0 ? &prefix : nullptr);
        s.k.push_back(capture.k);  // every position's: the prefix's and the rows'
        s.vs.push_back(capture.vs);
        at::Tensor written = x;  // what the lens reads after this layer
        BlockCapture local_capture;
        if (local) {  // the layer again at tau = 1 on the same input, against the prefix's tau = 1 values
            s.ssa.push_back(join(previous ? previous->ssa[l] : at::Tensor(), x[0].to(at::kFloat), 0));
            KeyValues local_prefix;
            if (p > 0) local_prefix = {prefix.k, previous->local_vs[l].narrow(2, 0, p)};
            written = Block(c, m.layers[l], input, true, &local_capture, p, p > 0 ? &local_prefix : nullptr);
            s.local_vs.push_back(local_capture.vs);
        }
        const BlockCapture& read = local ? local_capture : capture;  // the heads the lens reads
        // Query head h reads kv head h / (H / G): its values, tau_v applied, weighted by its row.
        at::Tensor vs = read.vs.size(1) == H ? read.vs : RepeatHeads(read.vs, H / G, 1);
        at::Tensor y = at::matmul(read.attention.to(at::kFloat), vs.to(at::kFloat));  // [1, H, T - p, D]
        s.heads.push_back(join(previous ? previous->heads[l] : at::Tensor(), y[0].transpose(0, 1).contiguous(), 0));  // [T, H, D]
        s.resid.push_back(join(previous ? previous->resid[l + 1] : at::Tensor(), written[0].to(at::kFloat), 0));
        ReportProgress(options, 0.5f * (l + 1) / m.layers.size());
    }
    return s;
}

// The final norm's divisor at each of the final residual's rows, [R, 1]: sqrt(var + eps) for
// LayerNorm, sqrt(mean of squares + eps) for RMSNorm.
at::Tensor Divisors(const SsaGpt& m, const at::Tensor& final_rows) {
    const ModelConfig& c = m.config;
    if (c.norm == NormKind::LayerNorm) return at::sqrt(final_rows.var(-1, /*unbiased=*/false, /*keepdim=*/true) + c.layer_norm_epsilon);
    return at::sqrt(final_rows.pow(2).mean(-1, true) + c.layer_norm_epsilon);
}

// The direction a part's output is dotted with for each position's target: the final norm with
// its divisor frozen (`divisors`, [R, 1]), then the target's row of the head. [R, E].
at::Tensor Directions(const SsaGpt& m, const at::Tensor& divisors, const at::Tensor& targets) {
    at::Tensor rows = m.lm_head.index_select(0, targets).to(at::kFloat);  // [R, E]
    at::Tensor u = rows * m.ln_f_w.to(at::kFloat);
    if (m.config.norm == NormKind::LayerNorm) return (u - u.mean(-1, true)) / divisors;  // (x - mean x) . u = x . (u - mean u)
    return u / divisors;
}

// What stays when every part's direction is taken: the final norm's bias and the head's bias.
at::Tensor OutputConstants(const SsaGpt& m, const at::Tensor& targets) {
    at::Tensor out = at::zeros({targets.size(0)}, m.wte.options().dtype(at::kFloat));
    if (m.ln_f_b.defined()) out += at::matmul(m.lm_head.index_select(0, targets).to(at::kFloat), m.ln_f_b.to(at::kFloat));
    if (m.lm_head_b.defined()) out += m.lm_head_b.index_select(0, targets).to(at::kFloat);
    return out;
}

std::vector<float> ToVector(const at::Tensor& t) {
    at::Tensor c = t.to(at::kCPU, at::kFloat).contiguous();
    return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

// Every part's attribution for rows `positions` [R] to `targets` [R]: heads [L, H, R], MLPs
// [L, R], embeddings [R], constants [R]; the final norm's divisor there [R] and the constants'
// part that does not pass through it [R] (the final norm's bias, the head's bias).
struct Parts {
    at::Tensor heads, mlp, embed, constants, divisor, free;
};

Parts Attribution(const SsaGpt& m, const Stream& s, const at::Tensor& positions, const at::Tensor& targets) {
    const ModelConfig& c = m.config;
    const int64_t L = c.n_layer, H = c.n_head, D = c.HeadSize();
    const at::Tensor divisors = Divisors(m, s.Final().index_select(0, positions));  // [R, 1]
    const at::Tensor d = Directions(m, divisors, targets);  // [R, E]
    Parts p;
    p.heads = at::empty({L, H, positions.size(0)}, d.options());
    p.mlp = at::empty({L, positions.size(0)}, d.options());
    p.embed = (s.resid[0].index_select(0, positions) * d).sum(-1);
    p.divisor = divisors.squeeze(-1);
    p.free = OutputConstants(m, targets);
    p.constants = p.free.clone();
    for (int64_t l = 0; l < L; ++l) {
        const LayerWeights& w = m.layers[l];
        const at::Tensor proj = w.proj_w.to(at::kFloat);  // [H D, E]
        const at::Tensor y = s.heads[l].index_select(0, positions);  // [R, H, D]
        // Head h's output is y_h W_O[h]: its part is y_h . (W_O[h] d).
        // Both products through MatmulRows: for one position's few rows it reads proj once at the
        // memory's speed (sgemv took 5 ms of LensAtPosition's 34 for GPT-2 small's 12 layers).
        const at::Tensor back = MatmulRows(d, proj.t()).view({-1, H, D});  // [R, H, D]
        p.heads[l].copy_((y * back).sum(-1).t());
        at::Tensor attn = MatmulRows(y.reshape({-1, H * D}), proj);  // [R, E]
        if (w.proj_b.defined()) {
            const at::Tensor b = w.proj_b.to(at::kFloat);
            attn = attn + b;
            p.constants += at::matmul(d, b);
        }
        // The MLP's whole output (biases included) is what the layer wrote besides its attention.
        const at::Tensor mlp = s.resid[l + 1].index_select(0, positions) - s.Input(l).index_select(0, positions) - attn;
        p.mlp[l].copy_((mlp * d).sum(-1));
    }
    return p;
}

// One row's parts as LensAt::parts and Attribute give them: heads (layer-major), MLPs, embeddings, constants.
std::vector<float> Flat(const Parts& p) {
    std::vector<float> parts = ToVector(p.heads);
    for (const at::Tensor& t : {p.mlp, p.embed, p.constants}) {
        const std::vector<float> v = ToVector(t);
        parts.insert(parts.end(), v.begin(), v.end());
    }
    return parts;
}

// The parts' sum at each row, [R]: the logit of a side no single pass computes (layer-local).
at::Tensor Sum(const Parts& p) { return p.heads.flatten(0, 1).sum(0) + p.mlp.sum(0) + p.embed + p.constants; }

}  // namespace

// Copies, for each of `groups` rows of `width` entries (the old ones `old_width` wide), the first
// `count` entries: an earlier lens's positions below the rows run again.
template <class V>
void KeepLeading(const std::vector<V>& old, int64_t old_width, std::vector<V>* now, int64_t width, int64_t groups, int64_t count) {
    if (count <= 0) return;
    for (int64_t g = 0; g < groups; ++g)
        std::copy_n(old.begin() + g * old_width, count, now->begin() + g * width);
}

Result<Lens> RunLens(const SsaGpt& m, const std::vector<int32_t>& ids, const LensOptions& options, LensCache* cache) {
    const ModelConfig& c = m.config;
    if (auto valid = CheckIds(c, ids); !valid) return Fail(valid.error());
    const int64_t T = static_cast<int64_t>(ids.size()), L = c.n_layer, H = c.n_head;
    const int64_t k = std::clamp<int64_t>(options.top_k, 1, c.vocab_size);
    c10::InferenceMode guard;
    const Stream* previous = cache && !options.whole ? Usable(cache->stream.get(), m, options.run) : nullptr;
    auto stream = RunStream(m, ids, options, previous);
    if (!stream) return Fail(stream.error());
    // An earlier lens of the same model, side and top_k: its positions below p - 1 stand (p - 1's
    // target is the first changed token); the rest run again.
    const Lens* was = previous && cache->lens && cache->lens->top_k == k && cache->lens->n_tokens == previous->n_tokens ? &*cache->lens : nullptr;
    const int64_t from = was ? std::max<int64_t>(0, std::min(SharedPrefix(previous->ids, ids), T) - 1) : 0;

    Lens out;
    out.n_layer = static_cast<int>(L);
    out.n_head = static_cast<int>(H);
    out.n_tokens = static_cast<int>(T);
    out.top_k = static_cast<int>(k);
    out.loss.assign((L + 1) * (T - 1), 0.0f);
    out.top_ids.assign((L + 1) * T * k, 0);
    out.top_probs.assign((L + 1) * T * k, 0.0f);
    if (was) {
        const int64_t old_t = was->n_tokens;
        KeepLeading(was->loss, old_t - 1, &out.loss, T - 1, L + 1, from);
        KeepLeading(was->top_ids, old_t * k, &out.top_ids, T * k, L + 1, from * k);
        KeepLeading(was->top_probs, old_t * k, &out.top_probs, T * k, L + 1, from * k);
        out.logit.assign(was->logit.begin(), was->logit.begin() + from);
    }
    const auto long_opts = at::TensorOptions().dtype(at::kLong).device(m.device());
    const at::Tensor next = at::tensor(at::ArrayRef<int32_t>(ids), at::kInt).to(m.device(), at::kLong).slice(0, 1);  // [T - 1]
    const int64_t block = std::max<int64_t>(1, options.block_rows);
    for (int64_t l = 0; l <= L; ++l) {
        for (int64_t t0 = from; t0 < T; t0 += block) {
            if (options.cancel && options.cancel->load()) return Fail("cancelled");
            const int64_t R = std::min(block, T - t0);
            const at::Tensor rows = stream->resid[l].slice(0, t0, t0 + R).to(stream->compute).unsqueeze(0);
            const at::Tensor logp = at::log_softmax(Logits(m, rows)[0].to(at::kFloat), -1);  // [R, V]
            const auto top = at::topk(logp, k, -1);
            const std::vector<float> probs = ToVector(std::get<0>(top).exp());
            const at::Tensor ids_top = std::get<1>(top).to(at::kCPU, at::kInt).contiguous();
            std::copy(probs.begin(), probs.end(), out.top_probs.begin() + (l * T + t0) * k);
            std::copy(ids_top.data_ptr<int32_t>(), ids_top.data_ptr<int32_t>() + R * k, out.top_ids.begin() + (l * T + t0) * k);
            const int64_t predicting = std::min(R, T - 1 - t0);  // the last position has no next token
            if (predicting > 0) {
                const at::Tensor target = next.slice(0, t0, t0 + predicting).unsqueeze(1);
                const std::vector<float> loss = ToVector(-logp.slice(0, 0, predicting).gather(1, target).squeeze(1));
                std::copy(loss.begin(), loss.end(), out.loss.begin() + l * (T - 1) + t0);
                if (l == L && options.run != LensRun::LayerLocal) {
                    at::Tensor logits = Logits(m, rows.slice(1, 0, predicting))[0].to(at::kFloat).gather(1, target).squeeze(1);
                    const std::vector<float> v = ToVector(logits);
                    out.logit.insert(out.logit.end(), v.begin(), v.end());
                }
            }
        }
        ReportProgress(options, 0.5f + 0.5f * (l + 1) / (L + 1));
    }
    if (T > 1) {
        const at::Tensor positions = at::arange(from, T - 1, long_opts);
        const Parts p = Attribution(m, *stream, positions, next.slice(0, from));
        out.dla = ToVector(p.heads);
        out.dla_mlp = ToVector(p.mlp);
        out.dla_embed = ToVector(p.embed);
        out.dla_const = ToVector(p.constants);
        out.dla_divisor = ToVector(p.divisor);
        out.dla_free = ToVector(p.free);
        if (options.run == LensRun::LayerLocal) {  // no pass computes this side's logit: it is its parts' sum
            const std::vector<float> v = ToVector(Sum(p));
            out.logit.insert(out.logit.end(), v.begin(), v.end());
        }
        if (from > 0) {  // the kept positions before the new ones
            const int64_t old_n = was->n_tokens - 1, n = T - 1 - from;
            auto join = [&](const std::vector<float>& old, std::vector<float>* now, int64_t groups) {
                std::vector<float> joined(static_cast<size_t>(groups * (T - 1)));
                for (int64_t g = 0; g < groups; ++g) {
                    std::copy_n(old.begin() + g * old_n, from, joined.begin() + g * (T - 1));
                    std::copy_n(now->begin() + g * n, n, joined.begin() + g * (T - 1) + from);
                }
                *now = std::move(joined);
            };
            join(was->dla, &out.dla, L * H);
            join(was->dla_mlp, &out.dla_mlp, L);
            join(was->dla_embed, &out.dla_embed, 1);
            join(was->dla_const, &out.dla_const, 1);
            join(was->dla_divisor, &out.dla_divisor, 1);
            join(was->dla_free, &out.dla_free, 1);
        }
    }
    if (cache) {
        cache->stream = std::make_shared<const LensStream>(std::move(*stream));
        cache->lens = out;
    }
    return out;
}

Result<std::shared_ptr<const LensStream>> RunLensStream(const SsaGpt& m, const std::vector<int32_t>& ids, LensRun run,
                                                        const std::atomic<bool>* cancel, const LensStream* previous) {
    if (auto valid = CheckIds(m.config, ids); !valid) return Fail(valid.error());
    if (previous && previous->model == &m && previous->run == run && previous->ids == ids)
        return std::shared_ptr<const LensStream>(std::make_shared<const LensStream>(*previous));
    c10::InferenceMode guard;
    LensOptions options;
    options.run = run;
    options.cancel = cancel;
    auto stream = RunStream(m, ids, options, previous);
    if (!stream) return Fail(stream.error());
    return std::make_shared<const LensStream>(std::move(*stream));
}

const std::vector<int32_t>& LensStreamIds(const LensStream& stream) { return stream.ids; }

Result<std::shared_ptr<const LensStream>> KeepLensStream(const SsaGpt& m, const std::vector<int32_t>& ids, LensRun run, LensCache* cache) {
    const LensStream* previous = Usable(cache->stream.get(), m, run);
    if (previous && previous->ids == ids) return cache->stream;
    auto stream = RunLensStream(m, ids, run, nullptr, previous);
    if (!stream) return stream;
    cache->lens.reset();  // of other ids (or another model or side): a later lens starts from the stream alone
    cache->stream = *stream;
    return stream;
}

size_t LensStreamBytes(const LensStream& s) {
    size_t bytes = 0;
    for (const auto* part : {&s.resid, &s.heads, &s.k, &s.vs, &s.ssa, &s.local_vs})
        for (const at::Tensor& t : *part) bytes += t.numel() * t.element_size();
    return bytes;
}

Result<LensAt> LensAtPosition(const SsaGpt& m, const LensStream& s, const std::vector<int32_t>& ids, int64_t position, int32_t token,
                              int top_k) {
    const ModelConfig& c = m.config;
    const int64_t T = static_cast<int64_t>(ids.size()), L = c.n_layer;
    if (T != s.n_tokens || static_cast<int64_t>(s.resid.size()) != L + 1) return Fail("the kept residual stream is of another text or model");
    if (position < 0 || position >= T)
        return Fail("position " + std::to_string(position) + " is outside the text's " + std::to_string(T) + " tokens");
    if (token >= c.vocab_size) return Fail("token id " + std::to_string(token) + " is outside the vocabulary of " + std::to_string(c.vocab_size));
    c10::InferenceMode guard;
    LensAt out;
    out.position = position;
    out.target = token >= 0 ? token : position + 1 < T ? ids[position + 1] : -1;
    const int64_t k = std::clamp<int64_t>(top_k, 1, c.vocab_size);
    out.top_k = static_cast<int>(k);
    // Each layer's row at the position through the final norm and the head: [L + 1, V], in groups
    // of kFewRowsTransposed rows (one for up to 31 layers), so that the head's product reads its
    // weight once a group (linear.h's few-rows kernel): sgemm packs all of [V, E] first, 50 ms for
    // GPT-2 small's head here.
    std::vector<at::Tensor> rows;
    for (const at::Tensor& r : s.resid) rows.push_back(r[position]);
    const at::Tensor stacked = at::stack(rows).to(s.compute);
    std::vector<at::Tensor> groups;
    for (int64_t r0 = 0; r0 <= L; r0 += kFewRowsTransposed)
        groups.push_back(Logits(m, stacked.slice(0, r0, std::min(r0 + kFewRowsTransposed, L + 1)).unsqueeze(0))[0].to(at::kFloat));
    const at::Tensor logits = at::cat(groups);
    const at::Tensor logp = at::log_softmax(logits, -1);
    const auto top = at::topk(logp, k, -1);
    out.top_probs = ToVector(std::get<0>(top).exp());
    const at::Tensor ids_top = std::get<1>(top).to(at::kCPU, at::kInt).contiguous();
    out.top_ids.assign(ids_top.data_ptr<int32_t>(), ids_top.data_ptr<int32_t>() + ids_top.numel());
    if (position + 1 < T) out.loss = ToVector(-logp.select(1, ids[position + 1]));
    if (out.target >= 0) {
        const auto long_opts = at::TensorOptions().dtype(at::kLong).device(m.device());
        const Parts p = Attribution(m, s, at::full({1}, position, long_opts), at::full({1}, static_cast<int64_t>(out.target), long_opts));
        out.parts = Flat(p);
        out.divisor = p.divisor[0].item<float>();
        out.free = p.free[0].item<float>();
        out.logit = s.run == LensRun::LayerLocal ? Sum(p)[0].item<float>()
                                                 : logits[L][out.target].item<float>();
    }
    return out;
}

Result<std::vector<float>> Attribute(const SsaGpt& m, const std::vector<int32_t>& ids, int64_t position, int32_t token, LensRun run) {
    const ModelConfig& c = m.config;
    if (auto valid = CheckIds(c, ids); !valid) return Fail(valid.error());
    if (position < 0 || position >= static_cast<int64_t>(ids.size()))
        return Fail("position " + std::to_string(position) + " is outside the text's " + std::to_string(ids.size()) + " tokens");
    if (token < 0 || token >= c.vocab_size) return Fail("token id " + std::to_string(token) + " is outside the vocabulary of " + std::to_string(c.vocab_size));
    c10::InferenceMode guard;
    LensOptions options;
    options.run = run;
    auto stream = RunStream(m, ids, options);
    if (!stream) return Fail(stream.error());
    const auto long_opts = at::TensorOptions().dtype(at::kLong).device(m.device());
    const Parts p = Attribution(m, *stream, at::full({1}, position, long_opts), at::full({1}, static_cast<int64_t>(token), long_opts));
    return Flat(p);
}

std::vector<float> PartsThroughDivisor(const std::vector<float>& parts, float divisor, float free, float to) {
    if (parts.empty() || !(to > 0.0f) || !(divisor > 0.0f)) return parts;
    const double ratio = static_cast<double>(divisor) / to;
    std::vector<float> out(parts.size());
    for (size_t k = 0; k + 1 < parts.size(); ++k) out[k] = static_cast<float>(parts[k] * ratio);
    out.back() = static_cast<float>((parts.back() - static_cast<double>(free)) * ratio + free);  // the constants
    return out;
}

float ReadThroughDivisor(std::vector<float>* heads, std::vector<float>* mlp, float* embed, float* constants, float divisor, float free, float to,
                         float logit) {
    std::vector<float> parts = *heads;
    parts.insert(parts.end(), mlp->begin(), mlp->end());
    parts.push_back(*embed);
    parts.push_back(*constants);
    parts = PartsThroughDivisor(parts, divisor, free, to);
    const size_t h = heads->size(), l = mlp->size();
    std::copy_n(parts.begin(), h, heads->begin());
    std::copy_n(parts.begin() + static_cast<std::ptrdiff_t>(h), l, mlp->begin());
    *embed = parts[h + l];
    *constants = parts[h + l + 1];
    double sum = 0;
    for (float v : parts) sum += v;
    return static_cast<float>(logit - sum);
}

}  // namespace model
