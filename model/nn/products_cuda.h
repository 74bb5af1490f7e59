// Float32 products on a CUDA device's TF32 tensor cores at float32's accuracy (issue 37; linear.h's
// Tf32x3Matmul, tf32.h for the arithmetic). Its functions are compiled only where the LibTorch has
// CUDA (SSAVIZ_CUDA_KERNELS); free of LibTorch and CUDA types, so the CPU's emulation shares its
// description of the product (ColumnMajor).
#pragma once

#include <cstdint>

#include "model/nn/cuda_stream.h"

namespace model::cuda {

// tf32.h's three-part layout of a device float32 [outer, inner] (contiguous) into `out`, device
// float32 [outer, 3, inner]; lo_parts tf32::kLeft or kRight; on `stream` (cuda_stream.h).
const char* Tf32Parts(Stream stream, const float* in, int64_t outer, int64_t inner, unsigned lo_parts, float* out);

// C [batch, M, N] = A [batch, M, K3] @ B for three-part operands (K3 = 3K), all device float32,
// row-major and contiguous within a batch: B [batch, K3, N], or with b_transposed its transpose
// stored as [batch, N, K3]. A batch stride of 0 shares one matrix across the batch. Through cuBLAS
// (CUBLAS_COMPUTE_32F_FAST_TF32) on `stream`; null, or what failed.
struct Tf32Operands {
    const float* a;
    const float* b;
    float* c;
    int64_t batch, M, N, K3;
    int64_t a_batch_stride, b_batch_stride;
    bool b_transposed;
};
const char* Tf32Product(int device, Stream stream, const Tf32Operands& operands);

// The column-major product Tf32Product asks cuBLAS for (cublasGemmStridedBatchedEx): a row-major
// C [M, N] = A [M, K3] B is the column-major C^T [N, M] = B^T A^T, so its first operand is B (its
// rows, [K3, N] or with b_transposed [N, K3], are B^T's columns) and its second A. As cuBLAS reads
// them, for each batch i: op(first_i) is m x k, element (r, c) at first[i * first_stride + r + c *
// first_ld] (transposed: [c + r * first_ld]); second_i is k x n, (r, c) at second[i *
// second_stride + r + c * second_ld]; out_i m x n, (r, c) at out[i * out_stride + r + c * out_ld].
// Plain C++: linear.cpp's CPU emulation multiplies the same description, so the tests check what
// a device is handed.
struct ColumnMajorProduct {
    bool first_transposed;
    int64_t m, n, k, batch;
    const float* first;
    int64_t first_ld, first_stride;
    const float* second;
    int64_t second_ld, second_stride;
    float* out;
    int64_t out_ld, out_stride;
};
inline ColumnMajorProduct ColumnMajor(const Tf32Operands& p) {
    return {p.b_transposed, p.N, p.M, p.K3, p.batch, p.b, p.b_transposed ? p.K3 : p.N, p.b_batch_stride, p.a, p.K3, p.a_batch_stride,
            p.c, p.N, p.M * p.N};
}

// Whether device `device` has TF32 tensor cores (compute capability 8.0 or later: Ampere on). Where
// it has none cuBLAS would run the 3K terms on its float32 units, three times float32's work.
bool HasTf32TensorCores(int device);

}  // namespace model::cuda
