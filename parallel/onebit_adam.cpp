#include "parallel/onebit_adam.h"

#include "core/error.h"
#include "kernels/elementwise.h"
#include "kernels/optimizer_kernels.h"

namespace fathom::parallel {

OneBitAdam::OneBitAdam(std::vector<nn::ParamGroup> groups, OneBitAdamOptions options,
                       std::shared_ptr<Communicator> data_group)
    : Optimizer("OneBitAdam", std::move(groups), options.lr, options.weight_decay),
      options_(options),
      group_(std::move(data_group)) {
  FATHOM_CHECK(group_ != nullptr, "OneBitAdam: no data-parallel group");
  nn::check_non_negative("OneBitAdam", "lr", options_.lr);
  nn::check_non_negative("OneBitAdam", "eps", options_.eps);
  nn::check_non_negative("OneBitAdam", "weight_decay", options_.weight_decay);
  nn::check_betas("OneBitAdam", options_.betas[0], options_.betas[1]);
  FATHOM_CHECK(options_.freeze_step >= 0, "OneBitAdam: \"freeze_step\" must be >= 0, got ", options_.freeze_step);
}

void OneBitAdam::update(const nn::ParamGroup&, const Tensor&, const Tensor&, ParamState&) {
  FATHOM_FAIL("OneBitAdam updates whole parameter groups (update_group): its momentum is compressed as one buffer");
}

void OneBitAdam::update_group(const nn::ParamGroup& group, const std::vector<Update>& updates) {
  if (updates.empty()) return;
  const int64_t step = updates.front().state->step;
  apply(group, updates, /*update_weights=*/step > 1);  // step 1 only initialises the moments
  // After the last group of the step: does compression start with the next one?
  if (&group == &param_groups().back() && !compressing_ && step >= options_.freeze_step) compressing_ = true;
}

void OneBitAdam::apply(const nn::ParamGroup& group, const std::vector<Update>& updates, bool update_weights) {
  const double lr = update_weights ? group.lr.value_or(options_.lr) : 0.0;  // step 1 moves the moments only
  const double decay = group.weight_decay.value_or(options_.weight_decay);
  if (!compressing_) {
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
  const double beta1 = options_.betas[0];
  for (const Update& u : updates) {
    Tensor& m = u.state->buffers[0];
    mul_(m, beta1);
    add_(m, mul(u.grad, 1.0 - beta1));
  }
  if (group_->size() > 1) compress_momenta(group, updates);
  for (const Update& u : updates) {
    Tensor step = div(u.state->buffers[0], add(sqrt(u.state->buffers[1]), options_.eps));
    if (decay > 0) step = add(step, mul(u.param, decay));
    Tensor param = u.param;
    sub_(param, mul(step, lr));
  }
}

// Each parameter's momentum replaced by its compressed mean over the group (its own scale and
// error buffers, as DeepSpeed's 1-bit Adam compresses each fp32 parameter).
void OneBitAdam::compress_momenta(const nn::ParamGroup& group, const std::vector<Update>& updates) {
  const size_t g = static_cast<size_t>(&group - &param_groups().front());
  if (errors_.size() <= g) errors_.resize(param_groups().size());
  std::vector<CompressionErrors>& errors = errors_[g];
  if (errors.empty())
    for (const Update& u : updates) errors.push_back(CompressionErrors::zeros(u.param.numel(), group_->size()));
  FATHOM_CHECK(errors.size() == updates.size(), "OneBitAdam: parameter group ", g, " has ", updates.size(),
               " parameters with gradients this step but had ", errors.size(),
               " when compression started; every parameter must get a gradient at every step");
  for (size_t i = 0; i < updates.size(); ++i) {
    Tensor m = updates[i].state->buffers[0];
    compressed_all_reduce(*group_, m, errors[i]);
  }
  ++compressed_steps_;
}

std::vector<Tensor> OneBitAdam::compression_state() const {
  std::vector<Tensor> out;
  for (const auto& group : errors_)
    for (const CompressionErrors& e : group) {
      out.push_back(e.worker);
      out.push_back(e.server);
    }
  return out;
}

void OneBitAdam::load_compression_state(const std::vector<Tensor>& state) {
  FATHOM_CHECK(state.size() % 2 == 0, "OneBitAdam: compression state must come in worker/server pairs");
  FATHOM_CHECK(!errors_.empty(), "OneBitAdam: load the compression state after the optimizer has compressed once");
  size_t k = 0;
  for (auto& group : errors_)
    for (CompressionErrors& e : group) {
      FATHOM_CHECK(k + 1 < state.size() && state[k].numel() == e.worker.numel() && state[k + 1].numel() == e.server.numel(),
                   "OneBitAdam: the compression state does not match this optimizer's parameters and world size");
      e.worker.copy_(state[k]);
      e.server.copy_(state[k + 1]);
      k += 2;
    }
}

}  // namespace fathom::parallel
