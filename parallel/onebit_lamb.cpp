#include "parallel/onebit_lamb.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "kernels/elementwise.h"
#include "kernels/reduction.h"
#include "nn/lamb.h"

namespace fathom::parallel {

namespace {
// Positions in ParamState::scalars (OneBitLamb::scalar_states).
constexpr size_t kCoeffFreeze = 0, kLastFactor = 1, kScalingCoeff = 2;
}  // namespace

OneBitLamb::OneBitLamb(std::vector<nn::ParamGroup> groups, OneBitLambOptions options,
                       std::shared_ptr<Communicator> data_group)
    : CompressedOptimizer("OneBitLamb", std::move(groups), options.lr, options.weight_decay, options.eps, options.betas,
                          std::move(data_group)),
      options_(options) {
  FATHOM_CHECK(options_.freeze_step >= 0, "OneBitLamb: \"freeze_step\" must be >= 0, got ", options_.freeze_step);
  for (const auto& [key, value] : {std::pair{"min_coeff", options_.min_coeff}, {"factor_min", options_.factor_min},
                                   {"factor_threshold", options_.factor_threshold}})
    nn::check_non_negative(type(), key, value);
  FATHOM_CHECK(options_.min_coeff <= options_.max_coeff, "OneBitLamb: \"min_coeff\" (", options_.min_coeff,
               ") must be <= \"max_coeff\" (", options_.max_coeff, ")");
  FATHOM_CHECK(options_.factor_min <= options_.factor_max, "OneBitLamb: \"factor_min\" (", options_.factor_min,
               ") must be <= \"factor_max\" (", options_.factor_max, ")");
  FATHOM_CHECK(options_.coeff_beta >= 0 && options_.coeff_beta < 1,
               "OneBitLamb: \"coeff_beta\" must be in [0, 1), got ", options_.coeff_beta);
}

bool OneBitLamb::compressing() const { return steps_taken() >= last_warmup_step(); }

void OneBitLamb::begin_step() {
  lamb_coeffs_.clear();
  pending_.clear();
}

void OneBitLamb::update_group(const nn::ParamGroup& group, const std::vector<Update>& updates) {
  const int64_t step = updates.front().state->step;  // this one, counted from 1
  if (step == 1) return;  // DeepSpeed's initialisation step
  if (step <= last_warmup_step()) {
    for (const Update& u : updates) warmup_step(group, u);
    return;
  }
  // Compressed: this rank's gradient into the momentum now; the exchange waits for every group.
  FATHOM_CHECK(updates.size() == group.params.size(), "OneBitLamb: ", updates.size(), " of the ",
               group.params.size(), " parameters of group ", &group - &param_groups().front(),
               " have gradients this step; after the freeze every parameter must get a gradient at every step, "
               "since all momenta are compressed as one buffer");
  const double beta1 = options_.betas[0];
  for (const Update& u : updates) {
    Tensor& m = u.state->buffers[0];
    pending_.push_back({&group, u, m.clone()});
    mul_(m, beta1);
    add_(m, mul(u.grad, 1.0 - beta1));
  }
}

void OneBitLamb::warmup_step(const nn::ParamGroup& group, const Update& u) {
  const nn::LambOptions lamb{.lr = *group.lr, .bias_correction = false, .betas = options_.betas, .eps = options_.eps,
                             .eps_inside_sqrt = false, .weight_decay = *group.weight_decay,
                             .max_coeff = options_.max_coeff, .min_coeff = options_.min_coeff};
  ParamState& state = *u.state;
  const double coeff =
      nn::lamb_step(u.param, u.grad, state.buffers[0], state.buffers[1], lamb, lamb.lr, lamb.weight_decay, state.step);
  lamb_coeffs_.push_back(coeff);
  double& frozen = state.scalars[kCoeffFreeze];
  if (coeff != 1.0) frozen = options_.coeff_beta * frozen + (1.0 - options_.coeff_beta) * coeff;
  if (state.step == last_warmup_step()) state.buffers[2].copy_(state.buffers[1]);  // the fresh variance starts
}

void OneBitLamb::end_step() {
  if (pending_.empty()) return;
  size_t params = 0;
  for (const nn::ParamGroup& group : param_groups()) params += group.params.size();
  FATHOM_CHECK(pending_.size() == params, "OneBitLamb: ", pending_.size(), " of its ", params,
               " parameters have gradients this step (a whole group has none); after the freeze every parameter "
               "must get a gradient at every step, since all momenta are compressed as one buffer");
  if (pending_.front().update.state->scalars[kScalingCoeff] == 0.0) set_scaling_coefficients();
  if (data_group().size() > 1) compress_momenta();
  for (const Pending& p : pending_) compressed_step(p);
  pending_.clear();
}

// At the first compressed step: s = mean scale / own scale, each scale |m|/√n of the momentum
// before this step's gradient, so that the one compressed buffer's single scale suits every part.
void OneBitLamb::set_scaling_coefficients() {
  std::vector<double> scales;
  for (const Pending& p : pending_)
    scales.push_back(global_norm({p.momentum_before}) / std::sqrt(static_cast<double>(p.momentum_before.numel())));
  double mean = 0;
  for (double s : scales) mean += s / static_cast<double>(scales.size());
  for (size_t i = 0; i < pending_.size(); ++i)
    pending_[i].update.state->scalars[kScalingCoeff] = scales[i] > 0 ? mean / scales[i] : 1.0;
}

// Every momentum, scaled, replaced by the compressed mean over the group of one flat buffer, then
// unscaled and masked.
void OneBitLamb::compress_momenta() {
  int64_t total = 0;
  for (const Pending& p : pending_) total += p.update.param.numel();
  const Device device = pending_.front().update.param.device();
  if (!errors_) {
    errors_ = CompressionErrors::zeros(total, data_group().size());
    if (!loaded_errors_.empty()) {
      FATHOM_CHECK(loaded_errors_[0].numel() == errors_->worker.numel() &&
                       loaded_errors_[1].numel() == errors_->server.numel(),
                   "OneBitLamb: the checkpoint's error-feedback buffers do not match this world size and model");
      errors_->worker.copy_(loaded_errors_[0]);
      errors_->server.copy_(loaded_errors_[1]);
      loaded_errors_.clear();
    }
  }
  Tensor flat = Tensor::empty({total}, DType::F32, device);
  int64_t offset = 0;
  for (const Pending& p : pending_) {
    const Tensor& m = p.update.state->buffers[0];
    FATHOM_CHECK(m.device() == device, "OneBitLamb: every parameter must live on one device (", device.str(),
                 " and ", m.device().str(), " found): the momenta are compressed as one buffer");
    flat.narrow(0, offset, m.numel()).copy_(mul(m, p.update.state->scalars[kScalingCoeff]).view({m.numel()}));
    offset += m.numel();
  }
  compressed_all_reduce(data_group(), flat, *errors_);
  offset = 0;
  for (const Pending& p : pending_) {
    const Tensor& m = p.update.state->buffers[0];
    m.copy_(div(flat.narrow(0, offset, m.numel()), p.update.state->scalars[kScalingCoeff]).view(m.sizes()));
    apply_mask(p.update.param, m);
    offset += m.numel();
  }
  count_compressed_step();
}

// The frozen-variance LAMB step with the trust ratio from the frozen coefficient and the fresh
// variance (see the header).
void OneBitLamb::compressed_step(const Pending& p) {
  ParamState& state = *p.update.state;
  const double decay = *p.group->weight_decay;
  const FrozenStepNorms norms = p.update.param.device().is_cpu() ? frozen_step_norms_host(p) : frozen_step_norms(p);
  double factor = norms.largest_denom_ratio;
  if (decay > 0) {
    const double ratio = norms.update > 0 ? std::min(1.0, norms.prelim / norms.update) : 1.0;
    factor = factor * ratio + (1.0 - ratio);
  }
  factor = std::clamp(factor, options_.factor_min, options_.factor_max);
  double& last = state.scalars[kLastFactor];
  factor = std::clamp(factor, last * (1.0 - options_.factor_threshold), last * (1.0 + options_.factor_threshold));
  last = factor;
  const double coeff = state.scalars[kCoeffFreeze] * factor;
  lamb_coeffs_.push_back(coeff);
  const ParamState& s = *p.update.state;
  frozen_variance_step(p.update.param, s.buffers[0], s.buffers[1], *p.group->lr * coeff, options_.eps, decay);
}

// ĝ = (m - β1·m_before)/(1-β1) into the fresh variance; the norms of m/(√v + eps) (prelim) and of
// prelim + decay·p (update); the largest (√v + eps)/(√v' + eps). Tensor ops, for any device.
OneBitLamb::FrozenStepNorms OneBitLamb::frozen_step_norms(const Pending& p) const {
  const ParamState& state = *p.update.state;
  const Tensor& m = state.buffers[0];
  Tensor fresh = state.buffers[2];
  const double beta1 = options_.betas[0], beta2 = options_.betas[1], eps = options_.eps;
  const double decay = *p.group->weight_decay;
  const Tensor gradient = div(sub(m, mul(p.momentum_before, beta1)), 1.0 - beta1);
  mul_(fresh, beta2);
  add_(fresh, mul(mul(gradient, gradient), 1.0 - beta2));
  const Tensor denom = add(sqrt(state.buffers[1]), eps);
  const Tensor prelim = div(m, denom);
  FrozenStepNorms norms;
  norms.largest_denom_ratio = max(div(denom, add(sqrt(fresh), eps))).item();
  norms.prelim = global_norm({prelim});
  norms.update = decay > 0 ? global_norm({add(prelim, mul(p.update.param, decay))}) : norms.prelim;
  return norms;
}

// The same in one pass over host memory (the hot path: ~15 tensor passes become one).
OneBitLamb::FrozenStepNorms OneBitLamb::frozen_step_norms_host(const Pending& p) const {
  const ParamState& state = *p.update.state;
  const float* m = static_cast<const float*>(state.buffers[0].raw_data());
  const float* before = static_cast<const float*>(p.momentum_before.raw_data());
  const float* v = static_cast<const float*>(state.buffers[1].raw_data());
  float* fresh = static_cast<float*>(state.buffers[2].raw_data());
  const float* w = static_cast<const float*>(p.update.param.raw_data());
  const float beta1 = static_cast<float>(options_.betas[0]), beta2 = static_cast<float>(options_.betas[1]);
  const float eps = static_cast<float>(options_.eps), decay = static_cast<float>(*p.group->weight_decay);
  const float inv_one_minus_beta1 = static_cast<float>(1.0 / (1.0 - options_.betas[0]));
  const int64_t n = p.update.param.numel();
  // Sums per fixed chunk, added in chunk order: the same bits at any thread count.
  constexpr int64_t kChunk = 8192;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> prelim_sq(static_cast<size_t>(chunks)), update_sq(static_cast<size_t>(chunks));
  std::vector<float> largest(static_cast<size_t>(chunks));
#pragma omp parallel for num_threads(host_threads(n)) schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    double prelims = 0, updates = 0;
    float most = 0;
    for (int64_t i = c * kChunk, end = std::min(n, i + kChunk); i < end; ++i) {
      const float g = (m[i] - beta1 * before[i]) * inv_one_minus_beta1;
      fresh[i] = beta2 * fresh[i] + (1.0f - beta2) * g * g;
      const float denom = std::sqrt(v[i]) + eps;
      const float prelim = m[i] / denom;
      const float update = prelim + decay * w[i];
      prelims += static_cast<double>(prelim) * prelim;
      updates += static_cast<double>(update) * update;
      most = std::max(most, denom / (std::sqrt(fresh[i]) + eps));
    }
    prelim_sq[c] = prelims;
    update_sq[c] = updates;
    largest[c] = most;
  }
  FrozenStepNorms norms;
  double prelims = 0, updates = 0;
  for (int64_t c = 0; c < chunks; ++c) {
    prelims += prelim_sq[c];
    updates += update_sq[c];
    norms.largest_denom_ratio = std::max<double>(norms.largest_denom_ratio, largest[c]);
  }
  norms.prelim = std::sqrt(prelims);
  norms.update = std::sqrt(updates);
  return norms;
}

std::vector<Tensor> OneBitLamb::rank_local_state() const {
  if (!errors_) return {};
  return {errors_->worker, errors_->server};
}

void OneBitLamb::load_rank_local_state(const std::vector<Tensor>& state) {
  FATHOM_CHECK(state.empty() || state.size() == 2, "OneBitLamb: its error-feedback state is one worker and one "
               "server buffer, got ", state.size(), " tensors; the checkpoint is from another optimizer");
  loaded_errors_.clear();
  for (const Tensor& t : state) loaded_errors_.push_back(t.clone());
  errors_.reset();  // rebuilt at the next compressed step, from these
}

}  // namespace fathom::parallel
