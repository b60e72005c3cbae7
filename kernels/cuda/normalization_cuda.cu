// CUDA twins of layernorm and rmsnorm, forward and backward (kernels/cpu/normalization_cpu.cpp).
// Layout: contiguous (N, C) rows; weight, bias (C) optional. Forward and dinp: a warp per row up
// to 1024 elements, else a block per row (launch::row_geometry), 128-bit accesses when every
// row of every operand is 16-byte aligned. dweight/dbias are column sums over rows: a grid of
// (column tile, row block) threads each sum one column over their row block in row order into
// a workspace row, then one thread per column adds the row blocks in block order
// (launch::plan_column_sums, chosen from N and C only). No atomics: the same shape gives the
// same bits on every run.
// Precision: f16/bf16/f32 compute in f32, f64 in f64, with the CPU's formulas: mean and
// variance in two passes over the row (no E[x^2] - E[x]^2), rstd = 1 / sqrt(var + eps), the
// saved mean/rstd in the compute type, one rounding on store. Row sums run in another order
// than the CPU's lanes, so f32 results agree to a few ulp.
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>

#include "core/cuda/kernel_launch.h"
#include "core/cuda/launch_check.h"
#include "core/dtype.h"
#include "kernels/cuda/dispatch_floating.cuh"
#include "kernels/cuda/row_ops.cuh"
#include "kernels/launch_geometry.h"
#include "kernels/nn_kernels.h"

namespace fathom::kernels {
namespace {

using rows::Acc;

__device__ inline float sqrt_acc(float x) { return sqrtf(x); }
__device__ inline double sqrt_acc(double x) { return ::sqrt(x); }

// The rows this thread works on, and how it walks a row.
struct RowWalk {
  bool whole_block;
  int lane;
  int rows_per_block;
  int threads_per_row;
  __device__ explicit RowWalk(int tpr)
      : whole_block(tpr > launch::kWarpSize),
        lane(static_cast<int>(threadIdx.x) % tpr),
        rows_per_block(static_cast<int>(blockDim.x) / tpr),
        threads_per_row(tpr) {}
  __device__ int64_t first_row() const {
    return static_cast<int64_t>(blockIdx.x) * rows_per_block + threadIdx.x / threads_per_row;
  }
  __device__ int64_t row_stride() const { return static_cast<int64_t>(gridDim.x) * rows_per_block; }
};

// Weight/bias pack j, or `fallback` when the pointer is null.
template <int V, typename T>
__device__ inline void load_or(const T* p, int64_t j, Acc<T> fallback, Acc<T> (&out)[V]) {
  if (p) {
    rows::load<V>(p, j, out);
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k) out[k] = fallback;
  }
}

template <typename T, int V>
__global__ void __launch_bounds__(launch::kRowBlockMaxThreads)
    layernorm_forward_kernel(T* out, Acc<T>* mean, Acc<T>* rstd, const T* inp, const T* weight, const T* bias,
                             int64_t N, int64_t C, Acc<T> eps, int threads_per_row) {
  using A = Acc<T>;
  FATHOM_SHARED(scratch, A[32]);
  const RowWalk walk(threads_per_row);
  const int64_t packs = C / V;
  for (int64_t row = walk.first_row(); row < N; row += walk.row_stride()) {
    const T* x_row = inp + row * C;
    A partial = A(0);
    for (int64_t j = walk.lane; j < packs; j += threads_per_row) {
      A x[V];
      rows::load<V>(x_row, j, x);
#pragma unroll
      for (int k = 0; k < V; ++k) partial += x[k];
    }
    const A m = rows::row_reduce(partial, rows::Plus{}, walk.whole_block, scratch) / A(C);
    partial = A(0);
    for (int64_t j = walk.lane; j < packs; j += threads_per_row) {
      A x[V];
      rows::load<V>(x_row, j, x);
#pragma unroll
      for (int k = 0; k < V; ++k) partial += (x[k] - m) * (x[k] - m);
    }
    const A var = rows::row_reduce(partial, rows::Plus{}, walk.whole_block, scratch) / A(C);
    const A s = A(1) / sqrt_acc(var + eps);
    for (int64_t j = walk.lane; j < packs; j += threads_per_row) {
      A x[V], w[V], b[V];
      rows::load<V>(x_row, j, x);
      load_or<V>(weight, j, A(1), w);
      load_or<V>(bias, j, A(0), b);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        A y = (x[k] - m) * s;
        if (weight) y *= w[k];
        if (bias) y += b[k];
        x[k] = y;
      }
      rows::store<V>(out + row * C, j, x, false);
    }
    if (walk.lane == 0) {
      mean[row] = m;
      rstd[row] = s;
    }
  }
}

