#pragma once
// Fused cross-entropy (log_softmax + nll) over the last dim of logits (..., V) with i64
// targets (...). The loss is the sum over non-ignored rows of -log p[target] divided by a
// normaliser: by default the number of non-ignored targets (the mean), or a caller-given
// value such as DeepSpeed's loss_normaliser (targets in the optimizer step / (dp * gas)), so
// that a loss with ignore_index equals the global token mean at any world size. With the
// default normaliser and no non-ignored target, the loss is 0 (not 0/0).
//
// Probabilities are never materialised beyond one row at a time; the per-row logsumexp is
// returned for the backward. loss (0-d) and lse are f32 for f32/f16/bf16 logits, f64 for f64.

#include <optional>

#include "core/tensor.h"

namespace fathom {

struct CrossEntropyOutputs {
  Tensor loss;  // 0-d
  Tensor lse;   // logits' shape without the last dim
};

inline constexpr int64_t kDefaultIgnoreIndex = -100;

CrossEntropyOutputs cross_entropy(const Tensor& logits, const Tensor& targets,
                                  std::optional<double> normaliser = std::nullopt,
                                  int64_t ignore_index = kDefaultIgnoreIndex);
// dlogits = (softmax - onehot) * dloss / normaliser (zero rows for ignored targets)
//           + dlse * softmax when dlse (optional) is given. dloss is a 0-d tensor of loss's dtype.
Tensor cross_entropy_backward(const Tensor& dloss, const Tensor& logits, const Tensor& targets, const Tensor& lse,
                              std::optional<double> normaliser = std::nullopt,
                              int64_t ignore_index = kDefaultIgnoreIndex, const Tensor& dlse = {});
// The same, adding into (accumulate) or overwriting dlogits: a contiguous tensor of logits'
// shape and dtype, e.g. a gradient buffer.
void cross_entropy_backward_into(const Tensor& dlogits, const Tensor& dloss, const Tensor& logits,
                                 const Tensor& targets, const Tensor& lse, std::optional<double> normaliser,
                                 int64_t ignore_index, const Tensor& dlse, bool accumulate);

}  // namespace fathom
