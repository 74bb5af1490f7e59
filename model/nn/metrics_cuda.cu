// metrics_cuda.h's functions on a CUDA device: the launches of metrics_kernels.cuh's kernels.
#include "model/nn/metrics_cuda.h"

#include <cuda_runtime.h>

#include "model/nn/metrics_kernels.cuh"

namespace model::cuda {
namespace {

template <int N>
const char* Launch(Stream stream, const float* const* in, int64_t rows, int64_t R, int64_t T, int64_t first, const RowOutputs* out, float* const* js,
                   float* const* l1) {
    Args<N> a;
    for (int m = 0; m < N; ++m) a.maps[m] = in[m], a.o.out[m] = out[m];
    for (int k = 0; k < kPairs<N>; ++k) a.o.js[k] = js[k], a.o.l1[k] = l1[k];
    const unsigned blocks = static_cast<unsigned>(rows < (int64_t{1} << 30) ? rows : (int64_t{1} << 30));
    CompareRowsKernel<N><<<blocks, kThreads, 0, stream>>>(a, rows, R, T, first);
    const cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
}

template <int N>
const char* LaunchSoftmaxCompare(Stream stream, float* const* scores, int64_t rows, int64_t R, int64_t T, int64_t first, int64_t window,
                                 const RowOutputs* out, float* const* js, float* const* l1) {
    SoftmaxArgs<N> a;
    for (int m = 0; m < N; ++m) a.scores[m] = scores[m], a.o.out[m] = out[m];
    for (int k = 0; k < kPairs<N>; ++k) a.o.js[k] = js[k], a.o.l1[k] = l1[k];
    const unsigned blocks = static_cast<unsigned>(rows < (int64_t{1} << 30) ? rows : (int64_t{1} << 30));
    SoftmaxCompareKernel<N><<<blocks, kThreads, 0, stream>>>(a, rows, R, T, first, window);
    const cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
}

}  // namespace

const char* MapExtentBits(Stream stream, const float* map, int64_t rows, int64_t width, int64_t first, unsigned* out) {
    if (rows <= 0 || width <= 0) return nullptr;
    const unsigned blocks = static_cast<unsigned>(rows < 4096 ? rows : 4096);
    MapExtentKernel<<<blocks, kThreads, 0, stream>>>(map, rows, width, first, out);
    const cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
}

const char* MaskedSoftmaxRows(Stream stream, float* scores, int64_t rows, int64_t R, int64_t T, int64_t first, int64_t window) {
    if (rows <= 0 || T <= 0) return nullptr;
    const unsigned blocks = static_cast<unsigned>(rows < (int64_t{1} << 30) ? rows : (int64_t{1} << 30));
    MaskedSoftmaxKernel<<<blocks, kThreads, 0, stream>>>(scores, rows, R, T, first, window);
    const cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
}

const char* PoolMaps(Stream stream, const float* p, const float* q, int64_t maps, int64_t R, int64_t T, int pool, float keep, float* out_p, float* out_q,
                     float* out_difference) {
    const int64_t rows = (R + pool - 1) / pool, cols = (T + pool - 1) / pool, cells = maps * rows * cols;
    if (cells <= 0) return nullptr;
    if (pool <= kThreads && maps * rows < 65536) {
        const int chunk = kThreads / pool * pool;
        const dim3 grid(static_cast<unsigned>((T + chunk - 1) / chunk), static_cast<unsigned>(maps * rows));
        PoolRowsKernel<<<grid, kThreads, 0, stream>>>(p, q, R, T, pool, rows, cols, chunk, keep, out_p, out_q, out_difference);
    } else {
        const int threads = 128;
        PoolKernel<<<static_cast<unsigned>((cells + threads - 1) / threads), threads, 0, stream>>>(p, q, maps, R, T, pool, rows, cols, keep, out_p, out_q,
                                                                                         out_difference);
    }
    const cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
}

const char* SoftmaxAndCompareRows(Stream stream, int maps, float* const* scores, int64_t rows, int64_t R, int64_t T, int64_t first, int64_t window,
                                  const RowOutputs* out, float* const* js, float* const* l1) {
    if (rows <= 0 || T <= 0) return nullptr;
    if (maps == 2) return LaunchSoftmaxCompare<2>(stream, scores, rows, R, T, first, window, out, js, l1);
    if (maps == 3) return LaunchSoftmaxCompare<3>(stream, scores, rows, R, T, first, window, out, js, l1);
    return "SoftmaxAndCompareRows takes two or three maps";
}

const char* TopLogits(Stream stream, const float* logits, int64_t rows, int64_t V, int K, const int64_t* targets, int64_t m, float* top, int64_t* top_ids,
                      float* actual, int64_t* rank) {
    if (rows <= 0 || V <= 0) return nullptr;
    if (K < 1 || K > kTopLogits || K > V || m > rows || V >= (int64_t{1} << 31) - kThreads * kUnroll) return "TopLogits: K, m or V out of range";
    const unsigned blocks = static_cast<unsigned>(rows < (int64_t{1} << 30) ? rows : (int64_t{1} << 30));
    TopLogitsKernel<<<blocks, kThreads, 0, stream>>>(logits, rows, V, K, targets, m, top, top_ids, actual, rank);
    const cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
}

const char* CompareRows(Stream stream, int maps, const float* const* in, int64_t rows, int64_t R, int64_t T, int64_t first, const RowOutputs* out,
                        float* const* js, float* const* l1) {
    if (rows <= 0) return nullptr;
    if (maps == 2) return Launch<2>(stream, in, rows, R, T, first, out, js, l1);
    if (maps == 3) return Launch<3>(stream, in, rows, R, T, first, out, js, l1);
    return "CompareRows takes two or three maps";
}

MemoryBytes DeviceMemory(int device) {
    MemoryBytes bytes;
    int current = 0;
    if (cudaGetDevice(&current) != cudaSuccess) return cudaGetLastError(), bytes;
    size_t free = 0, total = 0;
    if (cudaSetDevice(device) == cudaSuccess && cudaMemGetInfo(&free, &total) == cudaSuccess)
        bytes = {static_cast<int64_t>(total), static_cast<int64_t>(total - free)};
    cudaGetLastError();  // a failed query leaves no error behind for the next launch to report
    cudaSetDevice(current);
    return bytes;
}

}  // namespace model::cuda
