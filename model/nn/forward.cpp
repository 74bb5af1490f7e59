#include "model/nn/forward.h"

#include "model/nn/linear.h"
#include "model/nn/runtime_torch.h"
#include "model/nn/temperature_rows.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <string>

#include <c10/core/DeviceGuard.h>
#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>

#ifdef SSAVIZ_CUDA_KERNELS
#include "model/nn/metrics_cuda.h"
#endif

namespace model {

#ifdef SSAVIZ_CUDA_KERNELS
namespace {
// metrics_cuda.cu's masked softmax for the attention rows on a device; SSAVIZ_CUDA_SOFTMAX=0 turns
// it off (torch's masked_fill_ and softmax instead). Checked on an H200 (2026-11-29, bench/gpu.sh):
// every family's export with it equals the CPU's as closely as without it, and it is 6-8% faster
// at 8,192 tokens.
bool CudaSoftmax() { return CudaSwitchesOfEnvironment().softmax; }
}  // namespace
#endif

namespace {
// temperatures_cuda.cu's fused temperatures on a device, with SSAVIZ_CUDA_TEMPERATURES=1 (off by
// default until bench/gpu.sh's exact stage has checked them on a device).
bool CudaTemperatures(const at::Tensor& t) {
#ifdef SSAVIZ_CUDA_KERNELS
    return CudaSwitchesOfEnvironment().temperatures && t.is_cuda();
#else
    (void)t;
    return false;
#endif
}
}  // namespace

namespace {

// ln i for the positions first + 1 .. first + count, [count] in float32 on `options`' device: a
// slice of a table kept a device (made outside inference mode, so the trainer's autograd can keep
// it), grown as texts grow. The same values wherever a row is computed, in a full analysis or an
// edit, and two ops fewer a layer than arange and log each time (issue 37: on a GPU each op is a
// launch).
at::Tensor LogPositions(int64_t first, int64_t count, const at::TensorOptions& options) {
    static std::mutex mutex;
    // By device; never destroyed, so no device memory is freed while the process exits (after
    // CUDA may have shut down).
    static auto* tables = new std::map<std::string, at::Tensor>();
    const at::Device device = options.device();
    std::lock_guard<std::mutex> lock(mutex);
    at::Tensor& table = (*tables)[device.str()];
    if (!table.defined() || table.size(0) < first + count) {
        const c10::InferenceMode not_inference(false);
        const int64_t size = std::max<int64_t>(first + count, table.defined() ? 2 * table.size(0) : 1024);
        table = at::log(at::arange(1, size + 1, at::TensorOptions().dtype(at::kFloat).device(device)));
    }
    return table.narrow(0, first, count);
}

// tanh(w . z + b): [..., 1 or H, T].
at::Tensor TokenTerm(const TemperatureForm& form, const TemperatureParams& params, const at::Tensor& z_heads, const at::Tensor& x) {
    const at::Tensor& w = params.tok_w;
    at::Tensor tok;
    if (form.token == TokenForm::Shared)  // z = the head's own q_i or v_j
        tok = w.dim() == 1 ? Matmul(z_heads, w) : (z_heads * w.unsqueeze(1)).sum(-1);  // [..., H, T]
    else                                  // z = x_i, the LayerNorm-1 output
        tok = w.dim() == 1 ? Matmul(x, w).unsqueeze(-2) : Matmul(x, w.t()).transpose(-1, -2);  // [..., 1 or H, T]
    if (params.tok_b.defined()) tok = tok + params.tok_b.reshape({-1, 1});
    return at::tanh(tok);
}

}  // namespace

TemperatureTerms TemperatureParts(const TemperatureForm& form, const TemperatureParams& params, const at::Tensor& z_heads,
                                  const at::Tensor& x, int64_t first) {
    // Leading batch dimensions ride along: z_heads [..., H, T, D], x [..., T, E] -> [..., H, T].
    const int64_t T = z_heads.size(-2);
    at::IntArrayRef sizes = z_heads.sizes();
    const at::IntArrayRef out = sizes.slice(0, sizes.size() - 1);
    TemperatureTerms terms;
    if (form.position == PositionForm::None) {
        terms.position = at::ones({1, T}, x.options());
    } else {
        at::Tensor p = params.pos.reshape({-1, 1});  // [1 or H, 1]
        at::Tensor s = form.position == PositionForm::Sigmoid ? at::sigmoid(p)
                     : form.position == PositionForm::ExpExp  ? at::exp(-at::exp(p))
                                                              : p;
        // [1, T], i counted from 1; in float32 first, as bf16 cannot count past 256 exactly.
        const at::Tensor log_i = AsType(LogPositions(first, T, x.options()), x.scalar_type()).unsqueeze(0);
        terms.position = 1 + s * log_i;
    }
    terms.token = form.token == TokenForm::None ? at::zeros({1, T}, x.options()) : TokenTerm(form, params, z_heads, x);
    terms.position = terms.position.expand(out);
    terms.token = terms.token.expand(out);
    return terms;
}

at::Tensor CombineTemperature(const TemperatureForm& form, const TemperatureTerms& t) {
    at::Tensor tau = form.combine == Combine::Sum ? t.position + t.token : t.position * (1 + t.token);
    return tau.contiguous();
}

at::Tensor EditedTemperature(const TemperatureForm& form, const TemperatureParams& params, const at::Tensor& z_heads, const at::Tensor& x,
                             int64_t first, const TemperatureEdit* edit, TemperatureTerms* terms) {
    *terms = TemperatureParts(form, params, z_heads, x, first);
    if (edit) {  // where() rather than arithmetic, so unedited heads keep their exact values
        terms->position = at::where(edit->keep_position, terms->position, 1);
        terms->token = at::where(edit->keep_token, terms->token, 0);
    }
    at::Tensor tau = CombineTemperature(form, *terms);
    if (edit && edit->any_scaled) tau = at::where(edit->scaled, 1 + AsType(edit->scale, tau.scalar_type()) * (tau - 1), tau);
    return tau;
}

at::Tensor FusedTemperature(const TemperatureForm& form, const TemperatureParams& params, const at::Tensor& z_heads, const at::Tensor& x,
                            int64_t first, const TemperatureEdit* edit, TemperatureTerms* terms) {
    namespace rows = temperature_rows;
    const bool device = z_heads.is_cuda();
    if (!device && !z_heads.is_cpu()) return at::Tensor();
    if (at::GradMode::is_enabled() || z_heads.dim() != 4 || x.dim() != 3 || z_heads.scalar_type() != at::kFloat) return at::Tensor();
    auto fits = [&](const at::Tensor& t) { return !t.defined() || (t.scalar_type() == at::kFloat && t.is_contiguous() && t.device() == z_heads.device()); };
    if (!fits(params.pos) || !fits(params.tok_w) || !fits(params.tok_b) || !fits(x) || z_heads.stride(3) != 1) return at::Tensor();
    const int64_t B = z_heads.size(0), H = z_heads.size(1), R = z_heads.size(2);
    rows::Inputs in;
    in.B = B, in.H = H, in.R = R;
    in.position = static_cast<int>(form.position);
    in.token = static_cast<int>(form.token);
    in.combine = static_cast<int>(form.combine);
    static_assert(static_cast<int>(PositionForm::ExpExp) == rows::kExpExp && static_cast<int>(TokenForm::Feature) == rows::kFeature &&
                  static_cast<int>(Combine::Product) == rows::kProduct);
    // A parameter of one value serves every head (stride 0); of H values, head h's is the h-th.
    auto head_stride = [](const at::Tensor& t) { return t.numel() == 1 ? int64_t{0} : int64_t{1}; };
    at::Tensor log_i;
    if (form.position != PositionForm::None) {
        if (params.pos.numel() != 1 && params.pos.numel() != H) return at::Tensor();
        log_i = LogPositions(first, R, z_heads.options());
        in.pos = params.pos.data_ptr<float>();
        in.pos_stride = head_stride(params.pos);
        in.log_i = log_i.data_ptr<float>();
    }
    if (form.token != TokenForm::None) {
        const at::Tensor& w = params.tok_w;
        in.length = form.token == TokenForm::Shared ? z_heads.size(3) : x.size(2);
        if (w.size(-1) != in.length || (w.dim() == 2 && w.size(0) != H) || w.dim() > 2) return at::Tensor();
        if (params.tok_b.defined() && params.tok_b.numel() != 1 && params.tok_b.numel() != H) return at::Tensor();
        if (form.token == TokenForm::Shared) {
            in.z = z_heads.data_ptr<float>();
            in.z_b = z_heads.stride(0), in.z_h = z_heads.stride(1), in.z_r = z_heads.stride(2);
        } else {
            in.z = x.data_ptr<float>();
            in.z_b = x.stride(0), in.z_r = x.stride(1);
        }
        in.w = w.data_ptr<float>();
        in.w_stride = w.dim() == 1 ? 0 : in.length;
        if (params.tok_b.defined()) {
            in.bias = params.tok_b.data_ptr<float>();
            in.bias_stride = head_stride(params.tok_b);
        }
    }
    at::Tensor scale;
    if (edit) {  // [H, 1] for one batch row, [B, H, 1] for more
        for (const at::Tensor* t : {&edit->keep_position, &edit->keep_token, &edit->scaled})
            if (t->numel() != B * H || t->scalar_type() != at::kBool || !t->is_contiguous() || t->device() != z_heads.device()) return at::Tensor();
        in.keep_position = static_cast<const uint8_t*>(edit->keep_position.data_ptr());
        in.keep_token = static_cast<const uint8_t*>(edit->keep_token.data_ptr());
        in.edit_b = H;
        if (edit->any_scaled) {
            scale = edit->scale.to(at::kFloat).contiguous();
            in.scaled = static_cast<const uint8_t*>(edit->scaled.data_ptr());
            in.scale = scale.data_ptr<float>();
        }
    }
    const at::Tensor out = at::empty({terms ? 3 : 1, B, H, R}, z_heads.options());
    in.tau = out.data_ptr<float>();
    if (terms) {
        in.position_out = in.tau + B * H * R;
        in.token_out = in.tau + 2 * B * H * R;
    }
    if (device) {
#ifdef SSAVIZ_CUDA_KERNELS
        const c10::DeviceGuard on_its_device(z_heads.device());  // the kernel runs on the current device
        const char* error = cuda::Temperatures(CurrentStream(z_heads), in);
        TORCH_CHECK(error == nullptr, "the temperature kernel failed: ", error);
#else
        return at::Tensor();
#endif
    } else {
        for (int64_t i = 0; i < B * H * R; ++i) rows::TemperatureAt(in, i);
    }
    if (terms) *terms = {out[1], out[2]};
    return out[0];
}

at::Tensor Temperature(const TemperatureForm& form, const TemperatureParams& params, const at::Tensor& z_heads,
                       const at::Tensor& x, int64_t first) {
    if (form.position == PositionForm::None && form.token != TokenForm::None) {
        // tau = 1 + token either way (1 * (1 + t) is 1 + t to the bit): no tensor of ones to add.
        at::IntArrayRef sizes = z_heads.sizes();
        return TokenTerm(form, params, z_heads, x).expand(sizes.slice(0, sizes.size() - 1)) + 1;
    }
    return CombineTemperature(form, TemperatureParts(form, params, z_heads, x, first));
}

at::Tensor Embed(const SsaGpt& m, const at::Tensor& ids, int64_t first) {
    const int64_t R = ids.size(-1);
    at::Tensor x = m.wte.index_select(0, ids.reshape({-1})).view({ids.size(0), R, m.config.n_embd});
    return m.wpe.defined() ? x + m.wpe.narrow(0, first, R) : x;  // RoPE families have no learned positions
}

namespace {
// RMSNorm over the last dimension in float32 whatever the compute dtype, as lit-gpt's rmsnorm.py
// and HF's LlamaRMSNorm compute it.
at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& w, double eps) {
    const at::Tensor xf = x.to(at::kFloat);
    const at::Tensor normed = xf * at::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
    return (w.to(at::kFloat) * normed).to(x.scalar_type());
}
}  // namespace

