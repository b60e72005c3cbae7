#include "core/dtype.h"

#include "core/error.h"

namespace fathom {

size_t element_size(DType dtype) {
  switch (dtype) {
    case DType::F64:
    case DType::I64: return 8;
    case DType::F32:
    case DType::I32: return 4;
    case DType::F16:
    case DType::BF16: return 2;
    case DType::Bool: return 1;
  }
  FATHOM_FAIL("element_size: invalid dtype ", static_cast<int>(dtype));
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::F32: return "f32";
    case DType::F64: return "f64";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
    case DType::Bool: return "bool";
  }
  return "invalid";
}

DType parse_dtype(const std::string& name) {
  struct Alias {
    const char* name;
    DType dtype;
  };
  static const Alias aliases[] = {
      {"f32", DType::F32},  {"float32", DType::F32},   {"float", DType::F32},  {"fp32", DType::F32},
      {"f64", DType::F64},  {"float64", DType::F64},   {"double", DType::F64},
      {"f16", DType::F16},  {"float16", DType::F16},   {"half", DType::F16},   {"fp16", DType::F16},
      {"bf16", DType::BF16}, {"bfloat16", DType::BF16},
      {"i32", DType::I32},  {"int32", DType::I32},     {"i64", DType::I64},    {"int64", DType::I64},
      {"bool", DType::Bool}};
  for (const Alias& alias : aliases)
    if (name == alias.name) return alias.dtype;
  FATHOM_FAIL("unknown dtype \"", name, "\"; use one of f32, f64, f16, bf16, i32, i64, bool");
}

bool is_floating_point(DType dtype) {
  return dtype == DType::F32 || dtype == DType::F64 || dtype == DType::F16 || dtype == DType::BF16;
}

}  // namespace fathom
