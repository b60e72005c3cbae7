#pragma once
// layernorm and rmsnorm over the last dim, with their backward. x has any leading shape
// (N rows of C features); weight and bias (C) are optional (pass an undefined Tensor) and
// share x's dtype. The forward returns its saved statistics (mean, rstd: x's shape without
// the last dim, f32 for f32/f16/bf16 inputs, f64 for f64) for the backward to reuse.

#include "core/tensor.h"

namespace fathom {

struct LayerNormOutputs {
  Tensor y, mean, rstd;
};
struct LayerNormGrads {
  Tensor dx, dweight, dbias;  // undefined where not requested
};

// y = (x - mean) * rstd * weight + bias, rstd = 1 / sqrt(var + eps) (biased variance).
LayerNormOutputs layernorm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);
// dweight is computed only when weight is defined. dmean, drstd (optional) are gradients
// flowing into the saved statistics, for callers that use them as outputs.
LayerNormGrads layernorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                                  const Tensor& rstd, bool need_dx = true, bool need_dweight = true,
                                  bool need_dbias = true, const Tensor& dmean = {}, const Tensor& drstd = {});

struct RmsNormOutputs {
  Tensor y, rstd;
};
struct RmsNormGrads {
  Tensor dx, dweight;
};

// y = x * rstd * weight, rstd = 1 / sqrt(mean(x^2) + eps).
RmsNormOutputs rmsnorm(const Tensor& x, const Tensor& weight, double eps = 1e-6);
RmsNormGrads rmsnorm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& rstd,
                              bool need_dx = true, bool need_dweight = true, const Tensor& drstd = {});

}  // namespace fathom