at::Tensor Norm(const ModelConfig& c, const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
    if (c.norm == NormKind::LayerNorm) return at::layer_norm(x, {c.n_embd}, w, b, c.layer_norm_epsilon);
    return RmsNorm(x, w, c.layer_norm_epsilon);
}

at::Tensor RopeFrequencies(const ModelConfig& c, const at::TensorOptions& options) {
    const int64_t n = c.rope_n_elem;
    const auto f64 = options.dtype(at::kDouble);
    const at::Tensor theta = at::pow(c.rope_base, -at::arange(0, n, 2, f64) / static_cast<double>(n));  // [n / 2]
    const ModelConfig::RopeLlama3& s = c.rope_llama3;
    if (s.factor <= 0) return theta;
    // Llama 3.1: long wavelengths (low frequencies) slowed by the factor, short ones kept, and
    // the band between interpolated, as HF's _compute_llama3_parameters does.
    const double original = s.original_max_positions;
    const at::Tensor wavelength = (2 * M_PI) / theta;
    const at::Tensor smooth = (original / wavelength - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
    const at::Tensor between = (1 - smooth) * theta / s.factor + smooth * theta;
    return at::where(wavelength > original / s.low_freq_factor, theta / s.factor,
                     at::where(wavelength < original / s.high_freq_factor, theta, between));
}

at::Tensor Rope(const ModelConfig& c, const at::Tensor& x, int64_t first) {
    const int64_t n = c.rope_n_elem, R = x.size(-2);
    if (n == 0) return x;
    // theta_i = base^(-2i / n) for the n / 2 pairs (d, d + n / 2), at positions p / condense_ratio;
    // angles in float64 so long positions keep their precision, then the compute dtype.
    const auto f64 = x.options().dtype(at::kDouble);
    const at::Tensor theta = RopeFrequencies(c, x.options());  // [n / 2]
    const at::Tensor angle = at::outer(at::arange(first, first + R, f64) / c.rope_condense_ratio, theta).repeat({1, 2});  // [R, n]
    const at::Tensor cos = at::cos(angle).to(x.scalar_type()), sin = at::sin(angle).to(x.scalar_type());
    const at::Tensor part = x.narrow(-1, 0, n);
    const at::Tensor rotated = at::cat({-part.narrow(-1, n / 2, n / 2), part.narrow(-1, 0, n / 2)}, -1);
    const at::Tensor roped = part * cos + rotated * sin;
    return n == x.size(-1) ? roped : at::cat({roped, x.narrow(-1, n, x.size(-1) - n)}, -1);
}

at::Tensor MaskedSoftmax(at::Tensor scores, int64_t first, int64_t window) {
    const int64_t R = scores.size(-2), T = scores.size(-1);
#ifdef SSAVIZ_CUDA_KERNELS
    if (scores.is_cuda() && scores.scalar_type() == at::kFloat && scores.numel() > 0 && CudaSoftmax()) {
        scores = scores.contiguous();
        const c10::DeviceGuard on_its_device(scores.device());  // the kernel runs on the current device
        const char* error = cuda::MaskedSoftmaxRows(CurrentStream(scores), scores.data_ptr<float>(), scores.numel() / T, R, T, first, window);
        TORCH_CHECK(error == nullptr, "the attention softmax kernel failed: ", error);
        return scores;
    }
#endif
    const at::Tensor all = at::ones({R, T}, scores.options().dtype(at::kBool));
    at::Tensor hidden = all.triu(first + 1);  // keys j > first + r
    if (window > 0 && first + R > window) hidden = hidden | all.tril(first - window);  // keys j <= first + r - window
    return at::softmax(scores.masked_fill_(hidden, -std::numeric_limits<float>::infinity()), -1);
}

at::Tensor ScaledQueries(const at::Tensor& q, const at::Tensor& tau_q) {
    // On a device the scale and the temperatures go on q's rows ([.., R, D]) rather than on the
    // scores ([.., R, T]): two passes over the scores fewer, where those passes are most of the
    // time. The products round differently, within the dtype's rounding (bench/gpu.sh's exactness
    // stage holds the device's float32 to the CPU within 1e-5).
    if (tau_q.defined() && tau_q.scalar_type() != q.scalar_type()) return at::Tensor();
    const at::Tensor scaled = q * (1.0 / std::sqrt(static_cast<double>(q.size(-1))));
    return tau_q.defined() ? scaled * tau_q.unsqueeze(-1) : scaled;
}

at::Tensor AttentionRowsScaled(const at::Tensor& scaled_q, const at::Tensor& k, int64_t first, int64_t window) {
    return MaskedSoftmax(GroupedScores(scaled_q, k.transpose(-1, -2)), first, window);
}

at::Tensor AttentionRows(const at::Tensor& q, const at::Tensor& k, const at::Tensor& tau_q, int64_t first, int64_t window,
                         at::Tensor* scores_before_tau) {
    if (q.is_cuda())
        if (const at::Tensor scaled = ScaledQueries(q, tau_q); scaled.defined()) return AttentionRowsScaled(scaled, k, first, window);
    at::Tensor scores = GroupedScores(q, k.transpose(-1, -2)) * (1.0 / std::sqrt(static_cast<double>(q.size(-1))));
    if (tau_q.defined()) {
        if (scores_before_tau) *scores_before_tau = scores;  // a tensor of its own: the product below is another
        scores = scores * tau_q.unsqueeze(-1);
    }
    return MaskedSoftmax(scores, first, window);
}

at::Tensor RepeatHeads(const at::Tensor& t, int64_t n, int64_t dim) {
    std::vector<int64_t> sizes = t.sizes().vec();
    sizes.insert(sizes.begin() + dim + 1, n);
    return t.unsqueeze(dim + 1).expand(sizes).flatten(dim, dim + 1);
}

int64_t ValueHeads(const ModelConfig& c, bool vanilla, const TemperatureEdit* edit) {
    // A what-if that turns some query heads' value temperature off within a group makes the
    // values they read differ by query head: then each query head gets its own values.
    const bool split = !vanilla && c.value.Active() && c.KvHeads() != c.n_head && edit && edit->any_value_off;
    return split ? c.n_head : c.KvHeads();
}

BlockInput BlockIn(const ModelConfig& c, const LayerWeights& w, const at::Tensor& x, bool vanilla, int64_t first, const TemperatureEdit* edit) {
    const int64_t B = x.size(0), R = x.size(1), H = c.n_head, G = c.KvHeads(), D = c.HeadSize();
    BlockInput in;
    in.h = Norm(c, x, w.ln1_w, w.ln1_b);  // [B, R, E]
    const at::Tensor qkv = AffineRows(in.h, w.attn_w, w.attn_b);  // [B, R, (H + 2G) D]
    const at::Tensor all_heads = qkv.view({B, R, H + 2 * G, D}).transpose(1, 2);  // [B, H + 2G, R, D]
    at::Tensor q = all_heads.narrow(1, 0, H), k = all_heads.narrow(1, H, G), v = all_heads.narrow(1, H + G, G);  // [B, H, R, D], [B, G, R, D] twice
    if (w.q_norm_w.defined()) {  // Qwen 3: each head's q and k RMS-normalised before RoPE
        q = RmsNorm(q, w.q_norm_w, c.layer_norm_epsilon);
        k = RmsNorm(k, w.k_norm_w, c.layer_norm_epsilon);
    }

    // Temperatures read q and v as projected (SPEC section 1), before RoPE turns q and k (with
    // Qwen 3's q norm, the normalised q: the query attention reads, positions aside).
    if (!vanilla && c.query.Active()) {
        if (CudaTemperatures(q)) in.tau_q = FusedTemperature(c.query, w.q, q, in.h, first, edit, &in.terms);
        if (!in.tau_q.defined()) in.tau_q = EditedTemperature(c.query, w.q, q, in.h, first, edit, &in.terms);  // [B, H, R]
    }
    if (c.Rope()) {
        q = Rope(c, q, first);
        k = Rope(c, k, first);
    }
    in.q = q;
    in.k = k;
    in.vs = v;  // [B, G, R, D]: the values as attention sums them
    if (!vanilla && c.value.Active()) {
        at::Tensor tau_kv = CudaTemperatures(v) ? FusedTemperature(c.value, w.v, v, in.h, first, nullptr, nullptr) : at::Tensor();
        if (!tau_kv.defined()) tau_kv = Temperature(c.value, w.v, v, in.h, first);  // [B, G, R]
        in.tau_v = G == H ? tau_kv : RepeatHeads(tau_kv, H / G, 1);         // [B, H, R]: each query head reads its group's
        if (edit) in.tau_v = at::where(edit->value_off, 1, in.tau_v);
        if (ValueHeads(c, vanilla, edit) != G)
            in.vs = RepeatHeads(v, H / G, 1) * in.tau_v.unsqueeze(-1);  // [B, H, R, D]
        else
            in.vs = v * (G == H ? in.tau_v : tau_kv).unsqueeze(-1);
    }
    return in;
}

at::Tensor BlockOut(const ModelConfig& c, const LayerWeights& w, const at::Tensor& x, const at::Tensor& h, const at::Tensor& y) {
    const int64_t B = y.size(0), H = y.size(1), R = y.size(2), D = y.size(3);
    const at::Tensor attn_out = AffineRows(y.transpose(1, 2).reshape({B, R, H * D}), w.proj_w, w.proj_b);
    auto mlp = [&](const at::Tensor& in) {
        at::Tensor a = AffineRows(in, w.fc_w, w.fc_b);
        if (c.mlp == MlpKind::SwiGlu) {
            const int64_t I = a.size(-1) / 2;
            a = at::silu(a.narrow(-1, 0, I)) * a.narrow(-1, I, I);
        } else {
            a = at::gelu(a, c.activation == Activation::GeluNew ? "tanh" : "none");
        }
        return AffineRows(a, w.mlp_proj_w, w.mlp_proj_b);
    };
    if (c.parallel_residual) return x + attn_out + mlp(c.shared_attention_norm ? h : Norm(c, x, w.ln2_w, w.ln2_b));
    const at::Tensor out = x + attn_out;
    return out + mlp(Norm(c, out, w.ln2_w, w.ln2_b));
}

void CaptureTemperatures(const BlockInput& in, BlockCapture* capture) {
    const at::Tensor& q = in.q;
    const auto shape = q.sizes().slice(0, 3);  // [B, H, R]
    const auto opts = q.options();
    capture->tau_q = in.tau_q.defined() ? in.tau_q : at::ones(shape, opts);
    capture->tau_v = in.tau_v.defined() ? in.tau_v : at::ones(shape, opts);
    capture->tau_q_terms = in.tau_q.defined() ? in.terms : TemperatureTerms{at::ones(shape, opts), at::zeros(shape, opts)};
}

at::Tensor Block(const ModelConfig& c, const LayerWeights& w, const at::Tensor& x, bool vanilla, BlockCapture* capture,
                 int64_t first, const KeyValues* prefix, const TemperatureEdit* edit) {
    const int64_t R = x.size(1);
    BlockInput in = BlockIn(c, w, x, vanilla, first, edit);
    at::Tensor k = in.k, vs = in.vs;
    if (prefix && prefix->k.size(2) >= first + R && prefix->vs.size(1) == vs.size(1)) {  // room: the rows written in place
        prefix->k.narrow(2, first, R).copy_(k);
        prefix->vs.narrow(2, first, R).copy_(vs);
        k = prefix->k.narrow(2, 0, first + R);
        vs = prefix->vs.narrow(2, 0, first + R);
    } else if (prefix && first > 0) {  // every key and value the rows attend to: [B, G, first + R, D]
        k = at::cat({prefix->k.narrow(2, 0, first), k}, 2);
        vs = at::cat({prefix->vs.narrow(2, 0, first), vs}, 2);
    }
    at::Tensor attn = AttentionRows(in.q, k, in.tau_q, first, w.window, capture && capture->keep_scores ? &capture->scores : nullptr);  // [B, H, R, first + R]
    const at::Tensor out = BlockOut(c, w, x, in.h, GroupedMatmul(attn, vs));
    if (capture) {
        capture->attention = attn;
        capture->q = in.q;
        capture->k = k;
        capture->vs = vs;
        CaptureTemperatures(in, capture);
    }
    return out;
}

at::Tensor Logits(const SsaGpt& m, const at::Tensor& x) {
    return AffineRows(Norm(m.config, x, m.ln_f_w, m.ln_f_b), m.lm_head.t(), m.lm_head_b);
}

Status CheckIds(const ModelConfig& c, const std::vector<int32_t>& ids) {
    const int64_t T = static_cast<int64_t>(ids.size());
    if (T == 0) return Fail("no tokens to run");
    if (T > c.n_positions)
        return Fail(std::to_string(T) + " tokens exceed the model's context of " + std::to_string(c.n_positions));
    for (size_t i = 0; i < ids.size(); ++i)
        if (ids[i] < 0 || ids[i] >= c.vocab_size)
            return Fail("token id " + std::to_string(ids[i]) + " at position " + std::to_string(i) + " is outside the vocabulary of " +
                        std::to_string(c.vocab_size));
    return Ok{};
}

Result<ForwardOutput> Forward(const SsaGpt& m, const std::vector<int32_t>& ids, const ForwardOptions& options) {
    const ModelConfig& c = m.config;
    const int64_t T = static_cast<int64_t>(ids.size()), H = c.n_head, L = c.n_layer;
    if (auto valid = CheckIds(c, ids); !valid) return Fail(valid.error());

    c10::InferenceMode guard;
    const auto opts = m.wte.options().dtype(at::kFloat);  // captures in float32 whatever the compute dtype
    at::Tensor index = at::tensor(at::ArrayRef<int32_t>(ids), at::kInt).to(m.device(), at::kLong).unsqueeze(0);
    at::Tensor x = Embed(m, index);  // [1, T, E]

    ForwardOutput out;
    out.attention = at::empty({L, H, T, T}, opts);
    out.tau_q = at::empty({L, H, T}, opts);
    out.tau_v = at::empty({L, H, T}, opts);
    for (int64_t l = 0; l < L; ++l) {
        if (options.cancel && options.cancel->load()) return Fail("cancelled");
        BlockCapture capture;
        x = Block(c, m.layers[l], x, options.vanilla, &capture);
        out.attention[l].copy_(capture.attention[0]);
        out.tau_q[l].copy_(capture.tau_q[0]);
        out.tau_v[l].copy_(capture.tau_v[0]);
    }
    if (options.want_logits) out.logits = Logits(m, x)[0].to(at::kFloat);  // [T, V]
    return out;
}

}  // namespace model
