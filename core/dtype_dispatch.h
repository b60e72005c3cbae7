#pragma once
// dispatch_dtype(dtype, "op", fn) calls fn.template operator()<T>() with T the C++ type of
// `dtype`, e.g.
//   dispatch_dtype(t.dtype(), "fill", [&]<typename T>() { std::fill_n(t.data<T>(), n, T(1)); });
// (A function rather than a macro, so template arguments with commas need no parentheses.)
// Not for .cu files: it pulls in core/error.h.

#include "core/dtype.h"
#include "core/error.h"

namespace fathom {

template <typename Fn>
decltype(auto) dispatch_dtype(DType dtype, const char* op, Fn&& fn) {
  switch (dtype) {
    case DType::F32: return fn.template operator()<float>();
    case DType::F64: return fn.template operator()<double>();
    case DType::F16: return fn.template operator()<Half>();
    case DType::BF16: return fn.template operator()<BFloat16>();
    case DType::I32: return fn.template operator()<int32_t>();
    case DType::I64: return fn.template operator()<int64_t>();
    case DType::Bool: return fn.template operator()<bool>();
  }
  FATHOM_FAIL(op, ": invalid dtype ", static_cast<int>(dtype));
}

}  // namespace fathom
