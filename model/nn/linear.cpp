#include "model/nn/linear.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

#include <ATen/Parallel.h>

#include "model/nn/products_cuda.h"
#include "model/nn/runtime_torch.h"
#include "model/nn/tf32.h"
#ifdef SSAVIZ_CUDA_KERNELS
#include <c10/core/DeviceGuard.h>
#endif

namespace model {
namespace {

// The kernels are plain loops the compiler vectorises: each is compiled twice, for AVX2 with FMA
// and for the build's baseline, and the machine picks at run time. Written so no reassociation is
// needed to vectorise them (independent accumulators, never a reduction into one scalar).
#define SSAVIZ_INLINE inline __attribute__((always_inline))

// A weight as float: float32 as it is; bfloat16 (its bits) is the upper half of a float32.
SSAVIZ_INLINE float Widen(float w) { return w; }
SSAVIZ_INLINE float Widen(uint16_t bits) {
    const uint32_t wide = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &wide, sizeof f);
    return f;
}

// y[m, :] = sum over k in [k0, k1) of x[m, k] w[k, :], w row-major [K, N] with row stride ldw:
// the rows k0..k1 are one stretch of memory, read once from start to end, four at a time. Sixteen
// columns of the four rows are widened into registers once and used for every row of x.
template <typename W>
SSAVIZ_INLINE void RowMajorBody(const float* x, int64_t M, int64_t K, const W* w, int64_t ldw, int64_t N, int64_t k0, int64_t k1,
                                float* y) {
    constexpr int64_t kWidth = 16, kAhead = 1024;  // bytes
    for (int64_t m = 0; m < M; ++m)
        for (int64_t j = 0; j < N; ++j) y[m * N + j] = 0.0f;
    float xk[kFewRows][4];
    int64_t k = k0;
    for (; k + 4 <= k1; k += 4) {
        const W* w0 = w + k * ldw;
        for (int64_t m = 0; m < M; ++m)
            for (int r = 0; r < 4; ++r) xk[m][r] = x[m * K + k + r];
        int64_t j = 0;
        for (; j + kWidth <= N; j += kWidth) {
            float v[4][kWidth];
            // Ask for the four rows' memory ahead of use: the hardware's own prefetch keeps fewer
            // lines in flight than a bandwidth-bound stream of bfloat16 needs.
            for (int r = 0; r < 4; ++r) __builtin_prefetch(w0 + r * ldw + j + kAhead / sizeof(W));
            for (int r = 0; r < 4; ++r)
                for (int64_t t = 0; t < kWidth; ++t) v[r][t] = Widen(w0[r * ldw + j + t]);
            for (int64_t m = 0; m < M; ++m) {
                float* a = y + m * N + j;
                for (int64_t t = 0; t < kWidth; ++t)
                    a[t] += xk[m][0] * v[0][t] + xk[m][1] * v[1][t] + xk[m][2] * v[2][t] + xk[m][3] * v[3][t];
            }
        }
        for (; j < N; ++j)
            for (int64_t m = 0; m < M; ++m)
                y[m * N + j] += xk[m][0] * Widen(w0[j]) + xk[m][1] * Widen(w0[ldw + j]) + xk[m][2] * Widen(w0[2 * ldw + j]) +
                                xk[m][3] * Widen(w0[3 * ldw + j]);
    }
    for (; k < k1; ++k) {
        const W* w0 = w + k * ldw;
        for (int64_t m = 0; m < M; ++m) {
            const float x0 = x[m * K + k];
            float* a = y + m * N;
            for (int64_t j = 0; j < N; ++j) a[j] += x0 * Widen(w0[j]);
        }
    }
}

// Eight floats as one value (the GCC and clang vector extension): one ymm register where a kernel
// is compiled for AVX2, two xmm registers in the baseline build; the same arithmetic either way.
typedef float Lanes8 __attribute__((vector_size(32)));
SSAVIZ_INLINE void Load8(Lanes8* v, const float* p) { std::memcpy(v, p, sizeof *v); }

// y[i * ldy + j] = dot(x[i K ...], wt[j K ...]) for kM rows of x and kN rows of wt (each K long):
// eight lanes of partial sums per pair, added up in a fixed order at the end, so each sum's order
// is the same whatever kM and kN. Each load of x serves kN rows of wt and each of wt kM rows of x.
// `ahead`: the kN rows of wt to be read next, fetched into the cache meanwhile (or nullptr).
template <int kM, int kN>
SSAVIZ_INLINE void DotBlock(const float* x, int64_t K, const float* wt, float* y, int64_t ldy, const float* ahead) {
    const int64_t whole = K / 8 * 8;
    Lanes8 acc[kM][kN] = {};
    for (int64_t k = 0; k < whole; k += 8) {
        if (ahead && k % 16 == 0)  // a 64-byte line a row every other step
            for (int j = 0; j < kN; ++j) __builtin_prefetch(ahead + j * K + k);
        Lanes8 w[kN], xi;
        for (int j = 0; j < kN; ++j) Load8(&w[j], wt + j * K + k);
        for (int i = 0; i < kM; ++i) {
            Load8(&xi, x + i * K + k);
            for (int j = 0; j < kN; ++j) acc[i][j] += xi * w[j];
        }
    }
    for (int i = 0; i < kM; ++i)
        for (int j = 0; j < kN; ++j) {
            float sum = 0.0f;
            for (int lane = 0; lane < 8; ++lane) sum += acc[i][j][lane];
            for (int64_t k = whole; k < K; ++k) sum += x[i * K + k] * wt[j * K + k];
            y[i * ldy + j] = sum;
        }
}

// All M rows of x against kN rows of wt, in blocks of four rows of x (five when five are left: a
// block of one row keeps too few sums in flight to hide the additions' latency). The first block
// fetches `ahead`.
template <int kN>
SSAVIZ_INLINE void DotRows(const float* x, int64_t M, int64_t K, const float* wt, float* y, int64_t ldy, const float* ahead) {
    for (int64_t m = 0; m < M; ahead = nullptr) {
        const float* xm = x + m * K;
        float* ym = y + m * ldy;
        const int64_t left = M - m;
        if (left == 5) {
            DotBlock<5, kN>(xm, K, wt, ym, ldy, ahead);
            m += 5;
        } else if (left >= 4) {
            DotBlock<4, kN>(xm, K, wt, ym, ldy, ahead);
            m += 4;
        } else if (left == 3) {
            DotBlock<3, kN>(xm, K, wt, ym, ldy, ahead);
            m += 3;
        } else if (left == 2) {
            DotBlock<2, kN>(xm, K, wt, ym, ldy, ahead);
            m += 2;
        } else {
            DotBlock<1, kN>(xm, K, wt, ym, ldy, ahead);
            m += 1;
        }
    }
}

// y[m, n0..n1) = dot(x[m, :], wt[n, :]), wt row-major [N, K] (w given as its transpose). wt is read
// from memory once, a chunk of its rows at a time that the second-level cache holds while every
// group of x's rows that the first-level cache holds is dotted with it, two of wt's rows and four
// or five of x's at a time: with the lens's 13 rows of 768 the x rows alone overflow the first
// level, and reading them from the second for every row of wt made the product three times slower
// than the memory's speed. The first group of a chunk reads it from memory, fetching each next pair
// of rows while it works on the last (GPT-2 small's head for 13 rows: 24.2 -> 20.9 ms on 2 cores of an AMD EPYC).
SSAVIZ_INLINE void TransposedBody(const float* x, int64_t M, int64_t K, const float* wt, int64_t n0, int64_t n1, float* y,
                                  int64_t ldy) {
    const int64_t row_bytes = K * static_cast<int64_t>(sizeof(float));
    const int64_t chunk = std::max<int64_t>(2, (int64_t{128} << 10) / row_bytes);         // rows of wt in L2
    const int64_t group = (int64_t{24} << 10) / row_bytes >= 8 ? 8 : 4;                 // rows of x in L1 (four at least)
    for (int64_t c0 = n0; c0 < n1; c0 += chunk) {
        const int64_t c1 = std::min(n1, c0 + chunk);
        for (int64_t m0 = 0; m0 < M; m0 += group) {
            const int64_t g = std::min(group, M - m0);
            auto ahead = [&](int64_t n) { return m0 == 0 && n + 3 < n1 ? wt + (n + 2) * K : nullptr; };
            int64_t n = c0;
            for (; n + 2 <= c1; n += 2) DotRows<2>(x + m0 * K, g, K, wt + n * K, y + m0 * ldy + n, ldy, ahead(n));
            for (; n < c1; ++n) DotRows<1>(x + m0 * K, g, K, wt + n * K, y + m0 * ldy + n, ldy, nullptr);
        }
    }
}

template <typename W>
using RowMajorKernel = void (*)(const float*, int64_t, int64_t, const W*, int64_t, int64_t, int64_t, int64_t, float*);
using TransposedKernel = void (*)(const float*, int64_t, int64_t, const float*, int64_t, int64_t, float*, int64_t);

template <typename W>
void RowMajorBaseline(const float* x, int64_t M, int64_t K, const W* w, int64_t ldw, int64_t N, int64_t k0, int64_t k1, float* y) {
    RowMajorBody(x, M, K, w, ldw, N, k0, k1, y);
}
void TransposedBaseline(const float* x, int64_t M, int64_t K, const float* wt, int64_t n0, int64_t n1, float* y, int64_t ldy) {
    TransposedBody(x, M, K, wt, n0, n1, y, ldy);
}

#if defined(__x86_64__) && defined(__GNUC__)
template <typename W>
__attribute__((target("avx2,fma"))) void RowMajorAvx2(const float* x, int64_t M, int64_t K, const W* w, int64_t ldw, int64_t N,
                                                      int64_t k0, int64_t k1, float* y) {
    RowMajorBody(x, M, K, w, ldw, N, k0, k1, y);
}
__attribute__((target("avx2,fma"))) void TransposedAvx2(const float* x, int64_t M, int64_t K, const float* wt, int64_t n0,
                                                        int64_t n1, float* y, int64_t ldy) {
    TransposedBody(x, M, K, wt, n0, n1, y, ldy);
}
bool HasAvx2() {
    static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return has;
}
template <typename W>
RowMajorKernel<W> PickRowMajor() {
    return HasAvx2() ? RowMajorAvx2<W> : RowMajorBaseline<W>;
}
TransposedKernel PickTransposed() { return HasAvx2() ? TransposedAvx2 : TransposedBaseline; }
#else
template <typename W>
RowMajorKernel<W> PickRowMajor() {
    return RowMajorBaseline<W>;
}
TransposedKernel PickTransposed() { return TransposedBaseline; }
#endif

// Runs piece(0), ..., piece(pieces - 1) on the compute threads, each thread taking the next piece
// when it is done with one, so a thread the system holds back (the window drawing on a 2-core
// machine) leaves its pieces to the others instead of keeping them all waiting.
void TakePieces(int64_t pieces, const std::function<void(int64_t)>& piece) {
    std::atomic<int64_t> next{0};
    const int64_t threads = std::max<int64_t>(1, at::get_num_threads());
    at::parallel_for(0, std::min(threads, pieces), 1, [&](int64_t, int64_t) {
        for (int64_t p = next++; p < pieces; p = next++) piece(p);
    });
}

// Row-major w: each piece is a run of 128 of w's rows (one stretch of its memory) summed into the
// piece's own partial result; the partials are then added in the order of the pieces.
template <typename W>
void RowMajorProduct(const float* x, int64_t M, int64_t K, const W* w, int64_t ldw, int64_t N, float* y) {
    const RowMajorKernel<W> kernel = PickRowMajor<W>();
    constexpr int64_t kRows = 128;
    const int64_t pieces = (K + kRows - 1) / kRows;
    if (pieces == 1) return kernel(x, M, K, w, ldw, N, 0, K, y);
    std::vector<float> partial(static_cast<size_t>(pieces * M * N));
    TakePieces(pieces, [&](int64_t p) { kernel(x, M, K, w, ldw, N, p * kRows, std::min(K, (p + 1) * kRows), partial.data() + p * M * N); });
    const int64_t size = M * N;
    std::copy(partial.begin(), partial.begin() + size, y);
    for (int64_t p = 1; p < pieces; ++p) {
        const float* part = partial.data() + p * size;
        for (int64_t i = 0; i < size; ++i) y[i] += part[i];
    }
}

// A bfloat16 w widened to float32 for at::matmul. Each thread keeps the last four it widened (a
// layer's matrices), so the blocks of rows a long analysis runs through one layer widen each
// matrix once, and their buffers are reused rather than mapped and faulted in afresh. An entry
// holds its source, so the source's memory cannot be reused by another while it is cached.
at::Tensor Widened(const at::Tensor& w) {
    struct Entry {
        at::Tensor source, buffer, wide;  // buffer: flat float32, at least w's size; wide: w's shape over it
    };
    thread_local std::vector<Entry> cache;  // most recent last
    for (size_t i = 0; i < cache.size(); ++i)
        if (cache[i].source.is_same(w)) {
            std::rotate(cache.begin() + i, cache.begin() + i + 1, cache.end());
            return cache.back().wide;
        }
    at::Tensor buffer;
    if (cache.size() == 4) {
        buffer = std::move(cache.front().buffer);
        cache.erase(cache.begin());
    }
    if (!buffer.defined() || buffer.numel() < w.numel()) buffer = at::empty({w.numel()}, w.options().dtype(at::kFloat));
    at::Tensor wide = buffer.narrow(0, 0, w.numel()).view(w.sizes());
    wide.copy_(w);
    cache.push_back({w, buffer, wide});
    return wide;
}

// a [B, Ha, R, K] @ b [B, Hb, K, N], R <= kFewRows, float32 CPU, b's heads row-major [K, N]
// (row stride >= N) or transposes of row-major [N, K]: one head a piece.
at::Tensor FewRowsHeads(const at::Tensor& a, const at::Tensor& b, bool transposed) {
    const int64_t B = a.size(0), Ha = a.size(1), Hb = b.size(1), R = a.size(2), K = a.size(3), N = b.size(3);
    const at::Tensor x = a.contiguous();
    at::Tensor y = at::empty({B, Ha, R, N}, a.options());
    const float* xp = x.data_ptr<float>();
    const float* bp = b.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    const int64_t group = Ha / Hb;
    const TransposedKernel dot = PickTransposed();
    const RowMajorKernel<float> sum = PickRowMajor<float>();
    TakePieces(B * Ha, [&](int64_t i) {
        const int64_t batch = i / Ha, head = i % Ha;
        const float* w = bp + batch * b.stride(0) + head / group * b.stride(1);
        if (transposed)
            dot(xp + i * R * K, R, K, w, 0, N, yp + i * R * N, N);
        else
            sum(xp + i * R * K, R, K, w, b.stride(2), N, 0, K, yp + i * R * N);
    });
    return y;
}

EnvironmentSwitch g_tf32x3("SSAVIZ_PRODUCTS", "tf32x3", "float32");


// Whether a product of `rows` rows takes Tf32x3Matmul.
bool TakesTf32x3(const at::Tensor& a, const at::Tensor& b, int64_t rows) {
    return rows >= kTf32x3Rows && a.scalar_type() == at::kFloat && b.scalar_type() == at::kFloat && !a.requires_grad() &&
           !b.requires_grad() && a.device() == b.device() && Tf32x3Products() && Tf32Device(a.device());
}

// tf32.h's three-part layout of x as [outer, inner]: [outer, 3, inner].
at::Tensor Tf32Parts(const at::Tensor& x, int64_t outer, int64_t inner, unsigned lo_parts) {
    const at::Tensor in = x.contiguous();
    at::Tensor out = at::empty({outer, 3, inner}, in.options());
#ifdef SSAVIZ_CUDA_KERNELS
    if (in.is_cuda()) {
        const c10::DeviceGuard on_its_device(in.device());  // the kernel runs on the current device
        const char* error = cuda::Tf32Parts(CurrentStream(in), in.data_ptr<float>(), outer, inner, lo_parts, out.data_ptr<float>());
        TORCH_CHECK(!error, "the TF32 parts of a product: ", error);
        return out;
    }
#endif
    TORCH_CHECK(in.is_cpu(), "TF32 products run on the CPU or a CUDA device");
    const float* ip = in.data_ptr<float>();
    float* op = out.data_ptr<float>();
    at::parallel_for(0, outer * inner, 1 << 14, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) tf32::WriteParts(ip, inner, i, lo_parts, op);
    });
    return out;
}

