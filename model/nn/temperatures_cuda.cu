// The fused temperatures on a CUDA device (temperature_rows.h): one thread an element of
// [B, H, R], each running TemperatureAt, the function the CPU's test runs against the torch ops.
#include "model/nn/temperature_rows.h"

#include <cuda_runtime.h>

namespace model::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) TemperaturesKernel(temperature_rows::Inputs in, int64_t n) {
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * kThreads)
        temperature_rows::TemperatureAt(in, i);
}

}  // namespace

const char* Temperatures(Stream stream, const temperature_rows::Inputs& in) {
    const int64_t n = in.B * in.H * in.R;
    if (n == 0) return nullptr;
    const int64_t blocks = (n + kThreads - 1) / kThreads;
    TemperaturesKernel<<<static_cast<unsigned>(blocks < (int64_t{1} << 20) ? blocks : (int64_t{1} << 20)), kThreads, 0, stream>>>(in, n);
    const cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
}

}  // namespace model::cuda
