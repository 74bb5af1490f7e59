// Float32 values as sums of two TF32 values, for products on tensor cores that keep float32's
// accuracy (issue 37; linear.h's Tf32x3Matmul). TF32 keeps float32's exponent and 10 of its 23
// mantissa bits; x = hi + lo, hi being x rounded to those bits and lo the rest, itself rounded to
// them, so |x - hi - lo| <= 2^-22 |x| roughly. Then a . b = sum over k of a_k b_k is, to within
// about 3 * 2^-22 of each |a_k b_k|, the sum of a_hi b_lo + a_lo b_hi + a_hi b_hi: three TF32
// products whose operands are exact in TF32, so the tensor cores' own conversion changes nothing
// and they sum in float32, as float32's products do. float32's own rounding of each product and sum
// is 2^-24; a dot product of K terms rounds about sqrt(K) times that, so the two are alike.
//
// Plain C++ where CUDA is absent, device code where it is (products_cuda.cu's parts kernel); free
// of LibTorch.
#pragma once

#include <cstdint>
#include <cstring>

#include "model/nn/host_device.h"

namespace model::tf32 {

SSAVIZ_HOST_DEVICE inline uint32_t Bits(float x) {
#ifdef __CUDA_ARCH__
    return __float_as_uint(x);
#else
    uint32_t u;
    std::memcpy(&u, &x, sizeof u);
    return u;
#endif
}

SSAVIZ_HOST_DEVICE inline float FromBits(uint32_t u) {
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float x;
    std::memcpy(&x, &u, sizeof x);
    return x;
#endif
}

constexpr uint32_t kExponent = 0x7F800000u, kKept = 0xFFFFE000u, kHalf = 0x1000u;

// x to TF32's 10 mantissa bits, to nearest with ties away from zero (adding half the last kept
// bit's weight to the magnitude's bits carries into the exponent as it should). A finite x that
// would round to infinity (within half a TF32 step of FLT_MAX) is cut instead; infinities and NaNs
// stay what they are.
SSAVIZ_HOST_DEVICE inline float Round(float x) {
    const uint32_t u = Bits(x);
    if ((u & kExponent) == kExponent) return x;
    const uint32_t up = (u + kHalf) & kKept;
    return FromBits((up & kExponent) == kExponent ? u & kKept : up);
}

struct Parts {
    float hi, lo;
};

// x = hi + lo to within 2^-22 |x| or so, both exact in TF32. x - hi is exact in float32 (its bits
// lie below hi's last kept bit and within x's). A non-finite x is all hi (lo 0), so it still
// makes the product non-finite.
SSAVIZ_HOST_DEVICE inline Parts Split(float x) {
    const float hi = Round(x);
    if ((Bits(x) & kExponent) == kExponent) return {x, 0.0f};
#ifdef __CUDA_ARCH__
    return {hi, Round(__fsub_rn(x, hi))};
#else
    return {hi, Round(x - hi)};
#endif
}

// The three-part layout of an operand: out[o][j][i] = part j of in[o][i] (in [outer, inner], out
// [outer, 3, inner]), part j being lo where bit j of lo_parts is set and hi elsewhere. The left
// operand's rows [hi, lo, hi] (kLeft) against the right's [lo, hi, hi] (kRight) along the summed
// dimension make one product of 3K terms: a_hi b_lo + a_lo b_hi + a_hi b_hi.
constexpr unsigned kLeft = 0b010, kRight = 0b001;

SSAVIZ_HOST_DEVICE inline void WriteParts(const float* in, int64_t inner, int64_t i, unsigned lo_parts, float* out) {
    const int64_t o = i / inner, k = i - o * inner;
    const Parts p = Split(in[i]);
    float* row = out + o * 3 * inner + k;
    row[0] = lo_parts & 1u ? p.lo : p.hi;
    row[inner] = lo_parts & 2u ? p.lo : p.hi;
    row[2 * inner] = lo_parts & 4u ? p.lo : p.hi;
}

}  // namespace model::tf32
