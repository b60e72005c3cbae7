// CUDA twin of the overflow check has_inf_or_nan (kernels/cpu/optimizer_cpu.cpp).
// Layout: any strides (operand 0 of an ElementwiseLayout); one thread per element over a
// grid-stride loop, contiguous tensors without the offset arithmetic. Every thread that meets
// an Inf or NaN stores 1 into one device flag: all writers store the same value, so the result
// does not depend on their order, and there is no float arithmetic to reorder. 16-bit values
// convert exactly to f32, which keeps Inf and NaN.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "core/cuda/kernel_launch.h"
#include "core/cuda/launch_check.h"
#include "kernels/launch_geometry.h"
#include "kernels/overflow_kernels.h"

namespace fathom::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 4096;  // enough to fill the GPU; the grid-stride loop does the rest

__device__ int64_t offset_of(const ElementwiseLayout& layout, int64_t i) {
  int64_t offset = 0;
  for (int d = layout.ndim - 1; d >= 0; --d) {
    offset += (i % layout.sizes[d]) * layout.strides[0][d];
    i /= layout.sizes[d];
  }
  return offset;
}

template <typename T>
__device__ bool non_finite(T v) {
  if constexpr (std::is_same_v<T, double>) return !isfinite(v);
  else return !isfinite(static_cast<float>(v));
}

template <typename T>
__global__ void __launch_bounds__(kThreads) flag_non_finite(const T* data, ElementwiseLayout layout, int32_t* flag) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < layout.numel; i += stride) {
    if (non_finite(data[layout.contiguous ? i : offset_of(layout, i)])) {
      *flag = 1;
      return;
    }
  }
}

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    cuda::fail((std::string("has_inf_or_nan: ") + what + " failed: " + cudaGetErrorString(status)).c_str(), __FILE__,
               __LINE__);
}

}  // namespace

void flag_inf_or_nan_cuda(const NonFiniteScan* scans, int64_t count, int32_t* flag, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  check(cudaMemsetAsync(flag, 0, sizeof(int32_t), s), "cudaMemsetAsync");
  for (int64_t k = 0; k < count; ++k) {
    const NonFiniteScan& scan = scans[k];
    if (scan.layout.numel == 0) continue;
    const int blocks = launch::grid_stride_blocks(scan.layout.numel, kThreads, kMaxBlocks);
    switch (scan.dtype) {
      case DType::F32:
        FATHOM_LAUNCH(blocks, kThreads, 0, s, flag_non_finite<float>)
        (static_cast<const float*>(scan.data), scan.layout, flag);
        break;
      case DType::F64:
        FATHOM_LAUNCH(blocks, kThreads, 0, s, flag_non_finite<double>)
        (static_cast<const double*>(scan.data), scan.layout, flag);
        break;
      case DType::F16:
        FATHOM_LAUNCH(blocks, kThreads, 0, s, flag_non_finite<Half>)
        (static_cast<const Half*>(scan.data), scan.layout, flag);
        break;
      case DType::BF16:
        FATHOM_LAUNCH(blocks, kThreads, 0, s, flag_non_finite<BFloat16>)
        (static_cast<const BFloat16*>(scan.data), scan.layout, flag);
        break;
      default:
        cuda::fail("has_inf_or_nan: needs a floating-point tensor on CUDA", __FILE__, __LINE__);
    }
    FATHOM_CUDA_CHECK_LAUNCH("flag_non_finite");
  }
}

}  // namespace fathom::kernels
