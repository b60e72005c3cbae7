#include "parallel/zero_one_adam.h"

#include <algorithm>

#include "core/error.h"
#include "kernels/elementwise.h"

namespace fathom::parallel {

ZeroOneAdam::ZeroOneAdam(std::vector<nn::ParamGroup> groups, ZeroOneAdamOptions options,
                         std::shared_ptr<Communicator> data_group)
    : CompressedOptimizer("ZeroOneAdam", std::move(groups), options.lr, options.weight_decay, options.eps, options.betas,
                          std::move(data_group)),
      options_(options) {
  FATHOM_CHECK(options_.var_freeze_step >= 0, "ZeroOneAdam: \"var_freeze_step\" must be >= 0, got ",
               options_.var_freeze_step);
  for (const auto& [key, value] : {std::pair{"var_update_scaler", options_.var_update_scaler},
                                   std::pair{"local_step_scaler", options_.local_step_scaler},
                                   std::pair{"local_step_clipper", options_.local_step_clipper}})
    FATHOM_CHECK(value >= 1, "ZeroOneAdam: \"", key, "\" must be >= 1, got ", value);
  lrs_.assign(param_groups().size(), 0.0);
}

ZeroOneAdam::Schedule ZeroOneAdam::schedule_after(int64_t steps) const {
  Schedule s;
  for (int64_t step = 2; step <= steps; ++step) {  // step 1 initialises only
    if (!s.frozen) {
      if (step % s.var_interval == 0 && ++s.var_counter == options_.var_update_scaler) {
        s.var_counter = 0;
        s.var_interval *= 2;
      }
    } else if (++s.local_counter == options_.local_step_scaler) {
      s.local_counter = 0;
      s.local_interval = std::min(options_.local_step_clipper, s.local_interval * 2);
    }
    if (step > options_.var_freeze_step) s.frozen = true;
  }
  return s;
}

bool ZeroOneAdam::wants_reduced_gradients() const {
  const int64_t done = steps_taken();
  const Schedule s = schedule_after(done);
  return !s.frozen && (done + 1) % s.var_interval == 0;
}

void ZeroOneAdam::update_group(const nn::ParamGroup& group, const std::vector<Update>& updates) {
  if (updates.empty()) return;
  const int64_t step = updates.front().state->step;  // this one, from 1
  const size_t g = static_cast<size_t>(&group - &param_groups().front());
  if (step == 1) return;  // DeepSpeed's initialisation step
  const Schedule s = schedule_after(step - 1);
  const double beta1 = options_.betas[0];
  const double lr = group.lr.value_or(options_.lr), decay = group.weight_decay.value_or(options_.weight_decay);
  if (!s.frozen && step % s.var_interval == 0) {
    adam_step_without_bias_correction(updates, lr, options_.betas, options_.eps, decay);  // averaged by the engine
    return;
  }
  if (!s.frozen) {  // local gradients, their 1-bit mean into m
    std::vector<Tensor> grads;
    for (const Update& u : updates) grads.push_back(u.grad.clone());
    compress_each(g, updates, grads);
    for (size_t i = 0; i < updates.size(); ++i) fold_into_momentum(updates[i].state->buffers[0], grads[i], beta1);
  } else {  // local steps
    if (!schedule_after(step - 2).frozen)  // the first: the weights every rank holds are the anchor
      for (const Update& u : updates) u.state->buffers[2].copy_(u.param);
    for (const Update& u : updates) fold_into_momentum(u.state->buffers[0], u.grad, beta1);
    lrs_[g] += lr;
  }
  for (const Update& u : updates)
    frozen_variance_step(u.param, u.state->buffers[0], u.state->buffers[1], lr, options_.eps, decay);
  if (s.frozen && step % s.local_interval == 0) {
    // What the local steps moved each rank since the anchor, -Σ lr·update, in momentum units,
    // averaged compressed; the mean applied to the anchor, which every rank holds bit for bit, so
    // they all end with the same weights. (DeepSpeed undoes each rank's steps instead, which
    // leaves the ranks a rounding apart.)
    std::vector<Tensor> moved;
    for (const Update& u : updates)
      moved.push_back(mul(sub(u.param, u.state->buffers[2]), add(sqrt(u.state->buffers[1]), options_.eps)));
    compress_each(g, updates, moved);
    for (size_t i = 0; i < updates.size(); ++i) {
      const Update& u = updates[i];
      u.state->buffers[0].copy_(mul(moved[i], -1.0 / lrs_[g]));
      u.param.copy_(add(u.state->buffers[2], div(moved[i], add(sqrt(u.state->buffers[1]), options_.eps))));
      u.state->buffers[2].copy_(u.param);
    }
    lrs_[g] = 0;
  }
  // The errors of the gradients are not the accumulator's: zeroed once, when the freeze starts.
  if (&group == &param_groups().back() && step > options_.var_freeze_step && !errors_zeroed_at_freeze_) {
    zero_per_parameter_errors();
    errors_zeroed_at_freeze_ = true;
  }
}

std::vector<Tensor> ZeroOneAdam::rank_local_state() const {
  std::vector<Tensor> out;
  std::vector<double> lrs = lrs_;
  lrs.push_back(errors_zeroed_at_freeze_ ? 1.0 : 0.0);
  out.push_back(Tensor::from_vector(lrs, {static_cast<int64_t>(lrs.size())}));
  for (Tensor& e : per_parameter_errors()) out.push_back(std::move(e));
  return out;
}

void ZeroOneAdam::load_rank_local_state(const std::vector<Tensor>& state) {
  FATHOM_CHECK(!state.empty() && state[0].numel() == static_cast<int64_t>(lrs_.size()) + 1,
               "ZeroOneAdam: the checkpoint's rank-local state does not match this optimizer's groups");
  const std::vector<double> lrs = state[0].to(DType::F64).to_vector<double>();
  std::copy(lrs.begin(), lrs.end() - 1, lrs_.begin());
  errors_zeroed_at_freeze_ = lrs.back() != 0.0;
  load_per_parameter_errors(state, 1);  // after the lr sums
}

}  // namespace fathom::parallel
