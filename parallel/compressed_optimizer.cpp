#include "parallel/compressed_optimizer.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/threads.h"
#include "kernels/elementwise.h"
#include "kernels/optimizer_kernels.h"

namespace fathom::parallel {

CompressedOptimizer::CompressedOptimizer(std::string type, std::vector<nn::ParamGroup> groups, double lr,
                                         double weight_decay, double eps, const std::array<double, 2>& betas,
                                         std::shared_ptr<Communicator> data_group)
    : Optimizer(std::move(type), std::move(groups), lr, weight_decay), group_(std::move(data_group)) {
  FATHOM_CHECK(group_ != nullptr, this->type(), ": no data-parallel group");
  nn::check_non_negative(this->type(), "eps", eps);
  nn::check_betas(this->type(), betas[0], betas[1]);
  errors_.resize(param_groups().size());
}

void CompressedOptimizer::update(const nn::ParamGroup&, const Tensor&, const Tensor&, ParamState&) {
  FATHOM_FAIL(type(), " updates whole parameter groups (update_group): its momenta travel in one exchange");
}

int64_t CompressedOptimizer::steps_taken() const {
  for (const nn::ParamGroup& group : param_groups())
    if (!group.params.empty()) return step_count(group.params.front());
  return 0;
}

void CompressedOptimizer::set_exp_avg_mask(const autograd::Variable& param, const Tensor& mask) {
  const std::string key = param_key(param);  // fails for a parameter this optimizer does not own
  FATHOM_CHECK(mask.dtype() == DType::F32, type(), ": the exp_avg_mask of \"", key, "\" must be f32, got ",
               dtype_name(mask.dtype()));
  const Shape& shape = param.data().sizes();
  const Shape& sizes = mask.sizes();
  bool fits = sizes.size() <= shape.size();
  for (size_t d = 1; fits && d <= sizes.size(); ++d)
    fits = sizes[sizes.size() - d] == 1 || sizes[sizes.size() - d] == shape[shape.size() - d];
  FATHOM_CHECK(fits, type(), ": the exp_avg_mask of \"",
               key, "\" has shape ", shape_str(mask.sizes()), ", which does not broadcast to the parameter's ",
               shape_str(shape));
  std::erase_if(masks_, [&](const auto& entry) { return entry.first.same(param); });
  masks_.emplace_back(param, mask.to(param.data().device()).clone());
}

void CompressedOptimizer::apply_mask(const Tensor& param, const Tensor& values) const {
  for (const auto& [owner, mask] : masks_)
    if (owner.data().raw_data() == param.raw_data()) {
      Tensor out = values;
      mul_(out, mask);
      return;
    }
}

void CompressedOptimizer::adam_step_without_bias_correction(const std::vector<Update>& updates, double lr,
                                                            const std::array<double, 2>& betas, double eps,
                                                            double decay) {
  const AdamHyper hyper{.lr = lr, .beta1 = betas[0], .beta2 = betas[1], .eps = eps, .weight_decay = decay,
                        .step = updates.front().state->step, .adam_w_mode = true, .bias_correction = false};
  std::vector<AdamTensors> tensors;
  for (const Update& u : updates)
    tensors.push_back({.params = u.param, .grads = u.grad, .exp_avg = u.state->buffers[0],
                       .exp_avg_sq = u.state->buffers[1], .param_copy = {}});
  adam_step_multi(tensors, hyper);
}

int CompressedOptimizer::host_threads(int64_t n) {
  return static_cast<int>(std::clamp<int64_t>(n >> 15, 1, num_threads()));
}

void CompressedOptimizer::fold_into_momentum(const Tensor& momentum, const Tensor& grad, double beta1) {
  if (!momentum.device().is_cpu()) {
    Tensor m = momentum;
    mul_(m, beta1);
    add_(m, mul(grad, 1.0 - beta1));
    return;
  }
  float* m = static_cast<float*>(momentum.raw_data());
  const float* g = static_cast<const float*>(grad.raw_data());
  const float keep = static_cast<float>(beta1), take = static_cast<float>(1.0 - beta1);
  const int64_t n = momentum.numel();
#pragma omp parallel for num_threads(host_threads(n)) schedule(static)
  for (int64_t i = 0; i < n; ++i) m[i] = keep * m[i] + take * g[i];
}

void CompressedOptimizer::frozen_variance_step(const Tensor& param, const Tensor& momentum, const Tensor& variance,
                                               double lr, double eps, double decay) {
  if (!param.device().is_cpu()) {
    Tensor step = div(momentum, add(sqrt(variance), eps));
    if (decay > 0) step = add(step, mul(param, decay));
    Tensor p = param;
    sub_(p, mul(step, lr));
    return;
  }
  float* p = static_cast<float*>(param.raw_data());
  const float* m = static_cast<const float*>(momentum.raw_data());
  const float* v = static_cast<const float*>(variance.raw_data());
  const float rate = static_cast<float>(lr), epsilon = static_cast<float>(eps), wd = static_cast<float>(decay);
  const int64_t n = param.numel();
#pragma omp parallel for num_threads(host_threads(n)) schedule(static)
  for (int64_t i = 0; i < n; ++i) p[i] -= rate * (m[i] / (std::sqrt(v[i]) + epsilon) + wd * p[i]);
}

void CompressedOptimizer::compress_each(size_t g, const std::vector<Update>& updates,
                                        const std::vector<Tensor>& tensors) {
  if (group_->size() == 1) return;
  std::vector<CompressionErrors>& errors = errors_[g];
  if (errors.empty())
    for (const Update& u : updates) errors.push_back(CompressionErrors::zeros(u.param.numel(), group_->size()));
  FATHOM_CHECK(errors.size() == updates.size(), type(), ": parameter group ", g, " has ", updates.size(),
               " parameters with gradients this step but had ", errors.size(),
               " when compression started; every parameter must get a gradient at every step");
  std::vector<CompressionErrors*> pointers;
  for (CompressionErrors& e : errors) pointers.push_back(&e);
  compressed_all_reduce(*group_, tensors, pointers);  // one exchange for the whole group
  for (size_t i = 0; i < updates.size(); ++i) apply_mask(updates[i].param, tensors[i]);
  ++compressed_steps_;
}

std::vector<Tensor> CompressedOptimizer::per_parameter_errors() const {
  std::vector<Tensor> out;
  for (const auto& group : errors_)
    for (const CompressionErrors& e : group) out.push_back(e.worker), out.push_back(e.server);
  return out;
}

void CompressedOptimizer::load_per_parameter_errors(const std::vector<Tensor>& state, size_t first) {
  size_t k = first;
  for (size_t g = 0; g < errors_.size(); ++g) {
    errors_[g].clear();
    const size_t n = param_groups()[g].params.size();
    if (k + 2 * n > state.size()) continue;  // this group had not compressed yet
    for (size_t i = 0; i < n; ++i, k += 2) {
      const int64_t numel = param_groups()[g].params[i].data().numel();
      const CompressionErrors expected = CompressionErrors::zeros(numel, group_->size());
      FATHOM_CHECK(state[k].numel() == expected.worker.numel() && state[k + 1].numel() == expected.server.numel(),
                   type(), ": the checkpoint's error buffers of parameter ", i, " of group ", g,
                   " do not match this world size and model");
      errors_[g].push_back({state[k].clone(), state[k + 1].clone()});
    }
  }
  FATHOM_CHECK(k == state.size(), type(), ": the checkpoint's error buffers do not match this optimizer's parameters");
}

void CompressedOptimizer::zero_per_parameter_errors() {
  for (auto& group : errors_)
    for (CompressionErrors& e : group) mul_(e.worker, 0.0), mul_(e.server, 0.0);
}

}  // namespace fathom::parallel
