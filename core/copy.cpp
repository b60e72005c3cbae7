#include "core/copy.h"

#include <cstring>

#include "core/convert.h"
#include "core/cuda/copy_kernels.h"
#include "core/cuda/copy_layout.h"
#include "core/cuda/cuda_runtime.h"
#include "core/dtype_dispatch.h"
#include "core/memory_stats.h"
#include "core/strided_loop.h"

namespace fathom {
namespace {

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
                              for (int64_t j = 0; j < n; ++j) o[j] = convert<To, From>(i[j]);
                              return;
                            }
                            for (int64_t j = 0; j < n; ++j) o[j * step[0]] = convert<To, From>(i[j * step[1]]);
                          });
    });
  });
}

#if FATHOM_WITH_CUDA
// Both on one CUDA device: one kernel on the current stream.
void copy_device(const Tensor& dst, const Tensor& src) {
  const Strides src_strides = broadcast_strides(src.sizes(), src.strides(), dst.sizes());
  const cuda::CopyLayout layout = cuda::make_copy_layout(dst.sizes(), dst.strides(), src_strides);
  cuda::copy_cuda(dst.dtype(), dst.raw_data(), src.dtype(), src.raw_data(), layout, cuda::current_stream());
}
#else
[[noreturn]] void copy_device(const Tensor& dst, const Tensor&) {
  cuda::require_device(dst.device().index);
  FATHOM_FAIL("unreachable: a CUDA device without CUDA");
}
#endif

// Within one device (CPU or one GPU).
void copy_same_device(const Tensor& dst, const Tensor& src) {
  if (dst.device().is_cpu()) copy_cpu(dst, src);
  else copy_device(dst, src);
}

// Bytes move between devices only as a contiguous block of the source's dtype and shape; the
// layout and dtype work happens on either side, by the same-device copies.
void copy_across_devices(const Tensor& dst, const Tensor& src) {
  broadcast_strides(src.sizes(), src.strides(), dst.sizes());  // the shape error, before any work
  const Tensor staged = src.contiguous();  // on the source device
  const bool direct = dst.is_contiguous() && dst.dtype() == src.dtype() && dst.sizes() == src.sizes();
  const Tensor landing = direct ? dst : Tensor::empty(src.sizes(), src.dtype(), dst.device());
  cuda::copy_bytes(landing.raw_data(), landing.device(), staged.raw_data(), staged.device(), staged.nbytes());
  if (!direct) copy_same_device(dst, landing);
}

}  // namespace

void copy_into(const Tensor& dst, const Tensor& src) {
  FATHOM_CHECK(dst.defined() && src.defined(), "copy: undefined tensor");
  if (dst.numel() == 0) return;
  if (dst.device() != src.device()) {
    copy_across_devices(dst, src);
    return;
  }
  if (dst.storage() == src.storage() && dst.raw_data() == src.raw_data() && dst.strides() == src.strides() &&
      dst.sizes() == src.sizes() && dst.dtype() == src.dtype())
    return;  // copying a tensor onto itself
  copy_same_device(dst, src);
}

void fill(const Tensor& dst, double value) {
  if (dst.numel() == 0) return;
  if (dst.device().is_cpu()) {
    // A transient scalar, not part of what the caller's tag counts (an optimizer state's zeros).
    MemoryTagScope scratch(MemoryTag::Other);
    const Tensor source = Tensor::scalar(value, DType::F64);
    copy_cpu(dst, source);
    return;
  }
#if FATHOM_WITH_CUDA
  // The value is converted here, by the CPU's rule, and the kernel only stores it.
  unsigned char element[8] = {};
  dispatch_dtype(dst.dtype(), "fill", [&]<typename T>() {
    const T converted = convert<T, double>(value);
    std::memcpy(element, &converted, sizeof converted);
  });
  const cuda::CopyLayout layout =
      cuda::make_copy_layout(dst.sizes(), dst.strides(), Strides(dst.sizes().size(), 0));
  cuda::fill_cuda(dst.dtype(), dst.raw_data(), layout, element, cuda::current_stream());
#else
  cuda::require_device(dst.device().index);
#endif
}

}  // namespace fathom
