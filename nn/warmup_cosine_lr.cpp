#include "nn/warmup_cosine_lr.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.h"
#include "nn/lr_schedule_params.h"

namespace fathom::nn {

WarmupCosineLR::WarmupCosineLR(const WarmupCosineLRConfig& config, std::vector<double> base_lrs)
    : LRScheduler(std::move(base_lrs), config.last_batch_iteration),
      config_(config),
      warmup_num_steps_(std::max<int64_t>(2, config.warmup_num_steps)),
      inverse_log_warmup_(1.0 / std::log(static_cast<double>(warmup_num_steps_))) {
  const char* type = "WarmupCosineLR";
  FATHOM_CHECK(config.total_num_steps > 0, type, ": total_num_steps must be > 0, got ", config.total_num_steps);
  FATHOM_CHECK(config.warmup_num_steps >= 0, type, ": warmup_num_steps must be >= 0, got ", config.warmup_num_steps,
               " (values below 2 are raised to 2, as in DeepSpeed)");
  // T == W divides by zero in the cosine (DeepSpeed raises ZeroDivisionError at step W).
  FATHOM_CHECK(config.total_num_steps != warmup_num_steps_, type, ": total_num_steps (", config.total_num_steps,
               ") must differ from warmup_num_steps (", warmup_num_steps_,
               " after raising it to at least 2): the cosine phase would have zero length");
  warn_if_total_below_warmup(type, config.total_num_steps, warmup_num_steps_);
  check_in_unit_interval(type, "warmup_min_ratio", config.warmup_min_ratio);
  check_in_unit_interval(type, "cos_min_ratio", config.cos_min_ratio);
  check_warmup_type(type, config.warmup_type);
  for (const double lr : this->base_lrs()) check_at_least(type, "the optimizer's lr", lr, 0.0);
  if (config.last_batch_iteration == -1) update_lrs();
}

double WarmupCosineLR::lr_ratio() const {
  const int64_t t = last_batch_iteration();
  if (t < 0) return 0.0;
  if (t < warmup_num_steps_) {
    const double r = config_.warmup_type == "log" ? inverse_log_warmup_ * std::log(static_cast<double>(t + 1))
                                                  : static_cast<double>(t) / static_cast<double>(warmup_num_steps_);
    return config_.warmup_min_ratio + r * (1.0 - config_.warmup_min_ratio);
  }
  const double real_last_step = static_cast<double>(t - warmup_num_steps_ + 1);
  const double real_total_steps = static_cast<double>(config_.total_num_steps - warmup_num_steps_);
  const double c = (1.0 + std::cos(std::numbers::pi * real_last_step / real_total_steps)) / 2.0;
  return std::max(0.0, config_.cos_min_ratio + (1.0 - config_.cos_min_ratio) * c);
}

std::vector<double> WarmupCosineLR::compute_lrs() const {
  if (last_batch_iteration() < 0) return {0.0};  // DeepSpeed's [0.0]: group 0 only
  const double ratio = lr_ratio();
  std::vector<double> lrs;
  for (const double base : base_lrs()) lrs.push_back(base * ratio);
  return lrs;
}

WarmupCosineLRConfig read_warmup_cosine_lr_config(const LRParamMap& params) {
  const LRParamReader reader("WarmupCosineLR", params,
                             {"total_num_steps", "warmup_min_ratio", "warmup_num_steps", "cos_min_ratio", "warmup_type",
                              "last_batch_iteration"});
  WarmupCosineLRConfig config;
  config.total_num_steps = reader.required_integer("total_num_steps");
  config.warmup_min_ratio = reader.number("warmup_min_ratio", config.warmup_min_ratio);
  config.warmup_num_steps = reader.integer("warmup_num_steps", config.warmup_num_steps);
  config.cos_min_ratio = reader.number("cos_min_ratio", config.cos_min_ratio);
  config.warmup_type = reader.string("warmup_type", config.warmup_type);
  config.last_batch_iteration = reader.integer("last_batch_iteration", config.last_batch_iteration);
  return config;
}

}  // namespace fathom::nn
