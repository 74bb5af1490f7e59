// Sparsity metrics of SPEC section 2. Attention maps are [..., T, T], row-major, with row i
// (0-based) covering keys 0..i and zero above the diagonal; every row metric is [..., T]. Row
// aggregates skip the first row, which has a single key.
#pragma once

#include <iterator>
#include <string>
#include <vector>

#include <ATen/ATen.h>

namespace model {

struct SsaGpt;

struct RowMetricTensors {
    at::Tensor entropy;             // H_i = -sum p ln p, nats
    at::Tensor normalized_entropy;  // H_i / ln(i+1); 0 for the first row (its keys under a window: CountKeysThroughWindow)
    at::Tensor spikiness;           // 1 / ((i+1) sum p^2): 1 uniform, 1/(i+1) one-hot (the same)
    at::Tensor max_weight;          // also the top-1 mass
    at::Tensor top5_mass;
    at::Tensor effective_support;   // exp(H_i)
    at::Tensor sink_mass;           // weight on the first token
};
// Every field of RowMetricTensors with its name in MapMetrics (analysis.h), for code that treats them alike.
struct RowMetricField {
    const char* name;
    at::Tensor RowMetricTensors::*tensor;
};
inline constexpr RowMetricField kRowMetricFields[] = {
    {"entropy", &RowMetricTensors::entropy},     {"normalized_entropy", &RowMetricTensors::normalized_entropy},
    {"spikiness", &RowMetricTensors::spikiness}, {"max_weight", &RowMetricTensors::max_weight},
    {"top5_mass", &RowMetricTensors::top5_mass}, {"effective_support", &RowMetricTensors::effective_support},
    {"sink_mass", &RowMetricTensors::sink_mass}};

// These use torch ops on the device the maps live on, and accept any map. Maps may be only rows
// first..first+R-1 of a longer one, [..., R, T] with T >= first + R: row r has first + r + 1 keys.
RowMetricTensors ComputeRowMetrics(const at::Tensor& attention, int64_t first = 0);
at::Tensor JsDivergence(const at::Tensor& p, const at::Tensor& q);  // [..., T] nats
// The same from the rows' entropies when they are already known: H((p+q)/2) - (H(p) + H(q)) / 2.
at::Tensor JsDivergence(const at::Tensor& p, const at::Tensor& q, const at::Tensor& entropy_p, const at::Tensor& entropy_q);
at::Tensor L1Distance(const at::Tensor& p, const at::Tensor& q);    // [..., T]

// Everything the analysis reports about a map p and its comparison q (same shape).
struct MapComparison {
    RowMetricTensors p, q;
    at::Tensor js;  // [..., T] JS divergence of each p row from its q row, nats
    at::Tensor l1;  // [..., T] sum_j |p - q|
};
// In float32 on the CPU, or on a CUDA device where the build has metrics_cuda.cu's kernel: one
// fused pass over each row pair, reading keys 0..i only, so both maps must be causal (zero above
// the diagonal, as the forward pass makes them; debug builds check on the CPU).
// Elsewhere, CompareMapsGeneric.
// `first` as for ComputeRowMetrics.
MapComparison CompareMaps(const at::Tensor& p, const at::Tensor& q, int64_t first = 0);
bool HasCudaKernels();  // this build has metrics_cuda.cu's kernel (its LibTorch has CUDA)
// The same from the torch ops above, on any device and for any map; the fused path's reference.
MapComparison CompareMapsGeneric(const at::Tensor& p, const at::Tensor& q, int64_t first = 0);

// A fine-tune's three sides (SPEC section 9): p against q as CompareMaps (the SSA side against
// tau = 1), and a third map r (the base) measured and compared with each, every row of the three
// read once (the fused pass as CompareMaps's, on the same conditions).
struct ThreeWayComparison {
    MapComparison pq;
    RowMetricTensors r;
    at::Tensor js_pr, l1_pr;  // [..., T] p against r
    at::Tensor js_qr, l1_qr;  // [..., T] q against r
};
ThreeWayComparison CompareThreeMaps(const at::Tensor& p, const at::Tensor& q, const at::Tensor& r, int64_t first = 0);
ThreeWayComparison CompareThreeMapsGeneric(const at::Tensor& p, const at::Tensor& q, const at::Tensor& r, int64_t first = 0);

// CompareMaps (r undefined) or CompareThreeMaps as one tensor, [RowMeasureCount(maps), ..., R]: map
// m's row metrics in kRowMetricFields' order from RowMeasureMetric(m, 0), then each pair's JS, then
// each pair's L1 (pairs in CompareThreeMaps's order: (p, q), (p, r), (q, r)). The fused pass writes
// all of them into one allocation where the fields' own tensors are 16 or 27 (issue 37: on a GPU
// each op costs the host microseconds, and the analysis measures every block of rows); elsewhere
// the generic fields are stacked.
constexpr int kRowMetricCount = static_cast<int>(std::size(kRowMetricFields));
constexpr int MapPairs(int maps) { return maps * (maps - 1) / 2; }
constexpr int RowMeasureCount(int maps) { return maps * kRowMetricCount + 2 * MapPairs(maps); }
constexpr int RowMeasureMetric(int map, int field) { return map * kRowMetricCount + field; }
constexpr int RowMeasureJs(int maps, int pair) { return maps * kRowMetricCount + pair; }
constexpr int RowMeasureL1(int maps, int pair) { return maps * kRowMetricCount + MapPairs(maps) + pair; }
at::Tensor CompareMapsStacked(const at::Tensor& p, const at::Tensor& q, const at::Tensor& r, int64_t first = 0);
// Under a sliding window of `window` keys a row sees min(i + 1, window) of them, not i + 1 (SPEC
// section 1: i is the number of keys a row can see): makes map m's normalized entropy and
// spikiness in a CompareMapsStacked tensor of rows first.. ([fields, ..., R]) count those, in
// place (a flat row over its visible keys reads 1 in both). The maps' passes count i + 1 keys
// whatever the window; the analysis calls this once for each side that has one. Window 0: none.
void CountKeysThroughWindow(const at::Tensor& stacked, int map, int64_t first, int64_t window);

// Issue 37: the attention rows' softmax (forward.h's MaskedSoftmax) and CompareMapsStacked in one
// pass on a CUDA device. `scores`: the sides' score maps in CompareMapsStacked's order (2 or 3),
// [..., R, T] of one shape, contiguous float32 on one CUDA device, with one mask (`first` as above,
// `window` as MaskedSoftmax's). Each is softmaxed in place as MaskedSoftmax writes it, and their
// CompareMapsStacked tensor is returned, both bit for bit, without reading the maps again. Undefined,
// with nothing written, where there is no such pass: on the CPU, for other maps, in a build without
// the kernels, and unless SSAVIZ_CUDA_SOFTMAX_MEASURES=1 (off until a device has checked it;
// SSAVIZ_CUDA_SOFTMAX=0 turns it off too).
at::Tensor SoftmaxAndCompareStacked(const std::vector<at::Tensor>& scores, int64_t first, int64_t window);

// Mean over rows 1..T-1 (skipping the single-key row): [..., T] -> [...]; NaN when T == 1.
at::Tensor RowMean(const at::Tensor& rows);

struct QkSpectrum {
    at::Tensor opnorm;    // [L, H] ||W_q^h (W_k^h)^T||_2 / sqrt(D)
    at::Tensor eig_mean;  // [L, H] mean of Re(eig((W_k^h)^T W_q^h / sqrt(D)))
    at::Tensor eig_var;   // [L, H] population variance of the same
};
QkSpectrum ComputeQkSpectrum(const SsaGpt& model);  // float64 on the CPU: D x D problems

// How far a fine-tune's weights moved from its base's, each as ||W - W_base||_F / ||W_base||_F
// (0: unchanged; NaN where the base's is 0), in float64: the head's slice of W_q, W_k, W_v (a kv
// head's, shared by its query heads) and W_o (its rows of the output projection); each layer's
// MLP, its weights and biases together; the token and position embeddings together; an untied
// output head (and its bias). A head's q, k, v include its slice of the attention's bias. The
// norms by themselves, their scales and biases: each layer's before its attention (with Qwen 3's
// q and k norms, which scale q.k as the weights do), before its MLP (NaN where the attention's is
// shared) and the final one. The temperatures are the other part; the output projection's bias
// (shared by the heads) is left out. The two are of one shape (Engine::OpenBase checks it). Measured on the
// weights as the models hold them: where one computes in a dtype it did not store (--dtype bf16 of
// float32 weights), `rounded_to` names it, and a move below its rounding (~4e-3 for bf16) is noise.
struct WeightDrift {
    at::Tensor q, k, v, o;  // [L, H]
    at::Tensor mlp;         // [L]
    at::Tensor norm_attention, norm_mlp;  // [L]
    double norm_final = NAN;
    double embeddings = NAN;
    double head = NAN;      // the untied output head's; NaN where it is tied to the embeddings
    std::string rounded_to;  // "BFloat16" / "Half" where the weights measured were rounded to it; "" where as stored
};
WeightDrift ComputeWeightDrift(const SsaGpt& model, const SsaGpt& base);

}  // namespace model
