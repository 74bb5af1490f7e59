#include "model/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <ATen/Parallel.h>

#include <c10/core/InferenceMode.h>

#include "model/ssa_gpt.h"

namespace model {
namespace {

// Key counts 1..T for rows 0..T-1, shaped to broadcast against [..., T].
at::Tensor KeyCounts(const at::Tensor& attention) {
    return at::arange(1, attention.size(-1) + 1, attention.options());
}

at::Tensor NegPlogP(const at::Tensor& p) { return -at::xlogy(p, p); }  // 0 ln 0 = 0

// Sum of each row's k largest weights. On the CPU one pass per row keeping the k largest beats
// at::topk by ~20x here (it selects and sorts in general); other devices use topk.
at::Tensor TopKMass(const at::Tensor& attention, int64_t k) {
    const int64_t T = attention.size(-1);
    k = std::min(k, T);
    if (!attention.is_cpu() || attention.scalar_type() != at::kFloat) return std::get<0>(attention.topk(k, -1)).sum(-1);
    constexpr int64_t kMax = 8;
    assert(k <= kMax);
    const at::Tensor a = attention.contiguous();
    const int64_t rows = a.numel() / T;
    at::Tensor out = at::empty({rows}, a.options());
    const float* in = a.data_ptr<float>();
    float* mass = out.data_ptr<float>();
    at::parallel_for(0, rows, 16, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
            float best[kMax];  // descending
            std::fill(best, best + k, -std::numeric_limits<float>::infinity());
            for (const float* v = in + r * T; v != in + (r + 1) * T; ++v) {
                if (!(*v > best[k - 1])) continue;
                int64_t i = k - 1;
                for (; i > 0 && best[i - 1] < *v; --i) best[i] = best[i - 1];
                best[i] = *v;
            }
            float sum = 0;
            for (int64_t i = 0; i < k; ++i) sum += best[i];
            mass[r] = sum;
        }
    });
    return out.view(a.sizes().slice(0, a.dim() - 1));
}

}  // namespace

RowMetricTensors ComputeRowMetrics(const at::Tensor& attention) {
    c10::InferenceMode guard;
    at::Tensor n = KeyCounts(attention);
    RowMetricTensors r;
    r.entropy = NegPlogP(attention).sum(-1);
    r.normalized_entropy = at::where(n > 1, r.entropy / at::log(n), at::zeros_like(r.entropy));
    r.spikiness = 1.0 / (n * attention.square().sum(-1));
    r.max_weight = attention.amax(-1);
    r.top5_mass = TopKMass(attention, 5);
    r.effective_support = at::exp(r.entropy);
    r.sink_mass = attention.select(-1, 0);
    return r;
}

at::Tensor JsDivergence(const at::Tensor& p, const at::Tensor& q) {
    c10::InferenceMode guard;
    return JsDivergence(p, q, NegPlogP(p).sum(-1), NegPlogP(q).sum(-1));
}

at::Tensor JsDivergence(const at::Tensor& p, const at::Tensor& q, const at::Tensor& entropy_p, const at::Tensor& entropy_q) {
    c10::InferenceMode guard;
    // 0.5 KL(p||m) + 0.5 KL(q||m) with m = (p + q) / 2 expands to H(m) - (H(p) + H(q)) / 2: one
    // pass of logarithms instead of four. Rounding can dip a hair below 0 for equal rows.
    at::Tensor entropy_m = NegPlogP(0.5 * (p + q)).sum(-1);
    return (entropy_m - 0.5 * (entropy_p + entropy_q)).clamp_min(0);
}

at::Tensor L1Distance(const at::Tensor& p, const at::Tensor& q) {
    c10::InferenceMode guard;
    return (p - q).abs().sum(-1);
}

at::Tensor RowMean(const at::Tensor& rows) {
    c10::InferenceMode guard;
    const int64_t T = rows.size(-1);
    if (T < 2) return at::full(rows.sizes().slice(0, rows.dim() - 1), NAN, rows.options());
    return rows.narrow(-1, 1, T - 1).mean(-1);
}

QkSpectrum ComputeQkSpectrum(const SsaGpt& model) {
    c10::InferenceMode guard;
    const ModelConfig& c = model.config;
    const int64_t E = c.n_embd, H = c.n_head, D = c.HeadSize();
    const double scale = 1.0 / std::sqrt(static_cast<double>(D));
    std::vector<at::Tensor> opnorm, eig_mean, eig_var;
    for (const LayerWeights& w : model.layers) {
        at::Tensor attn = w.attn_w.to(at::kCPU, at::kDouble);              // [E, 3E]
        at::Tensor wq = attn.narrow(1, 0, E).view({E, H, D}).permute({1, 0, 2});  // [H, E, D]
        at::Tensor wk = attn.narrow(1, E, E).view({E, H, D}).permute({1, 0, 2});  // [H, E, D]
        // ||Wq Wk^T||_2 through thin QR factors: Wq Wk^T = Qq (Rq Rk^T) Qk^T, so the norm is
        // that of the D x D core, not of an E x E matrix.
        at::Tensor rq = std::get<1>(at::linalg_qr(wq)), rk = std::get<1>(at::linalg_qr(wk));  // [H, D, D]
        opnorm.push_back(std::get<0>(at::linalg_svdvals(at::matmul(rq, rk.transpose(1, 2))).max(-1)) * scale);
        at::Tensor eig = at::real(at::linalg_eigvals(at::matmul(wk.transpose(1, 2), wq) * scale));  // [H, D]
        eig_mean.push_back(eig.mean(-1));
        eig_var.push_back(eig.var(-1, /*unbiased=*/false));
    }
    return {at::stack(opnorm).to(at::kFloat), at::stack(eig_mean).to(at::kFloat), at::stack(eig_var).to(at::kFloat)};
}

}  // namespace model
