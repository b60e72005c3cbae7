#include "nn/adam.h"

#include "kernels/optimizer_kernels.h"

namespace fathom::nn {
namespace {

AdamOptions with_decoupled_decay(AdamOptions options) {
  options.adam_w_mode = true;
  return options;
}

}  // namespace

Adam::Adam(std::vector<ParamGroup> groups, AdamOptions options) : Adam("Adam", std::move(groups), options) {}

Adam::Adam(std::string type, std::vector<ParamGroup> groups, AdamOptions options)
    : Optimizer(std::move(type), std::move(groups), options.lr, options.weight_decay), options_(options) {
  check_betas(this->type(), options.betas[0], options.betas[1]);
  check_non_negative(this->type(), "eps", options.eps);
}

std::vector<std::string> Adam::state_names() const { return {"exp_avg", "exp_avg_sq"}; }

AdamHyper Adam::hyper(const ParamGroup& group, int64_t step) const {
  AdamHyper hyper;
  hyper.lr = *group.lr;
  hyper.beta1 = options_.betas[0];
  hyper.beta2 = options_.betas[1];
  hyper.eps = options_.eps;
  hyper.weight_decay = *group.weight_decay;
  hyper.step = step;
  hyper.adam_w_mode = options_.adam_w_mode;
  hyper.bias_correction = options_.bias_correction;
  return hyper;
}

void Adam::update(const ParamGroup& group, const Tensor& param, const Tensor& grad, ParamState& state) {
  adam_step(param, grad, state.buffers[0], state.buffers[1], hyper(group, state.step), state.copy);
}

void Adam::update_group(const ParamGroup& group, const std::vector<Update>& updates) {
  // Parameters on one device at one step count share every scalar: one multi-tensor update each.
  // Step counts differ only for parameters that had no gradient in some earlier step.
  for (const auto& [key, members] : batch_updates(updates, [](const Update& u) { return u.state->step; })) {
    std::vector<AdamTensors> tensors;
    for (const Update* u : members)
      tensors.push_back({u->param, u->grad, u->state->buffers[0], u->state->buffers[1], u->copy()});
    adam_step_multi(tensors, hyper(group, key.second));
  }
}

AdamW::AdamW(std::vector<ParamGroup> groups, AdamOptions options)
    : Adam("AdamW", std::move(groups), with_decoupled_decay(options)) {}

}  // namespace fathom::nn
