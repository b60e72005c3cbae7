#pragma once
// Lion (Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms"), with DeepSpeed's
// FusedLion config names and defaults:
//
//   c = beta1 * m + (1 - beta1) * g
//   p = p * (1 - lr * weight_decay) - lr * sign(c)      (decoupled weight decay)
//   m = beta2 * m + (1 - beta2) * g
//
// sign(0) = 0, as in the paper and lion-pytorch (DeepSpeed's kernels move such an element by
// ±lr). Built from tensor ops. State: "exp_avg".

#include <array>

#include "nn/optimizer.h"

namespace fathom::nn {

struct LionOptions {
  double lr = 1e-3;
  std::array<double, 2> betas{0.9, 0.999};  // DeepSpeed's FusedLion default (the paper uses 0.99)
  double weight_decay = 0.0;
};

class Lion : public Optimizer {
 public:
  Lion(std::vector<ParamGroup> groups, LionOptions options = {});
  Lion(std::vector<autograd::Variable> params, LionOptions options = {})
      : Lion(single_group(std::move(params)), options) {}
  const LionOptions& options() const { return options_; }

 protected:
  std::vector<std::string> state_names() const override;
  void update(const ParamGroup& group, const Tensor& param, const Tensor& grad, ParamState& state) override;

 private:
  LionOptions options_;
};

}  // namespace fathom::nn
