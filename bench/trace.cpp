#include "bench/trace.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <ATen/record_function.h>
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

namespace {

struct OpCounts {
    std::mutex mutex;
    std::map<std::string, std::map<std::string, long>> by_scope;  // scope -> op -> count
    std::map<std::string, double> scope_ms;                        // scope -> time inside it, on the host's clock
    std::map<std::string, std::vector<std::string>> in_order;      // scope -> its first ops as dispatched
    bool keep_order = false;
    at::CallbackHandle handle = 0;
};
OpCounts& Counts() {
    static OpCounts counts;
    return counts;
}
constexpr size_t kOrderKept = 300;                // ops a scope keeps in order, for SSAVIZ_BENCH_OPS=order
thread_local int t_depth = 0;                      // ops open on this thread
thread_local std::vector<std::string> t_scopes;   // ssaviz's user scopes open on this thread
thread_local std::vector<std::chrono::steady_clock::time_point> t_scope_starts;

std::unique_ptr<at::ObserverContext> OnStart(const at::RecordFunction& fn) {
    if (fn.scope() == at::RecordScope::USER_SCOPE) {
        t_scopes.emplace_back(fn.name());
        t_scope_starts.push_back(std::chrono::steady_clock::now());
        return nullptr;
    }
    if (t_depth++ == 0) {
        OpCounts& c = Counts();
        std::lock_guard<std::mutex> lock(c.mutex);
        const std::string scope = t_scopes.empty() ? "(no scope)" : t_scopes.back();
        ++c.by_scope[scope][fn.name()];
        if (c.keep_order && c.in_order[scope].size() < kOrderKept) c.in_order[scope].emplace_back(fn.name());
    }
    return nullptr;
}

void OnEnd(const at::RecordFunction& fn, at::ObserverContext*) {
    if (fn.scope() == at::RecordScope::USER_SCOPE) {
        if (t_scopes.empty()) return;
        const std::string name = t_scopes.back();
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_scope_starts.back()).count();
        t_scopes.pop_back();
        t_scope_starts.pop_back();
        if (std::find(t_scopes.begin(), t_scopes.end(), name) == t_scopes.end()) {  // its outermost instance
            OpCounts& c = Counts();
            std::lock_guard<std::mutex> lock(c.mutex);
            c.scope_ms[name] += ms;
        }
        return;
    }
    --t_depth;
}

}  // namespace

void StartOpCount(bool in_order) {
    OpCounts& c = Counts();
    c.by_scope.clear();
    c.scope_ms.clear();
    c.in_order.clear();
    c.keep_order = in_order;
    c.handle = at::addGlobalCallback(at::RecordFunctionCallback(OnStart, OnEnd).scopes({at::RecordScope::FUNCTION, at::RecordScope::USER_SCOPE}));
}

void StopOpCount(int top, const char* what) {
    OpCounts& c = Counts();
    at::removeCallback(c.handle);
    std::lock_guard<std::mutex> lock(c.mutex);
    long all = 0;
    std::map<std::string, long> by_op;
    std::vector<std::pair<long, std::string>> scopes;
    for (const auto& [scope, ops] : c.by_scope) {
        long n = 0;
        for (const auto& [op, k] : ops) {
            n += k;
            by_op[op] += k;
        }
        scopes.emplace_back(n, scope);
        all += n;
    }
    for (const auto& [scope, ms] : c.scope_ms)  // scopes that dispatched nothing still took time
        if (!c.by_scope.count(scope)) scopes.emplace_back(0, scope);
    std::sort(scopes.rbegin(), scopes.rend());
    std::printf("host ops dispatched%s%s%s: %ld (ms: the host's time in each scope, a device's waits included)\n", what ? " (" : "",
                what ? what : "", what ? ")" : "", all);
    for (const auto& [n, scope] : scopes) {
        const auto ms = c.scope_ms.find(scope);
        std::printf("  %8ld  %s", n, scope.c_str());
        if (ms != c.scope_ms.end()) std::printf(" (%.1f ms)", ms->second);
        std::printf(":");
        std::vector<std::pair<long, std::string>> ops;
        for (const auto& [op, k] : c.by_scope[scope]) ops.emplace_back(k, op);
        std::sort(ops.rbegin(), ops.rend());
        for (size_t i = 0; i < ops.size() && i < 8; ++i) std::printf(" %s %ld,", ops[i].second.c_str() + (ops[i].second.rfind("aten::", 0) == 0 ? 6 : 0), ops[i].first);
        std::printf("\n");
    }
    for (const auto& [scope, names] : c.in_order) {  // repeats of one op shown as op*n
        std::printf("in order, %s (the first %zu):", scope.c_str(), names.size());
        for (size_t i = 0; i < names.size();) {
            size_t j = i;
            while (j < names.size() && names[j] == names[i]) ++j;
            std::printf(" %s", names[i].c_str() + (names[i].rfind("aten::", 0) == 0 ? 6 : 0));
            if (j - i > 1) std::printf("*%zu", j - i);
            i = j;
        }
        std::printf("\n");
    }
    std::vector<std::pair<long, std::string>> ops;
    for (const auto& [op, n] : by_op) ops.emplace_back(n, op);
    std::sort(ops.rbegin(), ops.rend());
    std::printf("most dispatched:\n");
    for (size_t i = 0; i < ops.size() && static_cast<int>(i) < top; ++i) std::printf("  %8ld  %s\n", ops[i].first, ops[i].second.c_str());
}

}  // namespace bench
