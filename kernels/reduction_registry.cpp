// Op-registry entries of the reductions: sum, mean, max, min, var, argmax and norm, with f64
// references, samples over dim sets (incl. reductions long enough to be chunked), error
// cases and gradients.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/elementwise.h"
#include "kernels/op_registry.h"
#include "kernels/op_samples.h"
#include "kernels/reduction.h"

namespace fathom {
namespace {

using samples::non_contiguous;
using samples::uniform_tensor;

const std::vector<DType> kFloatTypes = {DType::F32, DType::F64, DType::BF16, DType::F16};

std::vector<bool> reduced_mask(int64_t ndim, const std::vector<int64_t>& dims) {
  std::vector<bool> mask(static_cast<size_t>(ndim), dims.empty());
  for (int64_t d : dims) mask[normalize_dim(d, ndim, "reduce")] = true;
  return mask;
}

// The output shape with reduced dims kept as 1: where a gradient broadcasts back from.
Shape keepdim_shape(const Shape& input, const std::vector<int64_t>& dims) {
  const std::vector<bool> mask = reduced_mask(static_cast<int64_t>(input.size()), dims);
  Shape out = input;
  for (size_t d = 0; d < out.size(); ++d)
    if (mask[d]) out[d] = 1;
  return out;
}

// Naive reference: rows of the reduced values, one row per output element, in order.
Tensor reference_reduce(const Tensor& x, const Attributes& attrs,
                        const std::function<double(const std::vector<double>&)>& f) {
  const std::vector<int64_t> dims = attrs.get_ints("dims");
  const bool keepdim = attrs.get_bool("keepdim");
  const std::vector<bool> mask = reduced_mask(x.dim(), dims);
  std::vector<int64_t> order;
  Shape out_shape;
  int64_t rows = 1, width = 1;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (!mask[d]) {
      order.push_back(d);
      out_shape.push_back(x.size(d));
      rows *= x.size(d);
    } else if (keepdim) {
      out_shape.push_back(1);
    }
  for (int64_t d = 0; d < x.dim(); ++d)
    if (mask[d]) {
      order.push_back(d);
      width *= x.size(d);
    }
  const std::vector<double> values = x.permute(order).contiguous().to_vector<double>();
  std::vector<double> out(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r)
    out[r] = f(std::vector<double>(values.begin() + r * width, values.begin() + (r + 1) * width));
  return Tensor::from_vector(out, {rows}).reshape(out_shape);
}

std::vector<OpSample> reduction_samples(DType dtype, Generator& gen, bool single_dim) {
  auto make = [&](const Shape& shape) { return uniform_tensor(shape, dtype, gen, -3, 3); };
  auto attrs = [](std::vector<int64_t> dims, bool keepdim) {
    return Attributes{{"dims", std::move(dims)}, {"keepdim", keepdim}, {"correction", int64_t{1}}};
  };
  std::vector<OpSample> out;
  out.push_back({"[4, 6] over dim 1", {make({4, 6})}, attrs({1}, false)});
  out.push_back({"[3, 5, 7] over dim -2, keepdim", {make({3, 5, 7})}, attrs({-2}, true)});
  out.push_back({"non-contiguous [4, 3, 5] over dim 0", {non_contiguous(make({4, 3, 5}))}, attrs({0}, false)});
  out.push_back({"chunked [2, 20001] over dim 1", {make({2, 20001})}, attrs({1}, false)});
  // Kept dim innermost and a long range: on CUDA, threads over columns in two passes.
  out.push_back({"columns [2000, 40] over dim 0", {make({2000, 40})}, attrs({0}, false)});
  if (!single_dim) {
    // Two reduced dims that do not merge, long enough for two passes of blocks on CUDA.
    out.push_back({"[40, 3, 300] over dims 0 and 2, keepdim", {make({40, 3, 300})}, attrs({0, 2}, true)});
    out.push_back({"[4, 6] over all dims", {make({4, 6})}, attrs({}, false)});
    out.push_back({"[3, 4, 5] over dims 0 and 2, keepdim", {make({3, 4, 5})}, attrs({0, 2}, true)});
    out.push_back({"chunked [30000] over all", {make({30000})}, attrs({}, false)});
  }
  return out;
}

Tensor broadcast_grad(const GradientContext& ctx) {
  return ctx.grad_outputs[0].reshape(keepdim_shape(ctx.input_sizes[0], ctx.attrs.get_ints("dims")));
}

int64_t reduced_count(const GradientContext& ctx) {
  const Shape& in = ctx.input_sizes[0];
  return shape_numel(in) / shape_numel(keepdim_shape(in, ctx.attrs.get_ints("dims")));
}

OpInfo reduction_entry(const std::string& name, ReduceOp op, std::function<double(const std::vector<double>&)> f) {
  OpInfo info;
  info.name = name;
  info.cost = [](const TensorList& in, const TensorList&, const Attributes&) { return OpCost{0, in[0].numel()}; };
  info.dtypes = kFloatTypes;
  info.has_cuda = true;
  info.run = [op](const TensorList& in, const Attributes& a) {
    return TensorList{reduce(op, in[0], a.get_ints("dims"), a.get_bool("keepdim"), a.get_int("correction", 1))};
  };
  info.reference = [f](const TensorList& in, const Attributes& a) { return TensorList{reference_reduce(in[0], a, f)}; };
  info.samples = [op](DType dtype, Generator& gen) { return reduction_samples(dtype, gen, op == ReduceOp::ArgMax); };
  info.error_cases = [name] {
    const Attributes dim3{{"dims", std::vector<int64_t>{3}}, {"keepdim", false}};
    const Attributes twice{{"dims", std::vector<int64_t>{1, -1}}, {"keepdim", false}};
    return std::vector<OpErrorCase>{
        {"dim out of range", {Tensor::zeros({2, 3})}, dim3, name + ": dim 3 out of range for a tensor with 2 dims"},
        {"dim repeated", {Tensor::zeros({2, 3})}, twice, name + ": dim -1 appears twice in [1, -1]"},
        {"bool input", {Tensor::zeros({2}, DType::Bool)}, dim3, name + ": bool tensors are not supported"}};
  };
  info.tolerance = [](DType dtype) {
    // 16-bit outputs are rounded once from an f64 accumulation: half an ulp of the result.
    if (dtype == DType::BF16) return Tolerance{1e-6, 4e-3};
    if (dtype == DType::F16) return Tolerance{1e-6, 5e-4};
    if (dtype == DType::F32) return Tolerance{1e-6, 1e-6};
    return Tolerance{1e-12, 1e-12};
  };
  return info;
}

double sum_of(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }
double mean_of(const std::vector<double>& v) { return sum_of(v) / static_cast<double>(v.size()); }

}  // namespace

void register_reduction_ops(std::vector<OpInfo>& registry) {
  OpInfo s = reduction_entry("sum", ReduceOp::Sum, sum_of);
  s.gradient = [](const GradientContext& ctx) {
    return TensorList{broadcast_grad(ctx).expand(ctx.input_sizes[0]).contiguous()};
  };
  s.gradient_uses_inputs = false;
  registry.push_back(s);

  OpInfo m = reduction_entry("mean", ReduceOp::Mean, mean_of);
  m.gradient = [](const GradientContext& ctx) {
    return TensorList{div(broadcast_grad(ctx).expand(ctx.input_sizes[0]).contiguous(),
                          static_cast<double>(reduced_count(ctx)))};
  };
  m.gradient_uses_inputs = false;
  registry.push_back(m);

  // max/min: the gradient is shared equally by every element equal to the extremum.
  for (const auto& [name, op] : {std::pair{"max", ReduceOp::Max}, std::pair{"min", ReduceOp::Min}}) {
    const bool is_max = op == ReduceOp::Max;
    OpInfo e = reduction_entry(name, op, [is_max](const std::vector<double>& v) {
      return is_max ? *std::max_element(v.begin(), v.end()) : *std::min_element(v.begin(), v.end());
    });
    e.gradient = [](const GradientContext& ctx) {
      const Shape kept = keepdim_shape(ctx.input_sizes[0], ctx.attrs.get_ints("dims"));
      const Tensor hit = eq(ctx.inputs[0], ctx.outputs[0].reshape(kept)).to(ctx.inputs[0].dtype());
      const Tensor count = reduce(ReduceOp::Sum, hit, ctx.attrs.get_ints("dims"), true);
      return TensorList{mul(hit, div(broadcast_grad(ctx), count))};
    };
    e.gradient_uses_outputs = true;
    e.error_cases = [name = std::string(name)] {
      const Attributes all{{"dims", std::vector<int64_t>{}}, {"keepdim", false}};
      return std::vector<OpErrorCase>{
          {"empty reduction", {Tensor::zeros({0, 3})}, Attributes{{"dims", std::vector<int64_t>{0}}, {"keepdim", false}},
           name + ": cannot reduce over an empty range of [0, 3]"},
          {"bool input", {Tensor::zeros({2}, DType::Bool)}, all, name + ": bool tensors are not supported"}};
    };
    registry.push_back(e);
  }

  OpInfo v = reduction_entry("var", ReduceOp::Var, [](const std::vector<double>& values) {
    const double mu = mean_of(values);
    double m2 = 0;
    for (double x : values) m2 += (x - mu) * (x - mu);
    return m2 / static_cast<double>(values.size() - 1);
  });
  v.gradient = [](const GradientContext& ctx) {
    const std::vector<int64_t>& dims = ctx.attrs.get_ints("dims");
    const Tensor& x = ctx.inputs[0];
    const Tensor centred = sub(x, reduce(ReduceOp::Mean, x, dims, true));
    const double dof = static_cast<double>(reduced_count(ctx) - ctx.attrs.get_int("correction", 1));
    return TensorList{mul(mul(centred, broadcast_grad(ctx)), 2.0 / dof)};
  };
  v.error_cases = [] {
    const Attributes all{{"dims", std::vector<int64_t>{}}, {"keepdim", false}};
    return std::vector<OpErrorCase>{
        {"integer input", {Tensor::zeros({3}, DType::I64)}, all, "var: needs a floating-point tensor, got i64"},
        {"negative correction", {Tensor::zeros({3})},
         Attributes{{"dims", std::vector<int64_t>{}}, {"keepdim", false}, {"correction", int64_t{-1}}},
         "var: correction must be non-negative, got -1"}};
  };
  registry.push_back(v);

  OpInfo a = reduction_entry("argmax", ReduceOp::ArgMax, [](const std::vector<double>& values) {
    return static_cast<double>(std::max_element(values.begin(), values.end()) - values.begin());
  });
  registry.push_back(a);  // not differentiable

  OpInfo n;
  n.name = "norm";
  n.cost = [](const TensorList& in, const TensorList&, const Attributes&) {
    int64_t elements = 0;
    for (const Tensor& t : in) elements += 2 * t.numel();  // a square and an add each
    return OpCost{0, elements};
  };
  n.dtypes = kFloatTypes;
  n.has_cuda = true;
  n.run = [](const TensorList& in, const Attributes&) { return TensorList{norm(in[0])}; };
  n.reference = [](const TensorList& in, const Attributes&) {
    double total = 0;
    for (double x : in[0].to_vector<double>()) total += x * x;
    return TensorList{Tensor::scalar(std::sqrt(total), DType::F64)};
  };
  n.samples = [](DType dtype, Generator& gen) {
    return std::vector<OpSample>{{"[4, 6]", {uniform_tensor({4, 6}, dtype, gen, -3, 3)}, {}},
                                 {"non-contiguous [3, 5]", {non_contiguous(uniform_tensor({3, 5}, dtype, gen, -3, 3))}, {}},
                                 {"chunked [20000]", {uniform_tensor({20000}, dtype, gen, -3, 3)}, {}}};
  };
  n.error_cases = [] {
    return std::vector<OpErrorCase>{{"integer input", {Tensor::zeros({3}, DType::I32)}, {},
                                     "sum_of_squares: needs a floating-point tensor, got i32"}};
  };
  n.gradient = [](const GradientContext& ctx) {
    return TensorList{mul(ctx.inputs[0], div(ctx.grad_outputs[0], ctx.outputs[0]))};
  };
  n.gradient_uses_outputs = true;
  n.tolerance = reduction_entry("", ReduceOp::Sum, sum_of).tolerance;
  registry.push_back(n);
}

}  // namespace fathom
