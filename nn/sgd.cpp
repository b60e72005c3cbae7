#include "nn/sgd.h"

#include "kernels/optimizer_kernels.h"

namespace fathom::nn {

Sgd::Sgd(std::vector<ParamGroup> groups, SgdOptions options)
    : Optimizer("SGD", std::move(groups), options.lr, options.weight_decay), options_(options) {
  check_non_negative(type(), "momentum", options.momentum);
  check_non_negative(type(), "dampening", options.dampening);
  FATHOM_CHECK(!options.nesterov || (options.momentum > 0 && options.dampening == 0), type(),
               ": \"nesterov\": true needs \"momentum\" > 0 and \"dampening\" = 0 (got momentum ", options.momentum,
               ", dampening ", options.dampening, ")");
}

std::vector<std::string> Sgd::state_names() const {
  if (options_.momentum == 0) return {};
  return {"momentum_buffer"};
}

SgdHyper Sgd::hyper(const ParamGroup& group, bool first_step) const {
  SgdHyper hyper;
  hyper.lr = *group.lr;
  hyper.momentum = options_.momentum;
  hyper.dampening = options_.dampening;
  hyper.weight_decay = *group.weight_decay;
  hyper.nesterov = options_.nesterov;
  hyper.first_step = first_step;  // torch starts the buffer as a copy of the gradient, without dampening
  return hyper;
}

void Sgd::update(const ParamGroup& group, const Tensor& param, const Tensor& grad, ParamState& state) {
  sgd_step(param, grad, state.buffers.empty() ? Tensor() : state.buffers[0], hyper(group, state.step == 1),
           state.copy);
}

void Sgd::update_group(const ParamGroup& group, const std::vector<Update>& updates) {
  // One multi-tensor update per device and per "first step or not" (how the buffer starts).
  auto first_step = [](const Update& u) { return int64_t{u.state->step == 1}; };
  for (const auto& [key, members] : batch_updates(updates, first_step)) {
    std::vector<SgdTensors> tensors;
    for (const Update* u : members)
      tensors.push_back({u->param, u->grad, u->state->buffers.empty() ? Tensor() : u->state->buffers[0], u->copy()});
    sgd_step_multi(tensors, hyper(group, key.second != 0));
  }
}

}  // namespace fathom::nn
