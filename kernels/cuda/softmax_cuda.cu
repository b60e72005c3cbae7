// CUDA twins of softmax / log_softmax over the last dim (kernels/cpu/softmax_cpu.cpp), optionally
// scaled and causally masked (attention's causal_softmax, SoftmaxScaling in kernels/nn_kernels.h).
// Layout: contiguous (N, C) rows; a warp per row up to 1024 elements, else a block per row
// (launch::row_geometry); 128-bit loads and stores when every row of every operand is 16-byte
// aligned (launch::vector_width), element by element otherwise.
// Forward: one read pass keeps each thread's running (max, sum of exp(x - max)) — the online
// softmax — merged across the row in a fixed tree; a second pass writes exp(x - max) / sum or
// x - (max + log sum). Backward: one pass for the row sum, one for dinp.
// Precision: f16/bf16/f32 compute in f32, f64 in f64; exp is the CPU's own f32 approximation
// (kernels/elementwise_math.h) so both sides round the same function. The sums run in another
// order than the CPU's lanes and the online rescaling multiplies by exp(old max - new max), so
// f32 results agree to a few ulp, not bit for bit. Inf/NaN rows come out as on the CPU: a NaN
// or +Inf anywhere makes the whole row NaN; -Inf entries give 0 (a row of only -Inf is NaN).
#include <cuda_runtime.h>

#include <cstdint>
#include <limits>

#include "core/cuda/kernel_launch.h"
#include "core/cuda/launch_check.h"
#include "core/dtype.h"
#include "kernels/cuda/dispatch_floating.cuh"
#include "kernels/cuda/online_softmax.cuh"
#include "kernels/cuda/row_ops.cuh"
#include "kernels/elementwise_math.h"
#include "kernels/launch_geometry.h"
#include "kernels/nn_kernels.h"

namespace fathom::kernels {
namespace {

using rows::Acc;
using rows::infinity;
using rows::MaxSum;
using rows::MergeMaxSum;
using rows::online_add;

__device__ inline float log_acc(float x) { return logf(x); }
__device__ inline double log_acc(double x) { return ::log(x); }

// Row `row` sees its first scaling.visible(row, C) values (all without a causal mask): packs
// past them are not read, and the masked values come out as 0 (log: -Inf).
template <typename T, int V>
__global__ void __launch_bounds__(launch::kRowBlockMaxThreads)
    softmax_forward_kernel(T* out, const T* inp, int64_t N, int64_t C, bool log, SoftmaxScaling scaling,
                           int threads_per_row) {
  using A = Acc<T>;
  FATHOM_SHARED(scratch, MaxSum<A>[32]);
  const bool whole_block = threads_per_row > launch::kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % threads_per_row;
  const int rows_per_block = static_cast<int>(blockDim.x) / threads_per_row;
  const int64_t packs = C / V;
  const A scale = static_cast<A>(scaling.scale);
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * rows_per_block + threadIdx.x / threads_per_row; row < N;
       row += static_cast<int64_t>(gridDim.x) * rows_per_block) {
    const T* x = inp + row * C;
    T* y = out + row * C;
    const int64_t n = scaling.visible(row, C), visible_packs = (n + V - 1) / V;
    MaxSum<A> st{-infinity<A>(), A(0)};
    for (int64_t j = lane; j < visible_packs; j += threads_per_row) {
      A v[V];
      rows::load<V>(x, j, v);
#pragma unroll
      for (int k = 0; k < V; ++k)
        if (j * V + k < n) online_add(st, scale * v[k]);
    }
    st = rows::row_reduce(st, MergeMaxSum{}, whole_block, scratch);
    const A m = st.m;
    const A s = m == infinity<A>() ? std::numeric_limits<A>::quiet_NaN() : st.s;  // +Inf - +Inf is NaN on the CPU
    const A shift = log ? m + log_acc(s) : A(0), inv = A(1) / s;
    const A masked = log ? -infinity<A>() : A(0);
    for (int64_t j = lane; j < packs; j += threads_per_row) {
      A v[V];
      if (j < visible_packs) rows::load<V>(x, j, v);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        if (j * V + k >= n) v[k] = masked;
        else v[k] = log ? scale * v[k] - shift : math::exp(scale * v[k] - m) * inv;
      }
      rows::store<V>(y, j, v, false);
    }
  }
}

