#include "parallel/onebit_adam.h"

#include <cmath>

#include "core/error.h"
#include "kernels/elementwise.h"

namespace fathom::parallel {

OneBitAdam::OneBitAdam(std::vector<nn::ParamGroup> groups, OneBitAdamOptions options,
                       std::shared_ptr<Communicator> data_group)
    : CompressedOptimizer("OneBitAdam", std::move(groups), options.lr, options.weight_decay, options.eps, options.betas,
                          std::move(data_group)),
      options_(options) {
  FATHOM_CHECK(options_.freeze_step >= 0, "OneBitAdam: \"freeze_step\" must be >= 0, got ", options_.freeze_step);
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
    adam_step_without_bias_correction(updates, lr, options_.betas, options_.eps, decay);  // the warm-up
    return;
  }
  // Compressed: the local gradient into the momentum, the momenta's compressed mean, the frozen
  // variance.
  for (const Update& u : updates) fold_into_momentum(u.state->buffers[0], u.grad, options_.betas[0]);
  std::vector<Tensor> momenta;
  for (const Update& u : updates) momenta.push_back(u.state->buffers[0]);
  compress_each(static_cast<size_t>(&group - &param_groups().front()), updates, momenta);
  for (const Update& u : updates)
    frozen_variance_step(u.param, u.state->buffers[0], u.state->buffers[1], lr, options_.eps, decay);
}

}  // namespace fathom::parallel
