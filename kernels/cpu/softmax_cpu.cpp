// CPU softmax / log_softmax over the last dim of contiguous (N, C) rows, optionally scaled and
// causally masked (attention's causal_softmax; kernels/nn_kernels.h, SoftmaxScaling).
// Layout: one row per task, rows split across threads. Precision: 16-bit rows are converted to
// f32 once; the max-subtracted exponentials are summed in fixed lanes; one rounding on store.
// Forward is one read pass for the max and one fused exp+sum pass that stashes exp in the
// output row, then a scaling pass over data already in L1.
#include <cmath>
#include <limits>

#include "kernels/cpu/nn_cpu_common.h"
#include "kernels/nn_kernels.h"

namespace fathom::kernels {
namespace {
using namespace nn_cpu;

// Row r sees its first scaling.visible(r, C) values (all of them without a causal mask); the
// rest come out as 0 (log: -Inf). scale > 0 commutes with the max, and a scale of 1 leaves
// every bit as the plain softmax's.
template <typename T>
void softmax_rows(T* out, const T* inp, int64_t N, int64_t C, bool log, const SoftmaxScaling& scaling) {
  using A = Acc<T>;
  const A scale = static_cast<A>(scaling.scale);
  parallel_rows(N, 8 * C, [&](int64_t begin, int64_t end) {
    std::vector<A> x_scratch, y_scratch(kIsAcc<T> ? 0 : C);
    for (int64_t r = begin; r < end; ++r) {
      prefetch_row_ahead(inp, r, end, C);
      const A* x = load_row(inp + r * C, C, x_scratch);
      A* y;
      if constexpr (kIsAcc<T>)
        y = out + r * C;
      else
        y = y_scratch.data();
      const int64_t n = scaling.visible(r, C);
      const A m = scale * row_max(x, n);
      exp_affine_row(y, x, n, scale, m);
      const A s = row_sum(y, n);
      if (log) {
        const A shift = m + std::log(s);
        for (int64_t i = 0; i < n; ++i) y[i] = scale * x[i] - shift;
      } else {
        const A inv = A(1) / s;
        for (int64_t i = 0; i < n; ++i) y[i] *= inv;
      }
      for (int64_t i = n; i < C; ++i) y[i] = log ? -std::numeric_limits<A>::infinity() : A(0);
      if constexpr (!kIsAcc<T>) store_row(out + r * C, y, C, /*accumulate=*/false);
    }
  });
}

template <typename T>
void softmax_backward_rows(T* dinp, const T* dout, const T* out, int64_t N, int64_t C, bool log, bool accumulate,
                           const SoftmaxScaling& scaling) {
  using A = Acc<T>;
  const A scale = static_cast<A>(scaling.scale);
  parallel_rows(N, 4 * C, [&](int64_t begin, int64_t end) {
    std::vector<A> dy_scratch, y_scratch, dx(C);
    for (int64_t r = begin; r < end; ++r) {
      const A* dy = load_row(dout + r * C, C, dy_scratch);
      const A* y = load_row(out + r * C, C, y_scratch);
      const int64_t n = scaling.visible(r, C);
      if (log) {
        const A s = row_sum(dy, n);
        for (int64_t i = 0; i < n; ++i) dx[i] = scale * (dy[i] - exp_acc(y[i]) * s);
      } else {
        const A s = lane_sum<A>(n, [&](int64_t i) { return dy[i] * y[i]; });
        for (int64_t i = 0; i < n; ++i) dx[i] = scale * (y[i] * (dy[i] - s));
      }
      for (int64_t i = n; i < C; ++i) dx[i] = A(0);  // masked: no gradient
      store_row(dinp + r * C, dx.data(), C, accumulate);
    }
  });
}

}  // namespace

void softmax_forward_cpu(DType dtype, void* out, const void* inp, int64_t N, int64_t C, bool log,
                         const SoftmaxScaling& scaling) {
  FATHOM_DISPATCH_FLOATING(dtype, "softmax", [&]<typename T>() {
    softmax_rows(static_cast<T*>(out), static_cast<const T*>(inp), N, C, log, scaling);
  });
}

void softmax_backward_cpu(DType dtype, void* dinp, const void* dout, const void* out, int64_t N, int64_t C, bool log,
                          bool accumulate, const SoftmaxScaling& scaling) {
  FATHOM_DISPATCH_FLOATING(dtype, "softmax_backward", [&]<typename T>() {
    softmax_backward_rows(static_cast<T*>(dinp), static_cast<const T*>(dout), static_cast<const T*>(out), N, C, log,
                          accumulate, scaling);
  });
}

}  // namespace fathom::kernels
