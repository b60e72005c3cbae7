#include "nn/lion.h"

#include "kernels/elementwise.h"

namespace fathom::nn {

Lion::Lion(std::vector<ParamGroup> groups, LionOptions options)
    : Optimizer("Lion", std::move(groups), options.lr, options.weight_decay), options_(options) {
  check_betas(type(), options.betas[0], options.betas[1]);
}

std::vector<std::string> Lion::state_names() const { return {"exp_avg"}; }

void Lion::update(const ParamGroup& group, const Tensor& param, const Tensor& grad, ParamState& state) {
  const double beta1 = options_.betas[0], beta2 = options_.betas[1];
  const double lr = *group.lr;
  Tensor exp_avg = state.buffers[0];
  const Tensor interpolated = add(mul(exp_avg, beta1), mul(grad, 1.0 - beta1));
  const Tensor zero = Tensor::zeros({}, DType::F32, param.device());
  // sign(c) as (c > 0) - (c < 0): exactly -1, 0 or 1.
  const Tensor sign = sub(gt(interpolated, zero).to(DType::F32), lt(interpolated, zero).to(DType::F32));
  Tensor weights = param;
  if (*group.weight_decay != 0) mul_(weights, 1.0 - lr * *group.weight_decay);
  sub_(weights, mul(sign, lr));
  mul_(exp_avg, beta2);
  add_(exp_avg, mul(grad, 1.0 - beta2));
}

}  // namespace fathom::nn
