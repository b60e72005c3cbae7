#pragma once
// SGD with momentum: torch.optim.SGD semantics (DeepSpeed hands an "SGD" config to torch.optim).
//
//   g = grad + weight_decay * p
//   momentum != 0:  buf = g on the first step, else momentum * buf + (1 - dampening) * g
//                   g = nesterov ? g + momentum * buf : buf
//   p -= lr * g
//
// One fused pass per parameter (kernels' sgd_step). State: "momentum_buffer" when momentum != 0.

#include "kernels/optimizer_kernels.h"
#include "nn/optimizer.h"

namespace fathom::nn {

struct SgdOptions {
  double lr = 1e-3;  // torch.optim.SGD's default since torch 2.2
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
};

class Sgd : public Optimizer {
 public:
  Sgd(std::vector<ParamGroup> groups, SgdOptions options = {});
  Sgd(std::vector<autograd::Variable> params, SgdOptions options = {})
      : Sgd(single_group(std::move(params)), options) {}
  const SgdOptions& options() const { return options_; }

 protected:
  std::vector<std::string> state_names() const override;
  void update(const ParamGroup& group, const Tensor& param, const Tensor& grad, ParamState& state) override;
  void update_group(const ParamGroup& group, const std::vector<Update>& updates) override;
  bool fused_copies() const override { return true; }

 private:
  SgdHyper hyper(const ParamGroup& group, bool first_step) const;
  SgdOptions options_;
};

}  // namespace fathom::nn
