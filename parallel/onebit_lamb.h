#pragma once
// 1-bit LAMB (Li et al. 2021), as DeepSpeed implements it (deepspeed/runtime/fp16/onebit/lamb.py):
//
//   step 1:               DeepSpeed's initialisation step: nothing moves, not even the moments.
//   steps 2 .. W:         warm-up, W = max(freeze_step, 2): LAMB on the gradient the engine
//                         averaged at full precision — no bias correction, eps outside the root:
//                           m = β1·m + (1-β1)·g,  v = β2·v + (1-β2)·g²
//                           u = m / (√v + eps) + weight_decay·p
//                           c = clamp(|p| / |u|, min_coeff, max_coeff)  (1 when either norm is 0)
//                           p -= lr·c·u
//                         and the trust ratio's running mean, c_frozen = coeff_beta·c_frozen +
//                         (1-coeff_beta)·c, over the steps where c ≠ 1. At step W a copy of v
//                         starts as the "fresh" variance.
//   after W (compressed): v is frozen and the engine no longer averages gradients. Each rank folds
//                         its own gradient into m; every momentum is scaled by s = (mean over
//                         parameters of |m|/√n) / (its |m|/√n), fixed at the first compressed step,
//                         so that one scale suits them all; all momenta go through the 1-bit
//                         compressed all-reduce as ONE buffer (parallel/compressed_allreduce.h),
//                         and are unscaled. The gradient is reconstructed from the momentum,
//                         ĝ = (m - β1·m_before)/(1-β1), and feeds the fresh variance v' = β2·v' +
//                         (1-β2)·ĝ². The trust ratio is c_frozen times a factor: the largest
//                         ratio (√v + eps)/(√v' + eps), blended towards 1 by the share of the
//                         update that weight decay does not make, clamped to [factor_min,
//                         factor_max] and to ±factor_threshold of the last step's factor.
//
// State: per parameter "exp_avg", "exp_avg_sq", "exp_avg_sq_fresh" and the scalars
// "lamb_coeff_freeze", "last_factor", "scaling_coeff" (0 until the first compressed step) — the
// same on every rank, checkpointed at any world size; the error buffers of the one compressed
// buffer are this rank's, kept across a checkpoint at the same world size (DeepSpeed resets them).
//
// Where DeepSpeed differs: its fresh variance is copied only when the step count equals
// freeze_step, so freeze_step 0 or 1 leaves it zero; here it is copied at W. A parameter whose
// momentum is exactly zero at the first compressed step gets scaling coefficient 1 (DeepSpeed's
// divides by zero).

#include <array>
#include <memory>
#include <optional>
#include <string>

#include "parallel/compressed_optimizer.h"

namespace fathom::parallel {

struct OneBitLambOptions {
  double lr = 1e-3;
  std::array<double, 2> betas{0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0.0;
  double max_coeff = 10.0;  // DeepSpeed's defaults
  double min_coeff = 0.01;
  int64_t freeze_step = 100000;
  double coeff_beta = 0.9;
  double factor_max = 4.0;
  double factor_min = 0.5;
  double factor_threshold = 0.1;
};

class OneBitLamb final : public CompressedOptimizer {
 public:
  // `data_group`: the ranks that average (the engine's data-parallel group).
  OneBitLamb(std::vector<nn::ParamGroup> groups, OneBitLambOptions options, std::shared_ptr<Communicator> data_group);

  const OneBitLambOptions& options() const { return options_; }
  // From the steps taken (so a resumed run knows too): steps after max(freeze_step, 2) compress.
  bool compressing() const;
  bool wants_reduced_gradients() const override { return !compressing(); }
  // The trust ratios of the last step, one per updated parameter in group order.
  const std::vector<double>& lamb_coeffs() const { return lamb_coeffs_; }

  // The error-feedback buffers of the compressed momentum (worker, server), kept by checkpoints.
  std::vector<Tensor> rank_local_state() const override;
  void load_rank_local_state(const std::vector<Tensor>& state) override;

 protected:
  std::vector<std::string> state_names() const override { return {"exp_avg", "exp_avg_sq", "exp_avg_sq_fresh"}; }
  std::vector<ScalarState> scalar_states() const override {
    return {{"lamb_coeff_freeze", 0.0}, {"last_factor", 1.0}, {"scaling_coeff", 0.0}};
  }
  void update_group(const nn::ParamGroup& group, const std::vector<Update>& updates) override;
  void begin_step() override;
  void end_step() override;

 private:
  // A parameter waiting, between update_group and end_step, for the compressed momentum.
  struct Pending {
    const nn::ParamGroup* group;
    Update update;
    Tensor momentum_before;  // m before this step's gradient: ĝ's reconstruction needs it
  };
  int64_t last_warmup_step() const { return std::max<int64_t>(options_.freeze_step, 2); }
  void warmup_step(const nn::ParamGroup& group, const Update& u);
  void set_scaling_coefficients();
  void compress_momenta();
  void compressed_step(const Pending& p);
  struct FrozenStepNorms {
    double largest_denom_ratio = 0, prelim = 0, update = 0;
  };
  FrozenStepNorms frozen_step_norms(const Pending& p) const;
  FrozenStepNorms frozen_step_norms_host(const Pending& p) const;

  OneBitLambOptions options_;
  std::vector<Pending> pending_;
  std::vector<double> lamb_coeffs_;
  std::vector<Tensor> loaded_errors_;      // from a checkpoint: adopted at the first compressed step
  std::optional<CompressionErrors> errors_;  // of the one compressed buffer; unset until the freeze
};

}  // namespace fathom::parallel
