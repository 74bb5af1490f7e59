// The launches of flash_kernels.cuh's kernel for 2 or 3 sides (metrics_cuda.h's FlashRows), split
// over two files (flash_cuda.cu, flash_three_cuda.cu) so that a build compiles them side by side:
// each side count's kernels take ptxas some 25 s.
#pragma once

#include <cuda_runtime.h>
#include <mma.h>

#include "model/nn/flash_kernels.cuh"
#include "model/nn/metrics_cuda.h"

namespace model::cuda {
namespace {

template <int N, int D>
const char* Launch(const FlashArgs& a) {
    dim3 grid;
    if (const char* error = FlashGrid(a, &grid)) return error;
    for (int y_first = 0; y_first < D; y_first += kFlashOutputs<D>) {  // the first launch measures the rows too
        FlashKernel<N, D><<<grid, kFlashWarps * 32, 0, a.stream>>>(a, y_first, y_first == 0);
        const cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) return cudaGetErrorString(e);
    }
    return nullptr;
}

template <int N>
const char* LaunchSides(const FlashArgs& a) {
    switch (a.head_size) {
        case 16: return Launch<N, 16>(a);
        case 32: return Launch<N, 32>(a);
        case 64: return Launch<N, 64>(a);
        case 128: return Launch<N, 128>(a);
        default: return "a head size the kernel is not built for";
    }
}

}  // namespace

const char* FlashRowsOfThreeSides(const FlashArgs& a);  // flash_three_cuda.cu

}  // namespace model::cuda
