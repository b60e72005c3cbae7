#pragma once
// WarmupCosineLR (DeepSpeed v0.16): scales each group's own lr (the optimizer's configured lr)
// by a ratio that warms up from warmup_min_ratio to 1 and then follows a cosine to cos_min_ratio.
// For step t = last_batch_iteration, W = max(2, warmup_num_steps), T = total_num_steps:
//   t < W:  r = log(t + 1) / log(W)  ("log")  or  t / W  ("linear");
//           ratio = warmup_min_ratio + r * (1 - warmup_min_ratio)
//   t >= W: c = (1 + cos(pi * (t - W + 1) / (T - W))) / 2;
//           ratio = max(0, cos_min_ratio + (1 - cos_min_ratio) * c)
//   lr = base_lr * ratio
// Before the first step() DeepSpeed sets the lr to 0.0 — for the first parameter group only
// (its get_lr() returns the one-element list [0.0]); other groups keep their base lr. Kept as is.

#include <string>
#include <vector>

#include "nn/lr_schedule.h"

namespace fathom::nn {

struct WarmupCosineLRConfig {
  int64_t total_num_steps = 0;  // required
  double warmup_min_ratio = 0.0;
  int64_t warmup_num_steps = 1000;  // DeepSpeed raises values below 2 to 2
  double cos_min_ratio = 0.0001;
  std::string warmup_type = "log";  // "log" or "linear"
  int64_t last_batch_iteration = -1;
};

class WarmupCosineLR : public LRScheduler {
 public:
  WarmupCosineLR(const WarmupCosineLRConfig& config, std::vector<double> base_lrs);
  const char* type() const override { return "WarmupCosineLR"; }
  int64_t warmup_num_steps() const { return warmup_num_steps_; }
  // The ratio applied to every base lr at the current step (0 before the first step).
  double lr_ratio() const;

 protected:
  std::vector<double> compute_lrs() const override;

 private:
  WarmupCosineLRConfig config_;
  int64_t warmup_num_steps_;
  double inverse_log_warmup_;
};

WarmupCosineLRConfig read_warmup_cosine_lr_config(const LRParamMap& params);

}  // namespace fathom::nn
