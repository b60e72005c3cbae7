#pragma once
// Embedding lookup: out[..., :] = weight[indices[...], :] for weight (V, C) and i64 or i32
// indices of any shape (out has shape indices.shape + [C]), and its scatter-add backward,
// which is deterministic for any thread count (see kernels/cpu/embedding_cpu.cpp).

#include "core/tensor.h"

namespace fathom {

Tensor embedding(const Tensor& indices, const Tensor& weight);
// dweight (V, C) = sum of dout rows per index; num_embeddings is V.
Tensor embedding_backward(const Tensor& dout, const Tensor& indices, int64_t num_embeddings);
// dweight (+)= that sum; dweight must be a contiguous (V, C) tensor of dout's dtype.
void embedding_backward_into(const Tensor& dweight, const Tensor& dout, const Tensor& indices, bool accumulate);

}  // namespace fathom
