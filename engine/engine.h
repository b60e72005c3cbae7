#pragma once
// The training engine: what deepspeed.initialize returns as `engine`.
//
//   auto out = engine(batch.inputs);          // forward
//   auto loss = nn::cross_entropy(out, batch.targets);
//   engine.backward(loss);                     // scaled by 1/gradient_accumulation_steps
//   engine.step();                             // acts at accumulation boundaries only
//
// DeepSpeed's semantics: backward divides the loss by gradient_accumulation_steps so that the
// accumulated gradient is the mean over the global batch; step() is called after every
// micro-batch and, at a boundary, clips by the global gradient norm, runs the optimizer,
// advances the LR schedule (and writes its lr into the optimizer) and zeroes the gradients.
//
// Mixed precision (bf16/fp16, set up by fathom::initialize): the model computes in 16 bits,
// the optimizer updates fp32 master weights. For fp16, backward also multiplies the loss by
// the loss scale; at the boundary an Inf/NaN gradient skips the step (weights, optimizer state
// and LR schedule untouched; the step still counts, as in DeepSpeed) and the scaler adapts.
//
// Data parallelism (set up by fathom::initialize with a communicator): the backward that ends
// an accumulation cycle averages gradients over the data-parallel ranks in buckets that start
// while backward runs (parallel/gradient_reducer.h); other backwards communicate nothing. The
// reported loss is the mean over the ranks.

#include <chrono>
#include <functional>
#include <optional>
#include <memory>
#include <string>

#include "engine/data_loader.h"
#include "engine/loss_scaler.h"
#include "engine/master_weights.h"
#include "nn/lr_schedule.h"
#include "nn/module.h"
#include "nn/optimizer.h"
#include "parallel/gradient_reducer.h"
#include "zero/zero_optimizer.h"

namespace fathom {

struct EngineOptions {
  int64_t micro_batch_size = 1;
  int64_t gradient_accumulation_steps = 1;
  int64_t dp_world_size = 1;
  double gradient_clipping = 0.0;  // 0: off
  int64_t steps_per_print = 10;    // 0: never
  bool wall_clock_breakdown = false;
  uint64_t seed = 1234;            // dropout's seed
  int64_t train_batch_size() const { return micro_batch_size * gradient_accumulation_steps * dp_world_size; }
};

// What the engine reports after each optimizer step.
struct StepReport {
  int64_t step = 0;              // global steps taken
  int64_t samples = 0;           // global samples seen
  double loss = 0.0;             // mean loss of the step (unscaled)
  double lr = 0.0;
  double grad_norm = 0.0;        // before clipping
  double seconds = 0.0;          // wall time of the whole step (all its micro-batches)
  double samples_per_second = 0.0;
  double tokens_per_second = 0.0;  // integer inputs counted as tokens
  double forward_ms = 0, backward_ms = 0, step_ms = 0;  // with wall_clock_breakdown
  double loss_scale = 1.0;       // fp16: the scale this step used
  bool skipped = false;          // fp16: the step overflowed and was skipped
  int64_t skipped_steps = 0;     // fp16: skipped so far
};

// What initialize() sets up for bf16/fp16 training.
struct MixedPrecision {
  std::shared_ptr<MasterWeights> masters;     // the optimizer updates these
  std::optional<LossScalerOptions> fp16;      // set for fp16: dynamic (or static) loss scaling
};

// What initialize() sets up for data parallelism: at stage 0 a gradient reducer (more than one
// rank), at ZeRO stages 1-2 the sharded optimizer (any number of ranks).
struct DataParallel {
  std::shared_ptr<distributed::Communicator> group;          // the data-parallel ranks
  std::shared_ptr<distributed::GradientReducer> reducer;     // stage 0: averages gradients
  std::shared_ptr<zero::ZeroOptimizer> zero;                 // stages 1-2: shards states (and grads)
};

class Engine {
 public:
  Engine(std::shared_ptr<nn::Module> model, std::shared_ptr<nn::Optimizer> optimizer,
         std::shared_ptr<nn::LRScheduler> scheduler, EngineOptions options, MixedPrecision mixed = {},
         DataParallel data_parallel = {});

