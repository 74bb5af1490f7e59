// Process-wide settings of the model layer that the front ends choose: how the heap keeps freed
// blocks, and how many threads LibTorch and OpenBLAS compute with. Free of LibTorch types; the
// device and dtype choices are in runtime_torch.h.
#pragma once

#include <atomic>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "model/io/result.h"

namespace model {

// Whether a model can open on `device` with `dtype` (ResolveDevice, ResolveComputeDtype): asked
// before a run's first step opens, so that --device cuda without a GPU is one line, not one a step.
Status CheckDeviceAndDtype(const std::string& device, const std::string& dtype);

// Makes freed blocks of up to 32 MB (a head's map at 2,048 tokens is 16 MB) go back to the
// process's heap for the next tensor instead of to the system: each new mapping of such a block
// costs a page fault per 4 KiB, which made rebuilding one head's map ~4x slower (136 ms against
// 38 ms at 2,048 tokens on this project's 2-core VM). Engine::Open calls it (glibc; no-op elsewhere).
void KeepFreedMemoryForReuse();

// Whether environment variable `name` is set to exactly `value` (the device kernels' switches:
// SSAVIZ_CUDA_SOFTMAX=0, SSAVIZ_CUDA_TEMPERATURES=1, ...).
bool SettingIs(const char* name, const char* value);

// A switch a test can also set (SetTf32x3Products, SetFusedAttention): read once from environment
// variable `name` (`on` or `off`; anything else is `off`, with a one-line warning), unless a Set
// came first. `state`: -1 until then, else 0 or 1.
class EnvironmentSwitch {
public:
    EnvironmentSwitch(const char* name, const char* on, const char* off) : m_name(name), m_on(on), m_off(off) {}
    bool On();
    void Set(bool on) { m_state.store(on ? 1 : 0); }

private:
    const char *m_name, *m_on, *m_off;
    std::atomic<int> m_state{-1};
};

// The CUDA kernels' switches of README's device settings, read from the environment once: where
// the kernels are taken, and what `info` and the exports say of them (ComputeSettings).
struct CudaSwitches {
    bool softmax = true;            // the attention rows' masked softmax, unless SSAVIZ_CUDA_SOFTMAX=0
    bool temperatures = false;      // the temperatures in one kernel: SSAVIZ_CUDA_TEMPERATURES=1
    bool softmax_measures = false;  // the softmax and the row statistics in one: SSAVIZ_CUDA_SOFTMAX_MEASURES=1, with the softmax on
    bool predictions = false;       // the predictions' scan: SSAVIZ_CUDA_PREDICTIONS=1
};
const CudaSwitches& CudaSwitchesOfEnvironment();

// Threads LibTorch uses for one operation (process-wide). The GUI leaves a core to the UI.
void SetComputeThreads(int threads);
// The BLAS this process loaded, for benchmark reports: OpenBLAS's own description and how it
// threads ("OpenMP": on LibTorch's threads; "pthreads": a pool of its own), or "not OpenBLAS".
std::string DescribeBlas();
// The fastest of OpenBLAS's x86 kernels this CPU and its OS run: "SkylakeX" for AVX-512 (F, CD,
// BW, DQ, VL), "Haswell" for AVX2 and FMA, else "".
std::string BlasKernelsOfThisCpu();
// The OpenBLAS kernels to ask for (OPENBLAS_CORETYPE) where OpenBLAS fell back to its generic SSE3
// ones, "Prescott", on a CPU newer than itself: Debian 12's 0.3.21 does so on an Intel Xeon of
// family 6, model 207, where every product then ran ~3x slower than under the SkylakeX kernels
// the CPU runs. BlasKernelsOfThisCpu; "" where OpenBLAS chose other kernels, is not the BLAS
// loaded, the CPU runs none faster, or OPENBLAS_CORETYPE is set (the user's choice stands,
// "Prescott" included).
std::string FasterBlasKernels();
// OpenBLAS reads OPENBLAS_CORETYPE once, as it loads, before main: so the command line and the
// benchmarks start themselves again with it set where FasterBlasKernels names kernels (execv of
// /proc/self/exe with the same arguments; ~0.1 s more at start). Returns only where there was
// nothing to do or the restart failed (then with a one-line note, and on with OpenBLAS's choice).
void RestartWithFasterBlasKernels(char** argv);

// $SSAVIZ_THREADS when it is a whole number from 1 to 1024, else `fallback` (0: none set). OpenBLAS
// splits its sums by thread count, so two runs agree to the last bit only with the same count:
// the window and `ssaviz export` both honour it.
int ComputeThreadsFromEnvironment(int fallback);

// How many threads the front ends compute with, and why. LibTorch's own default is its guess of
// the physical cores, which is 1 on some VMs that give the process 2 (issue 39), so every front
// end sets the count itself: $SSAVIZ_THREADS, else the usable cores less `reserve` (the window
// keeps one for the UI), at least 1. A Dask worker passes its threads_per_worker instead.
struct ComputeThreads {
    int count = 1;
    std::string why;  // "SSAVIZ_THREADS=3", "2 cores in the CPU affinity mask, 1 kept for the UI", ...
};
ComputeThreads ResolveComputeThreads(int reserve = 0);
// Sets `choice` (SetComputeThreads) and keeps it for reports (`ssaviz info`, Python's m.info).
void UseComputeThreads(const ComputeThreads& choice);
// What UseComputeThreads set last; before any call, LibTorch's own count ("LibTorch's default").
ComputeThreads CurrentComputeThreads();

// What the machine lets this process use: the cores of its CPU affinity mask (at least 1), capped
// by a cgroup CPU quota where one is set (rounded up: a quota of 1.5 cores keeps 2 threads busy
// part time), and the physical memory in bytes (0 when unknown). Counts a user gives (train's
// --threads, its batch and sizes) are checked against them: more threads than cores only wait on
// each other (a 0.6 s training run took minutes with 64 threads on 2 cores).
int UsableCores();
size_t PhysicalMemoryBytes();
// The parts of UsableCores, for reports and tests: the affinity mask's cores, and the cgroup
// quota in cores (cgroup v2's cpu.max, else v1's cpu.cfs_quota_us / cpu.cfs_period_us, of this
// process's cgroup or one above it; 0 when there is none).
int AffinityCores();
double CgroupQuotaCores();
// cpu.max's text ("max 100000" or "150000 100000") as cores; 0 for no limit or text it cannot read.
double QuotaCoresFromCpuMax(std::string_view text);

// A --device name: "auto", "cpu", "cuda" (the current GPU) or "cuda:N" (GPU N, 0-based, at most
// kMaxCudaIndex). The index, -1 for a bare "cuda" or the others; nullopt: not a device name.
struct DeviceName {
    bool cuda = false;
    int index = -1;
};
constexpr int kMaxCudaIndex = 1023;
inline constexpr const char* kDeviceNames = "auto, cpu, cuda or cuda:N";
// Inline: the command line's flags check names with it, and their fuzz build has no LibTorch.
inline std::optional<DeviceName> ParseDeviceName(std::string_view name) {
    if (name == "auto" || name == "cpu") return DeviceName{};
    if (name == "cuda") return DeviceName{true, -1};
    constexpr std::string_view prefix = "cuda:";
    if (name.substr(0, prefix.size()) != prefix) return std::nullopt;
    const std::string_view digits = name.substr(prefix.size());
    if (digits.empty() || digits.size() > 4 || (digits.size() > 1 && digits[0] == '0')) return std::nullopt;
    int index = 0;
    for (char c : digits) {
        if (c < '0' || c > '9') return std::nullopt;
        index = index * 10 + (c - '0');
    }
    if (index > kMaxCudaIndex) return std::nullopt;
    return DeviceName{true, index};
}

}  // namespace model