template <typename T, int V>
__global__ void __launch_bounds__(launch::kRowBlockMaxThreads)
    rmsnorm_forward_kernel(T* out, Acc<T>* rstd, const T* inp, const T* weight, int64_t N, int64_t C, Acc<T> eps,
                           int threads_per_row) {
  using A = Acc<T>;
  FATHOM_SHARED(scratch, A[32]);
  const RowWalk walk(threads_per_row);
  const int64_t packs = C / V;
  for (int64_t row = walk.first_row(); row < N; row += walk.row_stride()) {
    const T* x_row = inp + row * C;
    A partial = A(0);
    for (int64_t j = walk.lane; j < packs; j += threads_per_row) {
      A x[V];
      rows::load<V>(x_row, j, x);
#pragma unroll
      for (int k = 0; k < V; ++k) partial += x[k] * x[k];
    }
    const A ms = rows::row_reduce(partial, rows::Plus{}, walk.whole_block, scratch) / A(C);
    const A s = A(1) / sqrt_acc(ms + eps);
    for (int64_t j = walk.lane; j < packs; j += threads_per_row) {
      A x[V], w[V];
      rows::load<V>(x_row, j, x);
      load_or<V>(weight, j, A(1), w);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        A y = x[k] * s;
        if (weight) y *= w[k];
        x[k] = y;
      }
      rows::store<V>(out + row * C, j, x, false);
    }
    if (walk.lane == 0) rstd[row] = s;
  }
}

// dinp of layernorm (mean non-null) or rmsnorm (mean null), per row, with g = dy * w:
//   layernorm: rstd * (g - mean(g) - xhat * mean(g * xhat)) + dmean / C + slope * xhat
//   rmsnorm:   rstd * (g - xhat * mean(g * xhat)) + slope * xhat
// where xhat = (x - mean) * rstd (rmsnorm: x * rstd) and slope = -drstd * rstd^2 / C.
template <typename T, int V>
__global__ void __launch_bounds__(launch::kRowBlockMaxThreads)
    norm_backward_dinp_kernel(T* dinp, const T* dout, const T* inp, const T* weight, const Acc<T>* mean,
                              const Acc<T>* rstd, const Acc<T>* dmean, const Acc<T>* drstd, int64_t N, int64_t C,
                              bool accumulate, int threads_per_row) {
  using A = Acc<T>;
  FATHOM_SHARED(scratch, A[32]);
  const RowWalk walk(threads_per_row);
  const bool layernorm = mean != nullptr;
  const int64_t packs = C / V;
  for (int64_t row = walk.first_row(); row < N; row += walk.row_stride()) {
    const T* dy_row = dout + row * C;
    const T* x_row = inp + row * C;
    const A m = layernorm ? mean[row] : A(0), s = rstd[row];
    A g_partial = A(0), gx_partial = A(0);
    for (int64_t j = walk.lane; j < packs; j += threads_per_row) {
      A dy[V], x[V], w[V];
      rows::load<V>(dy_row, j, dy);
      rows::load<V>(x_row, j, x);
      load_or<V>(weight, j, A(1), w);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const A g = weight ? dy[k] * w[k] : dy[k];
        const A xhat = layernorm ? (x[k] - m) * s : x[k] * s;
        g_partial += g;
        gx_partial += g * xhat;
      }
    }
    const A g_mean = layernorm ? rows::row_reduce(g_partial, rows::Plus{}, walk.whole_block, scratch) / A(C) : A(0);
    const A gx_mean = rows::row_reduce(gx_partial, rows::Plus{}, walk.whole_block, scratch) / A(C);
    const A shift = layernorm && dmean ? dmean[row] / A(C) : A(0);
    const A slope = drstd ? -drstd[row] * s * s / A(C) : A(0);
    for (int64_t j = walk.lane; j < packs; j += threads_per_row) {
      A dy[V], x[V], w[V], dx[V];
      rows::load<V>(dy_row, j, dy);
      rows::load<V>(x_row, j, x);
      load_or<V>(weight, j, A(1), w);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const A g = weight ? dy[k] * w[k] : dy[k];
        if (layernorm) {
          const A xhat = (x[k] - m) * s;
          dx[k] = s * (g - g_mean - xhat * gx_mean) + shift + slope * xhat;
        } else {
          const A xhat = x[k] * s;
          dx[k] = s * (g - xhat * gx_mean) + slope * xhat;
        }
      }
      rows::store<V>(dinp + row * C, j, dx, accumulate);
    }
  }
}

