#include "kernels/elementwise.h"

#include <cmath>

#include "core/cuda/cuda_runtime.h"
#include "kernels/elementwise_math.h"

namespace fathom {

const char* op_name(UnaryOp op) {
  static const char* const names[] = {"neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu",
                                      "gelu", "gelu_erf", "silu", "add_scalar", "mul_scalar", "div_scalar",
                                      "rsub_scalar", "pow_scalar", "clamp"};
  return names[static_cast<int>(op)];
}

const char* op_name(BinaryOp op) {
  static const char* const names[] = {"add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "lt",
                                      "le", "gt", "ge", "relu_backward", "gelu_backward", "gelu_erf_backward",
                                      "silu_backward", "sigmoid_backward", "tanh_backward", "swiglu"};
  return names[static_cast<int>(op)];
}

namespace {

// Describes `operands` (operand 0 is the output) broadcast to the output's shape.
ElementwiseLayout make_layout(const std::vector<const Tensor*>& operands, const char* op) {
  const Tensor& out = *operands[0];
  FATHOM_CHECK(out.dim() <= kMaxElementwiseDims, op, ": tensors of more than ", kMaxElementwiseDims,
               " dims are not supported, got shape ", shape_str(out.sizes()));
  ElementwiseLayout layout;
  layout.ndim = static_cast<int>(out.dim());
  layout.numel = out.numel();
  layout.contiguous = true;
  for (int d = 0; d < layout.ndim; ++d) layout.sizes[d] = out.size(d);
  for (size_t k = 0; k < operands.size(); ++k) {
    const Tensor& t = *operands[k];
    const Strides strides = broadcast_strides(t.sizes(), t.strides(), out.sizes());
    for (int d = 0; d < layout.ndim; ++d) layout.strides[k][d] = strides[d];
    layout.contiguous = layout.contiguous && t.sizes() == out.sizes() && t.is_contiguous();
  }
  return layout;
}

void check_defined(const Tensor& t, const char* op) { FATHOM_CHECK(t.defined(), op, ": undefined tensor"); }

void check_dtype_supported(DType dtype, bool float_only, const char* op) {
  FATHOM_CHECK(dtype != DType::Bool, op, ": bool tensors are not supported (convert with .to(dtype) first)");
  FATHOM_CHECK(!float_only || is_floating_point(dtype), op, ": needs a floating-point tensor, got ",
               dtype_name(dtype), " (convert with .to(DType::F32) first)");
}

// The output shape the inputs produce must broadcast to `out` without changing it.
void check_fits(const Shape& result, const Tensor& out, const char* op) {
  FATHOM_CHECK(broadcast_shapes(result, out.sizes(), op) == out.sizes(), op, ": result of shape ", shape_str(result),
               " does not fit the output of shape ", shape_str(out.sizes()));
}

#if FATHOM_WITH_CUDA
constexpr bool kCudaBuilt = true;
#else
constexpr bool kCudaBuilt = false;
#endif

}  // namespace

void unary_into(UnaryOp op, const Tensor& out, const Tensor& x, double alpha, double beta, bool accumulate) {
  const char* name = op_name(op);
  check_defined(out, name);
  check_defined(x, name);
  check_same_device(out, x, name);
  check_same_dtype(out, x, name);
  check_dtype_supported(x.dtype(), math::is_float_only(op), name);
  check_fits(x.sizes(), out, name);
  if (!is_floating_point(x.dtype()))  // integer tensors take the scalar exactly or not at all
    for (double scalar : {alpha, beta})
      FATHOM_CHECK(scalar == std::trunc(scalar), name, ": scalar ", scalar, " is not an integer but the tensor is ",
                   dtype_name(x.dtype()), "; convert the tensor with .to(DType::F32) first");
  const ElementwiseLayout layout = make_layout({&out, &x}, name);
  if (out.device().is_cpu()) {
    kernels::unary_forward_cpu(op, x.dtype(), out.raw_data(), x.raw_data(), layout, alpha, beta, accumulate);
  } else if constexpr (kCudaBuilt) {
    kernels::unary_forward_cuda(op, x.dtype(), out.raw_data(), x.raw_data(), layout, alpha, beta, accumulate,
                                cuda::current_stream());
  }
  out.bump_version();
}

void binary_into(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, bool accumulate) {
  const char* name = op_name(op);
  check_defined(out, name);
  check_defined(a, name);
  check_defined(b, name);
  check_same_device(a, b, name);
  check_same_device(out, a, name);
  check_same_dtype(a, b, name);
  check_dtype_supported(a.dtype(), math::is_float_only(op), name);
  if (is_comparison(op)) {
    FATHOM_CHECK(out.dtype() == DType::Bool, name, ": a comparison writes a bool tensor, got ", dtype_name(out.dtype()));
    FATHOM_CHECK(!accumulate, name, ": a comparison cannot accumulate into its output");
  } else {
    check_same_dtype(out, a, name);
  }
  check_fits(broadcast_shapes(a.sizes(), b.sizes(), name), out, name);
  const ElementwiseLayout layout = make_layout({&out, &a, &b}, name);
  if (out.device().is_cpu()) {
    kernels::binary_forward_cpu(op, a.dtype(), out.raw_data(), a.raw_data(), b.raw_data(), layout, accumulate);
  } else if constexpr (kCudaBuilt) {
    kernels::binary_forward_cuda(op, a.dtype(), out.raw_data(), a.raw_data(), b.raw_data(), layout, accumulate,
                                 cuda::current_stream());
  }
  out.bump_version();
}

Tensor unary(UnaryOp op, const Tensor& x, double alpha, double beta) {
  check_defined(x, op_name(op));
  Tensor out = Tensor::empty(x.sizes(), x.dtype(), x.device());
  unary_into(op, out, x, alpha, beta);
  return out;
}

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  const char* name = op_name(op);
  check_defined(a, name);
  check_defined(b, name);
  check_same_device(a, b, name);
  const Shape shape = broadcast_shapes(a.sizes(), b.sizes(), name);
  Tensor out = Tensor::empty(shape, is_comparison(op) ? DType::Bool : a.dtype(), a.device());
  binary_into(op, out, a, b);
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_defined(cond, "where");
  check_defined(a, "where");
  check_defined(b, "where");
  FATHOM_CHECK(cond.dtype() == DType::Bool, "where: the condition must be a bool tensor, got ", dtype_name(cond.dtype()));
  check_same_device(cond, a, "where");
  check_same_device(a, b, "where");
  check_same_dtype(a, b, "where");
  const Shape shape = broadcast_shapes(broadcast_shapes(cond.sizes(), a.sizes(), "where"), b.sizes(), "where");
  Tensor out = Tensor::empty(shape, a.dtype(), a.device());
  const ElementwiseLayout layout = make_layout({&out, &cond, &a, &b}, "where");
  if (out.device().is_cpu()) {
    kernels::where_forward_cpu(a.dtype(), out.raw_data(), static_cast<const bool*>(cond.raw_data()), a.raw_data(),
                               b.raw_data(), layout);
  } else if constexpr (kCudaBuilt) {
    kernels::where_forward_cuda(a.dtype(), out.raw_data(), static_cast<const bool*>(cond.raw_data()), a.raw_data(),
                                b.raw_data(), layout, cuda::current_stream());
  }
  return out;
}

Tensor& add_(Tensor& self, const Tensor& other) {
  binary_into(BinaryOp::Add, self, self, other);
  return self;
}
Tensor& sub_(Tensor& self, const Tensor& other) {
  binary_into(BinaryOp::Sub, self, self, other);
  return self;
}
Tensor& mul_(Tensor& self, const Tensor& other) {
  binary_into(BinaryOp::Mul, self, self, other);
  return self;
}
Tensor& div_(Tensor& self, const Tensor& other) {
  binary_into(BinaryOp::Div, self, self, other);
  return self;
}
Tensor& add_(Tensor& self, double s) {
  unary_into(UnaryOp::AddScalar, self, self, s);
  return self;
}
Tensor& mul_(Tensor& self, double s) {
  unary_into(UnaryOp::MulScalar, self, self, s);
  return self;
}
Tensor& clamp_(Tensor& self, double min, double max) {
  unary_into(UnaryOp::Clamp, self, self, min, max);
  return self;
}

}  // namespace fathom
