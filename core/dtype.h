#pragma once
// Element types. Tests and gradient checks use f64; training uses f32, f16 and bf16;
// indices are i32/i64; masks are bool (one byte per element).

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/half.h"

namespace fathom {

enum class DType : uint8_t { F32, F64, F16, BF16, I32, I64, Bool };

inline constexpr DType kAllDTypes[] = {DType::F32, DType::F64, DType::F16, DType::BF16,
                                       DType::I32, DType::I64, DType::Bool};

size_t element_size(DType dtype);
const char* dtype_name(DType dtype);  // "f32", "bf16", ...
// Accepts Fathom's names and the common aliases ("float32", "float", "bfloat16", "half", ...).
DType parse_dtype(const std::string& name);
bool is_floating_point(DType dtype);

template <typename T>
struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::F32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::F64; };
template <> struct DTypeOf<Half> { static constexpr DType value = DType::F16; };
template <> struct DTypeOf<BFloat16> { static constexpr DType value = DType::BF16; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::I32; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::I64; };
template <> struct DTypeOf<bool> { static constexpr DType value = DType::Bool; };
template <typename T>
inline constexpr DType dtype_of = DTypeOf<T>::value;

}  // namespace fathom
