// CPU fused cross-entropy over contiguous (N, V) logits with i64 targets.
// Forward: row-parallel, one row of logits at a time: max, then a fused exp-sum in fixed lanes
// gives the row logsumexp (saved for backward) and the row's -log p[target]; probabilities
// are never stored. The per-row losses are summed in row order in f64 after the parallel part,
// so the loss is bit-identical for any thread count.
// Backward: row-parallel, dlogits = (exp(logit - lse) - onehot) * dloss / normaliser, plus
// dlse * softmax when the saved logsumexp itself received a gradient.
#include <cmath>

#include "kernels/cpu/nn_cpu_common.h"
#include "kernels/nn_kernels.h"

namespace fathom::kernels {
namespace {
using namespace nn_cpu;

template <typename T>
void cross_entropy_forward(Acc<T>* loss, Acc<T>* lse, const T* logits, const int64_t* targets, int64_t N, int64_t V,
                           int64_t ignore_index, double normaliser) {
  using A = Acc<T>;
  std::vector<double> row_loss(N, 0.0);
  parallel_rows(N, 8 * V, [&](int64_t begin, int64_t end) {
    std::vector<A> x_scratch;
    for (int64_t r = begin; r < end; ++r) {
      const A* x = load_row(logits + r * V, V, x_scratch);
      const A m = row_max(x, V);
      const A row_lse = m + std::log(exp_affine_row_sum(x, V, A(1), m));
      lse[r] = row_lse;
      if (targets[r] != ignore_index) row_loss[r] = static_cast<double>(row_lse - x[targets[r]]);
    }
  });
  double total = 0;
  for (int64_t r = 0; r < N; ++r) total += row_loss[r];
  *loss = static_cast<A>(total / normaliser);
}

template <typename T>
void cross_entropy_backward(T* dlogits, const Acc<T>* dloss, const T* logits, const int64_t* targets, const Acc<T>* lse,
                            const Acc<T>* dlse, int64_t N, int64_t V, int64_t ignore_index, double normaliser,
                            bool accumulate) {
  using A = Acc<T>;
  const A row_scale = static_cast<A>(static_cast<double>(*dloss) / normaliser);
  // f32/f64 rows that are not accumulated into are written in place; others go through dx.
  const bool direct = kIsAcc<T> && !accumulate;
  parallel_rows(N, 8 * V, [&](int64_t begin, int64_t end) {
    std::vector<A> x_scratch, dx_scratch(direct ? 0 : V);
    for (int64_t r = begin; r < end; ++r) {
      A* dx = direct ? reinterpret_cast<A*>(dlogits + r * V) : dx_scratch.data();
      const bool ignored = targets[r] == ignore_index;
      const A scale = (ignored ? A(0) : row_scale) + (dlse ? dlse[r] : A(0));
      if (scale == A(0)) {
        std::fill(dx, dx + V, A(0));
      } else {
        const A* x = load_row(logits + r * V, V, x_scratch);
        exp_affine_row(dx, x, V, A(1), lse[r], scale);
        if (!ignored) dx[targets[r]] -= row_scale;
      }
      if (!direct) store_row(dlogits + r * V, dx, V, accumulate);
    }
  });
}

}  // namespace

void cross_entropy_forward_cpu(DType dtype, void* loss, void* lse, const void* logits, const int64_t* targets,
                               int64_t N, int64_t V, int64_t ignore_index, double normaliser) {
  FATHOM_DISPATCH_FLOATING(dtype, "cross_entropy", [&]<typename T>() {
    using A = Acc<T>;
    cross_entropy_forward(static_cast<A*>(loss), static_cast<A*>(lse), static_cast<const T*>(logits), targets, N, V,
                          ignore_index, normaliser);
  });
}

void cross_entropy_backward_cpu(DType dtype, void* dlogits, const void* dloss, const void* logits,
                                const int64_t* targets, const void* lse, const void* dlse, int64_t N, int64_t V,
                                int64_t ignore_index, double normaliser, bool accumulate) {
  FATHOM_DISPATCH_FLOATING(dtype, "cross_entropy_backward", [&]<typename T>() {
    using A = Acc<T>;
    cross_entropy_backward(static_cast<T*>(dlogits), static_cast<const A*>(dloss), static_cast<const T*>(logits),
                           targets, static_cast<const A*>(lse), static_cast<const A*>(dlse), N, V, ignore_index,
                           normaliser, accumulate);
  });
}

}  // namespace fathom::kernels
