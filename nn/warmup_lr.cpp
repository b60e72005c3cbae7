#include "nn/warmup_lr.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "nn/lr_schedule_params.h"

namespace fathom::nn {
namespace {

void validate(const char* type, const WarmupLRConfig& config) {
  check_at_least(type, "warmup_min_lr", config.warmup_min_lr, 0.0);
  check_at_least(type, "warmup_max_lr", config.warmup_max_lr, 0.0);
  FATHOM_CHECK(config.warmup_num_steps >= 0, type, ": warmup_num_steps must be >= 0, got ", config.warmup_num_steps,
               " (values below 2 are raised to 2, as in DeepSpeed)");
  check_warmup_type(type, config.warmup_type);
}

void read_warmup(const LRParamReader& reader, WarmupLRConfig& config) {
  config.warmup_min_lr = reader.number("warmup_min_lr", config.warmup_min_lr);
  config.warmup_max_lr = reader.number("warmup_max_lr", config.warmup_max_lr);
  config.warmup_num_steps = reader.integer("warmup_num_steps", config.warmup_num_steps);
  config.warmup_type = reader.string("warmup_type", config.warmup_type);
  config.last_batch_iteration = reader.integer("last_batch_iteration", config.last_batch_iteration);
}

}  // namespace

WarmupLR::WarmupLR(const char* type, const WarmupLRConfig& config, std::vector<double> base_lrs)
    : LRScheduler(std::move(base_lrs), config.last_batch_iteration),
      min_lr_(config.warmup_min_lr),
      delta_lr_(config.warmup_max_lr - config.warmup_min_lr),
      warmup_num_steps_(std::max<int64_t>(2, config.warmup_num_steps)),
      log_warmup_(config.warmup_type == "log"),
      inverse_log_warmup_(1.0 / std::log(static_cast<double>(warmup_num_steps_))) {
  validate(type, config);
}

WarmupLR::WarmupLR(const WarmupLRConfig& config, std::vector<double> base_lrs)
    : WarmupLR("WarmupLR", config, std::move(base_lrs)) {
  // DeepSpeed writes the initial lr into the optimizer only when starting from the beginning.
  if (config.last_batch_iteration == -1) update_lrs();
}

std::vector<double> WarmupLR::compute_lrs() const {
  const double lr = last_batch_iteration() < 0 ? min_lr_ : min_lr_ + delta_lr_ * gamma();
  return std::vector<double>(num_groups(), lr);
}

double WarmupLR::warmup_gamma() const {
  const int64_t t = last_batch_iteration();
  if (log_warmup_) return inverse_log_warmup_ * std::log(static_cast<double>(t + 1));
  return static_cast<double>(t) / static_cast<double>(warmup_num_steps_);
}

double WarmupLR::gamma() const { return last_batch_iteration() < warmup_num_steps_ ? warmup_gamma() : 1.0; }

WarmupDecayLR::WarmupDecayLR(const WarmupDecayLRConfig& config, std::vector<double> base_lrs)
    : WarmupLR("WarmupDecayLR", config, std::move(base_lrs)), total_num_steps_(config.total_num_steps) {
  // DeepSpeed only warns when total_num_steps < warmup_num_steps (the decay then starts above
  // zero and falls to 0 at total_num_steps); that is kept, a non-positive total is not.
  FATHOM_CHECK(config.total_num_steps > 0, "WarmupDecayLR: total_num_steps must be > 0, got ", config.total_num_steps);
  warn_if_total_below_warmup("WarmupDecayLR", config.total_num_steps, warmup_num_steps());
  if (config.last_batch_iteration == -1) update_lrs();
}

double WarmupDecayLR::gamma() const {
  const int64_t t = last_batch_iteration();
  if (t < warmup_num_steps()) return warmup_gamma();
  return std::max(0.0, static_cast<double>(total_num_steps_ - t) /
                           std::max(1.0, static_cast<double>(total_num_steps_ - warmup_num_steps())));
}

WarmupLRConfig read_warmup_lr_config(const LRParamMap& params) {
  const LRParamReader reader("WarmupLR", params,
                             {"warmup_min_lr", "warmup_max_lr", "warmup_num_steps", "warmup_type", "last_batch_iteration"});
  WarmupLRConfig config;
  read_warmup(reader, config);
  return config;
}

WarmupDecayLRConfig read_warmup_decay_lr_config(const LRParamMap& params) {
  const LRParamReader reader("WarmupDecayLR", params,
                             {"total_num_steps", "warmup_min_lr", "warmup_max_lr", "warmup_num_steps", "warmup_type",
                              "last_batch_iteration"});
  WarmupDecayLRConfig config;
  config.total_num_steps = reader.required_integer("total_num_steps");
  read_warmup(reader, config);
  return config;
}

}  // namespace fathom::nn
