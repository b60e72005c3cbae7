#include "kernels/op_samples.h"

#include <numeric>

namespace fathom::samples {

Tensor uniform_tensor(const Shape& shape, DType dtype, Generator& gen, double low, double high) {
  return uniform(shape, gen, low, high, DType::F64).to(dtype);
}

Tensor non_contiguous(const Tensor& t) {
  if (t.dim() == 0) return t;
  if (t.dim() == 1) {
    Tensor wide = Tensor::zeros({t.size(0), 2}, t.dtype());
    wide.select(1, 0).copy_(t);
    return wide.select(1, 0);  // stride 2
  }
  std::vector<int64_t> reversed(static_cast<size_t>(t.dim()));
  std::iota(reversed.rbegin(), reversed.rend(), int64_t{0});
  return t.permute(reversed).contiguous().permute(reversed);  // strides reversed, same values
}

Tensor map_f64(const Tensor& x, const std::function<double(double)>& f) {
  const std::vector<double> in = x.to_vector<double>();
  std::vector<double> out(in.size());
  for (size_t i = 0; i < in.size(); ++i) out[i] = f(in[i]);
  return Tensor::from_vector(out, x.dim() == 0 ? Shape{} : x.sizes()).reshape(x.sizes());
}

Tensor zip_f64(const Tensor& a, const Tensor& b, const std::function<double(double, double)>& f) {
  const Shape shape = broadcast_shapes(a.sizes(), b.sizes(), "zip_f64");
  const std::vector<double> av = a.to(DType::F64).expand(shape).to_vector<double>();
  const std::vector<double> bv = b.to(DType::F64).expand(shape).to_vector<double>();
  std::vector<double> out(av.size());
  for (size_t i = 0; i < av.size(); ++i) out[i] = f(av[i], bv[i]);
  return Tensor::from_vector(out, {static_cast<int64_t>(out.size())}).reshape(shape);
}

}  // namespace fathom::samples
