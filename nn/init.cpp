#include "nn/init.h"

namespace fathom::nn::init {

// Random values are drawn in f32 (f64 for f64 parameters) and converted once, so a bf16 model
// holds exactly the rounded f32 model.
void normal_(const autograd::Variable& parameter, Generator& gen, double mean, double std) {
  const Tensor& data = parameter.data();
  const DType draw = data.dtype() == DType::F64 ? DType::F64 : DType::F32;
  data.copy_(fathom::normal(data.sizes(), gen, mean, std, draw));
}

void uniform_(const autograd::Variable& parameter, Generator& gen, double low, double high) {
  const Tensor& data = parameter.data();
  const DType draw = data.dtype() == DType::F64 ? DType::F64 : DType::F32;
  data.copy_(fathom::uniform(data.sizes(), gen, low, high, draw));
}

void constant_(const autograd::Variable& parameter, double value) { parameter.data().fill_(value); }

}  // namespace fathom::nn::init
