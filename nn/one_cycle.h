#pragma once
// OneCycle (DeepSpeed v0.16): the 1cycle policy — lr rises from cycle_min_lr to cycle_max_lr over
// cycle_first_step_size steps, falls back over cycle_second_step_size steps, then decays; the
// momentum (Adam's beta1) moves the opposite way between cycle_max_mom and cycle_min_mom.
//
// With b = t + 1 (t = last_batch_iteration), S = first + second step sizes, p = first / S:
//   x = 1 + b/S - floor(1 + b/S);  s = x/p if x <= p else (x - 1)/(p - 1)
//   t < S:  lr = min_lr + (max_lr - min_lr) * s;   mom = max_mom - (max_mom - min_mom) * s
//   t >= S (decay, i = (t - S + 1) / decay_step_size, a fraction, not a staircase):
//           lr = min_lr / (1 + decay_lr_rate * i);  mom = max_mom * (1 + decay_mom_rate * i)
//           (no decay — lr = min_lr, mom = max_mom — when decay_step_size or the rate is 0)
// The stair counts are accepted but, as in DeepSpeed, unused. DeepSpeed writes (mom, 0.99) into
// each group's betas, replacing beta2 too; betas() reports exactly that pair. Before the first
// step() the lr in force is cycle_min_lr and the betas (cycle_min_mom, 0.99).

#include <optional>
#include <utility>
#include <vector>

#include "nn/lr_schedule.h"

namespace fathom::nn {

struct OneCycleConfig {
  double cycle_min_lr = 0.0;  // required
  double cycle_max_lr = 0.0;  // required
  double decay_lr_rate = 0.0;
  int64_t cycle_first_step_size = 2000;
  std::optional<int64_t> cycle_second_step_size;  // default: cycle_first_step_size
  int64_t cycle_first_stair_count = 0;
  std::optional<int64_t> cycle_second_stair_count;  // default: cycle_first_stair_count
  int64_t decay_step_size = 0;
  bool cycle_momentum = true;
  double cycle_min_mom = 0.8;
  double cycle_max_mom = 0.9;
  double decay_mom_rate = 0.0;
  int64_t last_batch_iteration = -1;
};

class OneCycle : public LRScheduler {
 public:
  // The beta2 DeepSpeed pairs with the cycled momentum.
  static constexpr double kBeta2 = 0.99;

  OneCycle(const OneCycleConfig& config, std::vector<double> base_lrs);
  const char* type() const override { return "OneCycle"; }

  // The (beta1, beta2) in force for every group; nullopt when momentum is not cycled, or when
  // resuming (last_batch_iteration >= 0 at construction) until the first step().
  const std::optional<std::pair<double, double>>& betas() const { return betas_; }
  // What the schedule gives at the current step (DeepSpeed's get_mom()), nullopt without cycling.
  std::optional<double> compute_momentum() const;

 protected:
  std::vector<double> compute_lrs() const override;
  void after_update() override;

 private:
  double scale_factor() const;

  OneCycleConfig config_;
  double total_size_;
  double step_ratio_;
  bool skip_lr_decay_;
  bool skip_mom_decay_;
  std::optional<std::pair<double, double>> betas_;
};

OneCycleConfig read_one_cycle_config(const LRParamMap& params);

}  // namespace fathom::nn
