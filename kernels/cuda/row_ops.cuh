#pragma once
// Device helpers of the row kernels (softmax_cuda.cu, normalization_cuda.cu): the compute type,
// vectorised row loads/stores and fixed-order reductions over the threads of one row.
//
// A row belongs either to one warp or to a whole block (launch::row_geometry). Reductions go
// down a warp by __shfl_down_sync (a fixed tree) and are broadcast from lane 0, then, for block
// rows, every thread adds the per-warp results in warp order from shared memory: the same
// inputs give the same bits on every run, and every thread of the row holds the same value.
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "core/half.h"

namespace fathom::kernels::rows {

// f64 rows compute in f64, everything else in f32 (as the CPU twins, nn_cpu_common.h).
template <typename T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

// V consecutive elements; 16 bytes when V is the vector width, so one 128-bit access.
template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};

template <typename T>
__device__ inline Acc<T> to_acc(T x) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) return static_cast<float>(x);
  else return x;
}

// Pack j (elements j*V .. j*V+V-1) of `row`, converted to the compute type.
template <int V, typename T>
__device__ inline void load(const T* row, int64_t j, Acc<T> (&out)[V]) {
  const Pack<T, V> p = reinterpret_cast<const Pack<T, V>*>(row)[j];
#pragma unroll
  for (int k = 0; k < V; ++k) out[k] = to_acc(p.v[k]);
}

// row[pack j] (+)= values, rounding once to T.
template <int V, typename T>
__device__ inline void store(T* row, int64_t j, const Acc<T> (&values)[V], bool accumulate) {
  Pack<T, V> p;
  if (accumulate) {
    const Pack<T, V> old = reinterpret_cast<const Pack<T, V>*>(row)[j];
#pragma unroll
    for (int k = 0; k < V; ++k) p.v[k] = T(to_acc(old.v[k]) + values[k]);
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k) p.v[k] = T(values[k]);
  }
  reinterpret_cast<Pack<T, V>*>(row)[j] = p;
}

__device__ inline float shuffle_down(float v, int offset) { return __shfl_down_sync(0xffffffffu, v, offset); }
__device__ inline double shuffle_down(double v, int offset) { return __shfl_down_sync(0xffffffffu, v, offset); }
__device__ inline float shuffle_first(float v) { return __shfl_sync(0xffffffffu, v, 0); }
__device__ inline double shuffle_first(double v) { return __shfl_sync(0xffffffffu, v, 0); }

// Combines `value` over the 32 lanes of the calling warp (all lanes must call); every lane
// gets lane 0's result. V is float, double, or a struct with its own shuffle_down/shuffle_first.
template <typename V, typename Op>
__device__ inline V warp_reduce(V value, Op op) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) value = op(value, shuffle_down(value, offset));
  return shuffle_first(value);
}

// Combines `value` over the threads of one row: the warp, or the whole block when
// `whole_block` (then every thread of the block must call; `scratch` holds 32 values).
template <typename V, typename Op>
__device__ inline V row_reduce(V value, Op op, bool whole_block, V* scratch) {
  value = warp_reduce(value, op);
  if (!whole_block) return value;
  const int warp = static_cast<int>(threadIdx.x) / 32, warps = static_cast<int>(blockDim.x) / 32;
  __syncthreads();  // the previous reduction has finished reading scratch
  if (threadIdx.x % 32 == 0) scratch[warp] = value;
  __syncthreads();
  V total = scratch[0];
  for (int w = 1; w < warps; ++w) total = op(total, scratch[w]);
  return total;
}

struct Plus {
  template <typename A>
  __device__ A operator()(A a, A b) const {
    return a + b;
  }
};

// Whether p is 16-byte aligned (null counts as aligned: an absent operand is never loaded).
inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace fathom::kernels::rows
