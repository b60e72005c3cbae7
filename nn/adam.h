#pragma once
// Adam and AdamW with DeepSpeed's FusedAdam semantics (one fused pass per parameter, kernels'
// adam_step, f32 arithmetic):
//
//   adam_w_mode = false (Adam, L2):  g = grad + weight_decay * p
//   m = beta1 * m + (1 - beta1) * g          v = beta2 * v + (1 - beta2) * g^2
//   update = (m / bc1) / (sqrt(v / bc2) + eps)       bc_i = 1 - beta_i^step (1 without bias_correction)
//   adam_w_mode = true (AdamW):      update += weight_decay * p   (decoupled)
//   p -= lr * update
//
// DeepSpeed's config type "Adam" means AdamW unless "adam_w_mode": false; "AdamW" is always
// AdamW. `step` counts from 1 per parameter. State: "exp_avg", "exp_avg_sq".

#include <array>

#include "kernels/optimizer_kernels.h"
#include "nn/optimizer.h"

namespace fathom::nn {

struct AdamOptions {
  double lr = 1e-3;
  std::array<double, 2> betas{0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool bias_correction = true;
  bool adam_w_mode = true;  // DeepSpeed's default: decoupled weight decay
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<ParamGroup> groups, AdamOptions options = {});
  Adam(std::vector<autograd::Variable> params, AdamOptions options = {})
      : Adam(single_group(std::move(params)), options) {}
  const AdamOptions& options() const { return options_; }

 protected:
  Adam(std::string type, std::vector<ParamGroup> groups, AdamOptions options);
  std::vector<std::string> state_names() const override;
  void update(const ParamGroup& group, const Tensor& param, const Tensor& grad, ParamState& state) override;
  void update_group(const ParamGroup& group, const std::vector<Update>& updates) override;
  bool fused_copies() const override { return true; }

 private:
  AdamHyper hyper(const ParamGroup& group, int64_t step) const;
  AdamOptions options_;
};

// Adam with decoupled weight decay, whatever options.adam_w_mode says (as DeepSpeed's "AdamW").
class AdamW : public Adam {
 public:
  AdamW(std::vector<ParamGroup> groups, AdamOptions options = {});
  AdamW(std::vector<autograd::Variable> params, AdamOptions options = {})
      : AdamW(single_group(std::move(params)), options) {}
};

}  // namespace fathom::nn
