// f16/bf16 <-> f32 conversion kernels for the NCCL backend's f32-accumulated reductions.
// Rounding to 16 bits is round-to-nearest-even (__float2half_rn / __float2bfloat16_rn), the
// same as the CPU conversion, so both backends round the f32 result identically.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "core/cuda/kernel_launch.h"
#include "core/cuda/launch_check.h"
#include "parallel/nccl_convert.h"

namespace fathom::parallel::nccl_convert {
namespace {
template <typename Half>
__device__ float widen(Half h);
template <>
__device__ float widen(__half h) { return __half2float(h); }
template <>
__device__ float widen(__nv_bfloat16 h) { return __bfloat162float(h); }

template <typename Half>
__device__ Half narrow(float f);
template <>
__device__ __half narrow(float f) { return __float2half_rn(f); }
template <>
__device__ __nv_bfloat16 narrow(float f) { return __float2bfloat16_rn(f); }

template <typename Half>
__global__ void widen_kernel(const Half* src, float* dst, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = widen(src[i]);
}

template <typename Half>
__global__ void narrow_kernel(const float* src, Half* dst, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = narrow<Half>(src[i]);
}

unsigned blocks_for(int64_t n) { return static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 65535)); }
}  // namespace

void widen_to_f32(const void* src, float* dst, int64_t n, bool bf16, void* stream) {
  if (n == 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  if (bf16)
    FATHOM_LAUNCH(blocks_for(n), 256, 0, s, widen_kernel<__nv_bfloat16>)
    (static_cast<const __nv_bfloat16*>(src), dst, n);
  else
    FATHOM_LAUNCH(blocks_for(n), 256, 0, s, widen_kernel<__half>)(static_cast<const __half*>(src), dst, n);
  FATHOM_CUDA_CHECK_LAUNCH("widen_to_f32");
}

void narrow_from_f32(const float* src, void* dst, int64_t n, bool bf16, void* stream) {
  if (n == 0) return;
  auto s = static_cast<cudaStream_t>(stream);
  if (bf16)
    FATHOM_LAUNCH(blocks_for(n), 256, 0, s, narrow_kernel<__nv_bfloat16>)(src, static_cast<__nv_bfloat16*>(dst), n);
  else
    FATHOM_LAUNCH(blocks_for(n), 256, 0, s, narrow_kernel<__half>)(src, static_cast<__half*>(dst), n);
  FATHOM_CUDA_CHECK_LAUNCH("narrow_from_f32");
}

}  // namespace fathom::parallel::nccl_convert
