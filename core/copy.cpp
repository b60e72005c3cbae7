#include "core/copy.h"

#include <cmath>
#include <cstring>
#include <type_traits>

#include "core/cuda/cuda_runtime.h"
#include "core/dtype_dispatch.h"
#include "core/strided_loop.h"

namespace fathom {
namespace {

// Conversion through float for the 16-bit types and through double otherwise keeps every
// integer exact up to 2^53 and applies one rounding for the narrowing float conversions.
template <typename To, typename From>
To convert(From value) {
  if constexpr (std::is_same_v<To, From>) {
    return value;
  } else if constexpr (std::is_same_v<To, bool>) {
    return static_cast<double>(value) != 0.0;
  } else if constexpr (std::is_same_v<To, Half> || std::is_same_v<To, BFloat16>) {
    return To(static_cast<float>(value));
  } else if constexpr (std::is_same_v<From, Half> || std::is_same_v<From, BFloat16>) {
    return static_cast<To>(static_cast<float>(value));
  } else {
    return static_cast<To>(value);
  }
}

void copy_cpu(const Tensor& dst, const Tensor& src) {
  const Strides src_strides = broadcast_strides(src.sizes(), src.strides(), dst.sizes());
  char* dst_base = static_cast<char*>(dst.raw_data());
  const char* src_base = static_cast<const char*>(src.raw_data());
  dispatch_dtype(dst.dtype(), "copy", [&]<typename To>() {
    dispatch_dtype(src.dtype(), "copy", [&]<typename From>() {
      To* out = reinterpret_cast<To*>(dst_base);
      const From* in = reinterpret_cast<const From*>(src_base);
      for_each_strided<2>(dst.sizes(), {&dst.strides(), &src_strides},
                          [&](const std::array<int64_t, 2>& at, int64_t n, const std::array<int64_t, 2>& step) {
                            To* o = out + at[0];
                            const From* i = in + at[1];
                            if (step[0] == 1 && step[1] == 1) {  // contiguous runs vectorise
                              for (int64_t j = 0; j < n; ++j) o[j] = convert<To>(i[j]);
                              return;
                            }
                            for (int64_t j = 0; j < n; ++j) o[j * step[0]] = convert<To>(i[j * step[1]]);
                          });
    });
  });
}

}  // namespace

void copy_into(const Tensor& dst, const Tensor& src) {
  FATHOM_CHECK(dst.defined() && src.defined(), "copy: undefined tensor");
  if (dst.numel() == 0) return;
  if (dst.device().is_cpu() && src.device().is_cpu()) {
    if (dst.storage() == src.storage() && dst.raw_data() == src.raw_data() && dst.strides() == src.strides() &&
        dst.sizes() == src.sizes() && dst.dtype() == src.dtype())
      return;  // copying a tensor onto itself
    copy_cpu(dst, src);
    return;
  }
  // Across devices (or within one GPU): bytes only, for now; conversions and strided copies on
  // the GPU arrive with the CUDA kernels.
  FATHOM_CHECK(dst.dtype() == src.dtype() && dst.sizes() == src.sizes() && dst.is_contiguous() &&
                   src.is_contiguous(),
               "copy from ", src.str(), " to ", dst.str(),
               ": a copy involving a CUDA tensor needs equal dtypes and shapes and contiguous tensors "
               "(call .contiguous() and .to(dtype) on the CPU side first)");
  cuda::copy_bytes(dst.raw_data(), dst.device(), src.raw_data(), src.device(), dst.nbytes());
}

void fill(const Tensor& dst, double value) {
  if (dst.numel() == 0) return;
  if (dst.device().is_cpu()) {
    const Tensor source = Tensor::scalar(value, DType::F64);
    copy_cpu(dst, source);
    return;
  }
  Tensor host = Tensor::full(dst.sizes(), value, dst.dtype(), kCPU);
  copy_into(dst, host);
}

}  // namespace fathom
