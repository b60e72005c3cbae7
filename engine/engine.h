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
// Gradients, fp32 master weights and optimizer state belong to one zero::TrainingState
// (zero/training_state.h) — replicated at stage 0 (with data-parallel averaging when the data
// group has several ranks), sharded at ZeRO 1-3, with fp32 masters for a 16-bit model — and the
// engine drives it without knowing which it is (docs/architecture.md). For fp16, backward also
// multiplies the loss by the loss scale; at the boundary an Inf/NaN gradient anywhere in the
// job skips the step (weights, optimizer state and LR schedule untouched; the step still
// counts, as in DeepSpeed) and the scaler adapts. The reported loss is the mean over the
// data-parallel ranks.
//
// The micro-step API, for schedules that are not one backward per micro-batch (a pipeline
// stage): backward(outputs, grad_outputs) with the gradient received from the next stage,
// set_gradient_accumulation_boundary, and optimizer_step() — the boundary's body. train_batch
// runs one whole optimizer step through a schedule (gradient accumulation by default).

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <memory>
#include <string>

#include "autograd/engine.h"
#include "core/generator.h"
#include "engine/data/loader.h"
#include "engine/loss_scaler.h"
#include "engine/monitor/monitor.h"
#include "engine/monitor/step_instrument.h"
#include "engine/monitor/step_report.h"
#include "nn/lr_schedule.h"
#include "nn/module.h"
#include "nn/optimizer.h"
#include "zero/training_state.h"

namespace fathom::parallel {
class CommsLogger;            // parallel/comms_logger.h
class CollectiveObservation;  // parallel/collective_observer.h
}  // namespace fathom::parallel

