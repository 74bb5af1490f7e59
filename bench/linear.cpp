// ssaviz_bench_linear: the few-row product of model/nn/linear.h against at::matmul (OpenBLAS) on
// the weight shapes of GPT-2-small and TinyLlama, as GB/s of weights read. Not a test: it prints a
// Markdown table. usage: ssaviz_bench_linear [--threads N] [--repeats R]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "bench/median.h"
#include "model/nn/linear.h"
#include "model/nn/runtime_torch.h"

int main(int argc, char** argv) {
    int threads = 2, repeats = 15;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string flag = argv[i];
        if (flag == "--threads") threads = std::atoi(argv[i + 1]);
        else if (flag == "--repeats") repeats = std::max(1, std::atoi(argv[i + 1]));
    }
    model::SetComputeThreads(threads);
    struct Shape {
        const char* name;
        int64_t K, N;
        bool transposed;  // the weight given as the transpose of a row-major [N, K], as lm_head is
    };
    const Shape shapes[] = {{"GPT-2-small c_attn", 768, 2304, false}, {"GPT-2-small c_fc", 768, 3072, false},
                            {"GPT-2-small c_proj (MLP)", 3072, 768, false}, {"GPT-2 lm_head", 768, 50257, true},
                            {"TinyLlama qkv", 2048, 2560, false}, {"TinyLlama gate+up", 2048, 11264, false},
                            {"TinyLlama down", 5632, 2048, false}, {"TinyLlama lm_head", 2048, 32000, true}};
    std::printf("%d threads, median of %d; GB/s of weights read (the bf16 copy's are half the bytes)\n\n", threads, repeats);
    std::printf("| weight | rows | at::matmul ms | GB/s | MatmulRows ms | GB/s | max |diff| | bf16 weight ms | GB/s |\n");
    std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (const Shape& s : shapes) {
        const at::Tensor w = s.transposed ? at::randn({s.N, s.K}).t() : at::randn({s.K, s.N});
        const double gb = static_cast<double>(s.K * s.N) * 4 / 1e9;
        // A transposed weight (an output head) also for the logit lens's L + 1 rows of one position:
        // 13 for GPT-2 small, 23 for TinyLlama (kFewRowsTransposed).
        const std::vector<int64_t> rows = s.transposed ? std::vector<int64_t>{1, 8, 13, 23, 32} : std::vector<int64_t>{1, 2, 4, 8};
        for (int64_t M : rows) {
            const at::Tensor x = at::randn({1, M, s.K});
            at::Tensor a, b;
            const double blas = bench::MedianMs(repeats, [&] { a = at::matmul(x, w); });
            const double ours = bench::MedianMs(repeats, [&] { b = model::MatmulRows(x, w); });
            const float diff = (a - b).abs().max().item<float>();
            char half[64] = "- | -";
            if (!s.transposed) {  // the engine keeps a BF16 file's layer matrices as bf16, row-major
                const at::Tensor wb = w.to(at::kBFloat16);
                const double ms = bench::MedianMs(repeats, [&] { b = model::MatmulRows(x, wb); });
                std::snprintf(half, sizeof half, "%.3f | %.1f", ms, gb / 2 / ms * 1e3);
            }
            std::printf("| %s [%lld, %lld] | %lld | %.3f | %.1f | %.3f | %.1f | %.2g | %s |\n", s.name, static_cast<long long>(s.K),
                        static_cast<long long>(s.N), static_cast<long long>(M), blas, gb / blas * 1e3, ours, gb / ours * 1e3, diff, half);
        }
    }
}
