// Float32 products on a CUDA device's TF32 tensor cores at float32's accuracy (issue 37; linear.h's
// Tf32x3Matmul, tf32.h for the arithmetic). Compiled only where the LibTorch has CUDA
// (SSAVIZ_CUDA_KERNELS); free of LibTorch and CUDA types.
#pragma once

#include <cstdint>

namespace model::cuda {

// tf32.h's three-part layout of a device float32 [outer, inner] (contiguous) into `out`, device
// float32 [outer, 3, inner]; lo_parts tf32::kLeft or kRight.
const char* Tf32Parts(const float* in, int64_t outer, int64_t inner, unsigned lo_parts, float* out);

// C [batch, M, N] = A [batch, M, K3] @ B for three-part operands (K3 = 3K), all device float32,
// row-major and contiguous within a batch: B [batch, K3, N], or with b_transposed its transpose
// stored as [batch, N, K3]. A batch stride of 0 shares one matrix across the batch. Through cuBLAS
// (CUBLAS_COMPUTE_32F_FAST_TF32) on the default stream; null, or what failed.
struct Tf32Operands {
    const float* a;
    const float* b;
    float* c;
    int64_t batch, M, N, K3;
    int64_t a_batch_stride, b_batch_stride;
    bool b_transposed;
};
const char* Tf32Product(int device, const Tf32Operands& operands);

// Whether device `device` has TF32 tensor cores (compute capability 8.0 or later: Ampere on). Where
// it has none cuBLAS would run the 3K terms on its float32 units, three times float32's work.
bool HasTf32TensorCores(int device);

}  // namespace model::cuda
