#pragma once
// softmax and log_softmax over the last dim (numerically stable: the row max is subtracted
// first), and their backward. Any leading shape; inputs of any layout (made contiguous).
// f16/bf16 compute in f32 and round once.

#include "core/tensor.h"

namespace fathom {

Tensor softmax(const Tensor& x);
Tensor log_softmax(const Tensor& x);
// dx = y * (dy - sum(dy * y)), from the forward output y = softmax(x).
Tensor softmax_backward(const Tensor& dy, const Tensor& y);
// dx = dy - exp(y) * sum(dy), from the forward output y = log_softmax(x).
Tensor log_softmax_backward(const Tensor& dy, const Tensor& y);

}  // namespace fathom
