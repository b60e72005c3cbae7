#pragma once
// LAMB with DeepSpeed's FusedLamb semantics (csrc/lamb/fused_lamb_cuda_kernel.cu), per tensor:
//
//   m = beta1 * m + (1 - beta1) * g            v = beta2 * v + (1 - beta2) * g^2   (no bias correction here)
//   update = m / (sqrt(v) + eps) + weight_decay * p        (eps_inside_sqrt: m / sqrt(v + eps) + ...)
//   coeff  = ||p|| / ||update||, clamped to [min_coeff, max_coeff]; 1 when either norm is 0
//   step_size = lr * sqrt(1 - beta2^step) / (1 - beta1^step)   (lr without bias_correction)
//   p -= step_size * coeff * update
//
// Bias correction scales the step, not the update whose norm feeds the trust ratio — as in
// FusedLamb, unlike the LAMB paper. Built from tensor ops (so it runs wherever they run); norms
// accumulate in f64. State: "exp_avg", "exp_avg_sq".

#include <array>

#include "nn/optimizer.h"

namespace fathom::nn {

struct LambOptions {
  double lr = 1e-3;
  bool bias_correction = true;
  std::array<double, 2> betas{0.9, 0.999};
  double eps = 1e-8;
  bool eps_inside_sqrt = false;
  double weight_decay = 0.0;
  double max_coeff = 10.0;
  double min_coeff = 0.01;
};

// One LAMB update of one tensor as above, `lr` and `weight_decay` its group's, `step` counted
// from 1: moments, trust ratio and weights. Returns the trust ratio (coeff).
double lamb_step(const Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                 const LambOptions& options, double lr, double weight_decay, int64_t step);

class Lamb : public Optimizer {
 public:
  Lamb(std::vector<ParamGroup> groups, LambOptions options = {});
  Lamb(std::vector<autograd::Variable> params, LambOptions options = {})
      : Lamb(single_group(std::move(params)), options) {}
  const LambOptions& options() const { return options_; }
  // The trust-ratio coefficients of the last step, one per updated parameter in group order
  // (FusedLamb.get_lamb_coeffs()).
  const std::vector<double>& lamb_coeffs() const { return lamb_coeffs_; }

 protected:
  std::vector<std::string> state_names() const override;
  void update(const ParamGroup& group, const Tensor& param, const Tensor& grad, ParamState& state) override;
  void begin_step() override { lamb_coeffs_.clear(); }

 private:
  LambOptions options_;
  std::vector<double> lamb_coeffs_;
};

}  // namespace fathom::nn
