#include "autograd/functions.h"

#include "autograd/custom_function.h"
#include "autograd/op_node.h"
#include "kernels/reduction.h"

namespace fathom::autograd {
namespace {

// The registry entry, looked up once per op.
#define FATHOM_OP(name)                                 \
  [] () -> const OpInfo& {                              \
    static const OpInfo& op = find_op(name);            \
    return op;                                          \
  }()

Variable unary_op(const OpInfo& op, const Variable& x, double alpha = 0.0, double beta = 0.0) {
  return apply_op(op, {x}, Attributes{{"alpha", alpha}, {"beta", beta}})[0];
}

Attributes reduce_attrs(const std::vector<int64_t>& dims, bool keepdim, int64_t correction = 1) {
  return Attributes{{"dims", dims}, {"keepdim", keepdim}, {"correction", correction}};
}

// View ops: forward is a view; backward puts the gradient back in the input's shape.
class ReshapeFunction final : public Function {
 public:
  explicit ReshapeFunction(Shape shape) : shape_(std::move(shape)) {}
  std::string name() const override { return "reshape"; }
  TensorList forward(const TensorList& in) override {
    input_shape_ = in[0].sizes();
    return {in[0].reshape(shape_)};
  }
  TensorList backward(const TensorList& grads) override { return {grads[0].reshape(input_shape_)}; }

 private:
  Shape shape_, input_shape_;
};

class TransposeFunction final : public Function {
 public:
  TransposeFunction(int64_t dim0, int64_t dim1) : dim0_(dim0), dim1_(dim1) {}
  std::string name() const override { return "transpose"; }
  TensorList forward(const TensorList& in) override { return {in[0].transpose(dim0_, dim1_)}; }
  TensorList backward(const TensorList& grads) override { return {grads[0].transpose(dim0_, dim1_)}; }

 private:
  int64_t dim0_, dim1_;
};

}  // namespace

Variable neg(const Variable& x) { return unary_op(FATHOM_OP("neg"), x); }
Variable exp(const Variable& x) { return unary_op(FATHOM_OP("exp"), x); }
Variable log(const Variable& x) { return unary_op(FATHOM_OP("log"), x); }
Variable sqrt(const Variable& x) { return unary_op(FATHOM_OP("sqrt"), x); }
Variable rsqrt(const Variable& x) { return unary_op(FATHOM_OP("rsqrt"), x); }
Variable tanh(const Variable& x) { return unary_op(FATHOM_OP("tanh"), x); }
Variable sigmoid(const Variable& x) { return unary_op(FATHOM_OP("sigmoid"), x); }
Variable relu(const Variable& x) { return unary_op(FATHOM_OP("relu"), x); }
Variable silu(const Variable& x) { return unary_op(FATHOM_OP("silu"), x); }
Variable gelu(const Variable& x, GeluApproximation approximate) {
  return approximate == GeluApproximation::Tanh ? unary_op(FATHOM_OP("gelu"), x) : unary_op(FATHOM_OP("gelu_erf"), x);
}
Variable abs(const Variable& x) { return unary_op(FATHOM_OP("abs"), x); }
Variable clamp(const Variable& x, double min, double max) { return unary_op(FATHOM_OP("clamp"), x, min, max); }
Variable pow(const Variable& x, double exponent) { return unary_op(FATHOM_OP("pow_scalar"), x, exponent); }
Variable add(const Variable& x, double s) { return unary_op(FATHOM_OP("add_scalar"), x, s); }
Variable mul(const Variable& x, double s) { return unary_op(FATHOM_OP("mul_scalar"), x, s); }
Variable div(const Variable& x, double s) { return unary_op(FATHOM_OP("div_scalar"), x, s); }

Variable add(const Variable& a, const Variable& b) { return apply_op(FATHOM_OP("add"), {a, b})[0]; }
Variable sub(const Variable& a, const Variable& b) { return apply_op(FATHOM_OP("sub"), {a, b})[0]; }
Variable mul(const Variable& a, const Variable& b) { return apply_op(FATHOM_OP("mul"), {a, b})[0]; }
Variable swiglu(const Variable& gate, const Variable& up) { return apply_op(FATHOM_OP("swiglu"), {gate, up})[0]; }
Variable div(const Variable& a, const Variable& b) { return apply_op(FATHOM_OP("div"), {a, b})[0]; }
Variable maximum(const Variable& a, const Variable& b) { return apply_op(FATHOM_OP("maximum"), {a, b})[0]; }
Variable minimum(const Variable& a, const Variable& b) { return apply_op(FATHOM_OP("minimum"), {a, b})[0]; }
Variable where(const Variable& cond, const Variable& a, const Variable& b) {
  return apply_op(FATHOM_OP("where"), {cond, a, b})[0];
}

Variable sum(const Variable& x, const std::vector<int64_t>& dims, bool keepdim) {
  return apply_op(FATHOM_OP("sum"), {x}, reduce_attrs(dims, keepdim))[0];
}
Variable mean(const Variable& x, const std::vector<int64_t>& dims, bool keepdim) {
  return apply_op(FATHOM_OP("mean"), {x}, reduce_attrs(dims, keepdim))[0];
}
Variable max(const Variable& x, const std::vector<int64_t>& dims, bool keepdim) {
  return apply_op(FATHOM_OP("max"), {x}, reduce_attrs(dims, keepdim))[0];
}
Variable var(const Variable& x, const std::vector<int64_t>& dims, bool keepdim, int64_t correction) {
  return apply_op(FATHOM_OP("var"), {x}, reduce_attrs(dims, keepdim, correction))[0];
}

Variable reshape(const Variable& x, const Shape& shape) {
  return apply_function(std::make_shared<ReshapeFunction>(shape), {x})[0];
}
Variable transpose(const Variable& x, int64_t dim0, int64_t dim1) {
  return apply_function(std::make_shared<TransposeFunction>(dim0, dim1), {x})[0];
}

}  // namespace fathom::autograd
