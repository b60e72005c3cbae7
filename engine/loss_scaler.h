#pragma once
// fp16 loss scaling with DeepSpeed's exact semantics (deepspeed/runtime/fp16/loss_scaler.py,
// v0.16.0: DynamicLossScaler.update_scale, which ZeRO stages 1-3 use), so that a DeepSpeed fp16
// config skips the same steps and uses the same scales in Fathom. The scaler only does the
// bookkeeping: the engine multiplies the loss by scale(), checks the gradients for Inf/NaN,
// skips the optimizer step on overflow and calls update(overflow) once per optimizer step.
//
// Dynamic policy (loss_scale == 0), per update(overflow), in DeepSpeed's order:
//   overflow: if hysteresis == 1 or cur_hysteresis == 1, the scale halves (never below
//             min_loss_scale) — or, when the scale already is min_loss_scale, Fathom throws where
//             DeepSpeed raises; otherwise cur_hysteresis drops by one and the scale stays.
//             Either way last_overflow_iter = cur_iter.
//   clean:    with consecutive_hysteresis, cur_hysteresis refills to hysteresis; then, if
//             (cur_iter - last_overflow_iter) % loss_scale_window == 0, the scale doubles (and,
//             without consecutive_hysteresis, cur_hysteresis refills).
//   then cur_iter += 1.
// Halving never refills hysteresis: once exhausted, every further overflow halves until a clean
// step refills it as above. Static scaling (loss_scale > 0) never changes the scale.
//
// Plain options rather than Config, so the engine layer's config code and this file do not
// depend on each other beyond from_config().

#include <cstdint>

namespace fathom {

struct Fp16Config;

// The "fp16" keys that drive loss scaling, with DeepSpeed's defaults.
struct LossScalerOptions {
  double loss_scale = 0;              // 0 = dynamic; > 0 = this static scale
  int64_t initial_scale_power = 16;   // dynamic: the first scale is 2^initial_scale_power
  int64_t loss_scale_window = 1000;   // clean steps since the last overflow before the scale doubles
  int64_t hysteresis = 2;             // overflows absorbed before the scale halves
  bool consecutive_hysteresis = false;  // refill hysteresis on every clean step
  double min_loss_scale = 1;          // the scale never halves below this
};

LossScalerOptions from_config(const Fp16Config& fp16);

// Everything a checkpoint needs to resume the same trajectory.
struct LossScalerState {
  bool dynamic = true;
  double scale = 0;
  int64_t cur_iter = 0;             // update() calls so far
  int64_t last_overflow_iter = -1;  // cur_iter of the last overflow; -1 = none yet
  int64_t cur_hysteresis = 0;
  int64_t skipped_steps = 0;
  int64_t overflows = 0;

  bool operator==(const LossScalerState&) const = default;
};

class LossScaler {
 public:
  // Throws fathom::Error naming the bad option and its valid range.
  explicit LossScaler(const LossScalerOptions& options = {});

  // The factor the loss is multiplied by for the next backward.
  double scale() const { return scale_; }
  bool dynamic() const { return dynamic_; }
  const LossScalerOptions& options() const { return options_; }

  // Once per optimizer step, with whether any gradient held Inf/NaN. Throws fathom::Error on an
  // overflow at min_loss_scale with hysteresis exhausted (dynamic only); the scaler is then left
  // exactly as before the call.
  void update(bool overflow);

  // Optimizer steps skipped because of an overflow (DeepSpeed's engine.skipped_steps). Every
  // overflow skips its step, static or dynamic, so today this equals overflows(); they are kept
  // apart because the engine reports and checkpoints skipped steps as their own counter.
  int64_t skipped_steps() const { return skipped_steps_; }
  int64_t overflows() const { return overflows_; }
  int64_t cur_hysteresis() const { return cur_hysteresis_; }
  int64_t cur_iter() const { return cur_iter_; }
  int64_t last_overflow_iter() const { return last_overflow_iter_; }

  LossScalerState state() const;
  // Throws fathom::Error (and changes nothing) when the state could not have come from a scaler
  // with these options: static vs dynamic, a scale below min_loss_scale, hysteresis out of range.
  void load_state(const LossScalerState& state);

 private:
  LossScalerOptions options_;
  bool dynamic_ = true;
  double scale_ = 1;
  int64_t cur_iter_ = 0;
  int64_t last_overflow_iter_ = -1;
  int64_t cur_hysteresis_ = 0;
  int64_t skipped_steps_ = 0;
  int64_t overflows_ = 0;
};

}  // namespace fathom
