#include "bench/trace.h"

#include <cstdio>
#include <exception>
#include <set>
#include <string>

#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/cuda.h>

namespace bench {
namespace {

namespace profiler = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;

profiler::ProfilerConfig Config() { return profiler::ProfilerConfig(profiler::ProfilerState::KINETO); }

std::set<ActivityType> Activities() {
    std::set<ActivityType> a{ActivityType::CPU};
    if (torch::cuda::is_available()) a.insert(ActivityType::CUDA);
    return a;
}

// c10's messages go on with a stack trace.
std::string FirstLine(const std::exception& e) {
    const std::string s = e.what();
    return s.substr(0, s.find('\n'));
}

}  // namespace

bool StartTrace() {
    try {
        profiler::prepareProfiler(Config(), Activities());
        profiler::enableProfiler(Config(), Activities());
        return true;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ssaviz_bench: no trace: %s\n", FirstLine(e).c_str());
        return false;
    }
}

bool StopTrace(const std::string& path) {
    try {
        if (torch::cuda::is_available()) torch::cuda::synchronize();
        std::unique_ptr<profiler::ProfilerResult> result = profiler::disableProfiler();
        if (!result) return false;
        result->save(path);
        return true;
    } catch (const std::exception& e) {  // Debian's LibTorch has no Kineto to save with
        std::fprintf(stderr, "ssaviz_bench: the trace was not written: %s\n", FirstLine(e).c_str());
        return false;
    }
}

}  // namespace bench
