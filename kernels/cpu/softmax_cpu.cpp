// CPU softmax / log_softmax over the last dim of contiguous (N, C) rows.
// Layout: one row per task, rows split across threads. Precision: 16-bit rows are converted to
// f32 once; the max-subtracted exponentials are summed in fixed lanes; one rounding on store.
// Forward is one read pass for the max and one fused exp+sum pass that stashes exp in the
// output row, then a scaling pass over data already in L1.
#include <cmath>

#include "kernels/cpu/nn_cpu_common.h"
#include "kernels/nn_kernels.h"

namespace fathom::kernels {
namespace {
using namespace nn_cpu;

template <typename T>
void softmax_rows(T* out, const T* inp, int64_t N, int64_t C, bool log) {
  using A = Acc<T>;
  parallel_rows(N, 8 * C, [&](int64_t begin, int64_t end) {
    std::vector<A> x_scratch, y_scratch(kIsAcc<T> ? 0 : C);
    for (int64_t r = begin; r < end; ++r) {
      const A* x = load_row(inp + r * C, C, x_scratch);
      A* y;
      if constexpr (kIsAcc<T>)
        y = out + r * C;
      else
        y = y_scratch.data();
      const A m = row_max(x, C);
      for (int64_t i = 0; i < C; ++i) y[i] = exp_acc(x[i] - m);
      const A s = row_sum(y, C);
      if (log) {
        const A shift = m + std::log(s);
        for (int64_t i = 0; i < C; ++i) y[i] = x[i] - shift;
      } else {
        const A inv = A(1) / s;
        for (int64_t i = 0; i < C; ++i) y[i] *= inv;
      }
      if constexpr (!kIsAcc<T>) store_row(out + r * C, y, C, /*accumulate=*/false);
    }
  });
}

template <typename T>
void softmax_backward_rows(T* dinp, const T* dout, const T* out, int64_t N, int64_t C, bool log, bool accumulate) {
  using A = Acc<T>;
  parallel_rows(N, 4 * C, [&](int64_t begin, int64_t end) {
    std::vector<A> dy_scratch, y_scratch, dx(C);
    for (int64_t r = begin; r < end; ++r) {
      const A* dy = load_row(dout + r * C, C, dy_scratch);
      const A* y = load_row(out + r * C, C, y_scratch);
      if (log) {
        const A s = row_sum(dy, C);
        for (int64_t i = 0; i < C; ++i) dx[i] = dy[i] - exp_acc(y[i]) * s;
      } else {
        const A s = lane_sum<A>(C, [&](int64_t i) { return dy[i] * y[i]; });
        for (int64_t i = 0; i < C; ++i) dx[i] = y[i] * (dy[i] - s);
      }
      store_row(dinp + r * C, dx.data(), C, accumulate);
    }
  });
}

}  // namespace

void softmax_forward_cpu(DType dtype, void* out, const void* inp, int64_t N, int64_t C, bool log) {
  FATHOM_DISPATCH_FLOATING(dtype, "softmax", [&]<typename T>() {
    softmax_rows(static_cast<T*>(out), static_cast<const T*>(inp), N, C, log);
  });
}

void softmax_backward_cpu(DType dtype, void* dinp, const void* dout, const void* out, int64_t N, int64_t C, bool log,
                          bool accumulate) {
  FATHOM_DISPATCH_FLOATING(dtype, "softmax_backward", [&]<typename T>() {
    softmax_backward_rows(static_cast<T*>(dinp), static_cast<const T*>(dout), static_cast<const T*>(out), N, C, log,
                          accumulate);
  });
}

}  // namespace fathom::kernels
