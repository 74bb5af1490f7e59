// Where and how the model layer computes: which device and compute dtype a name means, binding a
// thread to the device, copying results to the host (these take LibTorch types), and the
// process-wide heap and thread settings (runtime.h, free of them).
#pragma once

#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "model/io/result.h"
#include "model/nn/cuda_stream.h"
#include "model/nn/runtime.h"

namespace model {

// "f32", "bf16" or "f16" (CUDA only) -> the compute dtype; captures are float32 whatever it is.
Result<at::ScalarType> ResolveComputeDtype(const std::string& name, at::Device device);

// Which device to run on (ParseDeviceName's names). "auto" picks CUDA when available; "cuda" or
// "cuda:N" without a GPU, or N past the machine's last GPU, is an error.
Result<at::Device> ResolveDevice(const std::string& name);

// Makes `device` the calling thread's current device, with its CUDA context current too; nothing
// on the CPU. A thread LibTorch did not start has no CUDA context until a runtime call makes one,
// so without this cuBLAS warns ("no current CUDA context") the first time such a thread
// multiplies. Cheap after the first call on a thread: every entry point that runs device work on
// whatever thread called it (loading, analysing, rebuilding a map) calls it.
void BindThreadToDevice(at::Device device);

// `t` in `type`: itself when it is already (`to` would say the same, at the cost of a dispatch).
inline at::Tensor AsType(const at::Tensor& t, at::ScalarType type) { return t.scalar_type() == type ? t : t.to(type); }
// t.narrow(dim, start, length), or t itself where that is all of it: the same values without an op
// (issue 37: on a GPU each op costs the host microseconds, and where a layer's new rows make one
// block, as an edit's do, the analysis would narrow whole tensors to themselves).
inline at::Tensor Narrow(const at::Tensor& t, int64_t dim, int64_t start, int64_t length) {
    return start == 0 && length == t.size(dim) ? t : t.narrow(dim, start, length);
}

#ifdef SSAVIZ_CUDA_KERNELS
// LibTorch's current stream on the CUDA device `on` lives on: where a kernel or cuBLAS product that
// reads or writes `on` goes, after the ops that made its inputs and before those that read it.
cuda::Stream CurrentStream(const at::Tensor& on);
#endif

// A device's memory in bytes, all of it and what is in use (by this process's caching allocator
// and any other process); 0 and 0 on the CPU and where this build has no CUDA kernels.
struct DeviceMemoryBytes {
    int64_t total = 0, used = 0;
};
DeviceMemoryBytes DeviceMemory(const at::Device& device);

// A tensor's values as float32 on the host, row-major: where results leave the device.
std::vector<float> ToHost(const at::Tensor& t);

// Tensors of one device on the host as `type`, crossing from a device in one transfer (one wait
// for the device instead of one a tensor), through pinned memory on CUDA: Of<T>(i) points to
// tensor i's values, row-major. A device's are joined there with one op (a cat along the first
// dimension where they share the rest of their shape, as the assembly's [*, rows] do; else a
// reshape each first) and copied once, and no view of each is made on the host: an analysis's
// assembly joins some 260 tensors, and a reshape, a narrow and a view a tensor were about 800 of
// an edit's ops on a GPU, each costing the host microseconds. `join` joins them so on the CPU too
// (for tests of a device's way); otherwise the CPU's are kept as they are where they fit.
class HostTensors {
public:
    template <class T>
    const T* Of(size_t i) const { return static_cast<const T*>(m_values[i]); }
    size_t size() const { return m_values.size(); }

private:
    friend HostTensors ToHostJoined(const std::vector<at::Tensor>& tensors, at::ScalarType type, bool join);
    std::vector<at::Tensor> m_owners;  // what holds the values: the joined copy, or the CPU's tensors
    std::vector<const void*> m_values;
};
HostTensors ToHostJoined(const std::vector<at::Tensor>& tensors, at::ScalarType type, bool join = false);

}  // namespace model
