#include "model/nn/runtime_torch.h"

#include <dlfcn.h>
#include <malloc.h>
#include <sched.h>
#include <unistd.h>
#include <algorithm>
#include <cstdlib>

#include <ATen/Parallel.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/cuda.h>

namespace model {

void KeepFreedMemoryForReuse() {
#if defined(__GLIBC__)
    mallopt(M_MMAP_THRESHOLD, 32 << 20);   // glibc's largest: blocks below come from the heap
    mallopt(M_TRIM_THRESHOLD, 512 << 20);  // and stay there, up to this much free at its top
#endif
}

void SetComputeThreads(int threads) {
    threads = std::max(1, threads);
    at::set_num_threads(threads);
    // LibTorch's setting does not reach OpenBLAS (Debian's libblas.so.3 alternative; its OpenMP
    // build, which .ci/setup-debian chooses, runs on LibTorch's threads but keeps its own count);
    // call it by name when that is the BLAS in use.
    using SetThreads = void (*)(int);
    if (auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) set(threads);
}

std::string DescribeBlas() {
    using Text = char* (*)();
    using Number = int (*)();
    const auto config = reinterpret_cast<Text>(dlsym(RTLD_DEFAULT, "openblas_get_config"));
    const auto parallel = reinterpret_cast<Number>(dlsym(RTLD_DEFAULT, "openblas_get_parallel"));
    const auto threads = reinterpret_cast<Number>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
    if (!config || !parallel || !threads) return "not OpenBLAS";
    const int kind = parallel();
    return std::string(config()) + ", " + (kind == 2 ? "OpenMP" : kind == 1 ? "pthreads" : "sequential") + " build, " +
           std::to_string(threads()) + " threads";
}

int ComputeThreadsFromEnvironment(int fallback) {
    const char* value = std::getenv("SSAVIZ_THREADS");
    if (!value || !*value) return fallback;
    char* end = nullptr;
    const long threads = std::strtol(value, &end, 10);
    return *end == '\0' && threads >= 1 && threads <= 1024 ? static_cast<int>(threads) : fallback;
}

int UsableCores() {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online > 0 ? static_cast<int>(online) : 1;
}

size_t PhysicalMemoryBytes() {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : 0;
}

Result<at::ScalarType> ResolveComputeDtype(const std::string& name, at::Device device) {
    if (name == "f32") return at::kFloat;
    if (name == "bf16") return at::kBFloat16;
    if (name == "f16") {
        if (!device.is_cuda()) return Fail("--dtype f16 needs CUDA: LibTorch's CPU kernels have no half-precision matmul; use bf16 or f32");
        return at::kHalf;
    }
    return Fail("--dtype '" + name + "' is not one of f32, bf16, f16");
}

Result<at::Device> ResolveDevice(const std::string& name) {
    bool cuda = torch::cuda::is_available();
    if (name == "cpu") return at::Device(at::kCPU);
    if (name == "auto") return at::Device(cuda ? at::kCUDA : at::kCPU);
    if (name == "cuda") {
        if (!cuda)
            return Fail(std::string("--device cuda: no CUDA device is available") +
                        (at::hasCUDA() ? "" : " (this build's LibTorch has no CUDA support; use --device cpu or auto)"));
        return at::Device(at::kCUDA);
    }
    return Fail("--device '" + name + "' is not one of auto, cpu, cuda");
}

void BindThreadToDevice(at::Device device) {
    if (!device.is_cuda()) return;
    const c10::DeviceIndex index = device.has_index() ? device.index() : 0;
    thread_local c10::DeviceIndex bound = -1;
    if (bound == index) return;
    // A device guard alone sets nothing when the thread's device is already this index (a new
    // thread's is 0), and so makes no context current: synchronizing is a runtime call that needs
    // one, which binds the device's primary context to this thread.
    c10::impl::getDeviceGuardImpl(at::kCUDA)->setDevice(at::Device(at::kCUDA, index));
    torch::cuda::synchronize(index);
    bound = index;
}

std::vector<float> ToHost(const at::Tensor& t) {
    at::Tensor c = t.to(at::kCPU, at::kFloat).contiguous();
    return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

}  // namespace model
