#pragma once
// The scalar math of the elementwise ops, shared by the CPU kernels and their CUDA twins so
// both compute the same formulas. Light header (usable from .cu files).
//
// f32 exp and tanh are own branch-free approximations (Cody-Waite range reduction and the
// Cephes minimax polynomials, max error ~2 ulp) because the C library's expf/tanhf do not
// vectorise; f64 uses the C library. NaN propagates; ±Inf give the IEEE limits.

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/half.h"
#include "kernels/elementwise_kernels.h"

namespace fathom::math {

// The float overloads, not the C library's double-only log(double) etc.
using std::erf;
using std::log;
using std::pow;
using std::sqrt;

FATHOM_HOST_DEVICE inline float exp(float x) {
  // Comparisons rather than fminf/fmaxf: those stay library calls (their NaN rules) and stop
  // the loop from vectorising; NaN is handled at the end anyway.
  float clamped = x < -87.33654f ? -87.33654f : x;
  clamped = clamped > 88.72283f ? 88.72283f : clamped;
  const float n = floorf(clamped * 1.44269504088896341f + 0.5f);
  const float r = clamped - n * 0.693359375f - n * -2.12194440e-4f;  // x - n·ln2 in two parts
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  // 2^n in two halves: each is a normal float even where 2^n alone is not (n = 128 near the top).
  const int32_t n_high = static_cast<int32_t>(n) / 2, n_low = static_cast<int32_t>(n) - n_high;
  const float scale_high = detail::bits_float(static_cast<uint32_t>(n_high + 127) << 23);
  const float scale_low = detail::bits_float(static_cast<uint32_t>(n_low + 127) << 23);
  float result = y * scale_high * scale_low;
  result = x < -87.33654f ? 0.0f : result;  // flush the subnormal range to zero
  result = x > 88.72283f ? INFINITY : result;
  return x != x ? x : result;
}
FATHOM_HOST_DEVICE inline double exp(double x) { return ::exp(x); }

FATHOM_HOST_DEVICE inline float tanh(float x) {
  const float ax = fabsf(x);
  // Small |x|: odd polynomial (no cancellation); otherwise 1 - 2 / (e^{2|x|} + 1).
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = x + x * z * p;
  const float large = copysignf(1.0f - 2.0f / (exp(2.0f * ax) + 1.0f), x);
  return ax < 0.625f ? small : large;
}
FATHOM_HOST_DEVICE inline double tanh(double x) { return ::tanh(x); }

template <typename C>
FATHOM_HOST_DEVICE inline C sigmoid(C x) {
  return C(1) / (C(1) + exp(-x));
}

// GELU, tanh approximation (GPT-2's): 0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³))).
template <typename C>
FATHOM_HOST_DEVICE inline C gelu_tanh(C x) {
  const C inner = C(0.7978845608028654) * (x + C(0.044715) * x * x * x);
  return C(0.5) * x * (C(1) + tanh(inner));
}
template <typename C>
FATHOM_HOST_DEVICE inline C gelu_tanh_grad(C x) {
  const C k = C(0.7978845608028654);
  const C t = tanh(k * (x + C(0.044715) * x * x * x));
  return C(0.5) * (C(1) + t) + C(0.5) * x * (C(1) - t * t) * k * (C(1) + C(3 * 0.044715) * x * x);
}
// GELU, exact: 0.5 x (1 + erf(x / √2)).
template <typename C>
FATHOM_HOST_DEVICE inline C gelu_erf(C x) {
  return C(0.5) * x * (C(1) + erf(x * C(0.7071067811865476)));
}
template <typename C>
FATHOM_HOST_DEVICE inline C gelu_erf_grad(C x) {
  return C(0.5) * (C(1) + erf(x * C(0.7071067811865476))) + x * exp(C(-0.5) * x * x) * C(0.3989422804014327);
}

// Ops that only make sense on floating-point values; integer tensors reject them before any
// kernel runs, and the kernels are not instantiated for them on integer types.
FATHOM_HOST_DEVICE constexpr bool is_float_only(UnaryOp op) {
  return op != UnaryOp::Neg && op != UnaryOp::Abs && op != UnaryOp::Relu && op != UnaryOp::AddScalar &&
         op != UnaryOp::MulScalar && op != UnaryOp::RsubScalar && op != UnaryOp::Clamp;
}
FATHOM_HOST_DEVICE constexpr bool is_float_only(BinaryOp op) {
  // Integer division is left out on purpose: it would truncate, and divide-by-zero traps.
  return op == BinaryOp::Div || op == BinaryOp::Pow || op >= BinaryOp::ReluBackward;
}

// `op` is a compile-time constant at every call site, so the switch folds away.
template <typename C>
FATHOM_HOST_DEVICE inline C unary(UnaryOp op, C x, C alpha, C beta) {
  if constexpr (std::is_floating_point_v<C>) {
    switch (op) {
      case UnaryOp::Exp: return exp(x);
      case UnaryOp::Log: return log(x);
      case UnaryOp::Sqrt: return sqrt(x);
      case UnaryOp::Rsqrt: return C(1) / sqrt(x);
      case UnaryOp::Tanh: return tanh(x);
      case UnaryOp::Sigmoid: return sigmoid(x);
      case UnaryOp::GeluTanh: return gelu_tanh(x);
      case UnaryOp::GeluErf: return gelu_erf(x);
      case UnaryOp::Silu: return x * sigmoid(x);
      case UnaryOp::DivScalar: return x / alpha;
      case UnaryOp::PowScalar: return pow(x, alpha);
      default: break;
    }
  }
  switch (op) {
    case UnaryOp::Neg: return -x;
    case UnaryOp::Abs: return x < C(0) ? -x : x;
    case UnaryOp::Relu: return x > C(0) ? x : (x != x ? x : C(0));
    case UnaryOp::AddScalar: return x + alpha;
    case UnaryOp::MulScalar: return x * alpha;
    case UnaryOp::RsubScalar: return alpha - x;
    case UnaryOp::Clamp: return x != x ? x : (x < alpha ? alpha : (x > beta ? beta : x));
    default: return x;
  }
}

template <typename C>
FATHOM_HOST_DEVICE inline C binary(BinaryOp op, C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    switch (op) {
      case BinaryOp::Div: return a / b;
      case BinaryOp::Pow: return pow(a, b);
      case BinaryOp::ReluBackward: return b > C(0) ? a : C(0);
      case BinaryOp::GeluTanhBackward: return a * gelu_tanh_grad(b);
      case BinaryOp::GeluErfBackward: return a * gelu_erf_grad(b);
      case BinaryOp::SiluBackward: {
        const C s = sigmoid(b);
        return a * s * (C(1) + b * (C(1) - s));
      }
      case BinaryOp::SigmoidBackward: return a * b * (C(1) - b);
      case BinaryOp::TanhBackward: return a * (C(1) - b * b);
      case BinaryOp::SwiGlu: return a * sigmoid(a) * b;
      default: break;
    }
  }
  switch (op) {
    case BinaryOp::Add: return a + b;
    case BinaryOp::Sub: return a - b;
    case BinaryOp::Mul: return a * b;
    case BinaryOp::Maximum: return (a != a || a > b) ? a : b;  // NaN propagates
    case BinaryOp::Minimum: return (a != a || a < b) ? a : b;
    case BinaryOp::Eq: return a == b;
    case BinaryOp::Ne: return a != b;
    case BinaryOp::Lt: return a < b;
    case BinaryOp::Le: return a <= b;
    case BinaryOp::Gt: return a > b;
    case BinaryOp::Ge: return a >= b;
    default: return a;
  }
}

}  // namespace fathom::math
