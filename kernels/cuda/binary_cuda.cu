// CUDA binary elementwise kernels. Layout: any strides (broadcast dims have stride 0), one
// thread per output element over a grid-stride loop; offsets are recovered from the linear
// index dim by dim (64-bit). Precision: f16/bf16 load, compute in f32, round once on store,
// exactly like the CPU twin in kernels/cpu/binary_cpu.cpp.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/cuda/launch_check.h"
#include "core/half.h"
#include "kernels/binary_kernels.h"

namespace fathom::kernels {
namespace {

template <typename T> struct ComputeType { using type = T; };
template <> struct ComputeType<Half> { using type = float; };
template <> struct ComputeType<BFloat16> { using type = float; };

template <typename T>
__global__ void add_kernel(T* out, const T* a, const T* b, BinaryLayout layout, bool accumulate) {
  using C = typename ComputeType<T>::type;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < layout.numel; i += stride) {
    int64_t rest = i, o = 0, x = 0, y = 0;
    for (int d = layout.ndim - 1; d >= 0; --d) {
      const int64_t index = rest % layout.sizes[d];
      rest /= layout.sizes[d];
      o += index * layout.out_strides[d];
      x += index * layout.a_strides[d];
      y += index * layout.b_strides[d];
    }
    C value = C(a[x]) + C(b[y]);
    if (accumulate) value += C(out[o]);
    out[o] = T(value);
  }
}

template <typename T>
void launch(void* out, const void* a, const void* b, const BinaryLayout& layout, bool accumulate, void* stream) {
  if (layout.numel == 0) return;
  constexpr int kThreads = 256;
  const int64_t wanted = (layout.numel + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(wanted < 65535 * 8 ? wanted : 65535 * 8);
  add_kernel<T><<<blocks, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<T*>(out), static_cast<const T*>(a), static_cast<const T*>(b), layout, accumulate);
  FATHOM_CUDA_CHECK_LAUNCH("add_kernel");
}

}  // namespace

void add_forward_cuda(DType dtype, void* out, const void* a, const void* b, const BinaryLayout& layout, bool accumulate,
                      void* stream) {
  switch (dtype) {
    case DType::F32: return launch<float>(out, a, b, layout, accumulate, stream);
    case DType::F64: return launch<double>(out, a, b, layout, accumulate, stream);
    case DType::F16: return launch<Half>(out, a, b, layout, accumulate, stream);
    case DType::BF16: return launch<BFloat16>(out, a, b, layout, accumulate, stream);
    case DType::I32: return launch<int32_t>(out, a, b, layout, accumulate, stream);
    case DType::I64: return launch<int64_t>(out, a, b, layout, accumulate, stream);
    case DType::Bool: break;
  }
  cuda::fail("add: bool tensors are not supported on CUDA", __FILE__, __LINE__);
}

}  // namespace fathom::kernels
