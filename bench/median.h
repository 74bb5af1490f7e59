// The median wall time of a few runs of one piece of work, for the benchmark programs that print
// their own figures (ssaviz_bench_linear, _bake, _summary), and their --repeats flag.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

namespace bench {

inline double MedianMs(int repeats, const std::function<void()>& fn) {
    std::vector<double> ms;
    for (int r = 0; r < repeats; ++r) {
        const auto start = std::chrono::steady_clock::now();
        fn();
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

// `--repeats R` from the command line (at least 1), or `fallback` without it.
inline int Repeats(int argc, char** argv, int fallback) {
    for (int i = 1; i + 1 < argc; ++i)
        if (!std::strcmp(argv[i], "--repeats")) return std::max(1, std::atoi(argv[i + 1]));
    return fallback;
}

}  // namespace bench
