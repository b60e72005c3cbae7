#include "parallel/onebit_adam.h"

#include <cmath>

#include "core/error.h"
#include "kernels/elementwise.h"
#include "kernels/optimizer_kernels.h"

namespace fathom::parallel {

OneBitAdam::OneBitAdam(std::vector<nn::ParamGroup> groups, OneBitAdamOptions options,
                       std::shared_ptr<Communicator> data_group)
    : CompressedOptimizer("OneBitAdam", std::move(groups), options.lr, options.weight_decay, std::move(data_group)),
      options_(options) {
  nn::check_non_negative("OneBitAdam", "eps", options_.eps);
  nn::check_betas("OneBitAdam", options_.betas[0], options_.betas[1]);
  FATHOM_CHECK(options_.freeze_step >= 0, "OneBitAdam: \"freeze_step\" must be >= 0, got ", options_.freeze_step);
}

void OneBitAdam::update(const nn::ParamGroup&, const Tensor&, const Tensor&, ParamState&) {
  FATHOM_FAIL("OneBitAdam updates whole parameter groups (update_group): its momentum is compressed as one buffer");
}

bool OneBitAdam::compressing() const { return steps_taken() >= std::max<int64_t>(options_.freeze_step, 1); }

void OneBitAdam::update_group(const nn::ParamGroup& group, const std::vector<Update>& updates) {
  if (updates.empty()) return;
  const int64_t step = updates.front().state->step;  // this one, counted from 1
  apply(group, updates, step > 1, step - 1 >= std::max<int64_t>(options_.freeze_step, 1));
}

void OneBitAdam::apply(const nn::ParamGroup& group, const std::vector<Update>& updates, bool update_weights,
                       bool compressed) {
  const double lr = update_weights ? group.lr.value_or(options_.lr) : 0.0;  // step 1 moves the moments only
  const double decay = group.weight_decay.value_or(options_.weight_decay);
  if (!compressed) {
    // Warm-up: Adam without bias correction, decoupled decay: the fused kernel Adam uses.
    AdamHyper hyper{.lr = lr, .beta1 = options_.betas[0], .beta2 = options_.betas[1], .eps = options_.eps,
                    .weight_decay = decay, .step = updates.front().state->step, .adam_w_mode = true,
                    .bias_correction = false};
    std::vector<AdamTensors> tensors;
    for (const Update& u : updates) tensors.push_back({u.param, u.grad, u.state->buffers[0], u.state->buffers[1]});
    adam_step_multi(tensors, hyper);
    return;
  }
  // Compressed: the local gradient into the momentum, the momenta's compressed mean, the frozen
  // variance.
  for (const Update& u : updates) fold_gradient(u, options_.betas[0]);
  std::vector<Tensor> momenta;
  for (const Update& u : updates) momenta.push_back(u.state->buffers[0]);
  compress_each(static_cast<size_t>(&group - &param_groups().front()), updates, momenta);
  for (const Update& u : updates) frozen_variance_step(u, lr, options_.eps, decay);
}

// m = β1·m + (1-β1)·g: one pass on the host, tensor ops elsewhere.
void OneBitAdam::fold_gradient(const Update& u, double beta1) {
  Tensor& m = u.state->buffers[0];
  if (!u.param.device().is_cpu()) {
    mul_(m, beta1);
    add_(m, mul(u.grad, 1.0 - beta1));
    return;
  }
  float* mp = static_cast<float*>(m.raw_data());
  const float* g = static_cast<const float*>(u.grad.raw_data());
  const float keep = static_cast<float>(beta1), take = static_cast<float>(1.0 - beta1);
  for (int64_t i = 0, n = m.numel(); i < n; ++i) mp[i] = keep * mp[i] + take * g[i];
}

// p -= lr·(m / (√v + eps) + decay·p), v frozen.
void OneBitAdam::frozen_variance_step(const Update& u, double lr, double eps, double decay) {
  const Tensor& m = u.state->buffers[0];
  const Tensor& v = u.state->buffers[1];
  if (!u.param.device().is_cpu()) {
    Tensor step = div(m, add(sqrt(v), eps));
    if (decay > 0) step = add(step, mul(u.param, decay));
    Tensor param = u.param;
    sub_(param, mul(step, lr));
    return;
  }
  float* p = static_cast<float*>(u.param.raw_data());
  const float* mp = static_cast<const float*>(m.raw_data());
  const float* vp = static_cast<const float*>(v.raw_data());
  const float rate = static_cast<float>(lr), epsilon = static_cast<float>(eps), wd = static_cast<float>(decay);
  for (int64_t i = 0, n = u.param.numel(); i < n; ++i)
    p[i] -= rate * (mp[i] / (std::sqrt(vp[i]) + epsilon) + wd * p[i]);
}

}  // namespace fathom::parallel
