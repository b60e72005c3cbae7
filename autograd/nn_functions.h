#pragma once
// Differentiable wrappers of the matmul, NN and shape ops for Variables (the building blocks
// of nn/ layers). Index and sample-index arguments are plain tensors: they need no gradient.

#include <optional>
#include <vector>

#include "autograd/variable.h"

namespace fathom::autograd {

Variable matmul(const Variable& a, const Variable& b, bool transpose_a = false, bool transpose_b = false);
Variable softmax(const Variable& x);
Variable log_softmax(const Variable& x);
// Attention's masked, scaled softmax over scores (..., Tq, Tk) (kernels/softmax.h).
Variable causal_softmax(const Variable& scores, double scale);
// weight and bias may be undefined Variables (no affine part).
Variable layernorm(const Variable& x, const Variable& weight, const Variable& bias, double eps = 1e-5);
Variable rmsnorm(const Variable& x, const Variable& weight, double eps = 1e-6);
Variable embedding(const Tensor& indices, const Variable& weight);
// Mean over non-ignored targets, or sum / normaliser when one is given (docs/data.md's
// loss_normaliser). logits (..., V), targets (...) i64.
Variable cross_entropy(const Variable& logits, const Tensor& targets, std::optional<double> normaliser = std::nullopt,
                       int64_t ignore_index = -100);
Variable dropout(const Variable& x, double p, uint64_t seed, uint64_t offset, const Tensor& sample_index,
                 int64_t column_offset = 0, int64_t full_width = -1);
// q, k, v: (B, NH, T, HS).
Variable causal_attention(const Variable& q, const Variable& k, const Variable& v, std::optional<double> scale = {});

// Shapes: views in forward, the gradient put back in backward.
Variable permute(const Variable& x, const std::vector<int64_t>& dims);
Variable contiguous(const Variable& x);
// Pieces of the given sizes along dim (one backward node for all of them).
VariableList split(const Variable& x, const std::vector<int64_t>& sizes, int64_t dim);
// x in another dtype; the gradient comes back in x's (e.g. a 16-bit model's outputs into an
// f32 loss). x itself when it already has that dtype.
Variable to_dtype(const Variable& x, DType dtype);

}  // namespace fathom::autograd
