#include "nn/grad_clipping.h"

#include <cmath>

#include "kernels/elementwise.h"
#include "kernels/optimizer_kernels.h"
#include "kernels/reduction.h"

namespace fathom::nn {

double clip_grad_norm(const std::vector<autograd::Variable>& params, double max_norm) {
  FATHOM_CHECK(max_norm > 0 && std::isfinite(max_norm), "clip_grad_norm: max_norm must be > 0 and finite, got ",
               max_norm, " (to turn clipping off, do not call it; DeepSpeed's \"gradient_clipping\": 0 does that)");
  std::vector<Tensor> grads;
  for (const autograd::Variable& param : params)
    if (param.defined() && param.grad().defined()) grads.push_back(param.grad());
  const double norm = global_norm(grads);
  if (!std::isfinite(norm)) return norm;
  // torch's and DeepSpeed's formula; the 1e-6 keeps the factor finite for a zero norm.
  const double coefficient = max_norm / (norm + 1e-6);
  if (coefficient >= 1.0) return norm;
  // Dense f32 gradients (fp32 masters' and f32 models') scale in one multi-tensor kernel.
  std::vector<ScaleTensors> dense_f32;
  for (Tensor& grad : grads) {
    if (grad.dtype() == DType::F32 && grad.is_contiguous() && grad.device() == grads.front().device())
      dense_f32.push_back({grad, Tensor()});
    else
      mul_(grad, coefficient);
  }
  scale_multi(dense_f32, coefficient);
  return norm;
}

}  // namespace fathom::nn
