// CPU embedding lookup and its scatter-add backward.
// Layout: weight (V, C) and out (N, C) contiguous; indices i32 or i64, already validated.
// Forward copies one weight row per output row (row-parallel). Backward first groups the
// positions by vocabulary row with a stable counting sort (sequential, O(N + V)), then each
// vocabulary row sums its dout rows in increasing position order in f32/f64 and stores once.
// Rows are independent, so the vocabulary-parallel loop is bit-identical for any thread count,
// and 16-bit gradients are rounded once, not once per occurrence.
#include <cstring>

#include "kernels/cpu/nn_cpu_common.h"
#include "kernels/nn_kernels.h"

namespace fathom::kernels {
namespace {
using namespace nn_cpu;

template <typename T, typename I>
void embedding_forward(T* out, const I* indices, const T* weight, int64_t N, int64_t C) {
  parallel_rows(N, C, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n)
      std::memcpy(out + n * C, weight + static_cast<int64_t>(indices[n]) * C, sizeof(T) * C);
  });
}

template <typename T, typename I>
void embedding_backward(T* dweight, const T* dout, const I* indices, int64_t N, int64_t V, int64_t C, bool accumulate) {
  using A = Acc<T>;
  // first[v] .. first[v + 1] index into `positions`, which lists each row's positions in order.
  std::vector<int64_t> first(V + 1, 0), positions(N);
  for (int64_t n = 0; n < N; ++n) ++first[static_cast<int64_t>(indices[n]) + 1];
  for (int64_t v = 0; v < V; ++v) first[v + 1] += first[v];
  {
    std::vector<int64_t> cursor(first.begin(), first.end() - 1);
    for (int64_t n = 0; n < N; ++n) positions[cursor[static_cast<int64_t>(indices[n])]++] = n;
  }
  parallel_rows(V, C * (N / std::max<int64_t>(V, 1) + 1), [&](int64_t begin, int64_t end) {
    std::vector<A> sum(C), row_scratch;
    for (int64_t v = begin; v < end; ++v) {
      if (first[v] == first[v + 1] && accumulate) continue;
      std::fill(sum.begin(), sum.end(), A(0));
      for (int64_t p = first[v]; p < first[v + 1]; ++p) {
        const A* row = load_row(dout + positions[p] * C, C, row_scratch);
        for (int64_t c = 0; c < C; ++c) sum[c] += row[c];
      }
      store_row(dweight + v * C, sum.data(), C, accumulate);
    }
  });
}

template <typename Fn>
void dispatch_index(DType index_dtype, const char* op, Fn&& fn) {
  switch (index_dtype) {
    case DType::I64:
      return fn.template operator()<int64_t>();
    case DType::I32:
      return fn.template operator()<int32_t>();
    default:
      FATHOM_FAIL(op, ": indices must be i64 or i32, got ", dtype_name(index_dtype));
  }
}

}  // namespace

void embedding_forward_cpu(DType dtype, DType index_dtype, void* out, const void* indices, const void* weight,
                           int64_t N, int64_t V, int64_t C) {
  FATHOM_DISPATCH_FLOATING(dtype, "embedding", [&]<typename T>() {
    dispatch_index(index_dtype, "embedding", [&]<typename I>() {
      embedding_forward(static_cast<T*>(out), static_cast<const I*>(indices), static_cast<const T*>(weight), N, C);
    });
  });
}

void embedding_backward_cpu(DType dtype, DType index_dtype, void* dweight, const void* dout, const void* indices,
                            int64_t N, int64_t V, int64_t C, bool accumulate) {
  FATHOM_DISPATCH_FLOATING(dtype, "embedding_backward", [&]<typename T>() {
    dispatch_index(index_dtype, "embedding_backward", [&]<typename I>() {
      embedding_backward(static_cast<T*>(dweight), static_cast<const T*>(dout), static_cast<const I*>(indices), N, V, C,
                         accumulate);
    });
  });
}

}  // namespace fathom::kernels
