#include "nn/normalization.h"

#include "autograd/nn_functions.h"

namespace fathom::nn {

LayerNorm::LayerNorm(int64_t dim, double eps_, bool with_bias, DType dtype) : eps(eps_) {
  FATHOM_CHECK(dim > 0, "LayerNorm: dim must be positive, got ", dim);
  MemoryTagScope tag(MemoryTag::Parameters);
  weight = register_parameter("weight", Tensor::ones({dim}, dtype));
  if (with_bias) bias = register_parameter("bias", Tensor::zeros({dim}, dtype));
}

Variable LayerNorm::forward(const Variable& x) { return autograd::layernorm(x, weight, bias, eps); }

RMSNorm::RMSNorm(int64_t dim, double eps_, DType dtype) : eps(eps_) {
  FATHOM_CHECK(dim > 0, "RMSNorm: dim must be positive, got ", dim);
  MemoryTagScope tag(MemoryTag::Parameters);
  weight = register_parameter("weight", Tensor::ones({dim}, dtype));
}

Variable RMSNorm::forward(const Variable& x) { return autograd::rmsnorm(x, weight, eps); }

}  // namespace fathom::nn
