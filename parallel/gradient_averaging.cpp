#include "parallel/gradient_averaging.h"

#include "kernels/elementwise.h"

namespace fathom::parallel {

double GradientAveraging::before(int world) const {
  if (plain()) return 1.0;  // the communicator's Avg
  return prescale ? 1.0 / world : 1.0 / predivide_factor;
}

double GradientAveraging::after(int world) const {
  if (plain() || prescale) return 1.0;
  return predivide_factor / world;
}

void scale_in_place(const Tensor& tensor, double factor) {
  if (factor == 1.0 || tensor.numel() == 0) return;
  Tensor t = tensor;
  mul_(t, factor);
}

}  // namespace fathom::parallel