  // Forward through the model. `sample_index` (i64 [B]: the batch rows' global sample indices)
  // makes dropout reproduce the single-process run under any parallel layout.
  autograd::Variable operator()(const autograd::Variable& input, const Tensor& sample_index = Tensor());
  void backward(const autograd::Variable& loss);
  void step();

  // True when the next step() completes an accumulation cycle (DeepSpeed's definition).
  bool is_gradient_accumulation_boundary() const;
  int64_t global_steps() const { return global_steps_; }
  int64_t global_samples() const { return global_samples_; }
  int64_t micro_steps() const { return micro_steps_; }
  const StepReport& last_report() const { return last_report_; }
  double lr() const;
  double loss_scale() const { return scaler_ ? scaler_->scale() : 1.0; }
  int64_t skipped_steps() const { return skipped_steps_; }
  const std::shared_ptr<MasterWeights>& master_weights() const { return mixed_.masters; }
  // Null with one data-parallel rank.
  const std::shared_ptr<distributed::GradientReducer>& gradient_reducer() const { return data_parallel_.reducer; }
  // Null unless ZeRO stage 1 or 2 is on.
  const std::shared_ptr<zero::ZeroOptimizer>& zero_optimizer() const { return data_parallel_.zero; }

  nn::Module& module() { return *model_; }
  const std::shared_ptr<nn::Optimizer>& optimizer() const { return optimizer_; }
  const std::shared_ptr<nn::LRScheduler>& scheduler() const { return scheduler_; }
  const EngineOptions& options() const { return options_; }
  // DeepSpeed's save_checkpoint / load_checkpoint (docs/checkpoints.md). Collective: every rank
  // calls them. A checkpoint saved at any world size and ZeRO stage loads at any other, the
  // optimizer state included. `tag` "" = "global_step<N>" when saving, the one the `latest`
  // file names when loading. `client_state` is JSON text stored with the checkpoint;
  // load_checkpoint returns it.
  void save_checkpoint(const std::string& dir, std::string tag = "", const std::string& client_state = "{}");
  std::string load_checkpoint(const std::string& dir, std::string tag = "");
  // The loader whose position checkpoints keep (fathom::initialize attaches it).
  void attach_data_loader(std::shared_ptr<data::DataLoader> loader) { loader_ = std::move(loader); }
  // The config (JSON) checkpoints record beside the state (fathom::initialize sets it).
  void set_config_json(std::string json) { config_json_ = std::move(json); }

  // Replaces the default log line (printed every steps_per_print steps) with `callback`,
  // called after every optimizer step.
  void on_step(std::function<void(const StepReport&)> callback) { on_step_ = std::move(callback); }
  static std::string format_report(const StepReport& report, bool wall_clock_breakdown);

 private:
  using Clock = std::chrono::steady_clock;
  void apply_scheduled_lr();
  // Gradients the optimizer and clipping see: the fp32 masters' in mixed precision.
  autograd::VariableList optimizer_parameters() const;
  // The boundary's gradient checks, on whichever holds the gradients (ZeRO shards, masters, model).
  bool gradients_overflow() const;
  void unscale_gradients();
  double clip_gradients();  // returns the norm before clipping
  void zero_gradients();
  void finish_cycle(StepReport& report, Clock::time_point step_start);

  std::shared_ptr<nn::Module> model_;
  std::shared_ptr<nn::Optimizer> optimizer_;
  std::shared_ptr<nn::LRScheduler> scheduler_;
  EngineOptions options_;
  MixedPrecision mixed_;
  DataParallel data_parallel_;
  std::optional<LossScaler> scaler_;
  int64_t skipped_steps_ = 0;
  int64_t global_steps_ = 0, global_samples_ = 0, micro_steps_ = 0;
  // The sum of this cycle's unscaled micro-batch losses (f64), kept on the loss's device and read
  // once per step: reading each loss at once would make the host wait for every forward pass.
  Tensor loss_sum_;
  int64_t tokens_ = 0;      // integer input elements this cycle
  Clock::time_point cycle_start_{};
  bool cycle_started_ = false;
  double forward_ms_ = 0, backward_ms_ = 0;
  StepReport last_report_;
  std::function<void(const StepReport&)> on_step_;
  std::shared_ptr<data::DataLoader> loader_;
  std::string config_json_ = "{}";
};

}  // namespace fathom
