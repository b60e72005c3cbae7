#include "nn/one_cycle.h"

#include <cmath>

#include "core/error.h"
#include "nn/lr_schedule_params.h"

namespace fathom::nn {

OneCycle::OneCycle(const OneCycleConfig& config, std::vector<double> base_lrs)
    : LRScheduler(std::move(base_lrs), config.last_batch_iteration), config_(config) {
  const char* type = "OneCycle";
  FATHOM_CHECK(config.cycle_first_step_size >= 1, type, ": cycle_first_step_size must be >= 1, got ",
               config.cycle_first_step_size);
  const int64_t second = config.cycle_second_step_size.value_or(config.cycle_first_step_size);
  FATHOM_CHECK(second >= 0, type, ": cycle_second_step_size must be >= 0, got ", second);
  FATHOM_CHECK(config.decay_step_size >= 0, type, ": decay_step_size must be >= 0, got ", config.decay_step_size);
  check_at_least(type, "cycle_min_lr", config.cycle_min_lr, 0.0);
  check_at_least(type, "cycle_max_lr", config.cycle_max_lr, 0.0);
  check_at_least(type, "decay_lr_rate", config.decay_lr_rate, 0.0);
  check_at_least(type, "decay_mom_rate", config.decay_mom_rate, 0.0);
  check_in_unit_interval(type, "cycle_min_mom", config.cycle_min_mom);
  check_in_unit_interval(type, "cycle_max_mom", config.cycle_max_mom);

  total_size_ = static_cast<double>(config.cycle_first_step_size) + static_cast<double>(second);
  step_ratio_ = static_cast<double>(config.cycle_first_step_size) / total_size_;
  // DeepSpeed tests these with math.isclose(x, 0), which is true only for exactly 0.
  skip_lr_decay_ = config.decay_step_size == 0 || config.decay_lr_rate == 0.0;
  skip_mom_decay_ = config.decay_step_size == 0 || config.decay_mom_rate == 0.0;

  if (config.last_batch_iteration == -1) {
    // DeepSpeed sets these directly (not through get_lr), before any step.
    update_lrs();
    if (config.cycle_momentum) betas_ = std::make_pair(config.cycle_min_mom, kBeta2);
  }
}

double OneCycle::scale_factor() const {
  const double batch_iteration = static_cast<double>(last_batch_iteration() + 1);
  const double cycle = std::floor(1.0 + batch_iteration / total_size_);
  const double x = 1.0 + batch_iteration / total_size_ - cycle;
  return x <= step_ratio_ ? x / step_ratio_ : (x - 1.0) / (step_ratio_ - 1.0);
}

std::vector<double> OneCycle::compute_lrs() const {
  const double t = static_cast<double>(last_batch_iteration());
  double lr;
  if (t < total_size_) {
    lr = config_.cycle_min_lr + (config_.cycle_max_lr - config_.cycle_min_lr) * scale_factor();
  } else if (skip_lr_decay_) {
    lr = config_.cycle_min_lr;
  } else {
    const double decay_interval = (t - total_size_ + 1.0) / static_cast<double>(config_.decay_step_size);
    lr = config_.cycle_min_lr / (1.0 + config_.decay_lr_rate * decay_interval);
  }
  return std::vector<double>(num_groups(), lr);
}

std::optional<double> OneCycle::compute_momentum() const {
  if (!config_.cycle_momentum) return std::nullopt;
  const double t = static_cast<double>(last_batch_iteration());
  if (t < total_size_) return config_.cycle_max_mom - (config_.cycle_max_mom - config_.cycle_min_mom) * scale_factor();
  if (skip_mom_decay_) return config_.cycle_max_mom;
  const double decay_interval = (t - total_size_ + 1.0) / static_cast<double>(config_.decay_step_size);
  return config_.cycle_max_mom * (1.0 + config_.decay_mom_rate * decay_interval);
}

void OneCycle::after_update() {
  if (const std::optional<double> momentum = compute_momentum()) betas_ = std::make_pair(*momentum, kBeta2);
}

OneCycleConfig read_one_cycle_config(const LRParamMap& params) {
  const LRParamReader reader(
      "OneCycle", params,
      {"cycle_min_lr", "cycle_max_lr", "decay_lr_rate", "cycle_first_step_size", "cycle_second_step_size",
       "cycle_first_stair_count", "cycle_second_stair_count", "decay_step_size", "cycle_momentum", "cycle_min_mom",
       "cycle_max_mom", "decay_mom_rate", "last_batch_iteration"});
  OneCycleConfig config;
  config.cycle_min_lr = reader.required_number("cycle_min_lr");
  config.cycle_max_lr = reader.required_number("cycle_max_lr");
  config.decay_lr_rate = reader.number("decay_lr_rate", config.decay_lr_rate);
  config.cycle_first_step_size = reader.integer("cycle_first_step_size", config.cycle_first_step_size);
  config.cycle_second_step_size = reader.optional_integer("cycle_second_step_size");
  config.cycle_first_stair_count = reader.integer("cycle_first_stair_count", config.cycle_first_stair_count);
  config.cycle_second_stair_count = reader.optional_integer("cycle_second_stair_count");
  config.decay_step_size = reader.integer("decay_step_size", config.decay_step_size);
  config.cycle_momentum = reader.boolean("cycle_momentum", config.cycle_momentum);
  config.cycle_min_mom = reader.number("cycle_min_mom", config.cycle_min_mom);
  config.cycle_max_mom = reader.number("cycle_max_mom", config.cycle_max_mom);
  config.decay_mom_rate = reader.number("decay_mom_rate", config.decay_mom_rate);
  config.last_batch_iteration = reader.integer("last_batch_iteration", config.last_batch_iteration);
  return config;
}

}  // namespace fathom::nn
