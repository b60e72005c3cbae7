#include "kernels/reduction.h"

#include <algorithm>
#include <cmath>

#include "core/cuda/cuda_runtime.h"
#include "kernels/reduction_kernels.h"

namespace fathom {

namespace kernels {
namespace {

// Merges one group (kept or reduced) of dims, outermost first.
void merge_group(const Shape& sizes, const Strides& strides, Shape& merged_sizes, Strides& merged_strides) {
  merged_sizes.clear();
  merged_strides.clear();
  if (shape_numel(sizes) == 0) {
    merged_sizes.push_back(0);
    merged_strides.push_back(0);
    return;
  }
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 1) continue;
    if (!merged_sizes.empty() && merged_strides.back() == sizes[d] * strides[d]) {
      merged_sizes.back() *= sizes[d];
      merged_strides.back() = strides[d];
    } else {
      merged_sizes.push_back(sizes[d]);
      merged_strides.push_back(strides[d]);
    }
  }
}

}  // namespace

ReduceLayout merge_dims(const ReduceLayout& layout) {
  ReduceLayout merged;
  merge_group(layout.kept_sizes, layout.kept_strides, merged.kept_sizes, merged.kept_strides);
  merge_group(layout.reduced_sizes, layout.reduced_strides, merged.reduced_sizes, merged.reduced_strides);
  return merged;
}

}  // namespace kernels

namespace {

#if FATHOM_WITH_CUDA
constexpr bool kCudaBuilt = true;
#else
constexpr bool kCudaBuilt = false;
#endif

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

// The checked, merged layout of a reduction of x over `dims`, and the output's shape.
struct ReducePlanHost {
  kernels::ReduceLayout layout;
  Shape out_shape;
};

ReducePlanHost plan_reduce(ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim,
                           int64_t correction) {
  const char* name = reduce_name(op);
  FATHOM_CHECK(x.defined(), name, ": undefined tensor");
  FATHOM_CHECK(x.dtype() != DType::Bool, name, ": bool tensors are not supported (convert with .to(dtype) first)");
  const bool needs_float = op == ReduceOp::Mean || op == ReduceOp::Var || op == ReduceOp::SumOfSquares;
  FATHOM_CHECK(!needs_float || is_floating_point(x.dtype()), name, ": needs a floating-point tensor, got ",
               dtype_name(x.dtype()));
  FATHOM_CHECK(correction >= 0, name, ": correction must be non-negative, got ", correction);

  std::vector<bool> reduced(static_cast<size_t>(x.dim()), dims.empty());
  for (int64_t d : dims) {
    const int64_t nd = normalize_dim(d, x.dim(), name);
    FATHOM_CHECK(x.dim() == 0 || !reduced[nd], name, ": dim ", d, " appears twice in ", shape_str(dims));
    if (x.dim() > 0) reduced[nd] = true;
  }
  ReducePlanHost plan;
  kernels::ReduceLayout& layout = plan.layout;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (reduced[d]) {
      layout.reduced_sizes.push_back(x.size(d));
      layout.reduced_strides.push_back(x.stride(d));
      if (keepdim) plan.out_shape.push_back(1);
    } else {
      layout.kept_sizes.push_back(x.size(d));
      layout.kept_strides.push_back(x.stride(d));
      plan.out_shape.push_back(x.size(d));
    }
  }
  const bool extremum = op == ReduceOp::Max || op == ReduceOp::Min || op == ReduceOp::ArgMax;
  FATHOM_CHECK(!extremum || shape_numel(layout.reduced_sizes) > 0, name, ": cannot reduce over an empty range of ",
               shape_str(x.sizes()), " (no identity for ", name, ")");
  layout = kernels::merge_dims(layout);
  return plan;
}

kernels::ReduceDims fixed_dims(const Shape& sizes, const Strides& strides, const char* name, const char* group,
                               const Tensor& x) {
  FATHOM_CHECK(static_cast<int>(sizes.size()) <= kernels::kMaxReduceDims, name, ": on CUDA at most ",
               kernels::kMaxReduceDims, " ", group, " dims are supported after merging neighbours, ", x.str(),
               " has ", sizes.size(), " (make it contiguous first)");
  kernels::ReduceDims dims;
  dims.ndim = static_cast<int>(sizes.size());
  for (int d = 0; d < dims.ndim; ++d) {
    dims.sizes[d] = sizes[d];
    dims.strides[d] = strides[d];
  }
  return dims;
}

