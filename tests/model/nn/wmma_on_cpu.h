// The tensor cores' fragments (CUDA's nvcuda::wmma, TF32 16 x 16 x 8) on the CPU, for kernels run
// by cuda_on_cpu.h (include that first). A fragment here holds its whole tile in every lane, where
// a device spreads it over the warp's lanes in an order CUDA leaves unsaid; a kernel may only
// touch a fragment's elements all alike (as SplitParts does), which either way is the same. Each
// lane does a collective operation whole: a store writes the same tile 32 times, a product is
// computed 32 times over. mma_sync reads only the TF32 bits of its operands (the tensor cores
// ignore the other 13), so a kernel that forgot to round its operands loses what the device would;
// it sums each product's 8 terms in float, which a device does in its own order and precision:
// tests bound the kernels' results against float64, never to the bit.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>

namespace nvcuda::wmma {

struct row_major;
struct col_major;
struct matrix_a;
struct matrix_b;
struct accumulator;
namespace precision {
struct tf32;
}
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K>
struct Shape;
template <int M, int N, int K>
struct Shape<matrix_a, M, N, K> {
    static constexpr int rows = M, cols = K;
};
template <int M, int N, int K>
struct Shape<matrix_b, M, N, K> {
    static constexpr int rows = K, cols = N;
};
template <int M, int N, int K>
struct Shape<accumulator, M, N, K> {
    static constexpr int rows = M, cols = N;
};

// The tile row by row, whatever the layout it is loaded from.
template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
    static constexpr int rows = Shape<Use, M, N, K>::rows, cols = Shape<Use, M, N, K>::cols, num_elements = rows * cols;
    float x[num_elements];
};

template <class Use, int M, int N, int K, class T, class Layout>
void fill_fragment(fragment<Use, M, N, K, T, Layout>& f, float v) {
    for (float& e : f.x) e = v;
}

// What CUDA asks of a load's or a store's memory: a 256-bit aligned pointer, a leading dimension
// of a multiple of 16 bytes. A device faults or misreads otherwise; here the test stops, naming it.
inline void CheckMemory(const float* p, unsigned ldm) {
    if (reinterpret_cast<uintptr_t>(p) % 32 == 0 && ldm % 4 == 0) return;
    std::fprintf(stderr, "wmma_on_cpu: a fragment's memory at %p with ldm %u is not 32-byte aligned or ldm not a multiple of 4\n",
                 static_cast<const void*>(p), ldm);
    std::abort();
}

template <class Use, int M, int N, int K, class T, class Layout>
void load_matrix_sync(fragment<Use, M, N, K, T, Layout>& f, const float* p, unsigned ldm) {
    CheckMemory(p, ldm);
    using F = fragment<Use, M, N, K, T, Layout>;
    for (int r = 0; r < F::rows; ++r)
        for (int c = 0; c < F::cols; ++c) f.x[r * F::cols + c] = std::is_same_v<Layout, row_major> ? p[r * ldm + c] : p[c * ldm + r];
}

template <int M, int N, int K>
void store_matrix_sync(float* p, const fragment<accumulator, M, N, K, float>& f, unsigned ldm, layout_t layout) {
    CheckMemory(p, ldm);
    for (int r = 0; r < M; ++r)
        for (int c = 0; c < N; ++c) (layout == mem_row_major ? p[r * ldm + c] : p[c * ldm + r]) = f.x[r * N + c];
}

// What a tensor core reads of a float: its sign, exponent and 10 mantissa bits.
inline float Tf32Bits(float v) {
    uint32_t u;
    std::memcpy(&u, &v, sizeof u);
    u &= 0xFFFFE000u;
    std::memcpy(&v, &u, sizeof v);
    return v;
}

template <int M, int N, int K, class LayoutA, class LayoutB>
void mma_sync(fragment<accumulator, M, N, K, float>& d, const fragment<matrix_a, M, N, K, precision::tf32, LayoutA>& a,
              const fragment<matrix_b, M, N, K, precision::tf32, LayoutB>& b, const fragment<accumulator, M, N, K, float>& c) {
    float ta[M * K], tb[K * N];  // the operands' TF32 bits, once
    for (int e = 0; e < M * K; ++e) ta[e] = Tf32Bits(a.x[e]);
    for (int e = 0; e < K * N; ++e) tb[e] = Tf32Bits(b.x[e]);
    float out[M * N];
    for (int i = 0; i < M; ++i) {
        float sum[N] = {};  // each product of two TF32 values is exact in float; summed in k's order
        for (int k = 0; k < K; ++k)
            for (int j = 0; j < N; ++j) sum[j] += ta[i * K + k] * tb[k * N + j];
        for (int j = 0; j < N; ++j) out[i * N + j] = c.x[i * N + j] + sum[j];
    }
    std::memcpy(d.x, out, sizeof out);
}

}  // namespace nvcuda::wmma