// Partial column sums over row block blockIdx.y: dw_partials[rb, c] = sum of dy * xhat,
// db_partials[rb, c] = sum of dy, rows in order. mean null: rmsnorm (xhat = x * rstd).
template <typename T>
__global__ void __launch_bounds__(launch::kColumnThreads)
    norm_param_partials_kernel(Acc<T>* dw_partials, Acc<T>* db_partials, const T* dout, const T* inp,
                               const Acc<T>* mean, const Acc<T>* rstd, int64_t N, int64_t C, int64_t rows_per_block) {
  using A = Acc<T>;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const int64_t block = blockIdx.y;
  const int64_t begin = block * rows_per_block;
  const int64_t end = begin + rows_per_block < N ? begin + rows_per_block : N;
  A dw = A(0), db = A(0);
  for (int64_t r = begin; r < end; ++r) {
    const A dy = rows::to_acc(dout[r * C + c]);
    if (dw_partials) {
      const A x = rows::to_acc(inp[r * C + c]);
      const A xhat = mean ? (x - mean[r]) * rstd[r] : x * rstd[r];
      dw += dy * xhat;
    }
    db += dy;
  }
  if (dw_partials) dw_partials[block * C + c] = dw;
  if (db_partials) db_partials[block * C + c] = db;
}

// dst[c] (+)= sum over row blocks, in block order, of partials[rb, c].
template <typename T>
__global__ void __launch_bounds__(launch::kColumnThreads)
    column_combine_kernel(T* dst, const Acc<T>* partials, int64_t row_blocks, int64_t C, bool accumulate) {
  using A = Acc<T>;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < C; c += stride) {
    A sum = A(0);
    for (int64_t b = 0; b < row_blocks; ++b) sum += partials[b * C + c];
    dst[c] = accumulate ? T(rows::to_acc(dst[c]) + sum) : T(sum);
  }
}

template <typename T>
void column_sums(T* dweight, T* dbias, const T* dout, const T* inp, const Acc<T>* mean, const Acc<T>* rstd, int64_t N,
                 int64_t C, bool accumulate, void* dw_workspace, void* db_workspace, cudaStream_t stream) {
  using A = Acc<T>;
  if (!dweight && !dbias) return;
  if ((dweight && !dw_workspace) || (dbias && !db_workspace))
    cuda::fail("norm backward: dweight/dbias need their workspaces", __FILE__, __LINE__);
  const launch::ColumnPlan plan = launch::plan_column_sums(N, C);
  A* dw_partials = dweight ? static_cast<A*>(dw_workspace) : nullptr;
  A* db_partials = dbias ? static_cast<A*>(db_workspace) : nullptr;
  const dim3 grid(static_cast<unsigned>(plan.column_blocks), static_cast<unsigned>(plan.row_blocks));
  FATHOM_LAUNCH(grid, launch::kColumnThreads, 0, stream, norm_param_partials_kernel<T>)
  (dw_partials, db_partials, dout, inp, mean, rstd, N, C, plan.rows_per_block);
  FATHOM_CUDA_CHECK_LAUNCH("norm_param_partials_kernel");
  const int blocks = launch::grid_stride_blocks(C, launch::kColumnThreads);
  if (dweight) {
    FATHOM_LAUNCH(blocks, launch::kColumnThreads, 0, stream, column_combine_kernel<T>)
    (dweight, dw_partials, plan.row_blocks, C, accumulate);
    FATHOM_CUDA_CHECK_LAUNCH("column_combine_kernel");
  }
  if (dbias) {
    FATHOM_LAUNCH(blocks, launch::kColumnThreads, 0, stream, column_combine_kernel<T>)
    (dbias, db_partials, plan.row_blocks, C, accumulate);
    FATHOM_CUDA_CHECK_LAUNCH("column_combine_kernel");
  }
}

template <typename T, typename Fn>
void with_width(int64_t C, bool aligned, Fn&& fn) {
  constexpr int kWide = 16 / static_cast<int>(sizeof(T));
  if (launch::vector_width(C, sizeof(T), aligned) == kWide) fn(std::integral_constant<int, kWide>{});
  else fn(std::integral_constant<int, 1>{});
}


bool all_aligned(std::initializer_list<const void*> pointers) {
  for (const void* p : pointers)
    if (!rows::aligned16(p)) return false;
  return true;
}

}  // namespace