// x [..., K]'s three-part rows [..., 3K] (tf32.h's layout; lo_parts kLeft or kRight).
at::Tensor PartsOfRows(const at::Tensor& x, unsigned lo_parts) {
    const int64_t K = x.size(-1);
    std::vector<int64_t> shape = x.sizes().vec();
    shape.back() = 3 * K;
    return Tf32Parts(x, x.numel() / K, K, lo_parts).view(shape);
}

// products_cuda.h's column-major product on the CPU, as cuBLAS reads its description: each operand
// viewed where the description says it lies, multiplied by at::matmul. The CPU's emulation takes
// it, so every test of the TF32 products checks the layouts a device's cuBLAS is handed.
void ColumnMajorOnCpu(const cuda::ColumnMajorProduct& g) {
    auto view = [&](const float* data, int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride, int64_t batch_stride) {
        return at::from_blob(const_cast<float*>(data), {g.batch, rows, cols}, {batch_stride, row_stride, col_stride}, at::TensorOptions(at::kFloat));
    };
    const at::Tensor first = g.first_transposed ? view(g.first, g.m, g.k, g.first_ld, 1, g.first_stride)
                                                : view(g.first, g.m, g.k, 1, g.first_ld, g.first_stride);
    view(g.out, g.m, g.n, 1, g.out_ld, g.out_stride).copy_(at::matmul(first, view(g.second, g.k, g.n, 1, g.second_ld, g.second_stride)));
}

