// The fused attention kernel (model/nn/flash_kernels.cuh) launched on the CPU as flash_launch.cuh
// launches it on a device (test_flash_kernel.cpp runs its warps as fibers), for
// model::SetFusedKernelOnCpu: whole analyses through the very arguments a device's kernel gets.
#pragma once

#include "model/nn/fused_attention_torch.h"
#include "model/nn/metrics_cuda.h"

namespace model::test {

const char* FlashRowsOnCpu(const cuda::FlashArgs& a);

}  // namespace model::test
