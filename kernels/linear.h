#pragma once
// The linear layer's products as single ops: y = x W^T + b, and y = gelu_tanh(x W^T + b), with
// x (..., in), weight (out, in) as nn::Linear stores it, bias (out) or undefined.
//
// On CUDA the bias and the GELU run in cuBLASLt's epilogue (CUBLASLT_EPILOGUE_BIAS,
// GELU_AUX_BIAS), so the output is written once instead of being read and written again by
// separate add and gelu passes, and the backward's bias gradient comes out of the dW GEMM
// (BGRADB). Where cuBLASLt cannot fuse (f64, an aux leading dim that is not a multiple of 8,
// no algorithm), and on the CPU, the same values come from matmul, add and gelu in turn.
// f16/bf16 accumulate in f32; the fused path rounds once, the unfused one after each step.

#include "core/tensor.h"

namespace fathom {

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias);

struct LinearGeluOutputs {
  Tensor out;  // gelu_tanh(pre)
  Tensor pre;  // x W^T + b, kept for the backward
};
LinearGeluOutputs linear_gelu(const Tensor& x, const Tensor& weight, const Tensor& bias);

struct LinearGrads {
  Tensor dx, dweight, dbias;  // undefined where not requested
};
// From dpre, the gradient of x W^T + b (for linear_gelu: gelu_backward(dy, pre)):
// dx = dpre W, dweight = dpre^T x, dbias = dpre summed over all rows.
LinearGrads linear_backward(const Tensor& dpre, const Tensor& x, const Tensor& weight, bool need_dx = true,
                            bool need_dweight = true, bool need_dbias = true);

}  // namespace fathom
