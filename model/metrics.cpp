#include "model/metrics.h"

#include <algorithm>
#include <cmath>

#include <c10/core/InferenceMode.h>

#include "model/ssa_gpt.h"

namespace model {
namespace {

// Key counts 1..T for rows 0..T-1, shaped to broadcast against [..., T].
at::Tensor KeyCounts(const at::Tensor& attention) {
    return at::arange(1, attention.size(-1) + 1, attention.options());
}

at::Tensor NegPlogP(const at::Tensor& p) { return -at::xlogy(p, p); }  // 0 ln 0 = 0

}  // namespace

RowMetricTensors ComputeRowMetrics(const at::Tensor& attention) {
    c10::InferenceMode guard;
    const int64_t T = attention.size(-1);
    at::Tensor n = KeyCounts(attention);
    RowMetricTensors r;
    r.entropy = NegPlogP(attention).sum(-1);
    r.normalized_entropy = at::where(n > 1, r.entropy / at::log(n), at::zeros_like(r.entropy));
    r.spikiness = 1.0 / (n * attention.square().sum(-1));
    r.max_weight = std::get<0>(attention.max(-1));
    r.top5_mass = std::get<0>(attention.topk(std::min<int64_t>(5, T), -1)).sum(-1);
    r.effective_support = at::exp(r.entropy);
    r.sink_mass = attention.select(-1, 0);
    return r;
}

at::Tensor JsDivergence(const at::Tensor& p, const at::Tensor& q) {
    c10::InferenceMode guard;
    at::Tensor m = 0.5 * (p + q);
    // KL(p || m) = sum p ln p - p ln m; rows where p = 0 contribute 0 in both terms.
    at::Tensor kl_p = (at::xlogy(p, p) - at::xlogy(p, m)).sum(-1);
    at::Tensor kl_q = (at::xlogy(q, q) - at::xlogy(q, m)).sum(-1);
    return (0.5 * (kl_p + kl_q)).clamp_min(0);
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
