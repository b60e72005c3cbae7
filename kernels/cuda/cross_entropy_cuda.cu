// CUDA twins of the fused cross-entropy (kernels/cpu/cross_entropy_cpu.cpp).
// Layout: contiguous logits/dlogits (N, V), i64 targets (N); one block per row over a
// grid-stride loop, 128-bit loads and stores when every row of every operand starts 16-byte
// aligned (launch::vector_width), element by element otherwise.
// Forward: one read pass keeps each thread's running (max, sum of exp(x - max)) — an online
// logsumexp — merged across the row by warp shuffles, then across warps in warp order. Only the
// row's lse is saved (in the compute type); probabilities are never stored. Row losses go to a
// workspace in f64 and one block adds them in a fixed order, then divides by the normaliser.
// Backward: one pass per row, dlogits = exp(x - lse) * scale, minus dloss / normaliser at the
// target, with scale = dloss / normaliser (0 on ignored rows) + dlse; dloss is read on the device.
// Precision: f16/bf16/f32 compute in f32, f64 in f64; exp is the CPU's own f32 approximation
// (kernels/elementwise_math.h). The row sums run in another order than the CPU's lanes and the
// online form rescales by exp(old max - new max), so f32 lse agrees to a few ulp; products that
// the CPU rounds before a subtraction are rounded the same way here (__fmul_rn: no FMA).
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
__device__ inline float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ inline double mul_rn(double a, double b) { return __dmul_rn(a, b); }

template <typename T, int W>
__global__ void __launch_bounds__(launch::kCrossEntropyMaxThreads)
    cross_entropy_forward_kernel(Acc<T>* lse, double* row_losses, const T* logits, const int64_t* targets, int64_t N,
                                 int64_t V, int64_t ignore_index) {
  using A = Acc<T>;
  FATHOM_SHARED(scratch, MaxSum<A>[32]);
  const int64_t packs = V / W;
  for (int64_t r = blockIdx.x; r < N; r += gridDim.x) {
    const T* x = logits + r * V;
    MaxSum<A> st{-infinity<A>(), A(0)};
    for (int64_t j = threadIdx.x; j < packs; j += blockDim.x) {
      A v[W];
      rows::load<W>(x, j, v);
#pragma unroll
      for (int k = 0; k < W; ++k) online_add(st, v[k]);
    }
    st = rows::row_reduce(st, MergeMaxSum{}, /*whole_block=*/true, scratch);
    if (threadIdx.x == 0) {
      // On the CPU a row holding +Inf, or only -Inf, meets Inf - Inf: its lse is NaN.
      const bool undefined = st.m == infinity<A>() || (V > 0 && st.m == -infinity<A>());
      const A row_lse = undefined ? std::numeric_limits<A>::quiet_NaN() : st.m + log_acc(st.s);
      lse[r] = row_lse;
      const int64_t target = targets[r];
      row_losses[r] = target == ignore_index ? 0.0 : static_cast<double>(row_lse - rows::to_acc(x[target]));
    }
  }
}

// One block: each thread adds a strided share of the rows, then a fixed tree over the threads.
template <typename A>
__global__ void __launch_bounds__(launch::kLossSumThreads)
    loss_sum_kernel(A* loss, const double* row_losses, int64_t N, double normaliser) {
  FATHOM_SHARED(partial, double[launch::kLossSumThreads]);
  double sum = 0;
  for (int64_t r = threadIdx.x; r < N; r += blockDim.x) sum += row_losses[r];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int width = static_cast<int>(blockDim.x) / 2; width > 0; width /= 2) {
    if (static_cast<int>(threadIdx.x) < width) partial[threadIdx.x] += partial[threadIdx.x + width];
    __syncthreads();
  }
  if (threadIdx.x == 0) *loss = static_cast<A>(partial[0] / normaliser);
}

