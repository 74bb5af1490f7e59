#include "model/nn/runtime_torch.h"

#include <dlfcn.h>
#include <malloc.h>
#include <sched.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>

#include <ATen/Parallel.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/cuda.h>

#include "model/io/files.h"
#ifdef SSAVIZ_CUDA_KERNELS
#include <c10/cuda/CUDAStream.h>

#include "model/nn/metrics_cuda.h"
#endif

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

std::string BlasKernelsOfThisCpu() {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    // GCC's checks of AVX and AVX-512 include the OS's: XGETBV says it saves those registers.
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
#endif
    return "";
}

std::string FasterBlasKernels() {
    if (std::getenv("OPENBLAS_CORETYPE")) return "";
    using Text = char* (*)();
    const auto corename = reinterpret_cast<Text>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
    if (!corename || std::strcmp(corename(), "Prescott") != 0) return "";
    return BlasKernelsOfThisCpu();
}

void RestartWithFasterBlasKernels(char** argv) {
    const std::string kernels = FasterBlasKernels();
    if (kernels.empty()) return;
    setenv("OPENBLAS_CORETYPE", kernels.c_str(), 1);
    execv("/proc/self/exe", argv);
    std::fprintf(stderr, "ssaviz: could not restart with OPENBLAS_CORETYPE=%s (%s); OpenBLAS's generic SSE3 kernels run instead, ~3x slower\n",
                 kernels.c_str(), std::strerror(errno));
    unsetenv("OPENBLAS_CORETYPE");
}

bool SettingIs(const char* name, const char* value) {
    const char* setting = std::getenv(name);
    return setting && std::strcmp(setting, value) == 0;
}

bool EnvironmentSwitch::On() {
    int on = m_state.load(std::memory_order_relaxed);
    if (on < 0) {
        const char* setting = std::getenv(m_name);
        on = setting && std::strcmp(setting, m_on) == 0;
        if (setting && !on && std::strcmp(setting, m_off) != 0)
            std::fprintf(stderr, "ssaviz: %s is neither %s nor %s; %s\n", m_name, m_off, m_on, m_off);
        int unread = -1;
        if (!m_state.compare_exchange_strong(unread, on)) on = unread;  // another thread read it first, or a Set
    }
    return on == 1;
}

const CudaSwitches& CudaSwitchesOfEnvironment() {
    static const CudaSwitches switches = [] {
        CudaSwitches s;
        s.softmax = !SettingIs("SSAVIZ_CUDA_SOFTMAX", "0");
        s.temperatures = SettingIs("SSAVIZ_CUDA_TEMPERATURES", "1");
        s.softmax_measures = s.softmax && SettingIs("SSAVIZ_CUDA_SOFTMAX_MEASURES", "1");
        s.predictions = SettingIs("SSAVIZ_CUDA_PREDICTIONS", "1");
        return s;
    }();
    return switches;
}

int ComputeThreadsFromEnvironment(int fallback) {
    const char* value = std::getenv("SSAVIZ_THREADS");
    if (!value || !*value) return fallback;
    char* end = nullptr;
    const long threads = std::strtol(value, &end, 10);
    return *end == '\0' && threads >= 1 && threads <= 1024 ? static_cast<int>(threads) : fallback;
}

namespace {

// The number at the start of a short text ("150000\n"), or nothing.
std::optional<double> LeadingNumber(std::string_view text) {
    std::string word(text.substr(0, std::min(text.find_first_of(" \n"), text.size())));
    if (word.empty() || word.size() > 20) return std::nullopt;
    char* end = nullptr;
    const double x = std::strtod(word.c_str(), &end);
    return *end == '\0' && std::isfinite(x) ? std::optional<double>(x) : std::nullopt;
}

// A small file of the kernel's (under /proc or /sys), "" when it cannot be read.
std::string KernelFile(const std::string& path) {
    auto text = ReadFile(path, 4096);
    return text ? *text : std::string();
}

// This process's cgroup paths from /proc/self/cgroup: v2's ("0::/a/b") and v1's cpu controller's.
struct CgroupPaths {
    std::string v2, v1_cpu;
};
CgroupPaths OwnCgroups() {
    CgroupPaths out;
    const std::string text = KernelFile("/proc/self/cgroup");
    size_t at = 0;
    while (at < text.size()) {
        const size_t end = std::min(text.find('\n', at), text.size());
        const std::string_view line(text.data() + at, end - at);
        at = end + 1;
        const size_t first = line.find(':'), second = first == std::string_view::npos ? first : line.find(':', first + 1);
        if (second == std::string_view::npos) continue;
        const std::string_view controllers = line.substr(first + 1, second - first - 1), path = line.substr(second + 1);
        if (line.substr(0, first) == "0" && controllers.empty()) out.v2 = std::string(path);
        for (size_t c = 0; c <= controllers.size();) {  // "cpu,cpuacct": a comma list
            const size_t comma = std::min(controllers.find(',', c), controllers.size());
            if (controllers.substr(c, comma - c) == "cpu") out.v1_cpu = std::string(path);
            c = comma + 1;
        }
    }
    return out;
}

// The smallest quota over a cgroup and the ones above it (a parent's limit binds its children);
// `quota_at(folder)` reads one folder's, 0 for none. Inside a container the path may name the
// host's hierarchy while the container sees its own at the mount point: the mount point is asked too.
double SmallestQuota(const std::string& mount, std::string path, const std::function<double(const std::string&)>& quota_at) {
    double best = 0;
    auto consider = [&](double q) {
        if (q > 0 && (best == 0 || q < best)) best = q;
    };
    for (int depth = 0; depth < 64 && !path.empty() && path != "/"; ++depth) {
        consider(quota_at(mount + path));
        path.erase(path.find_last_of('/'));
    }
    consider(quota_at(mount));
    return best;
}

}  // namespace

