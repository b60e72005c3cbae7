#pragma once
// Differentiable wrappers of the matmul, NN and shape ops for Variables (the building blocks
// of nn/ layers). Index and sample-index arguments are plain tensors: they need no gradient.

#include <optional>
#include <vector>

#include "autograd/variable.h"
#include "kernels/attention.h"

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
// q (B, NH, Tq, HS), k and v (B, NKV, Tk, HS): grouped-query heads, a cache's offset, a sliding
// window and a padding mask as kernels/attention.h describes.
Variable causal_attention(const Variable& q, const Variable& k, const Variable& v,
                          const AttentionOptions& options = {});
// x (B, H, T, D) turned by positions (T) or (B, T) times inv_freq (R/2, f32): kernels/rotary.h.
Variable rotary_embedding(const Variable& x, const Tensor& positions, const Tensor& inv_freq);

// Shapes: views in forward, the gradient put back in backward.
Variable permute(const Variable& x, const std::vector<int64_t>& dims);
Variable contiguous(const Variable& x);
// Pieces of the given sizes along dim (one backward node for all of them).
VariableList split(const Variable& x, const std::vector<int64_t>& sizes, int64_t dim);
// Copies (kernels/indexing.h, core/shape_ops.h): their backward is the other of each pair.
Variable concatenate(const VariableList& parts, int64_t dim);
Variable narrow(const Variable& x, int64_t dim, int64_t start, int64_t length);
Variable index_select(const Variable& x, int64_t dim, const Tensor& indices);
Variable index_add(const Variable& base, int64_t dim, const Tensor& indices, const Variable& source);
Variable repeat_interleave(const Variable& x, int64_t repeats, int64_t dim);
// x in another dtype; the gradient comes back in x's (e.g. a 16-bit model's outputs into an
// f32 loss). x itself when it already has that dtype.
Variable to_dtype(const Variable& x, DType dtype);

}  // namespace fathom::autograd