// C = A B of three-part operands (products_cuda.h): cuBLAS on a CUDA device, ColumnMajorOnCpu on the CPU.
void RunTf32Product(const at::Tensor& on, const cuda::Tf32Operands& p) {
#ifdef SSAVIZ_CUDA_KERNELS
    if (on.is_cuda()) {
        const char* error = cuda::Tf32Product(on.get_device(), CurrentStream(on), p);
        TORCH_CHECK(!error, "a TF32 product: ", error);
        return;
    }
#endif
    TORCH_CHECK(on.is_cpu(), "TF32 products run on the CPU or a CUDA device");
    ColumnMajorOnCpu(cuda::ColumnMajor(p));
}

// The leading sizes of t [..., rows, cols] as one batch of one stride (a narrow of rows keeps
// them so), or false.
bool OneBatch(const at::Tensor& t, int64_t* batch, int64_t* stride) {
    *batch = 1, *stride = 0;
    for (int64_t d = t.dim() - 3; d >= 0; --d) {
        if (t.size(d) == 1) continue;
        if (*batch == 1) *stride = t.stride(d);
        else if (t.stride(d) != *batch * *stride) return false;
        *batch *= t.size(d);
    }
    return true;
}

// left [..., M, 3K] @ right [..., N, 3K]^T, three-part rows of the same leading sizes: Tf32x3Matmul's
// product of a and a transposed b, from parts made beforehand.
at::Tensor PartsProduct(const at::Tensor& left, const at::Tensor& right) {
    const int64_t K3 = left.size(-1), M = left.size(-2), N = right.size(-2);
    int64_t batch = 1, a_stride = 0, b_batch = 1, b_stride = 0;
    const bool rows = left.stride(-1) == 1 && left.stride(-2) == K3 && right.stride(-1) == 1 && right.stride(-2) == K3;
    if (!rows || !OneBatch(left, &batch, &a_stride) || !OneBatch(right, &b_batch, &b_stride) || batch != b_batch)
        return PartsProduct(left.contiguous(), right.contiguous());
    std::vector<int64_t> shape = left.sizes().vec();
    shape.back() = N;
    at::Tensor c = at::empty(shape, left.options());
    if (c.numel() == 0) return c.zero_();
    RunTf32Product(left, {left.data_ptr<float>(), right.data_ptr<float>(), c.data_ptr<float>(), batch, M, N, K3, a_stride, b_stride,
                          /*b_transposed=*/true});
    return c;
}