// Writes the reduction into `out` (contiguous, one element per output, on x's device).
void reduce_into(ReduceOp op, const Tensor& x, const kernels::ReduceLayout& layout, DType out_dtype, void* out,
                 int64_t correction) {
  if (x.device().is_cpu()) {
    kernels::reduce_cpu(op, x.dtype(), out_dtype, out, x.raw_data(), layout, correction);
  } else if constexpr (kCudaBuilt) {
    const char* name = reduce_name(op);
    kernels::ReduceLayoutCuda cuda_layout;
    cuda_layout.kept = fixed_dims(layout.kept_sizes, layout.kept_strides, name, "kept", x);
    cuda_layout.reduced = fixed_dims(layout.reduced_sizes, layout.reduced_strides, name, "reduced", x);
    cuda_layout.outputs = shape_numel(layout.kept_sizes);
    cuda_layout.reduced_numel = shape_numel(layout.reduced_sizes);
    const int64_t workspace_bytes = kernels::reduce_plan(cuda_layout).workspace_bytes;
    const Tensor workspace = workspace_bytes > 0
                                 ? Tensor::empty({launch::ceil_div(workspace_bytes, 8)}, DType::I64, x.device())
                                 : Tensor();
    kernels::reduce_cuda(op, x.dtype(), out_dtype, out, x.raw_data(), cuda_layout, correction,
                         workspace.defined() ? workspace.raw_data() : nullptr, cuda::current_stream());
  } else {
    cuda::require_device(x.device().index);  // throws: this build has no CUDA backend
  }
}

}  // namespace

Tensor reduce(ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim, int64_t correction) {
  const ReducePlanHost plan = plan_reduce(op, x, dims, keepdim, correction);
  Tensor out = Tensor::empty(plan.out_shape, result_dtype(op, x.dtype()), x.device());
  if (out.numel() > 0) reduce_into(op, x, plan.layout, out.dtype(), out.raw_data(), correction);
  return out;
}

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) { return reduce(ReduceOp::ArgMax, x, {dim}, keepdim); }

Tensor norm(const Tensor& x) {
  const Tensor squares = reduce(ReduceOp::SumOfSquares, x, {}, false);
  return Tensor::scalar(std::sqrt(squares.item()), x.dtype(), x.device());
}

// Device tensors write their sums of squares into one device vector that is read back once, so
// the norm costs one synchronisation however many tensors there are; contiguous f32 ones (fp32
// master gradients, ZeRO's flat shards) take two kernel launches for the whole list, the others
// one reduction each. The sum over tensors is in list order on the host, as for CPU tensors.
double global_norm(const std::vector<Tensor>& tensors) {
  std::vector<double> squares(tensors.size(), 0.0);
  std::vector<size_t> on_device;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (!t.defined() || t.numel() == 0) continue;
    if (t.device().is_cpu()) squares[i] = reduce(ReduceOp::SumOfSquares, t, {}, false).item();
    else on_device.push_back(i);
  }
  if (!on_device.empty()) {
    const Tensor& first = tensors[on_device.front()];
    const Tensor slots = Tensor::empty({static_cast<int64_t>(on_device.size())}, DType::F64, first.device());
    [[maybe_unused]] std::vector<kernels::SquaresTensor> list;  // reduced together below
    for (size_t k = 0; k < on_device.size(); ++k) {
      const Tensor& t = tensors[on_device[k]];
      check_same_device(t, first, "global_norm");
      if (kCudaBuilt && t.dtype() == DType::F32 && t.is_contiguous()) {
        list.push_back({t.data<float>(), t.numel(), slots.data<double>() + k, 0});
        continue;
      }
      const ReducePlanHost plan = plan_reduce(ReduceOp::SumOfSquares, t, {}, false, 0);
      reduce_into(ReduceOp::SumOfSquares, t, plan.layout, DType::F64, slots.data<double>() + k, 0);
    }
    if constexpr (kCudaBuilt) {
      if (!list.empty()) {
        int64_t chunks = 0;
        for (const kernels::SquaresTensor& t : list) chunks += kernels::squares_chunks(t.n);
        const int64_t table_words = launch::ceil_div(static_cast<int64_t>(list.size() * sizeof(list[0])), 8);
        const Tensor table = Tensor::empty({table_words}, DType::I64, first.device());
        const Tensor partials = Tensor::empty({chunks}, DType::F64, first.device());
        kernels::sum_of_squares_multi_cuda(list.data(), static_cast<int64_t>(list.size()), table.raw_data(),
                                           partials.data<double>(), cuda::current_stream());
      }
    }
    const std::vector<double> host = slots.to_vector<double>();
    for (size_t k = 0; k < on_device.size(); ++k) squares[on_device[k]] = host[k];
  }
  double total = 0;
  for (double s : squares) total += s;
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
