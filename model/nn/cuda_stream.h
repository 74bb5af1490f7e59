// The stream a CUDA kernel or cuBLAS product goes on, named without CUDA's headers (cudaStream_t is
// this pointer), so that the kernels' plain C++ interfaces can take it. The host code passes
// LibTorch's current stream of the tensors' device (runtime_torch.h's CurrentStream): the kernels
// are then ordered with LibTorch's own ops on it, and with a caller's `torch.cuda.stream(s)` too.
#pragma once

struct CUstream_st;

namespace model::cuda {
using Stream = CUstream_st*;
}  // namespace model::cuda
