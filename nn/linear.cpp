#include "nn/linear.h"

#include <cmath>

#include "autograd/functions.h"
#include "autograd/nn_functions.h"
#include "autograd/op_node.h"
#include "nn/init.h"

namespace fathom::nn {
namespace {
Generator& default_init_generator() {
  static Generator gen(0);
  return gen;
}
}  // namespace

Linear::Linear(int64_t in, int64_t out, bool with_bias, DType dtype) : in_features(in), out_features(out) {
  FATHOM_CHECK(in > 0 && out > 0, "Linear: feature counts must be positive, got ", in, " -> ", out);
  MemoryTagScope tag(MemoryTag::Parameters);
  weight = register_parameter("weight", Tensor::empty({out, in}, dtype));
  // PyTorch's default: U(-1/sqrt(in), 1/sqrt(in)); models usually re-initialise.
  const double bound = 1.0 / std::sqrt(static_cast<double>(in));
  init::uniform_(weight, default_init_generator(), -bound, bound);
  if (with_bias) {
    bias = register_parameter("bias", Tensor::zeros({out}, dtype));
  }
}

Linear::Linear(const Variable& shared) : in_features(shared.size(-1)), out_features(shared.size(0)) {
  FATHOM_CHECK(shared.dim() == 2, "Linear: a shared weight must be [out, in], got ", shape_str(shared.sizes()));
  weight = register_parameter("weight", shared);
}

Variable Linear::forward(const Variable& x) {
  FATHOM_CHECK(x.dim() >= 1 && x.size(-1) == in_features, "Linear: input of shape ", shape_str(x.sizes()),
               " does not end in in_features = ", in_features);
  // Fold leading dims into rows: one GEMM [rows, in] x [in, out].
  const Shape in_shape = x.sizes();
  const Variable rows = x.dim() == 2 ? x : autograd::reshape(x, {-1, in_features});
  Variable y;
  if (bias.defined() && rows.device().is_cuda()) {
    // One GEMM with the bias in cuBLASLt's epilogue, and dbias from the dW GEMM (kernels/linear.h).
    static const OpInfo& linear_op = find_op("linear");
    y = autograd::apply_op(linear_op, {rows, weight, bias})[0];
  } else {
    y = autograd::matmul(rows, weight, false, /*transpose_b=*/true);
    if (bias.defined()) y = autograd::add(y, bias);
  }
  if (x.dim() == 2) return y;
  Shape out_shape = in_shape;
  out_shape.back() = out_features;
  return autograd::reshape(y, out_shape);
}

Variable Linear::forward_gelu(const Variable& x) {
  if (!x.device().is_cuda()) return autograd::gelu(forward(x));
  FATHOM_CHECK(x.dim() >= 1 && x.size(-1) == in_features, "Linear: input of shape ", shape_str(x.sizes()),
               " does not end in in_features = ", in_features);
  // The op keeps x's leading dims; its second output (the GELU input) is saved for the backward.
  static const OpInfo& linear_gelu_op = find_op("linear_gelu");
  return autograd::apply_op(linear_gelu_op, {x, weight, bias})[0];
}

void Linear::tie_weight(const Variable& shared) {
  FATHOM_CHECK(shared.sizes() == weight.sizes(), "Linear.tie_weight: shape ", shape_str(shared.sizes()),
               " does not match the weight's ", shape_str(weight.sizes()));
  weight = shared;
  replace_parameter("weight", shared);
}

}  // namespace fathom::nn
