#pragma once
// Row-major iteration over N strided operands of one shape, in parallel chunks.
//
// The callback receives the element offsets of each operand at the start of a run along the
// innermost dimension, the run length and the operands' innermost strides, so its inner loop
// is a plain strided loop the compiler can vectorise. Chunks are split by element count only,
// so every element is visited exactly once whatever the thread count (no reductions here).

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "core/shape.h"
#include "core/threads.h"

namespace fathom {

// Visits the elements [begin, end) of the row-major order of `sizes`, starting from operand
// offsets `base`: fn(offsets, run, inner_strides) per run along the innermost dimension.
template <size_t N, typename Fn>
void for_each_strided_range(const Shape& sizes, const std::array<const Strides*, N>& strides, int64_t begin,
                            int64_t end, const std::array<int64_t, N>& base, Fn&& fn) {
  if (begin >= end) return;
  const int ndim = static_cast<int>(sizes.size());
  const int64_t inner = ndim == 0 ? 1 : sizes[ndim - 1];
  std::array<int64_t, N> inner_strides{};
  for (size_t k = 0; k < N; ++k) inner_strides[k] = ndim == 0 ? 0 : (*strides[k])[ndim - 1];
  std::vector<int64_t> index(ndim);
  std::array<int64_t, N> offsets = base;
  int64_t rest = begin;
  for (int d = ndim - 1; d >= 0; --d) {
    index[d] = rest % sizes[d];
    rest /= sizes[d];
    for (size_t k = 0; k < N; ++k) offsets[k] += index[d] * (*strides[k])[d];
  }
  int64_t i = begin;
  while (i < end) {
    const int64_t position = ndim == 0 ? 0 : index[ndim - 1];
    const int64_t run = std::min(end - i, inner - position);
    fn(offsets, run, inner_strides);
    i += run;
    if (i >= end) break;
    // Advance the multi-index by `run` elements: the innermost wraps, carrying outward.
    for (size_t k = 0; k < N; ++k) offsets[k] += run * inner_strides[k];
    index[ndim - 1] += run;
    for (int d = ndim - 1; d > 0 && index[d] == sizes[d]; --d) {
      for (size_t k = 0; k < N; ++k) offsets[k] += (*strides[k])[d - 1] - sizes[d] * (*strides[k])[d];
      index[d] = 0;
      ++index[d - 1];
    }
  }
}

// Visits every element, in parallel chunks split by element count.
template <size_t N, typename Fn>
void for_each_strided(const Shape& sizes, const std::array<const Strides*, N>& strides, Fn&& fn) {
  const int64_t total = shape_numel(sizes);
  if (total == 0) return;
  constexpr int64_t kGrain = 32768;  // below this, threading costs more than it saves
  const int threads = static_cast<int>(std::min<int64_t>(num_threads(), (total + kGrain - 1) / kGrain));
  const std::array<int64_t, N> base{};
  if (threads <= 1) {
    for_each_strided_range<N>(sizes, strides, 0, total, base, fn);
    return;
  }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int t = 0; t < threads; ++t)
    for_each_strided_range<N>(sizes, strides, total * t / threads, total * (t + 1) / threads, base, fn);
}

}  // namespace fathom
