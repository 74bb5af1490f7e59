#include "model/nn/metrics.h"

#include <algorithm>
#include <cassert>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <c10/util/accumulate.h>

#include <c10/core/DeviceGuard.h>
#include <c10/core/InferenceMode.h>

#include "model/nn/forward.h"
#include "model/nn/fused_attention_torch.h"
#include "model/nn/model_weights.h"
#include "model/nn/runtime.h"
#include "model/nn/metrics_cuda.h"  // the kernels' argument structs (plain C++); their code only with CUDA
#ifdef SSAVIZ_CUDA_KERNELS
#include "model/nn/products_cuda.h"
#include "model/nn/runtime_torch.h"
#endif

namespace model {
namespace {

// Key counts first+1..first+R for rows first..first+R-1 of [..., R, T], to broadcast against [..., R].
at::Tensor KeyCounts(const at::Tensor& attention, int64_t first) {
    return at::arange(first + 1, first + attention.size(-2) + 1, attention.options());
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

// ---- The fused CPU pass of CompareMaps -------------------------------------------------------

#ifdef SSAVIZ_CUDA_KERNELS
constexpr bool kCudaKernels = true;
#else
constexpr bool kCudaKernels = false;
#endif

// Four floats as one SIMD value (GCC/Clang vector extensions; SSE on the x86-64 baseline, NEON
// on ARM). The compiler does not vectorise these loops itself: it would have to
// reorder float sums, and it turns the branch-free logarithm back into branches.
constexpr int kLanes = 4;
typedef float Floats __attribute__((vector_size(kLanes * sizeof(float))));
typedef int32_t Ints __attribute__((vector_size(kLanes * sizeof(float))));

template <typename To, typename From>
inline To BitCast(const From& from) {
    static_assert(sizeof(To) == sizeof(From));
    To to;
    std::memcpy(&to, &from, sizeof to);
    return to;
}

inline Floats Load(const float* p) {
    Floats v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

// ln x for normal x > 0 (Cephes' logf): within 1 ulp of std::log on [FLT_MIN, 2], all weights need.
inline Floats Log(Floats x) {
    const Ints bits = BitCast<Ints>(x);
    const Floats f = BitCast<Floats>((bits & 0x007fffff) | 0x3f000000);  // x = f 2^e, f in [0.5, 1)
    const Ints low = f < 0.70710678f;  // then f to [sqrt(1/2), sqrt(2)) so that f - 1 is small
    const Floats e = __builtin_convertvector((bits >> 23) - 126 + low, Floats);  // low is -1 or 0
    const Floats t = (f - 1.0f) + BitCast<Floats>(BitCast<Ints>(f) & low);      // 2f - 1 or f - 1
    const Floats t2 = t * t;
    Floats y = 7.0376836292e-2f - Floats{};
    y = y * t - 1.1514610310e-1f;
    y = y * t + 1.1676998740e-1f;
    y = y * t - 1.2420140846e-1f;
    y = y * t + 1.4249322787e-1f;
    y = y * t - 1.6668057665e-1f;
    y = y * t + 2.0000714765e-1f;
    y = y * t - 2.4999993993e-1f;
    y = y * t + 3.3333331174e-1f;
    y = y * t * t2 - 2.12194440e-4f * e - 0.5f * t2;  // ln 2 in two parts, the first exact in float
    return t + y + 0.693359375f * e;
}

// -x ln x with 0 ln 0 = 0; subnormal weights count as FLT_MIN (they add under 1e-36).
inline Floats NegXLogX(Floats x) {
    const Floats floor = FLT_MIN - Floats{};
    return -x * Log(x > floor ? x : floor);
}

// The pairs of maps the fused pass compares, in this order: with two maps (0, 1); with three
// also (0, 2) and (1, 2) (CompareThreeMaps: a fine-tune's SSA side, its tau = 1 side, its base).
template <int N>
constexpr int kPairs = N * (N - 1) / 2;
constexpr int kPairFirst[] = {0, 0, 1}, kPairSecond[] = {1, 2, 2};

// Per-lane float sums over kFlushGroups groups of kLanes keys, then added into the row's doubles:
// short float partials keep the error against float64 near float rounding (32 groups doubled it).
constexpr int kFlushGroups = 4;
template <int N>
struct LaneSums {
    Floats entropy[N]{}, square[N]{};                  // -sum x ln x and sum x^2 of each map
    Floats entropy_m[kPairs<N>]{}, l1[kPairs<N>]{};    // of each pair: m = (a + b) / 2, |a - b|
};

template <int N>
inline void AddGroup(const Floats (&x)[N], LaneSums<N>& s) {
    for (int m = 0; m < N; ++m) {
        s.entropy[m] += NegXLogX(x[m]);
        s.square[m] += x[m] * x[m];
    }
    for (int k = 0; k < kPairs<N>; ++k) {
        const Floats a = x[kPairFirst[k]], b = x[kPairSecond[k]];
        s.entropy_m[k] += NegXLogX(0.5f * (a + b));
        s.l1[k] += BitCast<Floats>(BitCast<Ints>(a - b) & 0x7fffffff);  // |a - b|: the sign bit cleared
    }
}

inline double Sum(Floats v) {
    double sum = 0;
    for (int l = 0; l < kLanes; ++l) sum += v[l];
    return sum;
}

// The five largest weights, descending. They start at 0, the weight of every key above the
// diagonal, so rows with fewer than five keys sum like a top-k over the whole row.
struct Top5 {
    float best[5] = {0, 0, 0, 0, 0};
    void Add(float v) {
        if (!(v > best[4])) return;
        int i = 4;
        for (; i > 0 && best[i - 1] < v; --i) best[i] = best[i - 1];
        best[i] = v;
    }
    double Sum() const { return static_cast<double>(best[0]) + best[1] + best[2] + best[3] + best[4]; }
};

struct RowPointers {  // one map's row metrics, float32 [rows] each, in kRowMetricFields' order
    float *entropy, *normalized_entropy, *spikiness, *max_weight, *top5_mass, *effective_support, *sink_mass;
};

// Map m's metrics in a CompareMapsStacked tensor's values, `rows` a field.
RowPointers MetricPointers(float* stacked, int m, int64_t rows) {
    float* at = stacked + RowMeasureMetric(m, 0) * rows;
    return {at, at + rows, at + 2 * rows, at + 3 * rows, at + 4 * rows, at + 5 * rows, at + 6 * rows};
}

void WriteRow(const RowPointers& out, int64_t row, int64_t keys, float sink, double entropy, double square, const Top5& top) {
    out.entropy[row] = static_cast<float>(entropy);
    out.normalized_entropy[row] = keys > 1 ? static_cast<float>(entropy / std::log(static_cast<double>(keys))) : 0.0f;
    out.spikiness[row] = static_cast<float>(1.0 / (static_cast<double>(keys) * square));
    out.max_weight[row] = top.best[0];
    out.top5_mass[row] = static_cast<float>(top.Sum());
    out.effective_support[row] = static_cast<float>(std::exp(entropy));
    out.sink_mass[row] = sink;
}

template <int N>
struct FusedPointers {
    const float* maps[N];
    RowPointers out[N];
    float *js[kPairs<N>], *l1[kPairs<N>];
};

// Row `row` of every map, query index i: keys 0..i, each read from memory once (a group is
// summed and then scanned for the top five while it is in L1).
template <int N>
void CompareRow(const FusedPointers<N>& f, int64_t T, int64_t row, int64_t i) {
    const float* x[N];
    for (int m = 0; m < N; ++m) x[m] = f.maps[m] + row * T;
    const int64_t keys = i + 1;
    // Past the query, nothing; or NaN where the row overflowed (tau_q past float range: its masked
    // keys too), which the analysis's finiteness check refuses after (it aborted a debug build).
    for (int m = 0; m < N; ++m)
        assert(std::all_of(x[m] + keys, x[m] + T, [](float v) { return v == 0 || std::isnan(v); }) && "a map is not causal");
    double entropy[N] = {}, square[N] = {}, entropy_m[kPairs<N>] = {}, distance[kPairs<N>] = {};
    Top5 top[N];
    for (int64_t j = 0; j < keys;) {
        LaneSums<N> s;
        const int64_t stop = std::min(keys, j + kFlushGroups * kLanes);
        for (; j < stop; j += kLanes) {
            Floats g[N] = {};
            if (stop - j >= kLanes) {
                for (int m = 0; m < N; ++m) g[m] = Load(x[m] + j);
            } else {  // the row's last, partial group, zero-padded
                for (int64_t k = j; k < stop; ++k)
                    for (int m = 0; m < N; ++m) g[m][k - j] = x[m][k];
            }
            AddGroup(g, s);
            for (int l = 0; l < kLanes; ++l)
                for (int m = 0; m < N; ++m) top[m].Add(g[m][l]);
        }
        j = stop;
        for (int m = 0; m < N; ++m) {
            entropy[m] += Sum(s.entropy[m]);
            square[m] += Sum(s.square[m]);
        }
        for (int k = 0; k < kPairs<N>; ++k) {
            entropy_m[k] += Sum(s.entropy_m[k]);
            distance[k] += Sum(s.l1[k]);
        }
    }
    for (int m = 0; m < N; ++m) WriteRow(f.out[m], row, keys, x[m][0], entropy[m], square[m], top[m]);
    // 0.5 KL(a||m) + 0.5 KL(b||m) = H(m) - (H(a) + H(b)) / 2; rounding can dip below 0 for equal rows.
    for (int k = 0; k < kPairs<N>; ++k) {
        f.js[k][row] = static_cast<float>(std::max(0.0, entropy_m[k] - 0.5 * (entropy[kPairFirst[k]] + entropy[kPairSecond[k]])));
        f.l1[k][row] = static_cast<float>(distance[k]);
    }
}

// A CompareMapsStacked tensor for maps [..., R, T] of one shape on their device, and each field's
// place in it.
struct Stacked {
    at::Tensor all;  // [RowMeasureCount(N), ..., R]
    int64_t rows = 0;  // of each field
    float* Field(int k) const { return all.data_ptr<float>() + k * rows; }
};
Stacked AllocateStacked(int maps, const at::Tensor& map) {
    std::vector<int64_t> sizes = map.sizes().slice(0, map.dim() - 1).vec();  // [..., R]
    Stacked out;
    out.rows = c10::multiply_integers(sizes);
    sizes.insert(sizes.begin(), RowMeasureCount(maps));
    out.all = at::empty(sizes, map.options().dtype(at::kFloat));
    return out;
}

// Maps [..., R, T] of one shape, float32 on the CPU.
template <int N>
at::Tensor CompareFused(const at::Tensor* const (&in)[N], int64_t first) {
    at::Tensor maps[N];
    for (int m = 0; m < N; ++m) maps[m] = in[m]->contiguous();
    const int64_t T = maps[0].size(-1), R = maps[0].size(-2);
    const Stacked out = AllocateStacked(N, maps[0]);
    FusedPointers<N> f;
    for (int m = 0; m < N; ++m) {
        f.maps[m] = maps[m].template data_ptr<float>();
        f.out[m] = MetricPointers(out.Field(0), m, out.rows);
    }
    for (int k = 0; k < kPairs<N>; ++k) {
        f.js[k] = out.Field(RowMeasureJs(N, k));
        f.l1[k] = out.Field(RowMeasureL1(N, k));
    }
    // Row r costs first + r + 1 keys, so a work item takes rows r and R-1-r of one map: equal
    // items, and threads stay balanced even for a single map.
    const int64_t count = R > 0 && T > 0 ? maps[0].numel() / (R * T) : 0, half = (R + 1) / 2;
    at::parallel_for(0, count * half, 8, [&](int64_t begin, int64_t end) {
        for (int64_t item = begin; item < end; ++item) {
            const int64_t map = item / half, r = item % half;
            CompareRow(f, T, map * R + r, first + r);
            if (R - 1 - r != r) CompareRow(f, T, map * R + R - 1 - r, first + R - 1 - r);
        }
    });
    return out.all;
}

// Where a kernel writes the fields of a CompareMapsStacked tensor of `maps` maps: each map's row
// metrics, each pair's JS and L1.
void PointKernelAt(const Stacked& stacked, int maps, cuda::RowOutputs* out, float** js, float** l1) {
    for (int m = 0; m < maps; ++m) {
        const RowPointers p = MetricPointers(stacked.Field(0), m, stacked.rows);
        out[m] = {p.entropy, p.normalized_entropy, p.spikiness, p.max_weight, p.top5_mass, p.effective_support, p.sink_mass};
    }
    for (int k = 0; k < MapPairs(maps); ++k) {
        js[k] = stacked.Field(RowMeasureJs(maps, k));
        l1[k] = stacked.Field(RowMeasureL1(maps, k));
    }
}

#ifdef SSAVIZ_CUDA_KERNELS

// Where metrics_cuda.cu's kernels write a CompareMapsStacked tensor's fields.
template <int N>
struct CudaOutputs {
    cuda::RowOutputs out[N];
    float *js[kPairs<N>], *l1[kPairs<N>];
};
template <int N>
CudaOutputs<N> OutputsOf(const Stacked& stacked) {
    CudaOutputs<N> o;
    PointKernelAt(stacked, N, o.out, o.js, o.l1);
    return o;
}

// The same on a CUDA device: metrics_cuda.cu's kernel, one thread block a row.
template <int N>
at::Tensor CompareFusedCuda(const at::Tensor* const (&in)[N], int64_t first) {
    at::Tensor maps[N];
    const float* pointers[N];
    for (int m = 0; m < N; ++m) {
        maps[m] = in[m]->contiguous();
        pointers[m] = maps[m].template data_ptr<float>();
    }
    const int64_t T = maps[0].size(-1), R = maps[0].size(-2);
    const Stacked stacked = AllocateStacked(N, maps[0]);
    const CudaOutputs<N> o = OutputsOf<N>(stacked);
    const int64_t rows = R > 0 && T > 0 ? maps[0].numel() / T : 0;
    const c10::DeviceGuard on_its_device(maps[0].device());  // the kernel runs on the current device
    const char* error = cuda::CompareRows(CurrentStream(maps[0]), N, pointers, rows, R, T, first, o.out, o.js, o.l1);
    TORCH_CHECK(error == nullptr, "the row statistics kernel failed: ", error);
    return stacked.all;
}

// SoftmaxAndCompareStacked's pass (maps it takes): metrics_cuda.cu's SoftmaxAndCompareRows.
template <int N>
at::Tensor SoftmaxCompareCuda(const std::vector<at::Tensor>& scores, int64_t first, int64_t window) {
    float* pointers[N];
    for (int m = 0; m < N; ++m) pointers[m] = scores[m].data_ptr<float>();
    const int64_t T = scores[0].size(-1), R = scores[0].size(-2);
    const Stacked stacked = AllocateStacked(N, scores[0]);
    const CudaOutputs<N> o = OutputsOf<N>(stacked);
    const c10::DeviceGuard on_its_device(scores[0].device());
    const char* error = cuda::SoftmaxAndCompareRows(CurrentStream(scores[0]), N, pointers, scores[0].numel() / T, R, T, first, window, o.out, o.js, o.l1);
    TORCH_CHECK(error == nullptr, "the softmax and row statistics kernel failed: ", error);
    return stacked.all;
}

// SoftmaxAndCompareStacked's pass, with SSAVIZ_CUDA_SOFTMAX_MEASURES=1 (off by default until
// bench/gpu.sh has checked it on a device) unless SSAVIZ_CUDA_SOFTMAX=0 turns the softmax kernel off.
bool CudaSoftmaxMeasures() { return CudaSwitchesOfEnvironment().softmax_measures; }
#endif

// What CompareMaps and CompareThreeMaps check of their maps; true when a fused pass takes them:
// float32 maps on the CPU, or on a CUDA device where the build has the kernel.
bool CheckMaps(const char* what, const at::Tensor& p, const at::Tensor& q, int64_t first) {
    TORCH_CHECK(p.sizes() == q.sizes() && p.dim() >= 2 && p.size(-1) >= first + p.size(-2), what, ": maps of shapes ", p.sizes(),
                " and ", q.sizes(), " are not [..., R, T] of the same shape with T >= ", first, " + R");
    if (p.scalar_type() != at::kFloat || q.scalar_type() != at::kFloat || p.device() != q.device()) return false;
    return p.is_cpu() || (p.is_cuda() && kCudaKernels);
}

// The fused pass of the maps' device (CheckMaps said there is one).
template <int N>
at::Tensor FusedPass(const at::Tensor* const (&in)[N], int64_t first) {
#ifdef SSAVIZ_CUDA_KERNELS
    if (in[0]->is_cuda()) return CompareFusedCuda<N>(in, first);
#endif
    return CompareFused<N>(in, first);
}

// Map m's row metrics in a CompareMapsStacked tensor, as views.
RowMetricTensors MetricsOf(const at::Tensor& stacked, int m) {
    RowMetricTensors r;
    for (int f = 0; f < kRowMetricCount; ++f) r.*kRowMetricFields[f].tensor = stacked[RowMeasureMetric(m, f)];
    return r;
}

}  // namespace

RowMetricTensors ComputeRowMetrics(const at::Tensor& attention, int64_t first) {
    c10::InferenceMode guard;
    at::Tensor n = KeyCounts(attention, first);
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

bool HasCudaKernels() { return kCudaKernels; }

MapComparison CompareMaps(const at::Tensor& p, const at::Tensor& q, int64_t first) {
    c10::InferenceMode guard;
    if (!CheckMaps("CompareMaps", p, q, first)) return CompareMapsGeneric(p, q, first);
    const at::Tensor f = FusedPass<2>({&p, &q}, first);
    return {MetricsOf(f, 0), MetricsOf(f, 1), f[RowMeasureJs(2, 0)], f[RowMeasureL1(2, 0)]};
}

at::Tensor SoftmaxAndCompareStacked(const std::vector<at::Tensor>& scores, int64_t first, int64_t window) {
#ifdef SSAVIZ_CUDA_KERNELS
    c10::InferenceMode guard;
    const size_t n = scores.size();
    if ((n != 2 && n != 3) || !CudaSoftmaxMeasures()) return {};
    const at::Tensor& s0 = scores[0];
    for (const at::Tensor& s : scores)
        if (!s.is_cuda() || s.scalar_type() != at::kFloat || !s.is_contiguous() || s.device() != s0.device() || s.sizes() != s0.sizes())
            return {};
    if (s0.dim() < 2 || s0.numel() == 0 || s0.size(-1) < first + s0.size(-2)) return {};
    for (size_t m = 1; m < n; ++m)  // each softmaxed once
        for (size_t k = 0; k < m; ++k)
            if (scores[m].data_ptr() == scores[k].data_ptr()) return {};
    return n == 2 ? SoftmaxCompareCuda<2>(scores, first, window) : SoftmaxCompareCuda<3>(scores, first, window);
#else
    (void)scores, (void)first, (void)window;
    return {};
#endif
}

MapComparison CompareMapsGeneric(const at::Tensor& p, const at::Tensor& q, int64_t first) {
    MapComparison c;
    c.p = ComputeRowMetrics(p, first);
    c.q = ComputeRowMetrics(q, first);
    c.js = JsDivergence(p, q, c.p.entropy, c.q.entropy);
    c.l1 = L1Distance(p, q);
    return c;
}

ThreeWayComparison CompareThreeMaps(const at::Tensor& p, const at::Tensor& q, const at::Tensor& r, int64_t first) {
    c10::InferenceMode guard;
    const bool fused = CheckMaps("CompareThreeMaps", p, q, first) && CheckMaps("CompareThreeMaps", p, r, first);
    if (!fused) return CompareThreeMapsGeneric(p, q, r, first);
    const at::Tensor f = FusedPass<3>({&p, &q, &r}, first);
    return {{MetricsOf(f, 0), MetricsOf(f, 1), f[RowMeasureJs(3, 0)], f[RowMeasureL1(3, 0)]},
            MetricsOf(f, 2),
            f[RowMeasureJs(3, 1)],
            f[RowMeasureL1(3, 1)],
            f[RowMeasureJs(3, 2)],
            f[RowMeasureL1(3, 2)]};
}

ThreeWayComparison CompareThreeMapsGeneric(const at::Tensor& p, const at::Tensor& q, const at::Tensor& r, int64_t first) {
    ThreeWayComparison c;
    c.pq = CompareMapsGeneric(p, q, first);
    c.r = ComputeRowMetrics(r, first);
    c.js_pr = JsDivergence(p, r, c.pq.p.entropy, c.r.entropy);
    c.l1_pr = L1Distance(p, r);
    c.js_qr = JsDivergence(q, r, c.pq.q.entropy, c.r.entropy);
    c.l1_qr = L1Distance(q, r);
    return c;
}

at::Tensor CompareMapsStacked(const at::Tensor& p, const at::Tensor& q, const at::Tensor& r, int64_t first) {
    c10::InferenceMode guard;
    if (!r.defined()) {
        if (CheckMaps("CompareMapsStacked", p, q, first)) return FusedPass<2>({&p, &q}, first);
        const MapComparison c = CompareMapsGeneric(p, q, first);
        std::vector<at::Tensor> fields;
        for (const RowMetricTensors* m : {&c.p, &c.q})
            for (const RowMetricField& f : kRowMetricFields) fields.push_back(m->*f.tensor);
        fields.insert(fields.end(), {c.js, c.l1});
        return at::stack(fields).to(at::kFloat);
    }
    if (CheckMaps("CompareMapsStacked", p, q, first) && CheckMaps("CompareMapsStacked", p, r, first)) return FusedPass<3>({&p, &q, &r}, first);
    const ThreeWayComparison c = CompareThreeMapsGeneric(p, q, r, first);
    std::vector<at::Tensor> fields;
    for (const RowMetricTensors* m : {&c.pq.p, &c.pq.q, &c.r})
        for (const RowMetricField& f : kRowMetricFields) fields.push_back(m->*f.tensor);
    fields.insert(fields.end(), {c.pq.js, c.js_pr, c.js_qr, c.pq.l1, c.l1_pr, c.l1_qr});
    return at::stack(fields).to(at::kFloat);
}

void CountKeysThroughWindow(const at::Tensor& stacked, int map, int64_t first, int64_t window) {
    static_assert(kRowMetricFields[0].tensor == &RowMetricTensors::entropy && kRowMetricFields[1].tensor == &RowMetricTensors::normalized_entropy &&
                  kRowMetricFields[2].tensor == &RowMetricTensors::spikiness);
    const int64_t R = stacked.size(-1), from = std::max<int64_t>(0, window - first);  // row r sees first + r + 1 keys
    if (window <= 0 || from >= R) return;
    c10::InferenceMode guard;
    const auto rows = [&](int field) { return stacked[RowMeasureMetric(map, field)].narrow(-1, from, R - from); };
    const at::Tensor entropy = rows(0), normalized = rows(1), spikiness = rows(2);
    const at::Tensor keys = at::arange(first + from + 1, first + R + 1, stacked.options().dtype(at::kDouble));
    const double w = static_cast<double>(window);
    if (window > 1)
        normalized.copy_(entropy.to(at::kDouble) / std::log(w));
    else
        normalized.zero_();
    spikiness.copy_(spikiness.to(at::kDouble) * keys / w);  // 1 / (keys sum p^2) -> 1 / (window sum p^2)
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
    const int64_t E = c.n_embd, H = c.n_head, G = c.KvHeads(), D = c.HeadSize();
    const double scale = 1.0 / std::sqrt(static_cast<double>(D));
    std::vector<at::Tensor> opnorm, eig_mean, eig_var;
    // With RoPE these are the weights' own bilinear forms, before positions turn q and k.
    for (const LayerWeights& w : model.layers) {
        at::Tensor attn = w.attn_w.to(at::kCPU, at::kDouble);              // [E, (H + 2G) D]
        at::Tensor wq = attn.narrow(1, 0, H * D).view({E, H, D}).permute({1, 0, 2});  // [H, E, D]
        at::Tensor wk = attn.narrow(1, H * D, G * D).view({E, G, D}).permute({1, 0, 2});  // [G, E, D]
        if (G != H) wk = wk.repeat_interleave(H / G, 0);  // query head h reads kv head h / (H / G)
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

WeightDrift ComputeWeightDrift(const SsaGpt& model, const SsaGpt& base) {
    c10::InferenceMode guard;
    const ModelConfig& c = model.config;
    const int64_t E = c.n_embd, H = c.n_head, G = c.KvHeads(), D = c.HeadSize();
    // Sums of squares of the change and of the base's, over `dims`, in float64 on the CPU a slice
    // of about 4 M values at a time along the first axis summed over (a 1.1 B-parameter pair's
    // embeddings were three 0.5 GB copies at once).
    struct Sums {
        at::Tensor change, base;
        at::Tensor Relative() const {  // NaN where the base's is 0 (or the two differ in shape)
            return at::where(base > 0, change.sqrt() / base.sqrt(), at::full_like(base, NAN)).to(at::kFloat);
        }
    };
    auto add = [](Sums* into, const Sums& more) {
        if (!into->change.defined()) *into = more;
        else into->change = into->change + more.change, into->base = into->base + more.base;
    };
    auto sums = [&add](const at::Tensor& w, const at::Tensor& b, std::vector<int64_t> dims) {
        if (!w.sizes().equals(b.sizes())) {  // a base's vocabulary a token larger (taken, as documented): no drift to give,
            // NaN, which stays NaN in any sum it joins (the embeddings' with the positions')
            const at::Tensor none = at::full_like(b.narrow(dims[0], 0, std::min<int64_t>(1, b.size(dims[0]))), NAN, at::kDouble).sum(dims).cpu();
            return Sums{none, none};
        }
        const int64_t axis = dims[0], along = w.size(axis), each = w.numel() / std::max<int64_t>(1, along);
        const int64_t step = std::max<int64_t>(1, (int64_t{1} << 22) / std::max<int64_t>(1, each));
        Sums s;
        for (int64_t i = 0; i < along; i += step) {
            const int64_t n = std::min(step, along - i);
            const at::Tensor base64 = b.narrow(axis, i, n).to(at::kCPU, at::kDouble), change = w.narrow(axis, i, n).to(at::kCPU, at::kDouble) - base64;
            add(&s, Sums{change.square().sum(dims), base64.square().sum(dims)});
        }
        if (!s.change.defined()) s.change = s.base = at::zeros({}, at::kDouble);  // an empty tensor: nothing moved, nothing there
        return s;
    };
    // Parts measured as one (each flattened): [], NaN where neither model has any.
    auto together = [&](const std::vector<std::pair<at::Tensor, at::Tensor>>& parts) {
        Sums s;
        for (const auto& [mine, theirs] : parts)
            if (mine.defined() && theirs.defined()) add(&s, sums(mine.flatten(), theirs.flatten(), {0}));
        return s.change.defined() ? s.Relative() : at::full({}, NAN, at::kFloat);
    };
    std::vector<at::Tensor> q, k, v, o, mlp, norm_attention, norm_mlp;
    for (size_t l = 0; l < model.layers.size(); ++l) {
        const LayerWeights &w = model.layers[l], &b = base.layers[l];
        auto heads = [&](int64_t first, int64_t count) {  // [E, count, D] slices of attn_w and [count, D] of its bias: [count]
            Sums s = sums(w.attn_w.narrow(1, first, count * D).reshape({E, count, D}), b.attn_w.narrow(1, first, count * D).reshape({E, count, D}),
                          {0, 2});
            if (w.attn_b.defined() && b.attn_b.defined())
                add(&s, sums(w.attn_b.narrow(0, first, count * D).reshape({count, D}), b.attn_b.narrow(0, first, count * D).reshape({count, D}), {1}));
            return s;
        };
        auto per_query_head = [&](const at::Tensor& kv) { return G == H ? kv : kv.repeat_interleave(H / G, 0); };
        q.push_back(heads(0, H).Relative());
        k.push_back(per_query_head(heads(H * D, G).Relative()));
        v.push_back(per_query_head(heads((H + G) * D, G).Relative()));
        o.push_back(sums(w.proj_w.reshape({H, D, E}), b.proj_w.reshape({H, D, E}), {1, 2}).Relative());
        mlp.push_back(together({{w.fc_w, b.fc_w}, {w.fc_b, b.fc_b}, {w.mlp_proj_w, b.mlp_proj_w}, {w.mlp_proj_b, b.mlp_proj_b}}));
        norm_attention.push_back(together({{w.ln1_w, b.ln1_w}, {w.ln1_b, b.ln1_b}, {w.q_norm_w, b.q_norm_w}, {w.k_norm_w, b.k_norm_w}}));
        norm_mlp.push_back(together({{w.ln2_w, b.ln2_w}, {w.ln2_b, b.ln2_b}}));
    }
    Sums e = sums(model.wte.flatten(), base.wte.flatten(), {0});
    if (model.wpe.defined() && base.wpe.defined()) add(&e, sums(model.wpe.flatten(), base.wpe.flatten(), {0}));
    WeightDrift d;
    if (!q.empty()) {
        d.q = at::stack(q), d.k = at::stack(k), d.v = at::stack(v), d.o = at::stack(o), d.mlp = at::stack(mlp);
        d.norm_attention = at::stack(norm_attention), d.norm_mlp = at::stack(norm_mlp);
    }
    d.norm_final = together({{model.ln_f_w, base.ln_f_w}, {model.ln_f_b, base.ln_f_b}}).item<float>();
    d.embeddings = e.Relative().item<float>();
    // The output head where it is a matrix of its own (tied, it is the embeddings'), with its bias.
    const bool untied = model.lm_head.defined() && !model.lm_head.is_same(model.wte);
    if (untied && base.lm_head.defined()) {
        Sums h = sums(model.lm_head.flatten(), base.lm_head.flatten(), {0});
        if (model.lm_head_b.defined() && base.lm_head_b.defined()) add(&h, sums(model.lm_head_b.flatten(), base.lm_head_b.flatten(), {0}));
        d.head = h.Relative().item<float>();
    }
    // Where a model computes in another dtype than it stored (--dtype bf16 of float32 weights), the
    // weights it has are rounded, and so is what this measures of them.
    auto rounded = [](const SsaGpt& g) {
        const bool bf16 = g.dtype() == at::kBFloat16, f16 = g.dtype() == at::kHalf;
        return (bf16 && g.stored_dtype != "BF16") || (f16 && g.stored_dtype != "F16");
    };
    if (rounded(model) || rounded(base)) d.rounded_to = c10::toString(model.dtype());
    return d;
}

namespace {

EnvironmentSwitch g_fused_attention("SSAVIZ_FUSED_ATTENTION", "1", "0");

// The fused rows by the unfused way's ops (the CPU's, for the tests): each side's map, then its
// statistics, cells and outputs from it.
void FusedByOps(const std::vector<FusedSide>& sides, int64_t first, int64_t keys, int64_t window, int pool, FusedRows* out) {
    std::vector<at::Tensor> maps;
    for (const FusedSide& s : sides) {
        const int64_t H = s.q.size(0), R = s.q.size(1), D = s.q.size(2), G = s.k.size(0), Gv = s.v.size(0);
        const at::Tensor scores = at::matmul(s.q.reshape({G, H / G, R, D}), s.k.narrow(1, 0, keys).unsqueeze(1).transpose(-1, -2));
        const at::Tensor map = MaskedSoftmax(scores.reshape({H, R, keys}), first, window);
        out->y.push_back(at::matmul(map.reshape({Gv, H / Gv, R, keys}), s.v.narrow(1, 0, keys).unsqueeze(1)).reshape({H, R, D}));
        maps.push_back(map);
    }
    out->measures = CompareMapsStacked(maps[0], maps[1], maps.size() > 2 ? maps[2] : at::Tensor(), first);
    for (size_t k = 1; k < maps.size(); ++k) out->cells[k - 1] = PoolKeys(maps[0], maps[k], pool);
}

int64_t RoundUp(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

// x [groups, keys, D] as the kernel reads it: at least `rows` keys, each row D floats on, 32-byte
// aligned; else a copy padded with zeros.
at::Tensor KernelKeys(const at::Tensor& x, int64_t rows) {
    const int64_t D = x.size(2);
    const bool fits = x.size(1) >= rows && x.stride(2) == 1 && x.stride(1) == D && x.stride(0) % 8 == 0 &&
                      reinterpret_cast<uintptr_t>(x.data_ptr()) % 32 == 0;
    if (fits) return x;
    const int64_t have = std::min(x.size(1), rows);
    at::Tensor padded = at::zeros({x.size(0), rows, D}, x.options());
    padded.narrow(1, 0, have).copy_(x.narrow(1, 0, have));
    return padded;
}

// The fused rows by metrics_cuda.h's FlashRows or what stands in for it (`launch`): the kernel's
// arguments made from the sides' tensors on their device (queries padded to whole warps, keys and
// values to whole steps) and its results as FusedRows.
bool FusedByKernel(const std::vector<FusedSide>& sides, int64_t first, int64_t keys, int64_t window, int pool, FusedRows* out,
                   FlashLaunch launch) {
    const at::Tensor& q0 = sides[0].q;
    const int64_t H = q0.size(0), R = q0.size(1), D = q0.size(2), n = static_cast<int64_t>(sides.size());
    const int64_t Rp = RoundUp(R, cuda::kFlashRows), K = RoundUp(keys, kFusedKeyStep), cells = (keys + pool - 1) / pool;
    cuda::FlashArgs a;
    a.maps = static_cast<int>(n);
    a.heads = H, a.rows = R, a.keys = keys, a.first = first, a.window = window, a.head_size = D, a.padded_rows = Rp;
    a.pool = pool, a.cells = cells;
#ifdef SSAVIZ_CUDA_KERNELS
    if (q0.is_cuda()) a.stream = CurrentStream(q0);
#endif
    std::vector<at::Tensor> operands, y;  // alive until the kernel is queued; the caching allocator keeps them for its stream
    for (int64_t m = 0; m < n; ++m) {
        const FusedSide& s = sides[static_cast<size_t>(m)];
        at::Tensor q = at::zeros({H, Rp, D}, q0.options());
        q.narrow(1, 0, R).copy_(s.q);
        const at::Tensor k = KernelKeys(s.k, K), v = KernelKeys(s.v, K);
        a.q[m] = q.data_ptr<float>(), a.k[m] = k.data_ptr<float>(), a.v[m] = v.data_ptr<float>();
        a.k_stride[m] = k.stride(0), a.v_stride[m] = v.stride(0);
        a.heads_per_k[m] = static_cast<int>(H / k.size(0)), a.heads_per_v[m] = static_cast<int>(H / v.size(0));
        y.push_back(at::empty({H, Rp, D}, q0.options()));
        a.y[m] = y.back().data_ptr<float>();
        operands.insert(operands.end(), {q, k, v});
    }
    const Stacked stacked = AllocateStacked(static_cast<int>(n), q0);  // [fields, H, R]
    PointKernelAt(stacked, static_cast<int>(n), a.out, a.js, a.l1);
    for (int k = 0; k + 1 < n; ++k) {
        out->cells[k].cells = at::empty({4, H, R, cells}, q0.options());
        a.pooled[k] = out->cells[k].cells.data_ptr<float>();
    }
    const char* error = launch(a);
    TORCH_CHECK(error == nullptr, "the fused attention kernel failed: ", error);
    out->measures = stacked.all;
    for (const at::Tensor& t : y) out->y.push_back(t.narrow(1, 0, R));
    return true;
}

FlashLaunch g_kernel_on_cpu = nullptr;  // SetFusedKernelOnCpu's

#ifdef SSAVIZ_CUDA_KERNELS
// metrics_cuda.h's FlashRows; false where the device or the head size has no kernel.
bool FusedOnCuda(const std::vector<FusedSide>& sides, int64_t first, int64_t keys, int64_t window, int pool, FusedRows* out) {
    const at::Tensor& q0 = sides[0].q;
    const c10::DeviceGuard on_its_device(q0.device());
    return FusedByKernel(sides, first, keys, window, pool, out, cuda::FlashRows);
}
#endif

}  // namespace

bool FusedAttention() { return g_fused_attention.On(); }

bool FusedAttentionTakes(const at::Tensor& q) {
    if (!q.defined() || q.dim() != 3 || q.scalar_type() != at::kFloat) return false;
    if (q.is_cpu()) return true;  // the unfused way's ops, or the kernel run on the CPU
#ifdef SSAVIZ_CUDA_KERNELS
    if (q.is_cuda()) return cuda::FlashHeadSize(q.size(2)) && cuda::HasTf32TensorCores(q.device().has_index() ? q.device().index() : 0);
#endif
    return false;
}

void SetFusedAttention(bool on) { g_fused_attention.Set(on); }

void SetFusedKernelOnCpu(FlashLaunch launch) { g_kernel_on_cpu = launch; }

bool FusedAttentionRows(const std::vector<FusedSide>& sides, int64_t first, int64_t keys, int64_t window, int pool, FusedRows* out) {
    c10::InferenceMode inference;
    if (sides.size() != 2 && sides.size() != 3) return false;
    const at::Tensor& q0 = sides[0].q;
    if (!FusedAttentionTakes(q0) || q0.size(0) == 0 || q0.size(1) == 0 || keys < first + q0.size(1) || pool < 1) return false;
    const int64_t H = q0.size(0), D = q0.size(2);
    for (const FusedSide& s : sides) {
        for (const at::Tensor* t : {&s.q, &s.k, &s.v})
            if (!t->defined() || t->dim() != 3 || t->scalar_type() != at::kFloat || t->device() != q0.device() || t->size(2) != D) return false;
        if (s.q.sizes() != q0.sizes() || s.k.size(0) == 0 || H % s.k.size(0) != 0 || s.v.size(0) == 0 || H % s.v.size(0) != 0 ||
            s.k.size(1) < keys || s.v.size(1) < keys)
            return false;
    }
    *out = FusedRows{};
    RECORD_USER_SCOPE("ssaviz::fused_attention");  // tests count these; a profiler shows them
    if (q0.is_cpu()) {
        if (g_kernel_on_cpu && cuda::FlashHeadSize(D)) return FusedByKernel(sides, first, keys, window, pool, out, g_kernel_on_cpu);
        FusedByOps(sides, first, keys, window, pool, out);
        return true;
    }
#ifdef SSAVIZ_CUDA_KERNELS
    if (q0.is_cuda()) return FusedOnCuda(sides, first, keys, window, pool, out);
#endif
    return false;
}

}  // namespace model
