// metrics_cuda.h's FlashRows on a CUDA device: the launches of flash_kernels.cuh's kernel
// (flash_launch.cuh), two sides here and three in flash_three_cuda.cu.
#include "model/nn/flash_launch.cuh"

namespace model::cuda {

const char* FlashRows(const FlashArgs& a) {
    if (a.rows <= 0 || a.heads <= 0) return nullptr;
    int device = 0, major = 0;
    if (cudaGetDevice(&device) != cudaSuccess || cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
        cudaGetLastError();  // leaves no error behind for the next launch to report
        return "cannot ask the device its compute capability";
    }
    if (major < 8) return "TF32 tensor cores need a device of compute capability 8.0 or more";
    if (a.maps == 2) return LaunchSides<2>(a);
    if (a.maps == 3) return FlashRowsOfThreeSides(a);
    return "2 or 3 sides";
}

}  // namespace model::cuda
