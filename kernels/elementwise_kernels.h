#pragma once
// Kernel entry points of the elementwise ops (CPU twins and CUDA). Light header: .cu files
// include it.
//
// Every kernel takes raw pointers plus an ElementwiseLayout: one shape and each operand's
// strides in elements (0 on broadcast dims; operand 0 is the output). `accumulate` adds the
// result into the output instead of overwriting it, so backward kernels can write straight
// into gradient buffers. f16/bf16 operands are computed in f32 and rounded once on store.

#include <cstdint>

#include "core/dtype.h"

namespace fathom {

inline constexpr int kMaxElementwiseDims = 8;
inline constexpr int kMaxElementwiseOperands = 4;

struct ElementwiseLayout {
  int ndim = 0;
  int64_t numel = 0;
  int64_t sizes[kMaxElementwiseDims] = {};
  int64_t strides[kMaxElementwiseOperands][kMaxElementwiseDims] = {};  // [operand][dim]
  bool contiguous = false;  // every operand dense in row-major order (no broadcasting)
};

// y = f(x; alpha, beta). Scalars (alpha, beta) are exact doubles cast to the compute type.
enum class UnaryOp : uint8_t {
  Neg, Abs, Exp, Log, Sqrt, Rsqrt, Tanh, Sigmoid, Relu, GeluTanh, GeluErf, Silu,
  AddScalar,   // x + alpha
  MulScalar,   // x * alpha
  DivScalar,   // x / alpha
  RsubScalar,  // alpha - x
  PowScalar,   // x ^ alpha
  Clamp,       // min(max(x, alpha), beta)
};

// out = f(a, b). Comparisons write bool. The *Backward ops compute grad · f'(saved) with
// a = grad and b = the saved input (x) or output (y) named in the comment.
enum class BinaryOp : uint8_t {
  Add, Sub, Mul, Div, Pow, Maximum, Minimum,
  Eq, Ne, Lt, Le, Gt, Ge,
  ReluBackward,      // b = y
  GeluTanhBackward,  // b = x
  GeluErfBackward,   // b = x
  SiluBackward,      // b = x
  SigmoidBackward,   // b = y
  TanhBackward,      // b = y
  SwiGlu,            // silu(a) · b: a = the gate, b = the up projection (Llama's gated MLP), fused
};

FATHOM_HOST_DEVICE constexpr bool is_comparison(BinaryOp op) { return op >= BinaryOp::Eq && op <= BinaryOp::Ge; }

namespace kernels {

void unary_forward_cpu(UnaryOp op, DType dtype, void* out, const void* x, const ElementwiseLayout& layout,
                       double alpha, double beta, bool accumulate);
// `dtype` is the operands' type; comparisons write bool to `out`.
void binary_forward_cpu(BinaryOp op, DType dtype, void* out, const void* a, const void* b,
                        const ElementwiseLayout& layout, bool accumulate);
// out = cond ? a : b
void where_forward_cpu(DType dtype, void* out, const bool* cond, const void* a, const void* b,
                       const ElementwiseLayout& layout);

void unary_forward_cuda(UnaryOp op, DType dtype, void* out, const void* x, const ElementwiseLayout& layout,
                        double alpha, double beta, bool accumulate, void* stream);
void binary_forward_cuda(BinaryOp op, DType dtype, void* out, const void* a, const void* b,
                         const ElementwiseLayout& layout, bool accumulate, void* stream);
void where_forward_cuda(DType dtype, void* out, const bool* cond, const void* a, const void* b,
                        const ElementwiseLayout& layout, void* stream);

}  // namespace kernels
}  // namespace fathom