// softmax: dinp (+)= scale * y * (dy - sum(dy * y)); log_softmax: dinp (+)= scale * (dy - exp(y) * sum(dy)),
// over the visible values; masked ones get 0.
template <typename T, int V>
__global__ void __launch_bounds__(launch::kRowBlockMaxThreads)
    softmax_backward_kernel(T* dinp, const T* dout, const T* out, int64_t N, int64_t C, bool log, bool accumulate,
                            SoftmaxScaling scaling, int threads_per_row) {
  using A = Acc<T>;
  FATHOM_SHARED(scratch, A[32]);
  const bool whole_block = threads_per_row > launch::kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % threads_per_row;
  const int rows_per_block = static_cast<int>(blockDim.x) / threads_per_row;
  const int64_t packs = C / V;
  const A scale = static_cast<A>(scaling.scale);
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * rows_per_block + threadIdx.x / threads_per_row; row < N;
       row += static_cast<int64_t>(gridDim.x) * rows_per_block) {
    const T* dy_row = dout + row * C;
    const T* y_row = out + row * C;
    T* dx_row = dinp + row * C;
    const int64_t n = scaling.visible(row, C), visible_packs = (n + V - 1) / V;
    A partial = A(0);
    for (int64_t j = lane; j < visible_packs; j += threads_per_row) {
      A dy[V], y[V];
      rows::load<V>(dy_row, j, dy);
      if (!log) rows::load<V>(y_row, j, y);
#pragma unroll
      for (int k = 0; k < V; ++k)
        if (j * V + k < n) partial += log ? dy[k] : dy[k] * y[k];
    }
    const A s = rows::row_reduce(partial, rows::Plus{}, whole_block, scratch);
    for (int64_t j = lane; j < packs; j += threads_per_row) {
      A dy[V], y[V], dx[V];
      if (j < visible_packs) {
        rows::load<V>(dy_row, j, dy);
        rows::load<V>(y_row, j, y);
      }
#pragma unroll
      for (int k = 0; k < V; ++k)
        dx[k] = j * V + k >= n ? A(0) : scale * (log ? dy[k] - math::exp(y[k]) * s : y[k] * (dy[k] - s));
      rows::store<V>(dx_row, j, dx, accumulate);
    }
  }
}

// Calls fn(T{}, std::integral_constant<int, V>{}) with V the vector width for these pointers.
template <typename T, typename Fn>
void with_width(int64_t C, bool aligned, Fn&& fn) {
  constexpr int kWide = 16 / static_cast<int>(sizeof(T));
  if (launch::vector_width(C, sizeof(T), aligned) == kWide) fn(T{}, std::integral_constant<int, kWide>{});
  else fn(T{}, std::integral_constant<int, 1>{});
}

}  // namespace

void softmax_forward_cuda(DType dtype, void* out, const void* inp, int64_t N, int64_t C, bool log,
                          const SoftmaxScaling& scaling, void* stream) {
  if (N == 0 || C == 0) return;
  const launch::RowGeometry g = launch::row_geometry(N, C);
  const bool aligned = rows::aligned16(out) && rows::aligned16(inp);
  dispatch_floating(dtype, "softmax: needs a floating-point dtype on CUDA", [&](auto tag) {
    using T = decltype(tag);
    with_width<T>(C, aligned, [&](auto, auto width) {
      FATHOM_LAUNCH(g.blocks, g.block_threads, 0, static_cast<cudaStream_t>(stream),
                    softmax_forward_kernel<T, decltype(width)::value>)
      (static_cast<T*>(out), static_cast<const T*>(inp), N, C, log, scaling, g.threads_per_row);
    });
  });
  FATHOM_CUDA_CHECK_LAUNCH("softmax_forward_kernel");
}

void softmax_backward_cuda(DType dtype, void* dinp, const void* dout, const void* out, int64_t N, int64_t C, bool log,
                           bool accumulate, const SoftmaxScaling& scaling, void* stream) {
  if (N == 0 || C == 0) return;
  const launch::RowGeometry g = launch::row_geometry(N, C);
  const bool aligned = rows::aligned16(dinp) && rows::aligned16(dout) && rows::aligned16(out);
  dispatch_floating(dtype, "softmax_backward: needs a floating-point dtype on CUDA", [&](auto tag) {
    using T = decltype(tag);
    with_width<T>(C, aligned, [&](auto, auto width) {
      FATHOM_LAUNCH(g.blocks, g.block_threads, 0, static_cast<cudaStream_t>(stream),
                    softmax_backward_kernel<T, decltype(width)::value>)
      (static_cast<T*>(dinp), static_cast<const T*>(dout), static_cast<const T*>(out), N, C, log, accumulate, scaling,
       g.threads_per_row);
    });
  });
  FATHOM_CUDA_CHECK_LAUNCH("softmax_backward_kernel");
}

}  // namespace fathom::kernels
