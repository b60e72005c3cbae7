#pragma once
// WarmupLR and WarmupDecayLR (DeepSpeed v0.16, deepspeed/runtime/lr_schedules.py).
//
// WarmupLR: lr = min_lr + (max_lr - min_lr) * gamma, with, for step t = last_batch_iteration,
//   gamma = log(t + 1) / log(W)  ("log")   or   t / W  ("linear")   while t < W,
//   gamma = 1                                                        after,
// where W = max(2, warmup_num_steps). Before the first step() the lr in force is min_lr.
// WarmupDecayLR: the same warmup, then gamma = max(0, (T - t) / max(1, T - W)), T = total_num_steps:
// a linear decay that reaches 0 at step T.

#include <string>
#include <vector>

#include "nn/lr_schedule.h"

namespace fathom::nn {

struct WarmupLRConfig {
  double warmup_min_lr = 0.0;
  double warmup_max_lr = 0.001;
  int64_t warmup_num_steps = 1000;  // DeepSpeed raises values below 2 to 2
  std::string warmup_type = "log";  // "log" or "linear"
  int64_t last_batch_iteration = -1;
};

struct WarmupDecayLRConfig : WarmupLRConfig {
  int64_t total_num_steps = 0;  // required
};

class WarmupLR : public LRScheduler {
 public:
  WarmupLR(const WarmupLRConfig& config, std::vector<double> base_lrs);
  const char* type() const override { return "WarmupLR"; }
  // After DeepSpeed's clamp: max(2, configured).
  int64_t warmup_num_steps() const { return warmup_num_steps_; }

 protected:
  WarmupLR(const char* type, const WarmupLRConfig& config, std::vector<double> base_lrs);  // no initial update
  std::vector<double> compute_lrs() const override;
  virtual double gamma() const;
  // The warmup part of gamma, for t < warmup_num_steps().
  double warmup_gamma() const;

 private:
  double min_lr_;
  double delta_lr_;
  int64_t warmup_num_steps_;
  bool log_warmup_;
  double inverse_log_warmup_;
};

class WarmupDecayLR : public WarmupLR {
 public:
  WarmupDecayLR(const WarmupDecayLRConfig& config, std::vector<double> base_lrs);
  const char* type() const override { return "WarmupDecayLR"; }

 protected:
  double gamma() const override;

 private:
  int64_t total_num_steps_;
};

// Config from a parameter map, checking names and kinds (make_lr_scheduler uses these).
WarmupLRConfig read_warmup_lr_config(const LRParamMap& params);
WarmupDecayLRConfig read_warmup_decay_lr_config(const LRParamMap& params);

}  // namespace fathom::nn