// at::matmul, or Tf32x3Matmul for attention's scores where it is on (operands of the same leading
// sizes: Tf32x3Matmul does not broadcast them).
at::Tensor ScoresOrMatmul(const at::Tensor& a, const at::Tensor& b, bool scores) {
    const bool fits = a.dim() >= 2 && a.dim() == b.dim() && a.sizes().slice(0, a.dim() - 2) == b.sizes().slice(0, b.dim() - 2);
    return scores && fits && TakesTf32x3(a, b, a.size(-2)) ? Tf32x3Matmul(a, b) : Matmul(a, b);
}

at::Tensor Grouped(const at::Tensor& a, const at::Tensor& b, bool scores) {
    const bool few = a.dim() == 4 && b.dim() == 4 && a.device().is_cpu() && b.device().is_cpu() && a.scalar_type() == at::kFloat &&
                     b.scalar_type() == at::kFloat && !a.requires_grad() && !b.requires_grad() && a.size(0) == b.size(0) &&
                     b.size(1) > 0 && a.size(1) % b.size(1) == 0 && a.size(2) >= 1 && a.size(2) <= kFewRows && a.size(3) == b.size(2) &&
                     b.size(2) > 0 && b.size(3) > 0;
    if (few && b.stride(2) == 1 && b.stride(3) == b.size(2)) return FewRowsHeads(a, b, /*transposed=*/true);
    if (few && b.stride(3) == 1 && b.stride(2) >= b.size(3)) return FewRowsHeads(a, b, /*transposed=*/false);
    if (a.dim() < 3 || a.size(-3) == b.size(-3)) return ScoresOrMatmul(a, b, scores);
    const int64_t Ha = a.size(-3), Hb = b.size(-3), R = a.size(-2), X = a.size(-1);
    std::vector<int64_t> grouped(a.sizes().begin(), a.sizes().end() - 3);
    std::vector<int64_t> back = grouped;
    grouped.insert(grouped.end(), {Hb, (Ha / Hb) * R, X});
    back.insert(back.end(), {Ha, R, b.size(-1)});
    return ScoresOrMatmul(a.reshape(grouped), b, scores).view(back);
}

}  // namespace

