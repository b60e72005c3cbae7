#pragma once
// Host-side dtype dispatch of the floating-point kernels: fn(T{}) for T in f32, f64, f16, bf16;
// any other dtype throws `message` (the host checks normally refuse it before this point).
#include "core/cuda/launch_check.h"
#include "core/dtype.h"
#include "core/half.h"

namespace fathom::kernels {

template <typename Fn>
void dispatch_floating(DType dtype, const char* message, Fn&& fn) {
  switch (dtype) {
    case DType::F32: return fn(float{});
    case DType::F64: return fn(double{});
    case DType::F16: return fn(Half{});
    case DType::BF16: return fn(BFloat16{});
    default: break;
  }
  cuda::fail(message, __FILE__, __LINE__);
}

}  // namespace fathom::kernels
