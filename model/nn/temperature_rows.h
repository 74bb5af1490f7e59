// One temperature (tau_q or tau_v, SPEC section 1) of one head and row, from raw pointers: the
// arithmetic of forward.cpp's TemperatureParts and CombineTemperature (with the what-ifs'
// keep, drop and scale) in one function, which temperatures_cuda.cu's kernel runs for every
// element on a device (one launch where the torch ops are some fifteen) and a test runs on the CPU
// against those ops. Plain C++ where CUDA is absent; free of LibTorch.
//
// Each product and sum is rounded on its own, as the torch ops round them (a device would fuse
// a * b + c into one rounding), so the position term, the what-ifs and the combination equal the
// torch ops' to the bit where their functions do; the token term's dot product sums in its own
// order (the torch ops' reduction or cuBLAS sum in theirs), within float32's rounding of them.
#pragma once

#include <cmath>
#include <cstdint>

#include "model/nn/cuda_stream.h"
#include "model/nn/host_device.h"

namespace model::temperature_rows {

SSAVIZ_HOST_DEVICE inline float Mul(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}
SSAVIZ_HOST_DEVICE inline float Add(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}
SSAVIZ_HOST_DEVICE inline float Sub(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}

// The forms' values (model/io/config.h's PositionForm, TokenForm and Combine), as plain numbers.
enum Position : int { kPositionNone, kSigmoid, kExpExp, kLinear };
enum Token : int { kTokenNone, kShared, kFeature };
enum CombineForm : int { kSum, kProduct };

// A side's temperature of B batch rows x H heads x R rows (positions first + 1 .. first + R).
// Strides are in floats; a parameter shared by the heads has stride 0.
struct Inputs {
    int64_t B = 0, H = 0, R = 0;
    int position = kPositionNone, token = kTokenNone, combine = kSum;
    const float* pos = nullptr;    // the position parameter p of head h at pos[h * pos_stride]
    int64_t pos_stride = 0;
    const float* log_i = nullptr;  // [R]: ln(first + 1 + r)
    // The token term's vector: a head's own (Shared; z[b, h, r, :], D floats) or the row's norm
    // output (Feature; x[b, r, :], E floats), and its weights w[h * w_stride + k], bias b[h * bias_stride].
    const float* z = nullptr;
    int64_t z_b = 0, z_h = 0, z_r = 0, length = 0;  // strides of b, h and r (the head's own only), and the vector's length
    const float* w = nullptr;
    int64_t w_stride = 0;
    const float* bias = nullptr;  // null: none
    int64_t bias_stride = 0;
    // The what-ifs (null: none): per batch row and head at [b * edit_b + h], as bytes 0 or 1.
    const uint8_t *keep_position = nullptr, *keep_token = nullptr, *scaled = nullptr;
    const float* scale = nullptr;
    int64_t edit_b = 0;
    float* tau = nullptr;  // [B, H, R]
    float *position_out = nullptr, *token_out = nullptr;  // [B, H, R] each, or null
};

SSAVIZ_HOST_DEVICE inline float PositionSlope(int form, float p) {
    if (form == kSigmoid) return 1.0f / (1.0f + expf(-p));
    if (form == kExpExp) return expf(-expf(p));
    return p;  // linear
}

// Element i of [B, H, R].
SSAVIZ_HOST_DEVICE inline void TemperatureAt(const Inputs& in, int64_t i) {
    const int64_t r = i % in.R, h = i / in.R % in.H, b = i / (in.R * in.H);
    float position = 1.0f, token = 0.0f;
    if (in.position != kPositionNone) position = Add(1.0f, Mul(PositionSlope(in.position, in.pos[h * in.pos_stride]), in.log_i[r]));
    if (in.token != kTokenNone) {
        const float* z = in.z + b * in.z_b + r * in.z_r + (in.token == kShared ? h * in.z_h : 0);
        const float* w = in.w + h * in.w_stride;
        float dot = 0.0f;
        for (int64_t k = 0; k < in.length; ++k) dot = Add(dot, Mul(z[k], w[k]));
        token = tanhf(in.bias ? Add(dot, in.bias[h * in.bias_stride]) : dot);
    }
    const int64_t e = b * in.edit_b + h;
    if (in.keep_position && !in.keep_position[e]) position = 1.0f;
    if (in.keep_token && !in.keep_token[e]) token = 0.0f;
    float tau = in.combine == kSum ? Add(position, token) : Mul(position, Add(1.0f, token));
    if (in.scaled && in.scaled[e]) tau = Add(1.0f, Mul(in.scale[e], Sub(tau, 1.0f)));
    in.tau[i] = tau;
    if (in.position_out) in.position_out[i] = position;
    if (in.token_out) in.token_out[i] = token;
}

}  // namespace model::temperature_rows

namespace model::cuda {
// TemperatureAt for every element of [in.B, in.H, in.R], the pointers on the current CUDA device
// (temperatures_cuda.cu, where the LibTorch has CUDA), on `stream` (cuda_stream.h); returns null,
// or CUDA's message for a failed launch.
const char* Temperatures(Stream stream, const temperature_rows::Inputs& in);
}  // namespace model::cuda