bool Tf32x3Products() { return g_tf32x3.On(); }

void SetTf32x3Products(bool on) { g_tf32x3.Set(on); }

bool Tf32Device(const at::Device& device) {
    if (device.is_cpu()) return true;
#ifdef SSAVIZ_CUDA_KERNELS
    if (device.is_cuda()) {
        static std::array<std::atomic<int>, 64> known = {};  // per device: 0 unknown, 1 yes, 2 no
        const int index = device.has_index() ? device.index() : 0;
        if (index < 0 || index >= static_cast<int>(known.size())) return false;
        int yes = known[index].load(std::memory_order_relaxed);
        if (yes == 0) known[index].store(yes = cuda::HasTf32TensorCores(index) ? 1 : 2, std::memory_order_relaxed);
        return yes == 1;
    }
#endif
    return false;
}

bool Tf32x3ProductsOn(const at::Device& device) { return Tf32x3Products() && Tf32Device(device); }

at::Tensor Tf32x3Matmul(const at::Tensor& a, const at::Tensor& b) {
    TORCH_CHECK(a.scalar_type() == at::kFloat && b.scalar_type() == at::kFloat, "TF32 products take float32 operands");
    TORCH_CHECK(a.dim() >= 2 && b.dim() >= 2 && a.size(-1) == b.size(-2) && a.device() == b.device(),
                "a TF32 product takes a [..., M, K] and b [K, N] or [..., K, N] on one device");
    const bool shared = b.dim() == 2;
    TORCH_CHECK(shared || a.sizes().slice(0, a.dim() - 2) == b.sizes().slice(0, b.dim() - 2), "a TF32 product's operands differ in their leading sizes");
    if (a.numel() == 0 || b.numel() == 0) return at::matmul(a, b);
    const int64_t K = a.size(-1), N = b.size(-1);
    int64_t batch = 1;
    for (int64_t d = 0; d + 2 < a.dim() && !shared; ++d) batch *= a.size(d);
    const int64_t M = a.numel() / K / batch;  // with a shared b, all of a's rows in one product
    const bool transposed = b.stride(-2) == 1 && b.stride(-1) != 1;  // b's columns are contiguous: parts of b^T's rows
    const at::Tensor left = Tf32Parts(a, batch * M, K, tf32::kLeft);  // [batch, M, 3K]
    const at::Tensor right = transposed ? Tf32Parts(b.transpose(-1, -2), batch * N, K, tf32::kRight)  // [batch, N, 3K]
                                        : Tf32Parts(b, batch, K * N, tf32::kRight);                     // [batch, 3K, N]
    std::vector<int64_t> shape = a.sizes().vec();
    shape.back() = N;
    at::Tensor c = at::empty(shape, a.options());
    RunTf32Product(a, {left.data_ptr<float>(), right.data_ptr<float>(), c.data_ptr<float>(), batch, M, N, 3 * K, M * 3 * K,
                       shared ? 0 : 3 * K * N, transposed});
    return c;
}

