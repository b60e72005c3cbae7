// CUDA twins of the elementwise kernels (kernels/cpu/elementwise_cpu.cpp).
// Layout: any strides (broadcast dims have stride 0); one thread per output element over a
// grid-stride loop, offsets recovered from the linear index dim by dim in 64-bit arithmetic.
// Precision: f16/bf16 load into f32, compute with the same formulas as the CPU
// (kernels/elementwise_math.h), round once on store. nvcc contracts a*b+c into FMA, so
// transcendental results may differ from the CPU in the last ulp; +,-,*,/ match bit for bit.
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "core/cuda/kernel_launch.h"
#include "core/cuda/launch_check.h"
#include "kernels/elementwise_kernels.h"
#include "kernels/elementwise_math.h"
#include "kernels/launch_geometry.h"

namespace fathom::kernels {
namespace {

template <typename T>
using Compute = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;

constexpr int kThreads = 256;

int block_count(int64_t numel) { return launch::grid_stride_blocks(numel, kThreads); }

template <int N>
__device__ void operand_offsets(const ElementwiseLayout& layout, int64_t i, int64_t (&offsets)[N]) {
  for (int k = 0; k < N; ++k) offsets[k] = 0;
  for (int d = layout.ndim - 1; d >= 0; --d) {
    const int64_t index = i % layout.sizes[d];
    i /= layout.sizes[d];
    for (int k = 0; k < N; ++k) offsets[k] += index * layout.strides[k][d];
  }
}

template <typename T>
__global__ void unary_kernel(UnaryOp op, T* out, const T* x, ElementwiseLayout layout, double alpha, double beta,
                             bool accumulate) {
  using C = Compute<T>;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < layout.numel; i += stride) {
    int64_t at[2];
    operand_offsets<2>(layout, i, at);
    C value = math::unary<C>(op, C(x[at[1]]), C(alpha), C(beta));
    if (accumulate) value += C(out[at[0]]);
    out[at[0]] = T(value);
  }
}

template <typename T, typename Out>
__global__ void binary_kernel(BinaryOp op, Out* out, const T* a, const T* b, ElementwiseLayout layout,
                              bool accumulate) {
  using C = Compute<T>;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < layout.numel; i += stride) {
    int64_t at[3];
    operand_offsets<3>(layout, i, at);
    C value = math::binary<C>(op, C(a[at[1]]), C(b[at[2]]));
    if (accumulate) value += C(out[at[0]]);
    out[at[0]] = Out(value);
  }
}

template <typename T>
__global__ void where_kernel(T* out, const bool* cond, const T* a, const T* b, ElementwiseLayout layout) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < layout.numel; i += stride) {
    int64_t at[4];
    operand_offsets<4>(layout, i, at);
    out[at[0]] = cond[at[1]] ? a[at[2]] : b[at[3]];
  }
}

template <typename Fn>
void dispatch(DType dtype, const char* what, Fn&& fn) {
  switch (dtype) {
    case DType::F32: return fn(float{});
    case DType::F64: return fn(double{});
    case DType::F16: return fn(Half{});
    case DType::BF16: return fn(BFloat16{});
    case DType::I32: return fn(int32_t{});
    case DType::I64: return fn(int64_t{});
    case DType::Bool: break;
  }
  cuda::fail(what, __FILE__, __LINE__);
}

}  // namespace

void unary_forward_cuda(UnaryOp op, DType dtype, void* out, const void* x, const ElementwiseLayout& layout,
                        double alpha, double beta, bool accumulate, void* stream) {
  if (layout.numel == 0) return;
  dispatch(dtype, "unary: bool tensors are not supported on CUDA", [&](auto tag) {
    using T = decltype(tag);
    FATHOM_LAUNCH(block_count(layout.numel), kThreads, 0, static_cast<cudaStream_t>(stream), unary_kernel<T>)
    (op, static_cast<T*>(out), static_cast<const T*>(x), layout, alpha, beta, accumulate);
  });
  FATHOM_CUDA_CHECK_LAUNCH("unary_kernel");
}

void binary_forward_cuda(BinaryOp op, DType dtype, void* out, const void* a, const void* b,
                         const ElementwiseLayout& layout, bool accumulate, void* stream) {
  if (layout.numel == 0) return;
  dispatch(dtype, "binary: bool tensors are not supported on CUDA", [&](auto tag) {
    using T = decltype(tag);
    auto launch = [&](auto* typed_out) {
      using Out = std::remove_pointer_t<decltype(typed_out)>;
      FATHOM_LAUNCH(block_count(layout.numel), kThreads, 0, static_cast<cudaStream_t>(stream), binary_kernel<T, Out>)
      (op, typed_out, static_cast<const T*>(a), static_cast<const T*>(b), layout, accumulate);
    };
    if (is_comparison(op)) launch(static_cast<bool*>(out));
    else launch(static_cast<T*>(out));
  });
  FATHOM_CUDA_CHECK_LAUNCH("binary_kernel");
}

void where_forward_cuda(DType dtype, void* out, const bool* cond, const void* a, const void* b,
                        const ElementwiseLayout& layout, void* stream) {
  if (layout.numel == 0) return;
  dispatch(dtype, "where: bool tensors are not supported on CUDA", [&](auto tag) {
    using T = decltype(tag);
    FATHOM_LAUNCH(block_count(layout.numel), kThreads, 0, static_cast<cudaStream_t>(stream), where_kernel<T>)
    (static_cast<T*>(out), cond, static_cast<const T*>(a), static_cast<const T*>(b), layout);
  });
  FATHOM_CUDA_CHECK_LAUNCH("where_kernel");
}

}  // namespace fathom::kernels
