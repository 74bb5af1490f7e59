// products_cuda.h on a CUDA device: the TF32 parts kernel (tf32.h's WriteParts for every element)
// and the product of three-part operands through cuBLAS with TF32 tensor cores.
#include "model/nn/products_cuda.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <climits>
#include <vector>

#include "model/nn/tf32.h"

namespace model::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) Tf32PartsKernel(const float* in, int64_t n, int64_t inner, unsigned lo_parts, float* out) {
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += static_cast<int64_t>(gridDim.x) * kThreads)
        tf32::WriteParts(in, inner, i, lo_parts, out);
}

const char* BlasError(cublasStatus_t s) {
    switch (s) {
        case CUBLAS_STATUS_NOT_INITIALIZED: return "cuBLAS could not start (CUBLAS_STATUS_NOT_INITIALIZED)";
        case CUBLAS_STATUS_ALLOC_FAILED: return "cuBLAS is out of device memory (CUBLAS_STATUS_ALLOC_FAILED)";
        case CUBLAS_STATUS_INVALID_VALUE: return "cuBLAS refused the product's sizes (CUBLAS_STATUS_INVALID_VALUE)";
        case CUBLAS_STATUS_ARCH_MISMATCH: return "this GPU has no TF32 tensor cores (CUBLAS_STATUS_ARCH_MISMATCH)";
        case CUBLAS_STATUS_NOT_SUPPORTED: return "cuBLAS does not support this TF32 product (CUBLAS_STATUS_NOT_SUPPORTED)";
        case CUBLAS_STATUS_EXECUTION_FAILED: return "the TF32 product failed on the device (CUBLAS_STATUS_EXECUTION_FAILED)";
        default: return "the TF32 product failed in cuBLAS";
    }
}

// One handle a thread and device, made on first use and kept for the process (a handle is tied to
// the device current when it is made; destroying one at a thread's exit could outlive CUDA's
// context at the process's). Each product sets the stream it goes on.
cublasHandle_t Handle(int device, cublasStatus_t* status) {
    thread_local std::vector<cublasHandle_t> handles;
    if (device < 0 || device > 1024) return *status = CUBLAS_STATUS_INVALID_VALUE, nullptr;
    if (static_cast<size_t>(device) >= handles.size()) handles.resize(device + 1, nullptr);
    if (!handles[device]) {
        *status = cublasCreate(&handles[device]);
        if (*status != CUBLAS_STATUS_SUCCESS) return handles[device] = nullptr, nullptr;
    }
    *status = CUBLAS_STATUS_SUCCESS;
    return handles[device];
}

}  // namespace

const char* Tf32Parts(Stream stream, const float* in, int64_t outer, int64_t inner, unsigned lo_parts, float* out) {
    const int64_t n = outer * inner;
    if (n <= 0) return nullptr;
    const int64_t blocks = (n + kThreads - 1) / kThreads;
    Tf32PartsKernel<<<static_cast<unsigned>(blocks < (int64_t{1} << 20) ? blocks : (int64_t{1} << 20)), kThreads, 0, stream>>>(in, n, inner, lo_parts, out);
    const cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
}

const char* Tf32Product(int device, Stream stream, const Tf32Operands& p) {
    if (p.batch <= 0 || p.M <= 0 || p.N <= 0) return nullptr;
    if (p.M > INT_MAX || p.N > INT_MAX || p.K3 > INT_MAX || p.K3 <= 0 || p.batch > INT_MAX) return "the TF32 product's sizes exceed cuBLAS's 32-bit ones";
    int current = 0;
    if (cudaGetDevice(&current) != cudaSuccess) return cudaGetErrorString(cudaGetLastError());
    if (current != device && cudaSetDevice(device) != cudaSuccess) return cudaGetErrorString(cudaGetLastError());
    cublasStatus_t status;
    const cublasHandle_t handle = Handle(device, &status);
    if (handle) status = cublasSetStream(handle, stream);
    if (status == CUBLAS_STATUS_SUCCESS) {
        const ColumnMajorProduct g = ColumnMajor(p);  // the CPU's emulation multiplies the same
        const float one = 1.0f, zero = 0.0f;
        status = cublasGemmStridedBatchedEx(handle, g.first_transposed ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(g.m),
                                            static_cast<int>(g.n), static_cast<int>(g.k), &one, g.first, CUDA_R_32F,
                                            static_cast<int>(g.first_ld), g.first_stride, g.second, CUDA_R_32F, static_cast<int>(g.second_ld),
                                            g.second_stride, &zero, g.out, CUDA_R_32F, static_cast<int>(g.out_ld), g.out_stride,
                                            static_cast<int>(g.batch), CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT);
    }
    if (current != device) cudaSetDevice(current);
    return status == CUBLAS_STATUS_SUCCESS ? nullptr : BlasError(status);
}

bool HasTf32TensorCores(int device) {
    int major = 0;
    const bool known = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess;
    if (!known) cudaGetLastError();  // leaves no error behind for the next launch to report
    return known && major >= 8;
}

}  // namespace model::cuda
