// Device copies with dtype conversion, strides and broadcasting (core/copy.cpp dispatches here).
// Layout: the CopyLayout of core/cuda/copy_layout.h, with dims already merged. Two dense
// operands (one dim, unit strides) of one dtype are a cudaMemcpyAsync; dense operands of two
// dtypes take a loop without index arithmetic; anything else one thread per element over a
// grid-stride loop, offsets recovered from the linear index dim by dim in 64-bit arithmetic
// (indices and offsets may exceed 2^31). Unaligned pointers need no care: every access is one
// element of its own type.
// Precision: core/convert.h, the CPU's own rule (16-bit floats through float, RNE; float ->
// integer truncating and saturating, NaN -> 0), so results equal the CPU's bit for bit (NaN
// payloads aside).
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "core/convert.h"
#include "core/cuda/copy_kernels.h"
#include "core/cuda/kernel_launch.h"
#include "core/cuda/launch_check.h"

namespace fathom::cuda {
namespace {

__device__ inline void element_offsets(const CopyLayout& layout, int64_t i, int64_t& dst, int64_t& src) {
  dst = 0;
  src = 0;
  for (int d = layout.ndim - 1; d > 0; --d) {
    const int64_t index = i % layout.sizes[d];
    i /= layout.sizes[d];
    dst += index * layout.dst_strides[d];
    src += index * layout.src_strides[d];
  }
  if (layout.ndim > 0) {  // what is left of i is the outermost index (i < numel)
    dst += i * layout.dst_strides[0];
    src += i * layout.src_strides[0];
  }
}

template <typename To, typename From>
__global__ void copy_dense_kernel(To* dst, const From* src, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] = convert<To, From>(src[i]);
}

template <typename To, typename From>
__global__ void copy_strided_kernel(To* dst, const From* src, CopyLayout layout) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < layout.numel; i += stride) {
    int64_t d = 0, s = 0;
    element_offsets(layout, i, d, s);
    dst[d] = convert<To, From>(src[s]);
  }
}

template <typename T>
__global__ void fill_kernel(T* dst, T value, CopyLayout layout) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < layout.numel; i += stride) {
    int64_t d = 0, s = 0;
    element_offsets(layout, i, d, s);
    dst[d] = value;
  }
}

template <typename Fn>
void dispatch(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::F32: return fn(float{});
    case DType::F64: return fn(double{});
    case DType::F16: return fn(Half{});
    case DType::BF16: return fn(BFloat16{});
    case DType::I32: return fn(int32_t{});
    case DType::I64: return fn(int64_t{});
    case DType::Bool: return fn(bool{});
  }
  fail("copy: invalid dtype", __FILE__, __LINE__);
}

// One dim (or none) with unit strides: the elements are consecutive in both operands.
bool dense(const CopyLayout& layout, bool with_src) {
  return layout.ndim == 0 ||
         (layout.ndim == 1 && layout.dst_strides[0] == 1 && (!with_src || layout.src_strides[0] == 1));
}

}  // namespace

void copy_cuda(DType dst_dtype, void* dst, DType src_dtype, const void* src, const CopyLayout& layout,
               void* stream) {
  if (layout.numel == 0) return;
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  if (dst_dtype == src_dtype && dense(layout, true)) {
    size_t bytes = 0;
    dispatch(dst_dtype, [&](auto tag) { bytes = sizeof(tag) * static_cast<size_t>(layout.numel); });
    const cudaError_t status = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cuda_stream);
    if (status != cudaSuccess) fail(cudaGetErrorString(status), __FILE__, __LINE__);
    return;
  }
  const int blocks = copy_grid_blocks(layout.numel);
  dispatch(dst_dtype, [&](auto to_tag) {
    using To = decltype(to_tag);
    dispatch(src_dtype, [&](auto from_tag) {
      using From = decltype(from_tag);
      if (dense(layout, true))
        FATHOM_LAUNCH(blocks, kCopyThreads, 0, cuda_stream, copy_dense_kernel<To, From>)
        (static_cast<To*>(dst), static_cast<const From*>(src), layout.numel);
      else
        FATHOM_LAUNCH(blocks, kCopyThreads, 0, cuda_stream, copy_strided_kernel<To, From>)
        (static_cast<To*>(dst), static_cast<const From*>(src), layout);
    });
  });
  FATHOM_CUDA_CHECK_LAUNCH("copy_kernel");
}

void fill_cuda(DType dtype, void* dst, const CopyLayout& layout, const void* value, void* stream) {
  if (layout.numel == 0) return;
  dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    T typed;
    std::memcpy(&typed, value, sizeof typed);
    FATHOM_LAUNCH(copy_grid_blocks(layout.numel), kCopyThreads, 0, static_cast<cudaStream_t>(stream), fill_kernel<T>)
    (static_cast<T*>(dst), typed, layout);
  });
  FATHOM_CUDA_CHECK_LAUNCH("fill_kernel");
}

}  // namespace fathom::cuda
