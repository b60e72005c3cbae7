#pragma once
// Activation modules.

#include "kernels/elementwise.h"
#include "nn/module.h"

namespace fathom::nn {

class GELU : public Module {
 public:
  explicit GELU(GeluApproximation approximate = GeluApproximation::Tanh) : approximate(approximate) {}
  Variable forward(const Variable& x) override;
  std::string type_name() const override { return "GELU"; }
  const GeluApproximation approximate;
};

}  // namespace fathom::nn