namespace fathom {

struct EngineOptions {
  int64_t micro_batch_size = 1;
  int64_t gradient_accumulation_steps = 1;
  int64_t dp_world_size = 1;
  double gradient_clipping = 0.0;  // 0: off
  int64_t steps_per_print = 10;    // 0: never
  // Whether this process logs the progress line (initialize: the job's first rank only, as
  // DeepSpeed does; every rank with FATHOM_LOG_ALL_RANKS=1).
  bool print_progress = true;
  bool wall_clock_breakdown = false;
  bool memory_breakdown = false;   // StepReport::memory_breakdown at the printed steps
  uint64_t seed = kDefaultSeed;    // dropout's seed
  // checkpoint.tag_validation: what save_checkpoint does when ranks pass different tags.
  enum class TagValidation { Ignore, Warn, Fail } tag_validation = TagValidation::Warn;
  int64_t train_batch_size() const { return micro_batch_size * gradient_accumulation_steps * dp_world_size; }
};

class Engine;
class CheckpointReader;  // engine/checkpoint/reader.h
// A source of micro-batches and the loss of one, for train_batch.
using NextBatch = std::function<Batch()>;
using LossFunction = std::function<autograd::Variable(const autograd::Variable& output, const Batch& batch)>;
// Drives the micro-batches of one optimizer step through the engine's micro-step API.
class Schedule {
 public:
  virtual ~Schedule() = default;
  virtual void run(Engine& engine, const NextBatch& next, const LossFunction& loss) = 0;
};

class Engine {
 public:
  // The engine over `state` (fathom::initialize builds it from the config). `fp16`: dynamic or
  // static loss scaling (the state must keep fp32 masters).
  Engine(std::shared_ptr<nn::Module> model, std::unique_ptr<zero::TrainingState> state,
         std::shared_ptr<nn::LRScheduler> scheduler, EngineOptions options,
         std::optional<LossScalerOptions> fp16 = std::nullopt);
  // One process, the model's own parameters updated by `optimizer` (the simple case).
  Engine(std::shared_ptr<nn::Module> model, std::shared_ptr<nn::Optimizer> optimizer,
         std::shared_ptr<nn::LRScheduler> scheduler, EngineOptions options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Forward through the model. `sample_index` (i64 [B]: the batch rows' global sample indices)
  // makes dropout reproduce the single-process run under any parallel layout.
  autograd::Variable operator()(const autograd::Variable& input, const Tensor& sample_index = Tensor());
  // Backward from the micro-batch's loss, scaled by 1/gradient_accumulation_steps (and the fp16
  // loss scale); the loss is recorded for the step's report.
  void backward(const autograd::Variable& loss);
  // Backward from outputs with given gradients (a pipeline stage's output and the gradient the
  // next stage sent), scaled like the loss would be. Records no loss.
  void backward(const autograd::VariableList& outputs, const autograd::TensorList& grad_outputs);
  // A pipeline stage's backward of one micro-batch (engine/pipeline_executor.h): on the last
  // stage from its loss (scaled and recorded as backward(loss) does), elsewhere from the stage's
  // output with the gradient the next stage sent (scaled there already). `input`: the received
  // activation, whose gradient goes upstream (undefined on the first stage). `weights` non-null:
  // zero bubble's B — the input gradient now, the parameters' gradients held in `weights` until
  // backward_weights(*weights), W, hands them to the training state.
  void backward_stage(const autograd::Variable& output, const Tensor& received_gradient,
                      const autograd::Variable& input, autograd::DeferredAccumulation* weights = nullptr);
  void backward_weights(autograd::DeferredAccumulation& weights);
  // After every micro-batch: counts it and, at an accumulation boundary, runs optimizer_step().
  void step();
  // The boundary's body: overflow check (fp16), unscale, clip by the global norm, optimizer
  // step, LR schedule, zero gradients, report. Public for schedules that count micro-batches
  // themselves.
  void optimizer_step();
  // One whole optimizer step: gradient_accumulation_steps micro-batches from `next` through the
  // schedule (set_schedule; gradient accumulation by default). `loss` default: cross-entropy of
  // the output against batch.targets with batch.loss_normaliser. Returns the step's report.
  const StepReport& train_batch(const NextBatch& next, const LossFunction& loss = nullptr);
  void set_schedule(std::unique_ptr<Schedule> schedule);

  // True when the next step() completes an accumulation cycle (DeepSpeed's definition), unless
  // set explicitly (DeepSpeed's set_gradient_accumulation_boundary; std::nullopt: counted again).
  bool is_gradient_accumulation_boundary() const;
  void set_gradient_accumulation_boundary(std::optional<bool> boundary) { boundary_override_ = boundary; }
  int64_t global_steps() const { return global_steps_; }
  int64_t global_samples() const { return global_samples_; }
  int64_t micro_steps() const { return micro_steps_; }
  const StepReport& last_report() const { return last_report_; }
  double lr() const;
  double loss_scale() const { return scaler_ ? scaler_->scale() : 1.0; }
  int64_t skipped_steps() const { return skipped_steps_; }
  // The owner of gradients and optimizer state (its concrete type says the mode).
  zero::TrainingState& training_state() const { return *state_; }
  // Every parameter whole on every rank, in the model's order, on the host: the consolidated
  // state dict (gathers at ZeRO-3, and tensor-parallel shards into the unsplit, unpadded
  // tensors; collective: every rank calls it).
  nn::NamedTensors consolidated_state_dict();

  nn::Module& module() { return *model_; }
  const std::shared_ptr<nn::Optimizer>& optimizer() const { return state_->optimizer(); }
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
  void attach_data_loader(std::shared_ptr<DataLoader> loader) { loader_ = std::move(loader); }
  // The config (JSON) checkpoints record beside the state (fathom::initialize sets it).
  void set_config_json(std::string json) { config_json_ = std::move(json); }

  // Outside fp16's loss scaling, a step whose loss or gradient norm is NaN/Inf throws before the
  // optimizer runs (engine/non_finite_check.h); false trains on regardless.
  void set_stop_on_non_finite(bool stop) { stop_on_non_finite_ = stop; }

  // Where the step's curves go (engine/monitor/monitor.h; initialize sets the config's monitors on the
  // first rank); null: nowhere. A program writes its own events through monitor() too.
  void set_monitor(std::unique_ptr<Monitor> monitor);
  Monitor* monitor() const { return monitor_.get(); }

  // Instruments watching every step (engine/monitor/step_instrument.h: the flops profiler, the trace);
  // initialize adds the config's.
  void add_instrument(std::unique_ptr<StepInstrument> instrument);
  // The comms logger (parallel/comms_logger.h) observes every collective of the process while the
  // engine lives; `print_at_end`: the engine logs its summary when it is destroyed (the first
  // rank's, at the end of the run). comms_summary() is DeepSpeed's table ("" without a logger).
  void set_comms_logger(std::shared_ptr<parallel::CommsLogger> logger, bool print_at_end);
  std::string comms_summary() const;
  const std::shared_ptr<parallel::CommsLogger>& comms_logger() const { return comms_logger_; }

  // Replaces the default log line (printed every steps_per_print steps) with `callback`,
  // called after every optimizer step.
  void on_step(std::function<void(const StepReport&)> callback) { on_step_ = std::move(callback); }
  static std::string format_report(const StepReport& report, bool wall_clock_breakdown);
  // " | io read X MB written Y MB wait Z ms" with anything offloaded to nvme, else "": the part of
  // the step's line every program prints alike.
  static std::string format_io(const StepReport& report);
  // DeepSpeed's wall_clock_breakdown lines: one per micro-step ("time (ms) | fwd_microstep: ...
  // | step_microstep: ..."), then the step's sums ("time (ms) | fwd: ... | bwd: ... | bwd_inner:
  // ... | bwd_allreduce: ... | step: ...").
  static std::vector<std::string> format_timers(const StepReport& report);

 private:
  using Clock = std::chrono::steady_clock;
  void apply_scheduled_lr();
  // The cycle's start: its clock, and every instrument's begin_step (on every rank).
  void begin_cycle();
  double clip_gradients();  // returns the norm before clipping
  double step_loss() const;
  void load_rank_local_state(const CheckpointReader& saved);  // load_checkpoint's part
  void note_memory(const char* point);  // memory_breakdown  // the mean loss of this cycle over the data group (collective)
  // `pass` between the training state's begin_backward and end_backward, timed and instrumented.
  void run_backward(const std::function<void()>& pass);
  void record_loss(const autograd::Variable& loss);
  // The loss times the fp16 loss scale over gradient_accumulation_steps: what backward starts from.
  autograd::Variable scaled_loss(const autograd::Variable& loss) const;
  void finish_cycle(StepReport& report);

  std::shared_ptr<nn::Module> model_;
  std::unique_ptr<zero::TrainingState> state_;
  autograd::HookHandle claim_;  // the model is this engine's while it lives
  std::shared_ptr<nn::LRScheduler> scheduler_;
  EngineOptions options_;
  std::optional<LossScaler> scaler_;
  std::unique_ptr<Schedule> schedule_;
  std::optional<bool> boundary_override_;
  int64_t skipped_steps_ = 0;
  bool stop_on_non_finite_ = true;
  int64_t global_steps_ = 0, global_samples_ = 0, micro_steps_ = 0;
  // The sum of this cycle's unscaled micro-batch losses (f64), kept on the loss's device and read
  // once per step: reading each loss at once would make the host wait for every forward pass.
  Tensor loss_sum_;
  int64_t tokens_ = 0;      // integer input elements this cycle
  Clock::time_point cycle_start_{};
  bool cycle_started_ = false;
  StepTimers timers_;
  std::vector<PhaseTimes> micro_step_times_;  // this cycle's, but the last
  std::vector<std::string> memory_lines_;  // memory_breakdown of this cycle
  StepReport last_report_;
  zero::IoTotals io_before_step_;  // the training state's I/O totals when the last step ended
  std::function<void(const StepReport&)> on_step_;
  std::unique_ptr<Monitor> monitor_;
  std::vector<std::unique_ptr<StepInstrument>> instruments_;
  std::shared_ptr<parallel::CommsLogger> comms_logger_;
  std::unique_ptr<parallel::CollectiveObservation> comms_observation_;
  bool print_comms_summary_ = false;
  std::shared_ptr<DataLoader> loader_;
  std::string config_json_ = "{}";
};

}  // namespace fathom