template <typename T, int W>
__global__ void __launch_bounds__(launch::kCrossEntropyMaxThreads)
    cross_entropy_backward_kernel(T* dlogits, const Acc<T>* dloss, const T* logits, const int64_t* targets,
                                  const Acc<T>* lse, const Acc<T>* dlse, int64_t N, int64_t V, int64_t ignore_index,
                                  double normaliser, bool accumulate) {
  using A = Acc<T>;
  const A row_scale = static_cast<A>(static_cast<double>(*dloss) / normaliser);
  const int64_t packs = V / W;
  for (int64_t r = blockIdx.x; r < N; r += gridDim.x) {
    const int64_t target = targets[r];
    const bool ignored = target == ignore_index;
    const A scale = (ignored ? A(0) : row_scale) + (dlse != nullptr ? dlse[r] : A(0));
    const A shift = lse[r];
    const T* x = logits + r * V;
    T* dx_row = dlogits + r * V;
    for (int64_t j = threadIdx.x; j < packs; j += blockDim.x) {
      A dx[W];
      if (scale == A(0)) {
#pragma unroll
        for (int k = 0; k < W; ++k) dx[k] = A(0);
      } else {
        rows::load<W>(x, j, dx);
#pragma unroll
        for (int k = 0; k < W; ++k) {
          dx[k] = mul_rn(math::exp(dx[k] - shift), scale);
          if (!ignored && j * W + k == target) dx[k] -= row_scale;
        }
      }
      rows::store<W>(dx_row, j, dx, accumulate);
    }
  }
}

// Calls fn(std::integral_constant<int, W>{}) with W the elements per access for these rows.
template <typename T, typename Fn>
void with_width(int64_t V, bool aligned, Fn&& fn) {
  constexpr int kWide = 16 / static_cast<int>(sizeof(T));
  if (launch::vector_width(V, sizeof(T), aligned) == kWide) fn(std::integral_constant<int, kWide>{});
  else fn(std::integral_constant<int, 1>{});
}

}  // namespace

void cross_entropy_forward_cuda(DType dtype, void* loss, void* lse, const void* logits, const int64_t* targets,
                                int64_t N, int64_t V, int64_t ignore_index, double normaliser, double* row_losses,
                                void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  dispatch_floating(dtype, "cross_entropy: needs f32, f64, f16 or bf16 logits", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    if (N > 0) {
      with_width<T>(V, rows::aligned16(logits), [&](auto width) {
        const int threads = launch::cross_entropy_threads(V);
        FATHOM_LAUNCH(launch::grid_stride_blocks(N, 1), threads, 0, s,
                      cross_entropy_forward_kernel<T, decltype(width)::value>)
        (static_cast<A*>(lse), row_losses, static_cast<const T*>(logits), targets, N, V, ignore_index);
      });
      FATHOM_CUDA_CHECK_LAUNCH("cross_entropy_forward_kernel");
    }
    FATHOM_LAUNCH(1, launch::kLossSumThreads, 0, s, loss_sum_kernel<A>)
    (static_cast<A*>(loss), row_losses, N, normaliser);
    FATHOM_CUDA_CHECK_LAUNCH("loss_sum_kernel");
  });
}

void cross_entropy_backward_cuda(DType dtype, void* dlogits, const void* dloss, const void* logits,
                                 const int64_t* targets, const void* lse, const void* dlse, int64_t N, int64_t V,
                                 int64_t ignore_index, double normaliser, bool accumulate, void* stream) {
  if (N == 0 || V == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  const bool aligned = rows::aligned16(dlogits) && rows::aligned16(logits);
  dispatch_floating(dtype, "cross_entropy_backward: needs f32, f64, f16 or bf16 logits", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    with_width<T>(V, aligned, [&](auto width) {
      const int threads = launch::cross_entropy_threads(V);
      FATHOM_LAUNCH(launch::grid_stride_blocks(N, 1), threads, 0, s,
                    cross_entropy_backward_kernel<T, decltype(width)::value>)
      (static_cast<T*>(dlogits), static_cast<const A*>(dloss), static_cast<const T*>(logits), targets,
       static_cast<const A*>(lse), static_cast<const A*>(dlse), N, V, ignore_index, normaliser, accumulate);
    });
  });
  FATHOM_CUDA_CHECK_LAUNCH("cross_entropy_backward_kernel");
}

}  // namespace fathom::kernels
