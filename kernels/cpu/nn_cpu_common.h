#pragma once
// Helpers shared by the fused CPU NN kernels (kernels/cpu/*_cpu.cpp of kernels/nn_kernels.h).
//
// - Acc<T>: the compute type of a storage type (f64 for f64, f32 for f32/f16/bf16).
// - exp_acc: the f32 exp approximation shared with the elementwise kernels.
// - Row loads/stores that convert 16-bit rows through an f32 scratch row, so inner loops run
//   on plain float arrays the compiler vectorises.
// - Fixed-lane sums: a row is summed into kLanes independent partial sums combined in a fixed
//   tree. That vectorises without -ffast-math and gives the same bits on every thread count
//   and every ISA, because the order is set by the code, not by the compiler or the machine.
// - parallel_rows: contiguous row ranges, one per thread. Each row is computed by exactly one
//   thread with the same code, so the split never changes a result.

#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/threads.h"
#include "kernels/elementwise_math.h"

namespace fathom::kernels::nn_cpu {

template <typename T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename T>
inline constexpr bool kIsAcc = std::is_same_v<T, Acc<T>>;

// Asks for row r + 2 of a (rows x n) block while row r is worked on: rows of a few KiB are too
// short for the hardware prefetcher to get ahead of.
template <typename T>
inline void prefetch_row_ahead(const T* rows, int64_t r, int64_t end, int64_t n) {
  if (r + 2 >= end) return;
  for (int64_t i = 0; i < n; i += 64 / static_cast<int64_t>(sizeof(T))) __builtin_prefetch(rows + (r + 2) * n + i);
}

// The row itself when T is already the compute type; otherwise a converted copy in scratch.
template <typename T>
inline const Acc<T>* load_row(const T* src, int64_t n, std::vector<Acc<T>>& scratch) {
  if constexpr (kIsAcc<T>) {
    return src;
  } else {
    if (static_cast<int64_t>(scratch.size()) < n) scratch.resize(n);
    for (int64_t i = 0; i < n; ++i) scratch[i] = static_cast<float>(src[i]);
    return scratch.data();
  }
}

// dst (+)= src, rounding once into the storage type.
template <typename T, typename A>
inline void store_row(T* dst, const A* src, int64_t n, bool accumulate) {
  if (accumulate) {
    for (int64_t i = 0; i < n; ++i) dst[i] = T(static_cast<A>(dst[i]) + src[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = T(src[i]);
  }
}

// exp in the compute type: for f32 the shared vectorisable approximation of
// kernels/elementwise_math.h (plain arithmetic: same bits on every thread count).
template <typename A>
inline A exp_acc(A x) {
  return math::exp(x);
}

template <typename A>
inline constexpr int kLanes = 64 / sizeof(A);  // one 512-bit register of partial sums

// sum over i in [0, n) of term(i), in the fixed lane order described above.
template <typename A, typename Term>
inline A lane_sum(int64_t n, Term&& term) {
  constexpr int L = kLanes<A>;
  A lanes[L] = {};
  int64_t i = 0;
  for (; i + L <= n; i += L)
    for (int k = 0; k < L; ++k) lanes[k] += term(i + k);
  A tail = 0;
  for (; i < n; ++i) tail += term(i);
  for (int width = L / 2; width > 0; width /= 2)
    for (int k = 0; k < width; ++k) lanes[k] += lanes[k + width];
  return lanes[0] + tail;
}

template <typename A>
inline A row_sum(const A* x, int64_t n) {
  return lane_sum<A>(n, [&](int64_t i) { return x[i]; });
}

// Max is exact in any order; lanes only help the compiler vectorise. -inf for an empty row.
template <typename A>
inline A row_max(const A* x, int64_t n) {
  constexpr int L = kLanes<A>;
  A lanes[L];
  for (int k = 0; k < L; ++k) lanes[k] = -std::numeric_limits<A>::infinity();
  int64_t i = 0;
  for (; i + L <= n; i += L)
    for (int k = 0; k < L; ++k) lanes[k] = x[i + k] > lanes[k] ? x[i + k] : lanes[k];
  A best = -std::numeric_limits<A>::infinity();
  for (; i < n; ++i) best = x[i] > best ? x[i] : best;
  for (int k = 0; k < L; ++k) best = lanes[k] > best ? lanes[k] : best;
  return best;
}

// y[i] = exp(scale * x[i] - shift) * factor for i < n (y may be x), and the lane_sum of
// exp(scale * x[i] - shift) without storing them: vectorised f32 passes (exp_rows.cpp).
void exp_affine(float* y, const float* x, int64_t n, float scale, float shift, float factor);
float exp_affine_sum(const float* x, int64_t n, float scale, float shift);

// The same in any compute type: the vectorised passes for f32, plain loops for f64.
template <typename A>
inline void exp_affine_row(A* y, const A* x, int64_t n, A scale, A shift, A factor = A(1)) {
  if constexpr (std::is_same_v<A, float>)
    exp_affine(y, x, n, scale, shift, factor);
  else
    for (int64_t i = 0; i < n; ++i) y[i] = exp_acc(scale * x[i] - shift) * factor;
}
template <typename A>
inline A exp_affine_row_sum(const A* x, int64_t n, A scale, A shift) {
  if constexpr (std::is_same_v<A, float>)
    return exp_affine_sum(x, n, scale, shift);
  else
    return lane_sum<A>(n, [&](int64_t i) { return exp_acc(scale * x[i] - shift); });
}

// Threads worth using for `work` units of roughly one flop each: small problems stay serial.
inline int threads_for(int64_t work, int64_t tasks) {
  constexpr int64_t kGrain = 1 << 15;
  const int64_t wanted = std::min<int64_t>({static_cast<int64_t>(num_threads()), tasks, work / kGrain + 1});
  return static_cast<int>(std::max<int64_t>(1, wanted));
}

// Calls fn(begin, end) on contiguous ranges of [0, rows), one range per thread.
template <typename Fn>
inline void parallel_rows(int64_t rows, int64_t work_per_row, Fn&& fn) {
  if (rows <= 0) return;
  const int threads = threads_for(rows * std::max<int64_t>(work_per_row, 1), rows);
  if (threads == 1) {
    fn(int64_t{0}, rows);
    return;
  }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int t = 0; t < threads; ++t) fn(rows * t / threads, rows * (t + 1) / threads);
}

// Storage dtypes of activations: the kernels are instantiated for these only.
#define FATHOM_DISPATCH_FLOATING(dtype, op_name, fn)                                                                 \
  [&] {                                                                                                              \
    switch (dtype) {                                                                                                 \
      case ::fathom::DType::F32:                                                                                     \
        return fn.template operator()<float>();                                                                      \
      case ::fathom::DType::F64:                                                                                     \
        return fn.template operator()<double>();                                                                     \
      case ::fathom::DType::F16:                                                                                     \
        return fn.template operator()<::fathom::Half>();                                                             \
      case ::fathom::DType::BF16:                                                                                    \
        return fn.template operator()<::fathom::BFloat16>();                                                         \
      default:                                                                                                       \
        break;                                                                                                       \
    }                                                                                                                \
    FATHOM_FAIL(op_name, ": needs a floating-point dtype (f32, f64, f16, bf16), got ", ::fathom::dtype_name(dtype)); \
  }()

}  // namespace fathom::kernels::nn_cpu
