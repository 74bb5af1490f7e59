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

// Counts the ATen ops the host dispatches (issue 37: on a GPU each is a launch or more, and at
// 1,024 tokens their host time was most of an analysis), with no profiler: a RecordFunction
// callback. An op counts once, where the caller dispatched it (the ops it calls inside are not
// counted again), under the innermost of ssaviz's RECORD_USER_SCOPEs open on its thread.
// With `in_order`, each scope's first ops are also kept as dispatched and printed.
void StartOpCount(bool in_order = false);
// Stops and prints the counts (of `what`): in all, by scope, and the `top` most dispatched ops.
void StopOpCount(int top = 15, const char* what = nullptr);

}  // namespace bench
