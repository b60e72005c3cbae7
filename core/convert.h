#pragma once
// The one element conversion rule, shared by the CPU copy (core/copy.cpp) and the device copy
// kernels (core/cuda/copy_cuda.cu), so a conversion gives the same bits on either side.
//
//  - 16-bit floats convert through float: one rounding (to nearest even) on the way in, an
//    exact widening on the way out.
//  - Everything else converts through a plain static_cast, which keeps every integer exact up
//    to 2^53 in f64 and rounds to nearest even when narrowing f64 -> f32 or i64 -> f32.
//  - Floating -> integer truncates toward zero, saturates outside the integer's range and
//    gives 0 for NaN. C++ leaves the out-of-range case undefined (x86 returns INT_MIN, a GPU
//    saturates), so it is spelled out here to make both sides agree.
//  - Anything -> bool is "non-zero" (NaN is non-zero).
// Light header: .cu files include it.

#include <cstdint>
#include <type_traits>

#include "core/half.h"

namespace fathom {

template <typename T>
inline constexpr bool is_16bit_float_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

template <typename To, typename From>
FATHOM_HOST_DEVICE inline To convert(From value) {
  if constexpr (std::is_same_v<To, From>) {
    return value;
  } else if constexpr (std::is_same_v<To, bool>) {
    return static_cast<double>(value) != 0.0;
  } else if constexpr (is_16bit_float_v<To>) {
    return To(static_cast<float>(value));
  } else if constexpr (is_16bit_float_v<From>) {
    return convert<To, float>(static_cast<float>(value));
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    static_assert(std::is_same_v<To, int32_t> || std::is_same_v<To, int64_t>, "integer dtypes are i32 and i64");
    constexpr bool narrow = std::is_same_v<To, int32_t>;
    // 2^31 and 2^63 are exact in float and double; -2^31 and -2^63 are in range.
    const From limit = static_cast<From>(narrow ? 2147483648.0 : 9223372036854775808.0);
    if (!(value == value)) return To(0);
    if (value >= limit) {
      if constexpr (narrow) return INT32_MAX;
      else return INT64_MAX;
    }
    if (value < -limit) {
      if constexpr (narrow) return INT32_MIN;
      else return INT64_MIN;
    }
    return static_cast<To>(value);
  } else {
    return static_cast<To>(value);
  }
}

}  // namespace fathom
