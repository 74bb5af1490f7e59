// x @ w for the forward pass's weight matrices, with a CPU path for the few rows an edit runs.
//
// Running one changed token through a layer is a matrix-vector product: each weight is read once
// and used for one multiply-add, so the cost is reading the weights from memory. OpenBLAS's sgemm
// and sgemv reach about a third of this machine's memory bandwidth on such shapes (17 GB/s of 50 on
// 2 cores), which made an edit at the end of a TinyLlama-shaped model cost ~230 ms and one of
// GPT-2-small ~60 ms. For float32 CPU x with at most kFewRows rows (kFewRowsTransposed for a
// transposed weight), MatmulRows streams the weight once, the threads taking pieces of it in turn;
// otherwise it is at::matmul.
//
// The weight may also be bfloat16 (what the engine keeps of a BF16 file's matrices on the CPU:
// half the memory, and half the bytes an edit reads). It is widened to float32 exactly, so the
// products are those of the float32 weight, summed in float32.
//
// Each output element is summed in an order fixed by the shapes alone, so the result does not
// depend on the thread count. It differs from sgemm's order of summation by rounding only (about
// 1e-7 relative), which the tests of edits against full analyses bound.
#pragma once

#include <ATen/ATen.h>

namespace model {

// at::matmul, except that on the CPU a bfloat16 product is summed in float32 from the bfloat16
// values and rounded to bfloat16 once. LibTorch 1.13's CPU kernels sum bfloat16 products in
// bfloat16 where the CPU lacks AVX-512's BF16 instructions (a 512-long product off by 5% of its
// largest value here, an AMD EPYC without AVX-512) and in float32 where it has them (oneDNN), as
// CUDA does: --dtype bf16 gave maps 2x further from float32 on one machine than on another.
at::Tensor Matmul(const at::Tensor& a, const at::Tensor& b);

// Rows (the product of x's leading dimensions) up to which MatmulRows uses its own kernel: kFewRows
// for a row-major w (its kernel holds each row's multipliers in registers), kFewRowsTransposed for a
// transposed one (each of the weight's rows is dotted with every row of x while it is in the cache,
// so the lens's L + 1 rows of one position read the output head once).
constexpr int64_t kFewRows = 8;
constexpr int64_t kFewRowsTransposed = 32;

// x [..., K] @ w [K, N] -> [..., N]. A float32 w may be row-major [K, N] or the transpose of a
// row-major [N, K] (lm_head.t()); a bfloat16 w row-major. Any other layout, dtype or device goes
// to at::matmul (a bfloat16 w widened first).
at::Tensor MatmulRows(const at::Tensor& x, const at::Tensor& w);
// MatmulRows(x, w) + b, b [N] or undefined. On a device the bias rides in the product (addmm: one
// op where the sum is two, and no [.., N] temporary; cuBLAS may pick another kernel, so the bits
// can differ within float32's rounding); the CPU adds it after its own kernels, as before.
at::Tensor AffineRows(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b);

// a [..., Ha, R, X] @ b [..., Hb, X, Y] where head h of a reads head h / (Ha / Hb) of b (grouped-
// query attention): attention's scores (q @ k^T) and sums (weights @ v). For float32 CPU
// tensors [B, H, R, X] with R <= kFewRows (an edit's rows), each head is one pass of the kernels
// above over its keys or values, wherever they lie in a larger buffer (only each head's rows
// need be contiguous): sgemm would pack every key and value first, which at 1,024 tokens cost as
// much as reading them. Otherwise at::matmul, a group's heads stacked as the rows of one product
// so b is never repeated.
at::Tensor GroupedMatmul(const at::Tensor& a, const at::Tensor& b);
// GroupedMatmul for attention's scores (q @ k^T), which may take Tf32x3Matmul; the weights' sums
// (weights @ v) do not: the map would be written three times over for a product that reads it once.
at::Tensor GroupedScores(const at::Tensor& q, const at::Tensor& k_transposed);

// A layer's queries and keys for the scores of many blocks of its rows, with their TF32 parts
// (tf32.h) made once where the products take them: each block's own would split every key again
// (at 8,192 tokens of GPT-2 small's shape some 20 GB of a device's memory traffic an analysis,
// and a dozen host ops a block and run). q [B, Ha, n, D] (scaled), k [B, Hb, T, D].
struct ScoreOperands {
    at::Tensor q, k;
    at::Tensor q_parts, k_parts;  // [B, Ha, n, 3D] (only where Ha == Hb), [B, Hb, T, 3D]; or undefined
};
ScoreOperands WithTf32Parts(const at::Tensor& q, const at::Tensor& k);
// GroupedScores(q's rows [first, first + rows), k's rows [0, keys)^T), the same product of the same
// parts where it takes Tf32x3Matmul (bit for bit on the CPU).
at::Tensor GroupedScoresOf(const ScoreOperands& o, int64_t first, int64_t rows, int64_t keys);

// a [..., M, K] @ b (float32 [K, N], or [..., K, N] with a's leading sizes) as one product of
// three-part operands (tf32.h): a's rows [hi, lo, hi] against b's [lo, hi, hi], 3K terms each,
// every one exact in TF32. On CUDA through cuBLAS's TF32 tensor cores (issue 37: some 7x float32's
// rate on an H100 or H200, where float32's products were half of an analysis's device time); on
// the CPU at::matmul of the same parts, for the tests: the same arithmetic, summed in another order,
// read through the same column-major description of the product that cuBLAS is handed
// (products_cuda.h's ColumnMajor), so the tests check the layouts a device multiplies.
// Within about 3 * 2^-22 of each |a_k b_k| of float32's product; a non-finite a or b gives a
// non-finite product (NaN where float32's might be infinite).
at::Tensor Tf32x3Matmul(const at::Tensor& a, const at::Tensor& b);
// Whether MatmulRows, AffineRows and GroupedScores take Tf32x3Matmul for float32 products of at
// least kTf32x3Rows rows (fewer read the weights three times for little arithmetic), on the CPU
// and on CUDA devices with TF32 tensor cores (compute capability 8.0 on):
// $SSAVIZ_PRODUCTS=tf32x3 (off by default until a device has measured it), or the last
// SetTf32x3Products.
constexpr int64_t kTf32x3Rows = 128;
bool Tf32x3Products();
void SetTf32x3Products(bool on);
// Whether products on `device` take them: Tf32x3Products, and a device that has them.
bool Tf32x3ProductsOn(const at::Device& device);
// Whether `device` multiplies TF32 parts on tensor cores: a CUDA device of compute capability 8.0
// on where the build has the kernels, and the CPU (its emulation, for the tests).
bool Tf32Device(const at::Device& device);

}  // namespace model
