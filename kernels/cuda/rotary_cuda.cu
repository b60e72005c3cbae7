// CUDA twin of the rotary position embedding (kernels/cpu/rotary_cpu.cpp, kernels/rotary.h).
// Layout: contiguous (B, H, T, D) rows. One thread per rotated pair (i, i + R/2) or passed-
// through dim of a row, grid-stride; each computes its angle as the same f32 product as the CPU
// and takes cos/sin itself (a table would cost a second launch and a round trip through memory
// for an op that is one read and one write of x). Precision: f16/bf16/f32 in f32, f64 in f64,
// rounded once; cosf/sinf here and the C library's on the CPU may differ by an ulp.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/cuda/kernel_launch.h"
#include "core/cuda/launch_check.h"
#include "kernels/cuda/dispatch_floating.cuh"
#include "kernels/cuda/row_ops.cuh"
#include "kernels/launch_geometry.h"
#include "kernels/nn_kernels.h"

namespace fathom::kernels {
namespace {

using rows::Acc;
using rows::to_acc;

constexpr int kThreads = 256;

__device__ inline void cos_sin(float a, float& c, float& s) {
  c = cosf(a);
  s = sinf(a);
}
__device__ inline void cos_sin(double a, double& c, double& s) {
  c = ::cos(a);
  s = ::sin(a);
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    rotary_kernel(T* out, const T* x, const int64_t* positions, const float* inv_freq, RotaryShape s) {
  using A = Acc<T>;
  const int64_t half = s.R / 2, per_row = half + (s.D - s.R), items = s.B * s.H * s.T * per_row;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t item = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; item < items; item += stride) {
    const int64_t r = item / per_row, i = item % per_row;
    const T* xr = x + r * s.D;
    T* o = out + r * s.D;
    if (i >= half) {  // a passed-through dim
      const int64_t d = s.R + (i - half);
      o[d] = xr[d];
      continue;
    }
    const int64_t t = r % s.T, b = r / (s.H * s.T);
    const int64_t position = positions[s.positions_batched ? b * s.T + t : t];
    const A angle = static_cast<A>(static_cast<float>(position) * inv_freq[i]);
    A c, sn;
    cos_sin(angle, c, sn);
    if (s.inverse) sn = -sn;
    const A x1 = to_acc(xr[i]), x2 = to_acc(xr[i + half]);
    o[i] = T(x1 * c - x2 * sn);
    o[i + half] = T(x2 * c + x1 * sn);
  }
}

}  // namespace

void rotary_embedding_cuda(DType dtype, void* out, const void* x, const int64_t* positions, const float* inv_freq,
                           const RotaryShape& shape, void* stream) {
  const int64_t items = shape.B * shape.H * shape.T * (shape.R / 2 + shape.D - shape.R);
  if (items == 0) return;
  dispatch_floating(dtype, "rotary_embedding: needs a floating-point dtype on CUDA", [&](auto tag) {
    using T = decltype(tag);
    FATHOM_LAUNCH(launch::grid_stride_blocks(items, kThreads), kThreads, 0, static_cast<cudaStream_t>(stream),
                  rotary_kernel<T>)
    (static_cast<T*>(out), static_cast<const T*>(x), positions, inv_freq, shape);
  });
  FATHOM_CUDA_CHECK_LAUNCH("rotary_kernel");
}

}  // namespace fathom::kernels
