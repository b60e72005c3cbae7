#include "nn/lamb.h"

#include <algorithm>
#include <cmath>

#include "kernels/elementwise.h"
#include "kernels/reduction.h"

namespace fathom::nn {

Lamb::Lamb(std::vector<ParamGroup> groups, LambOptions options)
    : Optimizer("Lamb", std::move(groups), options.lr, options.weight_decay), options_(options) {
  check_betas(type(), options.betas[0], options.betas[1]);
  check_non_negative(type(), "eps", options.eps);
  check_non_negative(type(), "min_coeff", options.min_coeff);
  check_non_negative(type(), "max_coeff", options.max_coeff);
  FATHOM_CHECK(options.min_coeff <= options.max_coeff, type(), ": \"min_coeff\" (", options.min_coeff,
               ") must be <= \"max_coeff\" (", options.max_coeff, ")");
}

std::vector<std::string> Lamb::state_names() const { return {"exp_avg", "exp_avg_sq"}; }

double lamb_step(const Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                 const LambOptions& options, double lr, double weight_decay, int64_t step) {
  const double beta1 = options.betas[0], beta2 = options.betas[1];
  mul_(exp_avg, beta1);
  add_(exp_avg, mul(grad, 1.0 - beta1));
  mul_(exp_avg_sq, beta2);
  add_(exp_avg_sq, mul(mul(grad, grad), 1.0 - beta2));

  const Tensor denom = options.eps_inside_sqrt ? sqrt(add(exp_avg_sq, options.eps))
                                               : add(sqrt(exp_avg_sq), options.eps);
  Tensor update = div(exp_avg, denom);
  if (weight_decay != 0) add_(update, mul(param, weight_decay));

  const double weight_norm = global_norm({param});
  const double update_norm = global_norm({update});
  double coeff = 1.0;
  if (weight_norm != 0 && update_norm != 0)
    coeff = std::clamp(weight_norm / update_norm, options.min_coeff, options.max_coeff);

  double step_size = lr;
  if (options.bias_correction) {
    const double bc1 = 1.0 - std::pow(beta1, static_cast<double>(step));
    const double bc2 = 1.0 - std::pow(beta2, static_cast<double>(step));
    step_size = step_size * std::sqrt(bc2) / bc1;
  }
  Tensor weights = param;
  sub_(weights, mul(update, step_size * coeff));
  return coeff;
}

void Lamb::update(const ParamGroup& group, const Tensor& param, const Tensor& grad, ParamState& state) {
  lamb_coeffs_.push_back(
      lamb_step(param, grad, state.buffers[0], state.buffers[1], options_, *group.lr, *group.weight_decay, state.step));
}

}  // namespace fathom::nn
