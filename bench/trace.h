// A kernel-level trace for the benchmarks (issue 37): LibTorch's own profiler (Kineto, with CUPTI
// on a CUDA build), so a GPU machine without Nsight still says where the time goes. The trace is
// Chrome's JSON (chrome://tracing, Perfetto); bench/trace_summary.py ranks its kernels.
#pragma once

#include <string>

namespace bench {

// Starts recording the CPU's ops and, where the LibTorch has CUDA, the device's kernels and copies.
// False (and a message on stderr) where this LibTorch cannot.
bool StartTrace();
// Stops and writes the trace to `path`; false where it could not.
bool StopTrace(const std::string& path);

}  // namespace bench