at::Tensor Matmul(const at::Tensor& a, const at::Tensor& b) {
    const bool bf16 = a.scalar_type() == at::kBFloat16 || b.scalar_type() == at::kBFloat16;
    if (!bf16 || !a.device().is_cpu()) return at::matmul(a, b);
    auto wide = [](const at::Tensor& t) { return t.scalar_type() == at::kBFloat16 ? t.to(at::kFloat) : t; };
    return at::matmul(wide(a), wide(b)).to(at::kBFloat16);
}

at::Tensor GroupedMatmul(const at::Tensor& a, const at::Tensor& b) { return Grouped(a, b, /*scores=*/false); }

at::Tensor GroupedScores(const at::Tensor& q, const at::Tensor& k_transposed) { return Grouped(q, k_transposed, /*scores=*/true); }

ScoreOperands WithTf32Parts(const at::Tensor& q, const at::Tensor& k) {
    ScoreOperands o{q, k, {}, {}};
    const bool grouped = q.defined() && k.defined() && q.dim() == 4 && k.dim() == 4 && q.size(0) == k.size(0) && k.size(1) > 0 &&
                         q.size(1) % k.size(1) == 0 && q.size(3) == k.size(3) && q.size(3) > 0;
    if (!grouped || !TakesTf32x3(q, k, q.size(2) * (q.size(1) / k.size(1)))) return o;
    o.k_parts = PartsOfRows(k, tf32::kRight);  // b^T's rows: Tf32x3Matmul's right parts of k^T
    if (q.size(1) == k.size(1)) o.q_parts = PartsOfRows(q, tf32::kLeft);
    return o;
}

