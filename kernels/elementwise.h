#pragma once
// Elementwise ops on tensors: unary math, binary arithmetic and comparisons with numpy
// broadcasting, scalar and in-place variants, and the activation backward ops.
//
// Each op checks devices, dtypes and shapes (errors name both shapes), allocates its output
// and dispatches to the CPU or CUDA kernel. Operands must share a dtype (no implicit
// promotion: convert with .to(dtype)); math functions need floating-point tensors.

#include "core/tensor.h"
#include "kernels/elementwise_kernels.h"

namespace fathom {

const char* op_name(UnaryOp op);
const char* op_name(BinaryOp op);

// --- generic forms (everything below is a one-line wrapper) ---
Tensor unary(UnaryOp op, const Tensor& x, double alpha = 0.0, double beta = 0.0);
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b);
// out (+)= op(x); out may be any strided view of x's shape (x broadcasts to it).
void unary_into(UnaryOp op, const Tensor& out, const Tensor& x, double alpha = 0.0, double beta = 0.0,
                bool accumulate = false);
// out (+)= op(a, b), a and b broadcast to out's shape.
void binary_into(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, bool accumulate = false);

// --- unary ---
inline Tensor neg(const Tensor& x) { return unary(UnaryOp::Neg, x); }
inline Tensor abs(const Tensor& x) { return unary(UnaryOp::Abs, x); }
inline Tensor exp(const Tensor& x) { return unary(UnaryOp::Exp, x); }
inline Tensor log(const Tensor& x) { return unary(UnaryOp::Log, x); }
inline Tensor sqrt(const Tensor& x) { return unary(UnaryOp::Sqrt, x); }
inline Tensor rsqrt(const Tensor& x) { return unary(UnaryOp::Rsqrt, x); }
inline Tensor tanh(const Tensor& x) { return unary(UnaryOp::Tanh, x); }
inline Tensor sigmoid(const Tensor& x) { return unary(UnaryOp::Sigmoid, x); }
inline Tensor relu(const Tensor& x) { return unary(UnaryOp::Relu, x); }
inline Tensor silu(const Tensor& x) { return unary(UnaryOp::Silu, x); }
enum class GeluApproximation { Tanh, None };  // Tanh: GPT-2's; None: the exact erf form
inline Tensor gelu(const Tensor& x, GeluApproximation approximate = GeluApproximation::Tanh) {
  return unary(approximate == GeluApproximation::Tanh ? UnaryOp::GeluTanh : UnaryOp::GeluErf, x);
}
inline Tensor clamp(const Tensor& x, double min, double max) { return unary(UnaryOp::Clamp, x, min, max); }
inline Tensor pow(const Tensor& x, double exponent) { return unary(UnaryOp::PowScalar, x, exponent); }

// --- binary, with broadcasting ---
inline Tensor add(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Add, a, b); }
inline Tensor sub(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Sub, a, b); }
inline Tensor mul(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Mul, a, b); }
inline Tensor div(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Div, a, b); }
inline Tensor pow(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Pow, a, b); }
inline Tensor maximum(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Maximum, a, b); }
inline Tensor minimum(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Minimum, a, b); }
// Comparisons give bool tensors.
inline Tensor eq(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Eq, a, b); }
inline Tensor ne(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Ne, a, b); }
inline Tensor lt(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Lt, a, b); }
inline Tensor le(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Le, a, b); }
inline Tensor gt(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Gt, a, b); }
inline Tensor ge(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Ge, a, b); }
// cond ? a : b, all three broadcast together; cond is a bool tensor.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

// --- with a scalar (kept exact in the compute type, not rounded to the tensor's dtype) ---
inline Tensor add(const Tensor& x, double s) { return unary(UnaryOp::AddScalar, x, s); }
inline Tensor sub(const Tensor& x, double s) { return unary(UnaryOp::AddScalar, x, -s); }
inline Tensor sub(double s, const Tensor& x) { return unary(UnaryOp::RsubScalar, x, s); }
inline Tensor mul(const Tensor& x, double s) { return unary(UnaryOp::MulScalar, x, s); }
inline Tensor div(const Tensor& x, double s) { return unary(UnaryOp::DivScalar, x, s); }

// --- in place (write into self, bump its version) ---
Tensor& add_(Tensor& self, const Tensor& other);
Tensor& sub_(Tensor& self, const Tensor& other);
Tensor& mul_(Tensor& self, const Tensor& other);
Tensor& div_(Tensor& self, const Tensor& other);
Tensor& add_(Tensor& self, double s);
Tensor& mul_(Tensor& self, double s);
Tensor& clamp_(Tensor& self, double min, double max);

// --- activation backward: grad · f'(saved) ---
inline Tensor relu_backward(const Tensor& grad, const Tensor& y) { return binary(BinaryOp::ReluBackward, grad, y); }
inline Tensor gelu_backward(const Tensor& grad, const Tensor& x,
                            GeluApproximation approximate = GeluApproximation::Tanh) {
  return binary(approximate == GeluApproximation::Tanh ? BinaryOp::GeluTanhBackward : BinaryOp::GeluErfBackward,
                grad, x);
}
inline Tensor silu_backward(const Tensor& grad, const Tensor& x) { return binary(BinaryOp::SiluBackward, grad, x); }
// silu(gate) · up in one pass (SwiGLU, the gated MLP of Llama, Qwen2 and Mistral).
inline Tensor swiglu(const Tensor& gate, const Tensor& up) { return binary(BinaryOp::SwiGlu, gate, up); }
inline Tensor sigmoid_backward(const Tensor& grad, const Tensor& y) {
  return binary(BinaryOp::SigmoidBackward, grad, y);
}
inline Tensor tanh_backward(const Tensor& grad, const Tensor& y) { return binary(BinaryOp::TanhBackward, grad, y); }

}  // namespace fathom
