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

// Attention's probabilities from its scores: y = softmax(scale * x) over the last dim of
// x = (..., Tq, Tk), Tk >= Tq, with the causal mask — query i (row i of each Tq x Tk matrix)
// sees keys 0 .. i + Tk - Tq, and the others get probability exactly 0. scale > 0. With
// matmuls around it, this is causal attention that keeps the T x T probabilities (the "gemm"
// attention kernel, nn/attention_kernel.h), in exchange for tensor-core GEMMs.
Tensor causal_softmax(const Tensor& x, double scale);
// dx = scale * y * (dy - sum(dy * y)) from the forward output y; 0 where masked.
Tensor causal_softmax_backward(const Tensor& dy, const Tensor& y, double scale);

}  // namespace fathom
