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

void Sgd::update(const ParamGroup& group, const Tensor& param, const Tensor& grad, ParamState& state) {
  SgdHyper hyper;
  hyper.lr = *group.lr;
  hyper.momentum = options_.momentum;
  hyper.dampening = options_.dampening;
  hyper.weight_decay = *group.weight_decay;
  hyper.nesterov = options_.nesterov;
  // torch starts the buffer as a copy of the gradient, without dampening.
  hyper.first_step = state.step == 1;
  sgd_step(param, grad, state.buffers.empty() ? Tensor() : state.buffers[0], hyper);
}

}  // namespace fathom::nn