double QuotaCoresFromCpuMax(std::string_view text) {
    const size_t space = text.find(' ');
    if (space == std::string_view::npos || text.substr(0, space) == "max") return 0;
    const auto quota = LeadingNumber(text.substr(0, space)), period = LeadingNumber(text.substr(space + 1));
    return quota && period && *quota > 0 && *period > 0 ? *quota / *period : 0;
}

double CgroupQuotaCores() {
    const CgroupPaths own = OwnCgroups();
    if (!own.v2.empty() || own.v1_cpu.empty()) {
        const double q = SmallestQuota("/sys/fs/cgroup", own.v2, [](const std::string& dir) { return QuotaCoresFromCpuMax(KernelFile(dir + "/cpu.max")); });
        if (q > 0 || own.v1_cpu.empty()) return q;
    }
    for (const char* mount : {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"}) {
        const double q = SmallestQuota(mount, own.v1_cpu, [](const std::string& dir) {
            const auto quota = LeadingNumber(KernelFile(dir + "/cpu.cfs_quota_us")), period = LeadingNumber(KernelFile(dir + "/cpu.cfs_period_us"));
            return quota && period && *quota > 0 && *period > 0 ? *quota / *period : 0.0;  // -1: no limit
        });
        if (q > 0) return q;
    }
    return 0;
}

int AffinityCores() {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online > 0 ? static_cast<int>(online) : 1;
}

int UsableCores() {
    const int cores = AffinityCores();
    const double quota = CgroupQuotaCores();
    return quota > 0 ? std::max(1, std::min(cores, static_cast<int>(std::ceil(quota)))) : cores;
}

namespace {
std::mutex g_threads_mutex;
std::optional<ComputeThreads> g_threads;  // what UseComputeThreads set last
}  // namespace

ComputeThreads ResolveComputeThreads(int reserve) {
    if (const int threads = ComputeThreadsFromEnvironment(0)) return {threads, "SSAVIZ_THREADS=" + std::to_string(threads)};
    const int cores = AffinityCores();
    const double quota = CgroupQuotaCores();
    const int usable = UsableCores();
    char quota_text[32];
    std::snprintf(quota_text, sizeof quota_text, "%.3g", quota);
    std::string why = quota > 0 && usable < cores ? "a cgroup CPU quota of " + std::string(quota_text) + " cores (of " + std::to_string(cores) +
                                                        " in the CPU affinity mask)"
                                                  : std::to_string(cores) + (cores == 1 ? " core" : " cores") + " in the CPU affinity mask";
    const int count = std::max(1, usable - std::max(0, reserve));
    if (count < usable) why += ", " + std::to_string(usable - count) + " kept for the window";
    return {count, why};
}

void UseComputeThreads(const ComputeThreads& choice) {
    SetComputeThreads(choice.count);
    std::lock_guard<std::mutex> lock(g_threads_mutex);
    g_threads = ComputeThreads{std::max(1, choice.count), choice.why};
}

ComputeThreads CurrentComputeThreads() {
    std::lock_guard<std::mutex> lock(g_threads_mutex);
    return g_threads ? *g_threads : ComputeThreads{at::get_num_threads(), "LibTorch's default"};
}

size_t PhysicalMemoryBytes() {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : 0;
}

Status CheckDeviceAndDtype(const std::string& device, const std::string& dtype) {
    auto resolved = ResolveDevice(device);
    if (!resolved) return Fail(resolved.error());
    if (auto compute = ResolveComputeDtype(dtype, *resolved); !compute) return Fail(compute.error());
    return Ok{};
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
    const std::optional<DeviceName> parsed = ParseDeviceName(name);
    if (!parsed) return Fail("--device '" + EscapeForMessage(name, 40) + "' is not one of " + kDeviceNames);
    const bool cuda = torch::cuda::is_available();
    if (name == "cpu") return at::Device(at::kCPU);
    if (name == "auto") return at::Device(cuda ? at::kCUDA : at::kCPU);
    if (!cuda)
        return Fail("--device " + name + ": no CUDA device is available" +
                    (at::hasCUDA() ? "" : " (this build's LibTorch has no CUDA support; use --device cpu or auto)"));
    if (parsed->index < 0) return at::Device(at::kCUDA);
    const int64_t count = static_cast<int64_t>(torch::cuda::device_count());
    if (parsed->index >= count)
        return Fail("--device " + name + ": this machine has " + std::to_string(count) + " CUDA device" + (count == 1 ? "" : "s") +
                    " (cuda:0" + (count > 1 ? " to cuda:" + std::to_string(count - 1) : std::string()) + ")");
    return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(parsed->index));
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

#ifdef SSAVIZ_CUDA_KERNELS
cuda::Stream CurrentStream(const at::Tensor& on) { return c10::cuda::getCurrentCUDAStream(on.get_device()).stream(); }
#endif

DeviceMemoryBytes DeviceMemory(const at::Device& device) {
#ifdef SSAVIZ_CUDA_KERNELS
    if (device.is_cuda()) {
        const cuda::MemoryBytes bytes = cuda::DeviceMemory(device.has_index() ? device.index() : 0);
        return {bytes.total, bytes.used};
    }
#endif
    (void)device;
    return {};
}

std::vector<float> ToHost(const at::Tensor& t) {
    if (!t.is_cuda()) {
        at::Tensor c = t.to(at::kCPU, at::kFloat).contiguous();
        return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
    }
    // From a GPU, in slices through one pinned buffer straight into the vector: a pageable copy of a
    // whole map (8,192 tokens: 268 MB) ran at about 1.3 GB/s on an H200 and was then copied again here.
    const at::Tensor flat = t.to(at::kFloat).contiguous().reshape({-1});  // still on the device
    const int64_t n = flat.numel();
    std::vector<float> out(static_cast<size_t>(n));
    constexpr int64_t kSlice = int64_t{4} << 20;  // floats: 16 MB
    if (n == 0) return out;
    at::Tensor staging = at::empty({std::min(kSlice, n)}, flat.options().device(at::kCPU).pinned_memory(true));
    for (int64_t first = 0; first < n; first += kSlice) {
        const int64_t count = std::min(kSlice, n - first);
        at::Tensor slice = staging.narrow(0, 0, count);
        slice.copy_(flat.narrow(0, first, count));  // waits for the copy
        std::memcpy(out.data() + first, slice.data_ptr<float>(), static_cast<size_t>(count) * sizeof(float));
    }
    return out;
}

HostTensors ToHostJoined(const std::vector<at::Tensor>& tensors, at::ScalarType type, bool join) {
    HostTensors out;
    if (tensors.empty()) return out;
    const at::Device device = tensors[0].device();
    if (device.is_cpu() && !join) {
        for (const at::Tensor& t : tensors) {
            out.m_owners.push_back(AsType(t, type).contiguous());
            out.m_values.push_back(out.m_owners.back().data_ptr());
        }
        return out;
    }
    // Tensors of one shape but for their first dimension are joined along it; others flat.
    bool along_first = tensors[0].dim() > 0;
    for (const at::Tensor& t : tensors) {
        TORCH_CHECK(t.device() == device, "ToHostJoined: tensors on ", device, " and ", t.device());
        along_first = along_first && t.dim() == tensors[0].dim() && t.sizes().slice(1) == tensors[0].sizes().slice(1);
    }
    std::vector<at::Tensor> parts;
    for (const at::Tensor& t : tensors) parts.push_back(along_first ? AsType(t, type) : AsType(t, type).reshape({-1}));
    // Along the first dimension each tensor's values lie row-major one after another, as flat.
    const at::Tensor joined = parts.size() == 1 ? parts[0].contiguous() : at::cat(parts, 0);
    at::Tensor host = joined;
    if (!device.is_cpu()) {
        host = at::empty(joined.sizes(), joined.options().device(at::kCPU).pinned_memory(device.is_cuda()));
        host.copy_(joined);
    }
    const char* base = static_cast<const char*>(host.data_ptr());
    const size_t element = host.element_size();
    int64_t at = 0;
    for (const at::Tensor& t : tensors) {
        out.m_values.push_back(base + static_cast<size_t>(at) * element);
        at += t.numel();
    }
    out.m_owners.push_back(std::move(host));
    return out;
}

}  // namespace model
