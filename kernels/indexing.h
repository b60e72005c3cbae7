#pragma once
// Gather and scatter-add along one dimension, and repetition, as whole-tensor ops on any device
// (PyTorch's index_select, index_add and repeat_interleave). The work is the embedding kernels'
// (kernels/embedding.h), whose CPU and CUDA twins gather rows and sum rows per index in a fixed
// order: a dim that is not the outermost is moved there first, so both devices get the same
// deterministic result. Indices are 1-D i64 or i32 on the tensor's device. concatenate and
// narrow are core/shape_ops.h's cat and Tensor::narrow (copies through the device copy kernel);
// their registry entries and gradients sit with these (kernels/shape_registry.cpp).

#include "core/tensor.h"

namespace fathom {

// out.size(dim) = indices.numel(): entry j along dim is x's entry indices[j].
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& indices);
// base + source, where source's entry j along dim is added to base's entry indices[j]; repeated
// indices accumulate in index order (the backward of index_select).
Tensor index_add(const Tensor& base, int64_t dim, const Tensor& indices, const Tensor& source);
// Each entry along dim `repeats` times in a row: [a, b] -> [a, a, b, b] (transformers' repeat_kv
// for grouped-query heads, where the fused attention does not need it).
Tensor repeat_interleave(const Tensor& x, int64_t repeats, int64_t dim);

}  // namespace fathom
