#pragma once
// Reductions over any set of dims (empty = all), with keepdim.
//
// Results are identical for every thread count: the reduced range of each output element is
// cut into fixed-size chunks whose partial results are combined in a fixed order, and which
// thread computes a chunk never matters. Floating-point inputs accumulate in f64 (f16/bf16/f32
// included) and are rounded once to the output dtype; integer sums accumulate and return i64.
// CUDA tensors reduce on the device with the same accumulation types and a fixed combining
// order (kernels/cuda/reduction_cuda.cu): the same bits on every run, and within an ulp or so
// of the CPU's result.

#include <vector>

#include "core/tensor.h"
#include "kernels/reduce_op.h"

namespace fathom {

Tensor reduce(ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, int64_t correction = 1);

inline Tensor sum(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false) {
  return reduce(ReduceOp::Sum, x, dims, keepdim);
}
inline Tensor mean(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false) {
  return reduce(ReduceOp::Mean, x, dims, keepdim);
}
// Values only (NaN propagates); see argmax for positions.
inline Tensor max(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false) {
  return reduce(ReduceOp::Max, x, dims, keepdim);
}
inline Tensor min(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false) {
  return reduce(ReduceOp::Min, x, dims, keepdim);
}
// Variance with Bessel's `correction` (1 = unbiased, as torch.var's default; 0 = population).
inline Tensor var(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false,
                  int64_t correction = 1) {
  return reduce(ReduceOp::Var, x, dims, keepdim, correction);
}
// i64 index of the first maximum along `dim` (a NaN counts as the maximum).
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
// L2 norm of all elements (0-d, x's dtype).
Tensor norm(const Tensor& x);
// sqrt(sum of squares) over every element of every tensor, accumulated in f64 in list order:
// the global gradient norm for clipping.
double global_norm(const std::vector<Tensor>& tensors);
// Sums x over the dims that broadcasting added or expanded, giving `shape` (the gradient of a
// broadcast operand). x's shape must be a broadcast of `shape`.
Tensor sum_to_shape(const Tensor& x, const Shape& shape);

}  // namespace fathom
