#include "engine/loss_scaler.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string>

#include "core/error.h"
#include "engine/config/config.h"

namespace fathom {

namespace {

// DeepSpeed's scale_factor: the fp16 config has no key for it, so it is always 2.
constexpr double kScaleFactor = 2.0;

// Shortest round-trip text, so 2^32 reads 4294967296 rather than 4.29497e+09 in messages.
std::string number(double value) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

void check_options(const LossScalerOptions& o) {
  FATHOM_CHECK(std::isfinite(o.loss_scale) && o.loss_scale >= 0, "fp16.loss_scale must be a finite number >= 0, got ",
               number(o.loss_scale), ": use 0 for dynamic loss scaling or a positive static scale such as 128");
  FATHOM_CHECK(o.initial_scale_power >= 0 && o.initial_scale_power <= 127,
               "fp16.initial_scale_power must be an integer in [0, 127], got ", o.initial_scale_power,
               ": the first dynamic scale is 2^initial_scale_power and must stay a finite float32; DeepSpeed's "
               "default is 16");
  FATHOM_CHECK(o.loss_scale_window >= 1, "fp16.loss_scale_window must be >= 1, got ", o.loss_scale_window,
               ": it is the number of clean steps before the scale doubles; DeepSpeed's default is 1000");
  // DeepSpeed accepts hysteresis 0 or below, but then cur_hysteresis counts down past 1 forever
  // and the scale never drops: every later step overflows and is skipped.
  FATHOM_CHECK(o.hysteresis >= 1, "fp16.hysteresis must be >= 1, got ", o.hysteresis,
               ": it is the number of overflows tolerated before the scale halves (1 = halve on every "
               "overflow); DeepSpeed's default is 2");
  FATHOM_CHECK(std::isfinite(o.min_loss_scale) && o.min_loss_scale > 0,
               "fp16.min_loss_scale must be a finite number > 0, got ", number(o.min_loss_scale),
               ": a zero scale would zero every gradient; DeepSpeed's default is 1");
  // DeepSpeed would, on the first overflow, "halve" such a scale to max(scale / 2, min) — a rise.
  if (o.loss_scale == 0) {
    const double initial = std::ldexp(1.0, static_cast<int>(o.initial_scale_power));
    FATHOM_CHECK(initial >= o.min_loss_scale, "fp16 initial loss scale 2^", o.initial_scale_power, " = ",
                 number(initial), " is below fp16.min_loss_scale (", number(o.min_loss_scale),
                 "): an overflow would raise the scale; raise initial_scale_power or lower min_loss_scale");
  }
}

}  // namespace

LossScalerOptions from_config(const Fp16Config& fp16) {
  LossScalerOptions o;
  o.loss_scale = fp16.loss_scale;
  o.initial_scale_power = fp16.initial_scale_power;
  o.loss_scale_window = fp16.loss_scale_window;
  o.hysteresis = fp16.hysteresis;
  o.consecutive_hysteresis = fp16.consecutive_hysteresis;
  o.min_loss_scale = fp16.min_loss_scale;
  return o;
}

LossScaler::LossScaler(const LossScalerOptions& options) : options_(options) {
  check_options(options_);
  dynamic_ = options_.loss_scale == 0;
  scale_ = dynamic_ ? std::ldexp(1.0, static_cast<int>(options_.initial_scale_power)) : options_.loss_scale;
  cur_hysteresis_ = options_.hysteresis;
}

void LossScaler::update(bool overflow) {
  if (!dynamic_) {
    // DeepSpeed's static LossScaler.update_scale is a no-op; the step is still skipped.
    if (overflow) {
      last_overflow_iter_ = cur_iter_;
      ++overflows_;
      ++skipped_steps_;
    }
    ++cur_iter_;
    return;
  }

  if (overflow) {
    if (options_.hysteresis == 1 || cur_hysteresis_ == 1) {
      // DeepSpeed compares with == too: halving clamps to min_loss_scale exactly, so the scale
      // lands on it even when it is not a power of two.
      if (scale_ == options_.min_loss_scale) {
        const std::string at_scale =
            options_.min_loss_scale == 1 ? "even unscaled" : "even at scale " + number(options_.min_loss_scale);
        FATHOM_FAIL("fp16 overflow at the minimum loss scale (", number(options_.min_loss_scale),
                    ") with hysteresis exhausted, at optimizer step ", cur_iter_, ": the gradients overflow ",
                    at_scale, ", which usually means training has diverged (DeepSpeed stops here too); train in "
                    "bf16 (\"bf16\": {\"enabled\": true}), or resume from an earlier checkpoint with a lower lr or "
                    "gradient clipping (\"gradient_clipping\": 1.0)",
                    options_.min_loss_scale > 1 ? ", or lower fp16.min_loss_scale" : "");
      }
      scale_ = std::max(scale_ / kScaleFactor, options_.min_loss_scale);
    } else {
      --cur_hysteresis_;
    }
    last_overflow_iter_ = cur_iter_;
    ++overflows_;
    ++skipped_steps_;
  } else {
    if (options_.consecutive_hysteresis) cur_hysteresis_ = options_.hysteresis;
    // Counts from the last overflow, absorbed ones included; before any, from iteration -1, so
    // the first growth comes after exactly loss_scale_window clean steps.
    if ((cur_iter_ - last_overflow_iter_) % options_.loss_scale_window == 0) {
      if (!options_.consecutive_hysteresis) cur_hysteresis_ = options_.hysteresis;
      scale_ *= kScaleFactor;
    }
  }
  ++cur_iter_;
}

LossScalerState LossScaler::state() const {
  LossScalerState s;
  s.dynamic = dynamic_;
  s.scale = scale_;
  s.cur_iter = cur_iter_;
  s.last_overflow_iter = last_overflow_iter_;
  s.cur_hysteresis = cur_hysteresis_;
  s.skipped_steps = skipped_steps_;
  s.overflows = overflows_;
  return s;
}

void LossScaler::load_state(const LossScalerState& s) {
  const char* mode = [](bool dynamic) { return dynamic ? "dynamic" : "static"; }(dynamic_);
  FATHOM_CHECK(s.dynamic == dynamic_, "loss scaler checkpoint is ", s.dynamic ? "dynamic" : "static",
               " but fp16.loss_scale (", number(options_.loss_scale), ") makes this run ", mode,
               ": set fp16.loss_scale as in the run that wrote the checkpoint (0 = dynamic)");
  if (dynamic_) {
    FATHOM_CHECK(std::isfinite(s.scale) && s.scale >= options_.min_loss_scale, "loss scaler checkpoint has scale ",
                 number(s.scale), ", below fp16.min_loss_scale (", number(options_.min_loss_scale),
                 ") or not finite: set min_loss_scale as in the run that wrote the checkpoint");
    FATHOM_CHECK(s.cur_hysteresis >= 1 && s.cur_hysteresis <= options_.hysteresis,
                 "loss scaler checkpoint has cur_hysteresis ", s.cur_hysteresis, ", outside [1, fp16.hysteresis = ",
                 options_.hysteresis, "]: set hysteresis as in the run that wrote the checkpoint (or higher)");
  } else {
    FATHOM_CHECK(s.scale == options_.loss_scale, "loss scaler checkpoint has static scale ", number(s.scale),
                 " but fp16.loss_scale is ", number(options_.loss_scale),
                 ": set fp16.loss_scale to the checkpoint's value to resume the same run");
  }
  FATHOM_CHECK(s.cur_iter >= 0 && s.last_overflow_iter >= -1 && s.last_overflow_iter < s.cur_iter,
               "loss scaler checkpoint is inconsistent: cur_iter ", s.cur_iter, ", last_overflow_iter ",
               s.last_overflow_iter, " (expected 0 <= cur_iter and -1 <= last_overflow_iter < cur_iter)");
  FATHOM_CHECK(s.overflows >= 0 && s.skipped_steps >= 0 && s.overflows <= s.cur_iter && s.skipped_steps <= s.cur_iter,
               "loss scaler checkpoint is inconsistent: ", s.overflows, " overflows and ", s.skipped_steps,
               " skipped steps in ", s.cur_iter, " steps (expected 0 <= each <= cur_iter)");
  scale_ = s.scale;
  cur_iter_ = s.cur_iter;
  last_overflow_iter_ = s.last_overflow_iter;
  if (dynamic_) cur_hysteresis_ = s.cur_hysteresis;  // a static scaler never uses it
  skipped_steps_ = s.skipped_steps;
  overflows_ = s.overflows;
}

}  // namespace fathom
