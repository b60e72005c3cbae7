// Op-registry entries of the shape ops a decoder's model layer needs beyond views: concatenate
// (a KV cache's growth, fused projections' parts put back), narrow (a fused projection's q, k
// and v of unequal widths), index_select and index_add (gathers and their scatter-add
// backward) and repeat_interleave. Each has an f64 reference written as plain index loops,
// samples along first, middle and last dims with non-contiguous inputs, bad inputs, and a
// gradient built from the others (concatenate <-> narrow, index_select <-> index_add).
#include "core/shape_ops.h"
#include "kernels/indexing.h"
#include "kernels/op_registry.h"
#include "kernels/op_samples.h"
#include "kernels/reduction.h"

namespace fathom {
namespace {

using samples::non_contiguous;
using samples::uniform_tensor;

const std::vector<DType> kFloatTypes = {DType::F32, DType::F64, DType::BF16, DType::F16};

OpCost no_arithmetic(const TensorList&, const TensorList&, const Attributes&) { return {}; }

// A tensor seen as (outer, n, inner) around `dim`, for the references' index loops.
struct Around {
  int64_t outer = 1, n, inner = 1;
  Around(const Shape& shape, int64_t dim) : n(shape[dim]) {
    for (int64_t d = 0; d < dim; ++d) outer *= shape[d];
    for (int64_t d = dim + 1; d < static_cast<int64_t>(shape.size()); ++d) inner *= shape[d];
  }
  int64_t at(int64_t o, int64_t j, int64_t i) const { return (o * n + j) * inner + i; }
};

Tensor f64_tensor(const std::vector<double>& values, const Shape& shape) {
  return Tensor::from_vector(values, {static_cast<int64_t>(values.size())}).reshape(shape);
}

Tensor indices(std::vector<int64_t> values, DType dtype = DType::I64) {
  return Tensor::from_vector(values, {static_cast<int64_t>(values.size())}).to(dtype);
}

int64_t dim_attr(const Attributes& a, const Tensor& x) { return normalize_dim(a.get_int("dim"), x.dim(), "dim"); }

// --- concatenate ---

OpInfo concatenate_entry() {
  OpInfo info;
  info.name = "concatenate";
  info.cost = no_arithmetic;
  info.dtypes = kFloatTypes;
  info.has_cuda = true;
  info.run = [](const TensorList& in, const Attributes& a) { return TensorList{cat(in, a.get_int("dim"))}; };
  info.reference = [](const TensorList& in, const Attributes& a) {
    const int64_t dim = dim_attr(a, in[0]);
    Shape shape = in[0].sizes();
    shape[dim] = 0;
    for (const Tensor& t : in) shape[dim] += t.size(dim);
    const Around out(shape, dim);
    std::vector<double> values(shape_numel(shape));
    int64_t at = 0;
    for (const Tensor& t : in) {
      const Around part(t.sizes(), dim);
      const std::vector<double> x = t.contiguous().to_vector<double>();
      for (int64_t o = 0; o < part.outer; ++o)
        for (int64_t j = 0; j < part.n; ++j)
          for (int64_t i = 0; i < part.inner; ++i) values[out.at(o, at + j, i)] = x[part.at(o, j, i)];
      at += part.n;
    }
    return TensorList{f64_tensor(values, shape)};
  };
  info.samples = [](DType dtype, Generator& gen) {
    const Attributes dim0{{"dim", int64_t{0}}}, dim1{{"dim", int64_t{1}}}, last{{"dim", int64_t{-1}}};
    return std::vector<OpSample>{
        {"three along dim 0", {uniform_tensor({2, 3}, dtype, gen), uniform_tensor({1, 3}, dtype, gen),
                               uniform_tensor({4, 3}, dtype, gen)}, dim0},
        {"a cache and new keys along T (dim 2 of 4)",
         {uniform_tensor({1, 2, 5, 4}, dtype, gen), uniform_tensor({1, 2, 1, 4}, dtype, gen)}, Attributes{{"dim", int64_t{2}}}},
        {"q, k, v widths along the last dim",
         {uniform_tensor({3, 8}, dtype, gen), uniform_tensor({3, 4}, dtype, gen), uniform_tensor({3, 4}, dtype, gen)}, last},
        {"non-contiguous parts along dim 1",
         {non_contiguous(uniform_tensor({3, 2, 5}, dtype, gen)), non_contiguous(uniform_tensor({3, 4, 5}, dtype, gen))}, dim1},
        {"an empty part", {uniform_tensor({2, 0}, dtype, gen), uniform_tensor({2, 3}, dtype, gen)}, dim1}};
  };
  info.error_cases = [] {
    return std::vector<OpErrorCase>{
        {"other dims differ", {Tensor::zeros({2, 3}), Tensor::zeros({2, 4})}, Attributes{{"dim", int64_t{0}}},
         "cat: tensor 1 has shape [2, 4] but tensor 0 has shape [2, 3]; all dims except dim 0 must match"},
        {"dtypes differ", {Tensor::zeros({2}), Tensor::zeros({2}, DType::F64)}, Attributes{{"dim", int64_t{0}}},
         "cat: expected tensors of the same dtype, got f32 and f64"},
        {"dim out of range", {Tensor::zeros({2}), Tensor::zeros({2})}, Attributes{{"dim", int64_t{1}}}, "cat"}};
  };
  info.gradient = [](const GradientContext& ctx) {
    const int64_t dim = normalize_dim(ctx.attrs.get_int("dim"), static_cast<int64_t>(ctx.input_sizes[0].size()), "dim");
    std::vector<int64_t> sizes;
    for (const Shape& s : ctx.input_sizes) sizes.push_back(s[dim]);
    return split_with_sizes(ctx.grad_outputs[0], sizes, dim);
  };
  info.gradient_uses_inputs = false;
  info.tolerance = [](DType) { return Tolerance{}; };  // copies: exact
  return info;
}

// --- narrow ---

OpInfo narrow_entry() {
  OpInfo info;
  info.name = "narrow";
  info.cost = no_arithmetic;
  info.dtypes = kFloatTypes;
  info.has_cuda = true;
  info.run = [](const TensorList& in, const Attributes& a) {
    return TensorList{in[0].narrow(a.get_int("dim"), a.get_int("start"), a.get_int("length")).contiguous()};
  };
  info.reference = [](const TensorList& in, const Attributes& a) {
    const int64_t dim = dim_attr(a, in[0]), start = a.get_int("start"), length = a.get_int("length");
    const Around from(in[0].sizes(), dim);
    Shape shape = in[0].sizes();
    shape[dim] = length;
    const Around to(shape, dim);
    const std::vector<double> x = in[0].contiguous().to_vector<double>();
    std::vector<double> values(shape_numel(shape));
    for (int64_t o = 0; o < to.outer; ++o)
      for (int64_t j = 0; j < length; ++j)
        for (int64_t i = 0; i < to.inner; ++i) values[to.at(o, j, i)] = x[from.at(o, start + j, i)];
    return TensorList{f64_tensor(values, shape)};
  };
  info.samples = [](DType dtype, Generator& gen) {
    auto at = [](int64_t dim, int64_t start, int64_t length) {
      return Attributes{{"dim", dim}, {"start", start}, {"length", length}};
    };
    return std::vector<OpSample>{
        {"k of a fused qkv [3, 16]: columns 8..12", {uniform_tensor({3, 16}, dtype, gen)}, at(1, 8, 4)},
        {"rows 1..3 of [5, 2]", {uniform_tensor({5, 2}, dtype, gen)}, at(0, 1, 3)},
        {"middle dim of a non-contiguous [2, 6, 3]", {non_contiguous(uniform_tensor({2, 6, 3}, dtype, gen))}, at(-2, 2, 4)},
        {"empty", {uniform_tensor({4, 3}, dtype, gen)}, at(0, 4, 0)}};
  };
  info.error_cases = [] {
    return std::vector<OpErrorCase>{
        {"past the end", {Tensor::zeros({4, 3})}, Attributes{{"dim", int64_t{0}}, {"start", int64_t{2}}, {"length", int64_t{3}}},
         "narrow: range [2, 5) out of bounds for dim 0 of size 4"}};
  };
  info.gradient = [](const GradientContext& ctx) {
    const Tensor grad = Tensor::zeros(ctx.input_sizes[0], ctx.grad_outputs[0].dtype(), ctx.grad_outputs[0].device());
    grad.narrow(ctx.attrs.get_int("dim"), ctx.attrs.get_int("start"), ctx.attrs.get_int("length"))
        .copy_(ctx.grad_outputs[0]);
    return TensorList{grad};
  };
  info.gradient_uses_inputs = false;
  info.tolerance = [](DType) { return Tolerance{}; };
  return info;
}

// --- index_select / index_add ---

OpInfo index_select_entry() {
  OpInfo info;
  info.name = "index_select";
  info.cost = no_arithmetic;
  info.dtypes = kFloatTypes;
  info.has_cuda = true;
  info.run = [](const TensorList& in, const Attributes& a) {
    return TensorList{index_select(in[0], a.get_int("dim"), in[1])};
  };
  info.reference = [](const TensorList& in, const Attributes& a) {
    const int64_t dim = dim_attr(a, in[0]);
    const std::vector<int64_t> idx = in[1].to_vector<int64_t>();
    const Around from(in[0].sizes(), dim);
    Shape shape = in[0].sizes();
    shape[dim] = static_cast<int64_t>(idx.size());
    const Around to(shape, dim);
    const std::vector<double> x = in[0].contiguous().to_vector<double>();
    std::vector<double> values(shape_numel(shape));
    for (int64_t o = 0; o < to.outer; ++o)
      for (int64_t j = 0; j < to.n; ++j)
        for (int64_t i = 0; i < to.inner; ++i) values[to.at(o, j, i)] = x[from.at(o, idx[j], i)];
    return TensorList{f64_tensor(values, shape)};
  };
  info.samples = [](DType dtype, Generator& gen) {
    const auto dim = [](int64_t d) { return Attributes{{"dim", d}}; };
    return std::vector<OpSample>{
        {"rows of [5, 3], repeated", {uniform_tensor({5, 3}, dtype, gen), indices({4, 0, 4, 2})}, dim(0)},
        {"heads of (B, H, T, D) by i32 indices",
         {uniform_tensor({2, 4, 3, 2}, dtype, gen), indices({3, 1}, DType::I32)}, dim(1)},
        {"last dim of a non-contiguous [3, 4, 5]",
         {non_contiguous(uniform_tensor({3, 4, 5}, dtype, gen)), indices({0, 4, 1, 1, 3, 2})}, dim(-1)},
        {"threaded [300, 70] rows", {uniform_tensor({300, 70}, dtype, gen), indices(std::vector<int64_t>(257, 299))}, dim(0)}};
  };
  info.error_cases = [] {
    return std::vector<OpErrorCase>{
        {"index out of range", {Tensor::zeros({2, 5}), indices({1, 5})}, Attributes{{"dim", int64_t{1}}},
         "index_select: index 5 at position 1 is out of range for dim 1 of size 5 (shape [2, 5])"},
        {"2-d indices", {Tensor::zeros({4}), indices({1, 2}).reshape({1, 2})}, Attributes{{"dim", int64_t{0}}},
         "index_select: indices must be a 1-D i64 or i32 tensor"}};
  };
  info.gradient = [](const GradientContext& ctx) {
    const Tensor& g = ctx.grad_outputs[0];
    const Tensor zeros = Tensor::zeros(ctx.input_sizes[0], g.dtype(), g.device());
    return TensorList{index_add(zeros, ctx.attrs.get_int("dim"), ctx.inputs[1], g), Tensor()};
  };
  info.nondifferentiable_inputs = {1};
  info.tolerance = [](DType) { return Tolerance{}; };
  return info;
}

OpInfo index_add_entry() {
  OpInfo info;
  info.name = "index_add";
  info.cost = [](const TensorList& in, const TensorList&, const Attributes&) { return OpCost{0, in[2].numel()}; };
  info.dtypes = kFloatTypes;
  info.has_cuda = true;
  info.run = [](const TensorList& in, const Attributes& a) {
    return TensorList{index_add(in[0], a.get_int("dim"), in[1], in[2])};
  };
  info.reference = [](const TensorList& in, const Attributes& a) {
    const int64_t dim = dim_attr(a, in[0]);
    const std::vector<int64_t> idx = in[1].to_vector<int64_t>();
    const Around to(in[0].sizes(), dim), from(in[2].sizes(), dim);
    std::vector<double> values = in[0].contiguous().to_vector<double>();
    const std::vector<double> src = in[2].contiguous().to_vector<double>();
    for (int64_t o = 0; o < from.outer; ++o)
      for (int64_t j = 0; j < from.n; ++j)
        for (int64_t i = 0; i < from.inner; ++i) values[to.at(o, idx[j], i)] += src[from.at(o, j, i)];
    return TensorList{f64_tensor(values, in[0].sizes())};
  };
  info.samples = [](DType dtype, Generator& gen) {
    const auto dim = [](int64_t d) { return Attributes{{"dim", d}}; };
    return std::vector<OpSample>{
        {"rows of [5, 3], repeats accumulate",
         {uniform_tensor({5, 3}, dtype, gen), indices({4, 0, 4, 2}), uniform_tensor({4, 3}, dtype, gen)}, dim(0)},
        {"middle dim, i32 indices",
         {uniform_tensor({2, 4, 3}, dtype, gen), indices({3, 3, 1}, DType::I32), uniform_tensor({2, 3, 3}, dtype, gen)}, dim(1)},
        {"non-contiguous base and source along the last dim",
         {non_contiguous(uniform_tensor({3, 5}, dtype, gen)), indices({1, 0}), non_contiguous(uniform_tensor({3, 2}, dtype, gen))},
         dim(-1)}};
  };
  info.error_cases = [] {
    return std::vector<OpErrorCase>{
        {"source of the wrong shape", {Tensor::zeros({5, 3}), indices({1, 2}), Tensor::zeros({3, 3})},
         Attributes{{"dim", int64_t{0}}},
         "index_add: source must have shape [2, 3] (base's, with dim 0 the number of indices), got [3, 3]"},
        {"index out of range", {Tensor::zeros({5, 3}), indices({7}), Tensor::zeros({1, 3})}, Attributes{{"dim", int64_t{0}}},
         "index_add: index 7 at position 0 is out of range for dim 0 of size 5"}};
  };
  info.gradient = [](const GradientContext& ctx) {
    const Tensor& g = ctx.grad_outputs[0];
    return TensorList{g, Tensor(), index_select(g, ctx.attrs.get_int("dim"), ctx.inputs[1])};
  };
  info.nondifferentiable_inputs = {1};
  info.tolerance = default_tolerance;  // sums
  return info;
}

// --- repeat_interleave ---

OpInfo repeat_interleave_entry() {
  OpInfo info;
  info.name = "repeat_interleave";
  info.cost = no_arithmetic;
  info.dtypes = kFloatTypes;
  info.has_cuda = true;
  info.run = [](const TensorList& in, const Attributes& a) {
    return TensorList{repeat_interleave(in[0], a.get_int("repeats"), a.get_int("dim"))};
  };
  info.reference = [](const TensorList& in, const Attributes& a) {
    const int64_t dim = dim_attr(a, in[0]), repeats = a.get_int("repeats");
    const Around from(in[0].sizes(), dim);
    Shape shape = in[0].sizes();
    shape[dim] *= repeats;
    const Around to(shape, dim);
    const std::vector<double> x = in[0].contiguous().to_vector<double>();
    std::vector<double> values(shape_numel(shape));
    for (int64_t o = 0; o < to.outer; ++o)
      for (int64_t j = 0; j < to.n; ++j)
        for (int64_t i = 0; i < to.inner; ++i) values[to.at(o, j, i)] = x[from.at(o, j / repeats, i)];
    return TensorList{f64_tensor(values, shape)};
  };
  info.samples = [](DType dtype, Generator& gen) {
    const auto at = [](int64_t repeats, int64_t dim) { return Attributes{{"repeats", repeats}, {"dim", dim}}; };
    return std::vector<OpSample>{
        {"kv heads 2 -> 6 of (B, H, T, D)", {uniform_tensor({2, 2, 3, 4}, dtype, gen)}, at(3, 1)},
        {"rows of a non-contiguous [3, 4]", {non_contiguous(uniform_tensor({3, 4}, dtype, gen))}, at(2, 0)},
        {"once: a copy", {uniform_tensor({5}, dtype, gen)}, at(1, 0)}};
  };
  info.error_cases = [] {
    return std::vector<OpErrorCase>{{"zero repeats", {Tensor::zeros({2, 3})},
                                     Attributes{{"repeats", int64_t{0}}, {"dim", int64_t{0}}},
                                     "repeat_interleave: repeats must be >= 1, got 0"}};
  };
  info.gradient = [](const GradientContext& ctx) {
    const Shape& shape = ctx.input_sizes[0];
    const int64_t dim = normalize_dim(ctx.attrs.get_int("dim"), static_cast<int64_t>(shape.size()), "dim");
    Shape split = shape;
    split.insert(split.begin() + dim + 1, ctx.attrs.get_int("repeats"));
    return TensorList{sum(ctx.grad_outputs[0].reshape(split), {dim + 1})};
  };
  info.gradient_uses_inputs = false;
  info.tolerance = [](DType) { return Tolerance{}; };
  return info;
}

}  // namespace

void register_shape_ops(std::vector<OpInfo>& registry) {
  registry.push_back(concatenate_entry());
  registry.push_back(narrow_entry());
  registry.push_back(index_select_entry());
  registry.push_back(index_add_entry());
  registry.push_back(repeat_interleave_entry());
}

}  // namespace fathom
