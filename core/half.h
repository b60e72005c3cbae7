#pragma once
// 16-bit floating-point storage types and their conversions to and from float.
//
// Half (IEEE binary16) and BFloat16 are plain 16-bit containers; arithmetic happens in float.
// float -> 16-bit rounds to nearest, ties to even; NaN stays NaN (quietened), Inf stays Inf,
// and finite values beyond the format's range round to Inf as IEEE requires. The functions are
// constexpr-free bit manipulation so they behave identically on every host and in CUDA code.

#include <cstdint>
#include <cstring>

// Host code built for a CPU with F16C (x86-64-v3 and later: Fathom's default baseline) converts
// f16 with the hardware instruction; it rounds exactly like the portable code below (a test
// compares them on every f16 pattern and two million floats).
#if defined(__F16C__) && !defined(__CUDACC__)
#include <immintrin.h>
#define FATHOM_HAVE_F16C 1
#endif

#if defined(__CUDACC__)
#define FATHOM_HOST_DEVICE __host__ __device__
#else
#define FATHOM_HOST_DEVICE
#endif

namespace fathom {

namespace detail {
FATHOM_HOST_DEVICE inline uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}
FATHOM_HOST_DEVICE inline float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}
}  // namespace detail

FATHOM_HOST_DEVICE inline uint16_t float_to_half_bits(float value) {
#if defined(FATHOM_HAVE_F16C)
  return static_cast<uint16_t>(_cvtss_sh(value, _MM_FROUND_TO_NEAREST_INT));
#endif
  uint32_t x = detail::float_bits(value);
  const uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u)  // Inf or NaN; a NaN keeps its top payload bits and is quietened
    return static_cast<uint16_t>(sign | 0x7c00u | (x > 0x7f800000u ? 0x200u | ((x >> 13) & 0x3ffu) : 0u));
  if (x >= 0x477ff000u)  // >= 65520 rounds to Inf
    return static_cast<uint16_t>(sign | 0x7c00u);
  if (x < 0x38800000u) {  // below 2^-14: a half subnormal (or zero)
    // Adding 0.5 puts the float's last mantissa bit at 2^-24, the half subnormal step, so the
    // FPU performs the round-to-nearest-even for us.
    const float shifted = detail::bits_float(x) + 0.5f;
    return static_cast<uint16_t>(sign | (detail::float_bits(shifted) - 0x3f000000u));
  }
  const uint32_t mantissa_odd = (x >> 13) & 1u;
  x += 0xc8000fffu + mantissa_odd;  // rebias exponent (127 -> 15) and round half to even
  return static_cast<uint16_t>(sign | (x >> 13));
}

FATHOM_HOST_DEVICE inline float half_bits_to_float(uint16_t h) {
#if defined(FATHOM_HAVE_F16C)
  return _cvtsh_ss(h);
#endif
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in float
    const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return detail::bits_float(sign | detail::float_bits(magnitude));
  }
  if (exponent == 31) return detail::bits_float(sign | 0x7f800000u | (mantissa << 13));
  return detail::bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

FATHOM_HOST_DEVICE inline uint16_t float_to_bfloat16_bits(float value) {
  const uint32_t x = detail::float_bits(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  const uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

FATHOM_HOST_DEVICE inline float bfloat16_bits_to_float(uint16_t b) {
  return detail::bits_float(static_cast<uint32_t>(b) << 16);
}

struct Half {
  uint16_t bits = 0;
  Half() = default;
  FATHOM_HOST_DEVICE explicit Half(float value) : bits(float_to_half_bits(value)) {}
  FATHOM_HOST_DEVICE operator float() const { return half_bits_to_float(bits); }
  FATHOM_HOST_DEVICE static Half from_bits(uint16_t b) {
    Half h;
    h.bits = b;
    return h;
  }
};

struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  FATHOM_HOST_DEVICE explicit BFloat16(float value) : bits(float_to_bfloat16_bits(value)) {}
  FATHOM_HOST_DEVICE operator float() const { return bfloat16_bits_to_float(bits); }
  FATHOM_HOST_DEVICE static BFloat16 from_bits(uint16_t b) {
    BFloat16 h;
    h.bits = b;
    return h;
  }
};

static_assert(sizeof(Half) == 2 && sizeof(BFloat16) == 2);

}  // namespace fathom
