#include "autograd/nn_functions.h"

#include "autograd/custom_function.h"
#include "autograd/functions.h"
#include "autograd/op_node.h"
#include "core/shape_ops.h"

namespace fathom::autograd {
namespace {

#define FATHOM_OP(name)                      \
  []() -> const OpInfo& {                    \
    static const OpInfo& op = find_op(name); \
    return op;                               \
  }()

class PermuteFunction final : public Function {
 public:
  explicit PermuteFunction(std::vector<int64_t> dims) : dims_(std::move(dims)) {}
  std::string name() const override { return "permute"; }
  TensorList forward(const TensorList& in) override { return {in[0].permute(dims_)}; }
  TensorList backward(const TensorList& grads) override {
    std::vector<int64_t> inverse(dims_.size());
    for (size_t i = 0; i < dims_.size(); ++i) inverse[normalize_dim(dims_[i], static_cast<int64_t>(dims_.size()), "permute")] = static_cast<int64_t>(i);
    return {grads[0].permute(inverse)};
  }

 private:
  std::vector<int64_t> dims_;
};

class ContiguousFunction final : public Function {
 public:
  std::string name() const override { return "contiguous"; }
  TensorList forward(const TensorList& in) override { return {in[0].contiguous()}; }
  TensorList backward(const TensorList& grads) override { return {grads[0]}; }
};

class CastFunction final : public Function {
 public:
  explicit CastFunction(DType to) : to_(to) {}
  std::string name() const override { return "to_dtype"; }
  TensorList forward(const TensorList& in) override {
    from_ = in[0].dtype();
    return {in[0].to(to_)};
  }
  TensorList backward(const TensorList& grads) override { return {grads[0].to(from_)}; }

 private:
  DType to_, from_ = DType::F32;
};

class SplitFunction final : public Function {
 public:
  SplitFunction(std::vector<int64_t> sizes, int64_t dim) : sizes_(std::move(sizes)), dim_(dim) {}
  std::string name() const override { return "split"; }
  TensorList forward(const TensorList& in) override { return split_with_sizes(in[0], sizes_, dim_); }
  TensorList backward(const TensorList& grads) override { return {cat(grads, dim_)}; }

 private:
  std::vector<int64_t> sizes_;
  int64_t dim_;
};

}  // namespace

Variable matmul(const Variable& a, const Variable& b, bool transpose_a, bool transpose_b) {
  return apply_op(FATHOM_OP("matmul"), {a, b}, Attributes{{"transpose_a", transpose_a}, {"transpose_b", transpose_b}})[0];
}
Variable softmax(const Variable& x) { return apply_op(FATHOM_OP("softmax"), {x})[0]; }
Variable log_softmax(const Variable& x) { return apply_op(FATHOM_OP("log_softmax"), {x})[0]; }
Variable causal_softmax(const Variable& scores, double scale) {
  return apply_op(FATHOM_OP("causal_softmax"), {scores}, Attributes{{"scale", scale}})[0];
}
Variable layernorm(const Variable& x, const Variable& weight, const Variable& bias, double eps) {
  return apply_op(FATHOM_OP("layernorm"), {x, weight, bias}, Attributes{{"eps", eps}})[0];
}
Variable rmsnorm(const Variable& x, const Variable& weight, double eps) {
  return apply_op(FATHOM_OP("rmsnorm"), {x, weight}, Attributes{{"eps", eps}})[0];
}
Variable rotary_embedding(const Variable& x, const Tensor& positions, const Tensor& inv_freq) {
  return apply_op(FATHOM_OP("rotary_embedding"), {x, Variable(positions), Variable(inv_freq)})[0];
}
Variable embedding(const Tensor& indices, const Variable& weight) {
  return apply_op(FATHOM_OP("embedding"), {Variable(indices), weight})[0];
}
Variable cross_entropy(const Variable& logits, const Tensor& targets, std::optional<double> normaliser,
                       int64_t ignore_index) {
  Attributes attrs{{"ignore_index", ignore_index}};
  if (normaliser) attrs.set("normaliser", *normaliser);
  return apply_op(FATHOM_OP("cross_entropy"), {logits, Variable(targets)}, attrs)[0];
}
Variable dropout(const Variable& x, double p, uint64_t seed, uint64_t offset, const Tensor& sample_index,
                 int64_t column_offset, int64_t full_width) {
  return apply_op(FATHOM_OP("dropout"), {x, Variable(sample_index)},
                  Attributes{{"p", p}, {"seed", static_cast<int64_t>(seed)}, {"offset", static_cast<int64_t>(offset)},
                             {"column_offset", column_offset}, {"full_width", full_width}})[0];
}
Variable causal_attention(const Variable& q, const Variable& k, const Variable& v, const AttentionOptions& options) {
  Attributes attrs{{"window", options.window}};
  if (options.scale) attrs.set("scale", *options.scale);
  VariableList inputs{q, k, v};
  if (options.key_padding_mask.defined()) inputs.push_back(Variable(options.key_padding_mask));
  return apply_op(FATHOM_OP("causal_attention"), inputs, attrs)[0];
}

Variable permute(const Variable& x, const std::vector<int64_t>& dims) {
  return apply_function(std::make_shared<PermuteFunction>(dims), {x})[0];
}
Variable contiguous(const Variable& x) { return apply_function(std::make_shared<ContiguousFunction>(), {x})[0]; }
Variable concatenate(const VariableList& parts, int64_t dim) {
  return apply_op(FATHOM_OP("concatenate"), parts, Attributes{{"dim", dim}})[0];
}
Variable narrow(const Variable& x, int64_t dim, int64_t start, int64_t length) {
  return apply_op(FATHOM_OP("narrow"), {x}, Attributes{{"dim", dim}, {"start", start}, {"length", length}})[0];
}
Variable index_select(const Variable& x, int64_t dim, const Tensor& indices) {
  return apply_op(FATHOM_OP("index_select"), {x, Variable(indices)}, Attributes{{"dim", dim}})[0];
}
Variable index_add(const Variable& base, int64_t dim, const Tensor& indices, const Variable& source) {
  return apply_op(FATHOM_OP("index_add"), {base, Variable(indices), source}, Attributes{{"dim", dim}})[0];
}
Variable repeat_interleave(const Variable& x, int64_t repeats, int64_t dim) {
  return apply_op(FATHOM_OP("repeat_interleave"), {x}, Attributes{{"repeats", repeats}, {"dim", dim}})[0];
}
Variable to_dtype(const Variable& x, DType dtype) {
  if (x.data().dtype() == dtype) return x;
  return apply_function(std::make_shared<CastFunction>(dtype), {x})[0];
}
VariableList split(const Variable& x, const std::vector<int64_t>& sizes, int64_t dim) {
  return apply_function(std::make_shared<SplitFunction>(sizes, dim), {x});
}

}  // namespace fathom::autograd
