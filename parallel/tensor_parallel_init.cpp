#include "parallel/tensor_parallel_init.h"

#include <cmath>

namespace fathom::parallel {

Tensor draw_full_linear_weight(int64_t in_features, int64_t out_features, DType dtype) {
  static Generator generator(0);
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
  const DType draw = dtype == DType::F64 ? DType::F64 : DType::F32;  // as nn::init draws
  return uniform({out_features, in_features}, generator, -bound, bound, draw).to(dtype);
}

}  // namespace fathom::parallel
