#pragma once
// Shapes and strides, and the arithmetic on them shared by views, broadcasting and kernels.

#include <cstdint>
#include <string>
#include <vector>

namespace fathom {

using Shape = std::vector<int64_t>;
using Strides = std::vector<int64_t>;

int64_t shape_numel(const Shape& sizes);
Strides contiguous_strides(const Shape& sizes);
std::string shape_str(const Shape& sizes);  // "[4, 64, 768]"
// Maps a possibly negative dim into [0, ndim); throws naming the op, the dim and the range.
int64_t normalize_dim(int64_t dim, int64_t ndim, const char* op);
// numpy broadcasting of two shapes; throws naming both shapes and the clashing dims.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
// Strides that read a tensor of (sizes, strides) as if it had shape `target`: stride 0 on
// broadcast dimensions. `sizes` must broadcast to `target`.
Strides broadcast_strides(const Shape& sizes, const Strides& strides, const Shape& target);

}  // namespace fathom
