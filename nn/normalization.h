#pragma once
// Layer normalisation over the last dim: LayerNorm (mean and variance, optional bias) and
// RMSNorm (root mean square, weight only).

#include "nn/module.h"

namespace fathom::nn {

class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t dim, double eps = 1e-5, bool bias = true, DType dtype = DType::F32);
  Variable forward(const Variable& x) override;
  std::string type_name() const override { return "LayerNorm"; }

  Variable weight, bias;  // bias undefined when disabled
  const double eps;
};

class RMSNorm : public Module {
 public:
  explicit RMSNorm(int64_t dim, double eps = 1e-6, DType dtype = DType::F32);
  Variable forward(const Variable& x) override;
  std::string type_name() const override { return "RMSNorm"; }

  Variable weight;
  const double eps;
};

}  // namespace fathom::nn
