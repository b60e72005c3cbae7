#pragma once
// Joining and splitting tensors along a dimension. split/chunk return views; cat/stack copy.

#include <vector>

#include "core/tensor.h"

namespace fathom {

// Concatenates along `dim`; every other dim must agree. Result dtype/device of the first tensor.
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
// Joins along a new dimension `dim`; all shapes must be equal.
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
// Views of `split_size` elements along dim (the last one may be shorter).
std::vector<Tensor> split(const Tensor& tensor, int64_t split_size, int64_t dim = 0);
// Views with the given sizes along dim; the sizes must add up to the dim's size.
std::vector<Tensor> split_with_sizes(const Tensor& tensor, const std::vector<int64_t>& sizes, int64_t dim = 0);
// `chunks` views of ceil(size / chunks) elements (fewer if the dim is small), like torch.chunk.
std::vector<Tensor> chunk(const Tensor& tensor, int64_t chunks, int64_t dim = 0);

}  // namespace fathom