at::Tensor GroupedScoresOf(const ScoreOperands& o, int64_t first, int64_t rows, int64_t keys) {
    const int64_t group = o.k_parts.defined() ? o.q.size(1) / o.k.size(1) : 1;
    const bool few = o.q.is_cpu() && rows <= kFewRows;  // GroupedScores's own kernels
    if (!o.k_parts.defined() || few || !TakesTf32x3(o.q, o.k, rows * group))
        return GroupedScores(Narrow(o.q, 2, first, rows), Narrow(o.k, 2, 0, keys).transpose(-1, -2));
    const at::Tensor right = Narrow(o.k_parts, 2, 0, keys);
    if (o.q_parts.defined()) return PartsProduct(Narrow(o.q_parts, 2, first, rows), right);
    // A group's query heads stacked as one product's rows, as GroupedScores stacks them.
    const int64_t B = o.q.size(0), Hb = o.k.size(1), D = o.q.size(3);
    const at::Tensor stacked = Narrow(o.q, 2, first, rows).reshape({B, Hb, group * rows, D});
    return PartsProduct(PartsOfRows(stacked, tf32::kLeft), right).view({B, Hb * group, rows, keys});
}

at::Tensor MatmulRows(const at::Tensor& x, const at::Tensor& w) {
    const bool cpu = x.device().is_cpu() && w.device().is_cpu() && x.scalar_type() == at::kFloat && x.dim() >= 1 && w.dim() == 2 &&
                     x.size(-1) == w.size(0) && !x.requires_grad() && !w.requires_grad();
    const bool bf16 = cpu && w.scalar_type() == at::kBFloat16 && w.is_contiguous();
    const int64_t K = w.size(0), N = w.size(1);
    const int64_t M = cpu && K > 0 ? x.numel() / K : 0;
    const bool f32 = cpu && w.scalar_type() == at::kFloat;
    const bool row_major = (f32 && w.stride(1) == 1 && w.stride(0) >= N) || bf16;
    const bool transposed = f32 && w.stride(0) == 1 && w.stride(1) == K;
    if (!(row_major || transposed) || M < 1 || M > (transposed ? kFewRowsTransposed : kFewRows) || N < 1) {
        if (bf16) return at::matmul(x, Widened(w));
        // bfloat16 compute (--dtype bf16): x and w both bfloat16, summed in float32 (Matmul), the
        // weight widened once per layer as a float32 x's is.
        if (x.device().is_cpu() && x.scalar_type() == at::kBFloat16 && w.scalar_type() == at::kBFloat16 && w.dim() == 2)
            return at::matmul(x.to(at::kFloat), Widened(w)).to(at::kBFloat16);
        if (w.dim() == 2 && x.dim() >= 2 && w.size(0) > 0 && TakesTf32x3(x, w, x.numel() / w.size(0))) return Tf32x3Matmul(x, w);
        return Matmul(x, w);
    }

    const at::Tensor xs = x.reshape({M, K}).contiguous();
    std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
    shape.back() = N;
    at::Tensor y = at::empty(shape, x.options());
    const float* xp = xs.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    if (bf16) {
        RowMajorProduct(xp, M, K, reinterpret_cast<const uint16_t*>(w.data_ptr<at::BFloat16>()), N, N, yp);
    } else if (row_major) {
        RowMajorProduct(xp, M, K, w.data_ptr<float>(), w.stride(0), N, yp);
    } else {  // transposed: each piece a run of 128 output columns, each a dot product of rows
        const TransposedKernel kernel = PickTransposed();
        const float* wp = w.data_ptr<float>();
        constexpr int64_t kColumns = 128;
        TakePieces((N + kColumns - 1) / kColumns, [&](int64_t p) { kernel(xp, M, K, wp, p * kColumns, std::min(N, (p + 1) * kColumns), yp, N); });
    }
    return y;
}

at::Tensor AffineRows(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
    if (!b.defined()) return MatmulRows(x, w);
    const bool fused = !x.device().is_cpu() && x.dim() >= 2 && w.dim() == 2 && b.dim() == 1 && x.scalar_type() == w.scalar_type() &&
                       b.scalar_type() == w.scalar_type() && x.size(-1) == w.size(0) && b.size(0) == w.size(1);
    if (!fused) return MatmulRows(x, w) + b;
    if (w.size(0) > 0 && TakesTf32x3(x, w, x.numel() / w.size(0))) return Tf32x3Matmul(x, w).add_(b);
    std::vector<int64_t> shape = x.sizes().vec();
    shape.back() = w.size(1);
    return at::addmm(b, x.reshape({-1, x.size(-1)}), w).view(shape);
}

}  // namespace model
