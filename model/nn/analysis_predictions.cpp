// The predictions of an analysis (analysis_predictions_torch.h).
#include "model/nn/analysis_predictions_torch.h"

#include <algorithm>
#include <limits>
#include <tuple>

#include <ATen/Parallel.h>
#include <c10/core/DeviceGuard.h>

#include "model/nn/runtime.h"
#ifdef SSAVIZ_CUDA_KERNELS
#include "model/nn/metrics_cuda.h"
#include "model/nn/runtime_torch.h"
#endif

namespace model {

namespace {

#ifdef SSAVIZ_CUDA_KERNELS
static_assert(Analysis::kTopK == cuda::kTopLogits, "the CUDA scan keeps kTopLogits logits a row");

// The CPU's scan below on a CUDA device (metrics_cuda.cu's TopLogits), with
// SSAVIZ_CUDA_PREDICTIONS=1 (off by default until bench/gpu.sh has checked it on a device): one
// kernel a block of rows where topk, a gather and a comparison were some ten.
bool CudaPredictions(const at::Tensor& logits) {
    return CudaSwitchesOfEnvironment().predictions && logits.is_cuda() && logits.scalar_type() == at::kFloat && logits.is_contiguous() && logits.size(1) < (int64_t{1} << 30);
}
#endif

// The logits computed at once, [sides, rows, V] floats: the heap's largest block (see
// KeepFreedMemoryForReuse). Each product with the head reads (and sgemm packs) all of it, [V, E],
// so the fewer the blocks the better: 8 MB blocks (20 rows a side of GPT-2) took 1.9 s of a full
// analysis of 1,024 tokens of GPT-2 small, 32 MB ones 1.5 s.
// On a GPU, larger blocks: fewer kernels.
constexpr size_t kLogitsBytes = size_t{32} << 20, kDeviceLogitsBytes = size_t{512} << 20;

}  // namespace

RowPredictions PredictRows(const at::Tensor& logits, const at::Tensor& targets) {
    const int64_t n = logits.size(0), V = logits.size(1), m = targets.size(0), K = std::min<int64_t>(Analysis::kTopK, V);
    RowPredictions out;
    out.log_sum_exp = at::logsumexp(logits, -1);
#ifdef SSAVIZ_CUDA_KERNELS
    if (CudaPredictions(logits)) {
        out.top_logits = at::empty({n, K}, logits.options());
        out.top_ids = at::empty({n, K}, logits.options().dtype(at::kLong));
        out.actual = at::empty({m}, logits.options());
        out.rank = at::empty({m}, logits.options().dtype(at::kLong));
        const at::Tensor target = targets.to(logits.device(), at::kLong).contiguous();
        const c10::DeviceGuard on_its_device(logits.device());
        const char* error = cuda::TopLogits(CurrentStream(logits), logits.data_ptr<float>(), n, V, static_cast<int>(K), target.data_ptr<int64_t>(), m,
                                            out.top_logits.data_ptr<float>(), out.top_ids.data_ptr<int64_t>(), out.actual.data_ptr<float>(),
                                            out.rank.data_ptr<int64_t>());
        TORCH_CHECK(error == nullptr, "the predictions kernel failed: ", error);
        return out;
    }
#endif
    if (!logits.is_cpu()) {
        auto top = at::topk(logits, K, -1);
        out.top_logits = std::get<0>(top);
        out.top_ids = std::get<1>(top);
        const at::Tensor head = logits.narrow(0, 0, m);
        const at::Tensor actual = head.gather(1, targets.unsqueeze(1));  // [m, 1]
        out.actual = actual.squeeze(1);
        out.rank = (head > actual).sum(1);
        return out;
    }
    out.top_ids = at::empty({n, K}, at::kLong);
    out.top_logits = at::empty({n, K}, at::kFloat);
    out.actual = at::empty({m}, at::kFloat);
    out.rank = at::empty({m}, at::kLong);
    const at::Tensor target = targets.to(at::kCPU, at::kLong).contiguous();
    const float* x = logits.data_ptr<float>();
    const int64_t* t = target.data_ptr<int64_t>();
    int64_t *top_ids = out.top_ids.data_ptr<int64_t>(), *rank = out.rank.data_ptr<int64_t>();
    float *top = out.top_logits.data_ptr<float>(), *actual = out.actual.data_ptr<float>();
    at::parallel_for(0, n, 1, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
            const float* row = x + r * V;
            float* best = top + r * K;  // descending; a later equal logit does not pass an earlier one
            int64_t* best_id = top_ids + r * K;
            std::fill(best, best + K, -std::numeric_limits<float>::infinity());
            std::fill(best_id, best_id + K, int64_t{0});
            const float a = r < m ? row[t[r]] : std::numeric_limits<float>::infinity();
            int64_t above = 0;
            for (int64_t j = 0; j < V; ++j) {
                const float v = row[j];
                above += v > a;
                if (!(v > best[K - 1])) continue;
                int64_t i = K - 1;
                for (; i > 0 && best[i - 1] < v; --i) best[i] = best[i - 1], best_id[i] = best_id[i - 1];
                best[i] = v;
                best_id[i] = j;
            }
            if (r < m) actual[r] = a, rank[r] = above;
        }
    });
    return out;
}

