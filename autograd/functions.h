#pragma once
// Differentiable ops on Variables: thin wrappers over the op registry (autograd/op_node.h).
// Each records a backward node when an input requires grad and grad mode is on.

#include <vector>

#include "autograd/variable.h"
#include "kernels/elementwise.h"

namespace fathom::autograd {

// --- elementwise ---
Variable neg(const Variable& x);
Variable exp(const Variable& x);
Variable log(const Variable& x);
Variable sqrt(const Variable& x);
Variable rsqrt(const Variable& x);
Variable tanh(const Variable& x);
Variable sigmoid(const Variable& x);
Variable relu(const Variable& x);
Variable silu(const Variable& x);
// silu(gate) · up, fused (kernels: BinaryOp::SwiGlu): the gated MLP of the Llama family.
Variable swiglu(const Variable& gate, const Variable& up);
Variable gelu(const Variable& x, GeluApproximation approximate = GeluApproximation::Tanh);
Variable abs(const Variable& x);
Variable clamp(const Variable& x, double min, double max);
Variable pow(const Variable& x, double exponent);
Variable add(const Variable& a, const Variable& b);
Variable sub(const Variable& a, const Variable& b);
Variable mul(const Variable& a, const Variable& b);
Variable div(const Variable& a, const Variable& b);
Variable maximum(const Variable& a, const Variable& b);
Variable minimum(const Variable& a, const Variable& b);
Variable add(const Variable& x, double s);
Variable mul(const Variable& x, double s);
Variable div(const Variable& x, double s);
Variable where(const Variable& cond, const Variable& a, const Variable& b);

// --- reductions ---
Variable sum(const Variable& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Variable mean(const Variable& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Variable max(const Variable& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Variable var(const Variable& x, const std::vector<int64_t>& dims = {}, bool keepdim = false, int64_t correction = 1);

// --- views and shapes (backward reshapes/scatters the gradient back) ---
Variable reshape(const Variable& x, const Shape& shape);
Variable transpose(const Variable& x, int64_t dim0, int64_t dim1);

inline Variable operator+(const Variable& a, const Variable& b) { return add(a, b); }
inline Variable operator-(const Variable& a, const Variable& b) { return sub(a, b); }
inline Variable operator*(const Variable& a, const Variable& b) { return mul(a, b); }
inline Variable operator/(const Variable& a, const Variable& b) { return div(a, b); }
inline Variable operator-(const Variable& x) { return neg(x); }
inline Variable operator+(const Variable& x, double s) { return add(x, s); }
inline Variable operator*(const Variable& x, double s) { return mul(x, s); }
inline Variable operator/(const Variable& x, double s) { return div(x, s); }

}  // namespace fathom::autograd
