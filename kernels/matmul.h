#pragma once
// Matrix products of tensors, with numpy/torch batching: the last two dims of each operand are
// the matrices, the dims before them are batch dims that broadcast against each other. Both
// operands need at least 2 dims (no 1-D promotion). transpose_a / transpose_b use the transpose
// of an operand's last two dims, without a copy. f32 and f64 compute in their own precision;
// bf16 and f16 operands accumulate in f32 and round once to a bf16/f16 result. Any strides:
// layouts with a unit stride in either of the last two dims go to the GEMM as they are, others
// are copied first. CUDA tensors go to cuBLASLt (kernels/cuda/gemm_cublaslt.h): 16-bit outputs are
// written directly (f32 accumulation, one rounding), f32 in strict f32 unless TF32 is allowed.

#include "core/tensor.h"

namespace fathom {

// [..., M, K] x [..., K, N] -> [broadcast(...), M, N] (after the requested transposes).
Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a = false, bool transpose_b = false);

// The shape matmul(a, b, transpose_a, transpose_b) returns; throws naming both shapes.
Shape matmul_shape(const Shape& a, const Shape& b, bool transpose_a, bool transpose_b);

// out (+)= op(a) op(b): out must have exactly the result's shape and the operands' dtype, and may
// be any strided view. With accumulate, 16-bit outputs are summed in f32 and rounded once.
void matmul_into(const Tensor& out, const Tensor& a, const Tensor& b, bool transpose_a = false,
                 bool transpose_b = false, bool accumulate = false);

namespace cuda {
// Whether f32 matmuls on CUDA may use TF32 tensor cores (inputs rounded to a 10-bit mantissa, so
// about 1e-3 relative error, several times faster). Off by default so f32 results match the CPU;
// FATHOM_ALLOW_TF32=1 in the environment turns it on at start. 16-bit and f64 are unaffected.
void set_allow_tf32(bool allow);
bool allow_tf32();
}  // namespace cuda

}  // namespace fathom
