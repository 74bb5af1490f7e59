// metrics_cuda.h's FlashRows on a CUDA device: the launch of flash_kernels.cuh's kernel.
#include <cuda_runtime.h>
#include <mma.h>

#include "model/nn/flash_kernels.cuh"
#include "model/nn/metrics_cuda.h"

namespace model::cuda {
namespace {

template <int N, int D>
const char* Launch(const FlashArgs& a) {
    const int64_t row_blocks = (a.rows + kFlashWarps * kFlashRows - 1) / (kFlashWarps * kFlashRows);
    if (row_blocks > 0x7fffffff || a.heads > 65535) return "too many rows or heads for one launch";
    FlashKernel<N, D><<<dim3(static_cast<unsigned>(row_blocks), static_cast<unsigned>(a.heads)), kFlashWarps * 32>>>(a);
    const cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
}

template <int N>
const char* LaunchSides(const FlashArgs& a) {
    switch (a.head_size) {
        case 16: return Launch<N, 16>(a);
        case 32: return Launch<N, 32>(a);
        case 64: return Launch<N, 64>(a);
        default: return "a head size the kernel is not built for";
    }
}

}  // namespace

const char* FlashRows(const FlashArgs& a) {
    if (a.rows <= 0 || a.heads <= 0) return nullptr;
    int device = 0, major = 0;
    if (cudaGetDevice(&device) != cudaSuccess || cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
        cudaGetLastError();  // leaves no error behind for the next launch to report
        return "cannot ask the device its compute capability";
    }
    if (major < 8) return "TF32 tensor cores need a device of compute capability 8.0 or more";
    if (a.maps == 2) return LaunchSides<2>(a);
    if (a.maps == 3) return LaunchSides<3>(a);
    return "2 or 3 sides";
}

}  // namespace model::cuda