namespace {

// Rows < keep of the last analysis's `old` (undefined: none), then the new rows in parts, along dimension 0.
at::Tensor JoinPositions(const at::Tensor& old, int64_t keep, const std::vector<at::Tensor>& parts) {
    at::Tensor fresh = parts.empty() ? at::Tensor() : parts.size() == 1 ? parts[0] : at::cat(parts, 0);
    if (!old.defined() || keep == 0) return fresh.defined() ? fresh : at::empty({0}, old.defined() ? old.options() : at::TensorOptions());
    const at::Tensor kept = old.narrow(0, 0, keep);
    return fresh.defined() ? at::cat({kept, fresh}, 0) : kept.contiguous();
}

}  // namespace

PerSide<SidePredictions> Predict(const AnalysisPlan& plan, const std::vector<int32_t>& ids, const std::vector<at::Tensor>& streams,
                                 const PerSide<SidePredictions>& old, RowBuffers& buffers, at::Tensor* next_logits,
                                 const std::function<void(float)>& progress) {
    const int64_t p = plan.p, T = plan.T;
    const at::Tensor next_ids = at::tensor(at::ArrayRef<int32_t>(ids), at::kInt).to(plan.device, at::kLong);
    const int64_t lo = std::max<int64_t>(p - 1, 0);
    PerSide<SidePredictions> next;
    for (size_t r = 0; r < plan.runs.size(); ++r) {
        const Run& run = plan.runs[r];
        const SsaGpt& model = *run.model;
        const int64_t V = model.config.vocab_size;
        for (int i = 0; i < run.Rows(); ++i) {  // the rows below p are the last analysis's, in a buffer the new ones are written into
            const Side s = run.sides[i];
            if (p == T) {
                next[s].hidden = old[s].hidden.narrow(1, 0, T);
                continue;
            }
            const at::Tensor fresh = streams[r].narrow(0, i, 1);  // [1, T - p, E]
            const at::Tensor room = buffers.Acquire(StreamSlot(model.config.n_layer, s), {1, T, fresh.size(2)}, 1, fresh.options(),
                                                    p > 0 ? old[s].hidden : at::Tensor(), p, model.config.n_positions);
            room.narrow(1, p, T - p).copy_(fresh);
            next[s].hidden = room.narrow(1, 0, T);
        }
        const int64_t rows = std::max<int64_t>(1, static_cast<int64_t>((plan.device.is_cpu() ? kLogitsBytes : kDeviceLogitsBytes) / (sizeof(float) * static_cast<size_t>(V) * run.Rows())));
        PerSide<std::vector<at::Tensor>> loss, rank, top_ids, top_probs;
        for (int64_t first = lo; first < T; first += rows) {
            const int64_t n = std::min(rows, T - first), m = std::min(n, T - 1 - first);  // m rows have a next token
            std::vector<at::Tensor> hidden;
            for (Side s : run.sides) hidden.push_back(next[s].hidden.narrow(1, first, n));
            const at::Tensor logits = Logits(model, hidden.size() == 1 ? hidden[0] : at::cat(hidden, 0)).to(at::kFloat);  // [sides, n, V]
            for (int i = 0; i < run.Rows(); ++i) {
                const Side s = run.sides[i];
                const at::Tensor side_logits = logits[i].contiguous();  // [n, V]
                const RowPredictions rp = PredictRows(side_logits, next_ids.narrow(0, first + 1, m));
                top_ids[s].push_back(rp.top_ids);
                top_probs[s].push_back(at::exp(rp.top_logits - rp.log_sum_exp.unsqueeze(1)));
                if (m > 0) {
                    loss[s].push_back(rp.log_sum_exp.narrow(0, 0, m) - rp.actual);
                    rank[s].push_back(rp.rank);
                }
                if (s == Side::Ssa && first + n == T) *next_logits = side_logits[n - 1];
            }
            if (progress) progress((r + static_cast<float>(first + n - lo) / (T - lo)) / plan.runs.size());
        }
        for (Side s : run.sides) {
            const SidePredictions was = p > 0 ? old[s] : SidePredictions{};
            next[s].loss = JoinPositions(was.loss, lo, loss[s]);
            next[s].rank = JoinPositions(was.rank, lo, rank[s]);
            next[s].top_ids = JoinPositions(was.top_ids, lo, top_ids[s]);
            next[s].top_probs = JoinPositions(was.top_probs, lo, top_probs[s]);
        }
    }
    return next;
}

}  // namespace model
