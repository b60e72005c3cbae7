#include "kernels/reduction.h"

#include <algorithm>
#include <cmath>

#include "kernels/reduction_kernels.h"

namespace fathom {
namespace {

const char* reduce_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Mean: return "mean";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
    case ReduceOp::Var: return "var";
    case ReduceOp::ArgMax: return "argmax";
    case ReduceOp::SumOfSquares: return "sum_of_squares";
  }
  return "reduce";
}

DType result_dtype(ReduceOp op, DType in) {
  if (op == ReduceOp::ArgMax) return DType::I64;
  if (op == ReduceOp::SumOfSquares) return DType::F64;  // feeds norms; rounded only at the end
  if (!is_floating_point(in)) return DType::I64;  // integer sum/max/min
  return in;
}

}  // namespace

Tensor reduce(ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, int64_t correction) {
  const char* name = reduce_name(op);
  FATHOM_CHECK(x.defined(), name, ": undefined tensor");
  FATHOM_CHECK(x.dtype() != DType::Bool, name, ": bool tensors are not supported (convert with .to(dtype) first)");
  const bool needs_float = op == ReduceOp::Mean || op == ReduceOp::Var || op == ReduceOp::SumOfSquares;
  FATHOM_CHECK(!needs_float || is_floating_point(x.dtype()), name, ": needs a floating-point tensor, got ",
               dtype_name(x.dtype()));
  FATHOM_CHECK(correction >= 0, name, ": correction must be non-negative, got ", correction);
  FATHOM_CHECK(x.device().is_cpu(), name, ": reductions on ", x.device().str(),
               " arrive with the CUDA kernels; copy to the CPU with .to(kCPU)");

  std::vector<bool> reduced(static_cast<size_t>(x.dim()), dims.empty());
  for (int64_t d : dims) {
    const int64_t nd = normalize_dim(d, x.dim(), name);
    FATHOM_CHECK(x.dim() == 0 || !reduced[nd], name, ": dim ", d, " appears twice in ", shape_str(dims));
    if (x.dim() > 0) reduced[nd] = true;
  }
  kernels::ReduceLayout layout;
  Shape out_shape;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (reduced[d]) {
      layout.reduced_sizes.push_back(x.size(d));
      layout.reduced_strides.push_back(x.stride(d));
      if (keepdim) out_shape.push_back(1);
    } else {
      layout.kept_sizes.push_back(x.size(d));
      layout.kept_strides.push_back(x.stride(d));
      out_shape.push_back(x.size(d));
    }
  }
  const bool extremum = op == ReduceOp::Max || op == ReduceOp::Min || op == ReduceOp::ArgMax;
  FATHOM_CHECK(!extremum || shape_numel(layout.reduced_sizes) > 0, name, ": cannot reduce over an empty range of ",
               shape_str(x.sizes()), " (no identity for ", name, ")");
  Tensor out = Tensor::empty(out_shape, result_dtype(op, x.dtype()), x.device());
  if (out.numel() > 0)
    kernels::reduce_cpu(op, x.dtype(), out.dtype(), out.raw_data(), x.raw_data(), layout, correction);
  return out;
}

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) { return reduce(ReduceOp::ArgMax, x, {dim}, keepdim); }

Tensor norm(const Tensor& x) {
  const Tensor squares = reduce(ReduceOp::SumOfSquares, x, {}, false);
  return Tensor::scalar(std::sqrt(squares.item()), x.dtype(), x.device());
}

double global_norm(const std::vector<Tensor>& tensors) {
  double total = 0;
  for (const Tensor& t : tensors) {
    if (!t.defined() || t.numel() == 0) continue;
    total += reduce(ReduceOp::SumOfSquares, t, {}, false).item();
  }
  return std::sqrt(total);
}

Tensor sum_to_shape(const Tensor& x, const Shape& shape) {
  if (x.sizes() == shape) return x;
  FATHOM_CHECK(broadcast_shapes(shape, x.sizes(), "sum_to_shape") == x.sizes(), "sum_to_shape: ",
               shape_str(x.sizes()), " is not a broadcast of ", shape_str(shape));
  const int64_t lead = x.dim() - static_cast<int64_t>(shape.size());
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d < lead || (shape[d - lead] == 1 && x.size(d) != 1)) dims.push_back(d);
  if (dims.empty()) return x.reshape(shape);
  return sum(x, dims, /*keepdim=*/true).reshape(shape);
}

}  // namespace fathom