void layernorm_forward_cuda(DType dtype, void* out, void* mean, void* rstd, const void* inp, const void* weight,
                            const void* bias, int64_t N, int64_t C, double eps, void* stream) {
  if (N == 0) return;
  const launch::RowGeometry g = launch::row_geometry(N, C);
  const bool aligned = all_aligned({out, inp, weight, bias});
  dispatch_floating(dtype, "layernorm: needs a floating-point dtype on CUDA", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    with_width<T>(C, aligned, [&](auto width) {
      FATHOM_LAUNCH(g.blocks, g.block_threads, 0, static_cast<cudaStream_t>(stream),
                    layernorm_forward_kernel<T, decltype(width)::value>)
      (static_cast<T*>(out), static_cast<A*>(mean), static_cast<A*>(rstd), static_cast<const T*>(inp),
       static_cast<const T*>(weight), static_cast<const T*>(bias), N, C, static_cast<A>(eps), g.threads_per_row);
    });
  });
  FATHOM_CUDA_CHECK_LAUNCH("layernorm_forward_kernel");
}

void rmsnorm_forward_cuda(DType dtype, void* out, void* rstd, const void* inp, const void* weight, int64_t N, int64_t C,
                          double eps, void* stream) {
  if (N == 0) return;
  const launch::RowGeometry g = launch::row_geometry(N, C);
  const bool aligned = all_aligned({out, inp, weight});
  dispatch_floating(dtype, "rmsnorm: needs a floating-point dtype on CUDA", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    with_width<T>(C, aligned, [&](auto width) {
      FATHOM_LAUNCH(g.blocks, g.block_threads, 0, static_cast<cudaStream_t>(stream),
                    rmsnorm_forward_kernel<T, decltype(width)::value>)
      (static_cast<T*>(out), static_cast<A*>(rstd), static_cast<const T*>(inp), static_cast<const T*>(weight), N, C,
       static_cast<A>(eps), g.threads_per_row);
    });
  });
  FATHOM_CUDA_CHECK_LAUNCH("rmsnorm_forward_kernel");
}

void layernorm_backward_cuda(DType dtype, void* dinp, void* dweight, void* dbias, const void* dout, const void* inp,
                             const void* weight, const void* mean, const void* rstd, const void* dmean,
                             const void* drstd, int64_t N, int64_t C, bool accumulate, void* dweight_partials,
                             void* dbias_partials, void* stream) {
  if (C == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  dispatch_floating(dtype, "layernorm_backward: needs a floating-point dtype on CUDA", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    if (dinp && N > 0) {
      const launch::RowGeometry g = launch::row_geometry(N, C);
      with_width<T>(C, all_aligned({dinp, dout, inp, weight}), [&](auto width) {
        FATHOM_LAUNCH(g.blocks, g.block_threads, 0, s, norm_backward_dinp_kernel<T, decltype(width)::value>)
        (static_cast<T*>(dinp), static_cast<const T*>(dout), static_cast<const T*>(inp), static_cast<const T*>(weight),
         static_cast<const A*>(mean), static_cast<const A*>(rstd), static_cast<const A*>(dmean),
         static_cast<const A*>(drstd), N, C, accumulate, g.threads_per_row);
      });
      FATHOM_CUDA_CHECK_LAUNCH("norm_backward_dinp_kernel");
    }
    column_sums<T>(static_cast<T*>(dweight), static_cast<T*>(dbias), static_cast<const T*>(dout),
                   static_cast<const T*>(inp), static_cast<const A*>(mean), static_cast<const A*>(rstd), N, C,
                   accumulate, dweight_partials, dbias_partials, s);
  });
}

void rmsnorm_backward_cuda(DType dtype, void* dinp, void* dweight, const void* dout, const void* inp,
                           const void* weight, const void* rstd, const void* drstd, int64_t N, int64_t C,
                           bool accumulate, void* dweight_partials, void* stream) {
  if (C == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  dispatch_floating(dtype, "rmsnorm_backward: needs a floating-point dtype on CUDA", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    if (dinp && N > 0) {
      const launch::RowGeometry g = launch::row_geometry(N, C);
      with_width<T>(C, all_aligned({dinp, dout, inp, weight}), [&](auto width) {
        FATHOM_LAUNCH(g.blocks, g.block_threads, 0, s, norm_backward_dinp_kernel<T, decltype(width)::value>)
        (static_cast<T*>(dinp), static_cast<const T*>(dout), static_cast<const T*>(inp), static_cast<const T*>(weight),
         nullptr, static_cast<const A*>(rstd), nullptr, static_cast<const A*>(drstd), N, C, accumulate,
         g.threads_per_row);
      });
      FATHOM_CUDA_CHECK_LAUNCH("norm_backward_dinp_kernel");
    }
    column_sums<T>(static_cast<T*>(dweight), nullptr, static_cast<const T*>(dout), static_cast<const T*>(inp), nullptr,
                   static_cast<const A*>(rstd), N, C, accumulate, dweight_partials, nullptr, s);
  });
}

}  // namespace fathom::kernels
