// CUDA twin of dropout (kernels/cpu/dropout_cpu.cpp), forward and backward (the same kernel on
// dout). Layout: contiguous rows x width; element (r, c) is kept when Philox word
// sample_index[r] * full_width + column_offset + c (core/philox.h, the very code the CPU runs)
// is below ceil((1 - p) * 2^32). A thread takes one Philox block of one row — up to four
// consecutive elements, one 10-round evaluation (launch::dropout_group) — over a grid-stride
// loop; the mask is never stored. Precision: y = x * (1 / (1 - p)) in f32 (f64 for f64), one
// product and, when accumulating, one sum, each rounded as on the CPU (no FMA contraction), then
// rounded once to the storage type: outputs equal the CPU's bit for bit.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "core/cuda/kernel_launch.h"
#include "core/cuda/launch_check.h"
#include "core/dtype.h"
#include "core/philox.h"
#include "kernels/cuda/dispatch_floating.cuh"
#include "kernels/launch_geometry.h"
#include "kernels/nn_kernels.h"

namespace fathom::kernels {
namespace {

constexpr int kThreads = 256;

template <typename T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

__device__ inline float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ inline double mul_rn(double a, double b) { return __dmul_rn(a, b); }

template <typename T>
__global__ void __launch_bounds__(kThreads)
    dropout_kernel(T* out, const T* inp, const int64_t* sample_index, int64_t rows, int64_t width,
                   uint64_t keep_below, Acc<T> scale, uint64_t seed, uint64_t offset, int64_t column_offset,
                   int64_t full_width, bool accumulate) {
  using A = Acc<T>;
  const int64_t groups = launch::dropout_groups_per_row(width);
  const int64_t items = rows * groups;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < items; i += stride) {
    const int64_t r = i / groups, g = i % groups;
    const uint64_t base = static_cast<uint64_t>(sample_index[r]) * static_cast<uint64_t>(full_width) +
                          static_cast<uint64_t>(column_offset);
    const int64_t lead = static_cast<int64_t>(base & 3);
    const launch::ElementRange range = launch::dropout_group(lead, width, g);
    if (range.begin >= range.end) continue;
    const PhiloxWords words = philox_block(seed, offset, (base >> 2) + static_cast<uint64_t>(g));
    for (int64_t c = range.begin; c < range.end; ++c) {
      const uint32_t word = words.w[(base + static_cast<uint64_t>(c)) & 3];
      const int64_t at = r * width + c;
      A y = word < keep_below ? mul_rn(static_cast<A>(inp[at]), scale) : A(0);
      if (accumulate) y = static_cast<A>(out[at]) + y;
      out[at] = T(y);
    }
  }
}


}  // namespace

void dropout_forward_cuda(DType dtype, void* out, const void* inp, const int64_t* sample_index, int64_t rows,
                          int64_t width, double p, uint64_t seed, uint64_t offset, int64_t column_offset,
                          int64_t full_width, bool accumulate, void* stream) {
  if (rows == 0 || width == 0) return;
  // The CPU's threshold and scale, computed by the same host expressions.
  const uint64_t keep_below = static_cast<uint64_t>(std::ceil((1.0 - p) * 4294967296.0));
  const int blocks = launch::grid_stride_blocks(rows * launch::dropout_groups_per_row(width), kThreads);
  dispatch_floating(dtype, "dropout: needs a floating-point dtype (f32, f64, f16, bf16)", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const A scale = p < 1.0 ? static_cast<A>(1.0 / (1.0 - p)) : A(0);
    FATHOM_LAUNCH(blocks, kThreads, 0, static_cast<cudaStream_t>(stream), dropout_kernel<T>)
    (static_cast<T*>(out), static_cast<const T*>(inp), sample_index, rows, width, keep_below, scale, seed, offset,
     column_offset, full_width, accumulate);
  });
  FATHOM_CUDA_CHECK_LAUNCH("dropout_kernel");
}

}  // namespace fathom::kernels
