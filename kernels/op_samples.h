#pragma once
// Building blocks for op-registry entries: sample tensors in a value range, non-contiguous
// copies of them, and naive f64 reference loops.

#include <functional>

#include "core/generator.h"
#include "core/tensor.h"

namespace fathom::samples {

// Uniform values in [low, high), made in f64 and converted to `dtype`.
Tensor uniform_tensor(const Shape& shape, DType dtype, Generator& gen, double low = -2.0, double high = 2.0);
// The same values as `t` in a non-contiguous layout (reversed-dims storage permuted back, or a
// strided column for 1-D), so kernels see real strides.
Tensor non_contiguous(const Tensor& t);
// Reference loops in f64 over CPU tensors (inputs converted to f64; broadcasting applied).
Tensor map_f64(const Tensor& x, const std::function<double(double)>& f);
Tensor zip_f64(const Tensor& a, const Tensor& b, const std::function<double(double, double)>& f);

}  // namespace fathom::samples
