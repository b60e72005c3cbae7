#include "engine/engine.h"

#include <cmath>
#include <cstdio>

#include "autograd/engine.h"
#include "autograd/functions.h"
#include "core/logging.h"
#include "engine/monitor/memory_report.h"
#include "engine/non_finite_check.h"
#include "engine/schedule.h"
#include "kernels/elementwise.h"
#include "kernels/reduction.h"
#include "nn/dropout.h"
#include "nn/loss.h"
#include "parallel/comms_logger.h"
#include "parallel/rank_agreement.h"
#include "zero/replicated_state.h"

namespace fathom {
namespace {
double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace

Engine::Engine(std::shared_ptr<nn::Module> model, std::unique_ptr<zero::TrainingState> state,
               std::shared_ptr<nn::LRScheduler> scheduler, EngineOptions options, std::optional<LossScalerOptions> fp16)
    : model_(std::move(model)),
      state_(std::move(state)),
      scheduler_(std::move(scheduler)),
      options_(options),
      schedule_(std::make_unique<GradientAccumulation>()),
      timers_(options.wall_clock_breakdown && model_ && model_->device().is_cuda()) {
  FATHOM_CHECK(model_ != nullptr, "Engine: no model");
  FATHOM_CHECK(state_ != nullptr, "Engine: no training state");
  // The first step's I/O excludes setup's.
  if (const zero::IoCounters* io = state_->io_counters()) io_before_step_ = io->io_totals();
  claim_ = model_->claim("an engine");
  if (fp16) {
    FATHOM_CHECK(state_->keeps_masters(), "Engine: fp16 loss scaling needs fp32 master weights (a 16-bit model)");
    scaler_.emplace(*fp16);
  }
  FATHOM_CHECK(
      options_.gradient_accumulation_steps >= 1 && options_.micro_batch_size >= 1 && options_.dp_world_size >= 1,
      "Engine: micro_batch_size, gradient_accumulation_steps and dp_world_size must be >= 1");
  FATHOM_CHECK(options_.dp_world_size == state_->data_group().size(), "Engine: dp_world_size is ",
               options_.dp_world_size, " but the data-parallel group has ", state_->data_group().size(), " ranks");
  FATHOM_CHECK(options_.gradient_clipping >= 0, "Engine: gradient_clipping must be >= 0, got ",
               options_.gradient_clipping);
  if (optimizer()) apply_scheduled_lr();  // the lr in force before the first step, as DeepSpeed sets it
  nn::assign_dropout_streams(*model_);    // dropout masks keyed by module name, the same everywhere
}

namespace {
std::unique_ptr<zero::TrainingState> single_process_state(const std::shared_ptr<nn::Module>& model,
                                                          std::shared_ptr<nn::Optimizer> optimizer) {
  FATHOM_CHECK(optimizer != nullptr, "Engine: no optimizer");
  FATHOM_CHECK(model != nullptr, "Engine: no model");
  const auto named = model->named_parameters();
  return std::make_unique<zero::ReplicatedState>(named, zero::single_process_layout(named.size()),
                                                 zero::ReplicatedOptions{},
                                                 [&](const zero::NamedParameters&) { return optimizer; });
}
}  // namespace

Engine::Engine(std::shared_ptr<nn::Module> model, std::shared_ptr<nn::Optimizer> optimizer,
               std::shared_ptr<nn::LRScheduler> scheduler, EngineOptions options)
    : Engine(model, single_process_state(model, std::move(optimizer)), std::move(scheduler), options) {}

// The state goes first: its hooks point into it, and the claim is released last.
Engine::~Engine() {
  state_.reset();
  instruments_.clear();  // their module hooks go before the model can
  comms_observation_.reset();
  if (print_comms_summary_ && comms_logger_) FATHOM_LOG(Info, "communication summary:\n" + comms_logger_->summary());
}

std::string Engine::comms_summary() const { return comms_logger_ ? comms_logger_->summary() : ""; }

void Engine::add_instrument(std::unique_ptr<StepInstrument> instrument) {
  FATHOM_CHECK(instrument != nullptr, "engine.add_instrument: no instrument");
  instruments_.push_back(std::move(instrument));
}

void Engine::set_comms_logger(std::shared_ptr<parallel::CommsLogger> logger, bool print_at_end) {
  comms_observation_.reset();
  comms_logger_ = std::move(logger);
  print_comms_summary_ = print_at_end;
  if (comms_logger_) comms_observation_ = std::make_unique<parallel::CollectiveObservation>(comms_logger_);
}

void Engine::apply_scheduled_lr() {
  if (!scheduler_) return;
  const std::vector<double>& lrs = scheduler_->get_lrs();
  nn::Optimizer& opt = *optimizer();
  for (size_t g = 0; g < lrs.size() && g < opt.param_groups().size(); ++g) opt.set_lr(g, lrs[g]);
}

double Engine::lr() const { return optimizer() ? optimizer()->lr(0) : 0.0; }

void Engine::begin_cycle() {
  if (cycle_started_) return;
  cycle_start_ = Clock::now();
  cycle_started_ = true;
  for (auto& instrument : instruments_) instrument->begin_step(*this, global_steps_ + 1);
}

autograd::Variable Engine::operator()(const autograd::Variable& input, const Tensor& sample_index) {
  begin_cycle();
  parallel::check_same_batch(state_->groups().tensor(), input.data(), sample_index);  // debug mode only
  nn::set_dropout_context({options_.seed, static_cast<uint64_t>(global_steps_), sample_index});
  if (!is_floating_point(input.dtype())) tokens_ += input.numel();
  const int64_t step_number = global_steps_ + 1;
  for (auto& instrument : instruments_) instrument->before_forward(*this, step_number);
  timers_.start(Phase::Forward);
  autograd::Variable out;
  {
    // What forward allocates is activations (ZeRO-3's gathered parameters carry their own tag).
    MemoryTagScope activations(MemoryTag::Activations);
    out = (*model_)(input);
  }
  timers_.stop(Phase::Forward);
  for (auto& instrument : instruments_) instrument->after_forward(*this, step_number);
  note_memory("forward");
  return out;
}

void Engine::record_loss(const autograd::Variable& loss) {
  FATHOM_CHECK(loss.numel() == 1, "engine.backward: the loss must be a scalar, got shape ", shape_str(loss.sizes()),
               "; for other outputs pass their gradients: backward(outputs, grad_outputs)");
  const Tensor loss_value = loss.data().reshape({1}).to(DType::F64);
  loss_sum_ = loss_sum_.defined() ? add(loss_sum_, loss_value) : loss_value.clone();
}

autograd::Variable Engine::scaled_loss(const autograd::Variable& loss) const {
  const double scale = loss_scale() / static_cast<double>(options_.gradient_accumulation_steps);
  return scale == 1.0 ? loss : autograd::mul(loss, scale);
}

void Engine::backward(const autograd::Variable& loss) {
  record_loss(loss);
  run_backward([&] { autograd::backward({scaled_loss(loss)}); });
}

void Engine::backward(const autograd::VariableList& outputs, const autograd::TensorList& grad_outputs) {
  FATHOM_CHECK(!outputs.empty() && outputs.size() == grad_outputs.size(), "engine.backward: ", outputs.size(),
               " outputs but ", grad_outputs.size(), " gradients; pass one gradient per output");
  autograd::VariableList scaled;
  for (const autograd::Variable& output : outputs) scaled.push_back(scaled_loss(output));
  run_backward([&] { autograd::backward(scaled, grad_outputs); });
}

void Engine::backward_stage(const autograd::Variable& output, const Tensor& received_gradient,
                            const autograd::Variable& input, autograd::DeferredAccumulation* weights) {
  const bool from_loss = !received_gradient.defined();
  if (from_loss) record_loss(output);
  const autograd::Variable start = from_loss ? scaled_loss(output) : output;
  if (weights == nullptr) return run_backward([&] { autograd::backward({start}, {received_gradient}); });
  // B: no parameter gradient appears, so the training state has nothing to see yet.
  autograd::VariableList now;
  if (input.defined()) now.push_back(input);
  timers_.start(Phase::BackwardInner);
  autograd::backward_deferring({start}, {received_gradient}, now, *weights);
  timers_.stop(Phase::BackwardInner);
}

void Engine::backward_weights(autograd::DeferredAccumulation& weights) {
  run_backward([&] { weights.run(); });
}

void Engine::run_backward(const std::function<void()>& pass) {
  const int64_t step_number = global_steps_ + 1;
  for (auto& instrument : instruments_) instrument->before_backward(*this, step_number);
  timers_.start(Phase::BackwardInner);
  state_->begin_backward(is_gradient_accumulation_boundary());
  pass();
  timers_.stop(Phase::BackwardInner);
  timers_.start(Phase::BackwardAllreduce);
  state_->end_backward();  // waits for the reductions backward left in flight
  timers_.stop(Phase::BackwardAllreduce);
  for (auto& instrument : instruments_) instrument->after_backward(*this, step_number);
  note_memory("backward");
}

bool Engine::is_gradient_accumulation_boundary() const {
  if (boundary_override_) return *boundary_override_;
  return (micro_steps_ + 1) % options_.gradient_accumulation_steps == 0;
}

void Engine::step() {
  const bool boundary = is_gradient_accumulation_boundary();
  ++micro_steps_;
  if (boundary) optimizer_step();
  else micro_step_times_.push_back(timers_.end_micro_step());
}

void Engine::optimizer_step() {
  FATHOM_CHECK(optimizer() != nullptr,
               "engine: an optimizer step on an engine without an optimizer (it was "
               "initialized for evaluation); give the config an \"optimizer\" section to train");
  for (auto& instrument : instruments_) instrument->before_optimizer_step(*this, global_steps_ + 1);
  timers_.start(Phase::Step);
  StepReport report;
  report.loss_scale = loss_scale();
  report.loss = step_loss();

  // fp16: an overflow anywhere in the job skips the whole step; nothing but the scaler changes.
  if (scaler_ && state_->gradients_overflow()) {
    report.skipped = true;
    ++skipped_steps_;
    scaler_->update(/*overflow=*/true);
    state_->zero_grad();
    report.lr = lr();
    finish_cycle(report);
    return;
  }
  if (loss_scale() != 1.0) state_->scale_gradients(1.0 / loss_scale());
  report.grad_norm = clip_gradients();
  // Job-wide values, so every rank stops at the same step (none is left waiting in a collective).
  if (stop_on_non_finite_ && !scaler_ && !(std::isfinite(report.loss) && std::isfinite(report.grad_norm))) {
    state_->zero_grad();
    FATHOM_FAIL(non_finite_step_message(global_steps_ + 1, report.loss, report.grad_norm, *model_));
  }
  state_->step();    // at ZeRO 1-2 the shard's step, then the all-gather
  report.lr = lr();  // the lr this step used
  if (scaler_) scaler_->update(/*overflow=*/false);
  if (scheduler_) {
    scheduler_->step();
    apply_scheduled_lr();
  }
  state_->zero_grad();
  finish_cycle(report);
}

double Engine::step_loss() const {
  const double local =
      (loss_sum_.defined() ? loss_sum_.item() : 0.0) / static_cast<double>(options_.gradient_accumulation_steps);
  return state_->mean_over_replicas(local);
}

// The global norm over the whole job; torch's and DeepSpeed's clipping coefficient.
double Engine::clip_gradients() {
  const double norm = state_->gradient_norm();
  if (options_.gradient_clipping > 0 && std::isfinite(norm)) {
    const double coefficient = options_.gradient_clipping / (norm + 1e-6);
    if (coefficient < 1.0) state_->scale_gradients(coefficient);
  }
  return norm;
}

const StepReport& Engine::train_batch(const NextBatch& next, const LossFunction& loss) {
  FATHOM_CHECK(next != nullptr, "engine.train_batch: no batch source");
  const int64_t steps_before = global_steps_;
  begin_cycle();  // every rank, before the schedule's first transfer
  const LossFunction default_loss = [](const autograd::Variable& output, const Batch& batch) {
    return nn::cross_entropy(output, batch.targets.to(output.device()), batch.loss_normaliser);
  };
  schedule_->run(*this, next, loss ? loss : default_loss);
  FATHOM_CHECK(global_steps_ == steps_before + 1, "engine.train_batch: the schedule ran ", global_steps_ - steps_before,
               " optimizer steps; it must run exactly one");
  return last_report_;
}

void Engine::set_monitor(std::unique_ptr<Monitor> monitor) { monitor_ = std::move(monitor); }

void Engine::set_schedule(std::unique_ptr<Schedule> schedule) {
  FATHOM_CHECK(schedule != nullptr, "engine.set_schedule: no schedule");
  schedule_ = std::move(schedule);
}

nn::NamedTensors Engine::consolidated_state_dict() {
  zero::ParameterResidency* residency = state_->residency();
  if (residency) residency->gather_full_parameters();
  nn::NamedTensors out;
  size_t i = 0;
  for (const auto& [name, param] : model_->named_parameters())
    out.emplace_back(name, state_->whole_parameter(i++, param.data()).to(kCPU).clone());
  if (residency) residency->release_full_parameters();
  return out;
}

// The last forward's and backward's lines replace the earlier micro-batches' of the cycle.
void Engine::note_memory(const char* point) {
  const bool printed = options_.steps_per_print > 0 && (global_steps_ + 1) % options_.steps_per_print == 0;
  if (!options_.memory_breakdown || !printed) return;
  const std::string line = format_memory_breakdown(point);
  const std::string prefix = std::string("memory after ") + point;
  for (std::string& existing : memory_lines_)
    if (existing.rfind(prefix, 0) == 0) return void(existing = line);
  memory_lines_.push_back(line);
}

void Engine::finish_cycle(StepReport& report) {
  timers_.stop(Phase::Step);
  micro_step_times_.push_back(timers_.end_micro_step());
  report.times = timers_.end_cycle();
  report.micro_step_times = std::move(micro_step_times_);
  micro_step_times_.clear();
  note_memory("step");
  report.memory_breakdown = std::move(memory_lines_);
  memory_lines_.clear();
  // Skipped steps still count, as DeepSpeed's global_steps do.
  ++global_steps_;
  global_samples_ += options_.train_batch_size();
  report.step = global_steps_;
  report.samples = global_samples_;
  report.skipped_steps = skipped_steps_;
  if (const zero::IoCounters* counters = state_->io_counters()) {
    const zero::IoTotals io = counters->io_totals();
    report.io = {.bytes_read = io.bytes_read - io_before_step_.bytes_read,
                 .bytes_written = io.bytes_written - io_before_step_.bytes_written,
                 .wait_seconds = io.wait_seconds - io_before_step_.wait_seconds};
    io_before_step_ = io;
  }
  report.seconds = cycle_started_ ? ms_since(cycle_start_) / 1000.0 : 0.0;
  if (report.seconds > 0) {
    report.samples_per_second = static_cast<double>(options_.train_batch_size()) / report.seconds;
    report.tokens_per_second = static_cast<double>(tokens_ * options_.dp_world_size) / report.seconds;
  }
  last_report_ = report;
  loss_sum_ = Tensor();
  tokens_ = 0;
  cycle_started_ = false;

  if (monitor_) {
    // DeepSpeed's tags and x-axis (global samples).
    std::vector<MonitorEvent> events = {{"Train/Samples/train_loss", report.loss, global_samples_},
                                        {"Train/Samples/lr", report.lr, global_samples_}};
    if (scaler_) events.push_back({"Train/Samples/loss_scale", report.loss_scale, global_samples_});
    if (report.io)
      for (const auto& [name, value] : {std::pair{"io_read_MB", report.io->bytes_read / 1e6},
                                        std::pair{"io_written_MB", report.io->bytes_written / 1e6},
                                        std::pair{"io_wait_ms", report.io->wait_seconds * 1e3}})
        events.push_back({std::string("Train/Samples/") + name, value, global_samples_});
    if (options_.wall_clock_breakdown)
      for (const auto& [name, ms] :
           {std::pair{"forward", report.times.forward_ms}, std::pair{"backward", report.times.backward_ms},
            std::pair{"backward_inner", report.times.backward_inner_ms},
            std::pair{"backward_allreduce", report.times.backward_allreduce_ms},
            std::pair{"step", report.times.step_ms}})
        events.push_back({std::string("Train/Samples/elapsed_time_ms_") + name, ms, global_samples_});
    monitor_->write_events(events);
  }
  for (auto& instrument : instruments_) instrument->after_optimizer_step(*this, report);
  if (on_step_)
    on_step_(report);
  else if (options_.print_progress && options_.steps_per_print > 0 && global_steps_ % options_.steps_per_print == 0) {
    FATHOM_LOG(Info, format_report(report, false));
    if (options_.wall_clock_breakdown)
      for (const std::string& line : format_timers(report)) FATHOM_LOG(Info, line);
    for (const std::string& line : report.memory_breakdown) FATHOM_LOG(Info, line);
  }
}

std::vector<std::string> Engine::format_timers(const StepReport& r) {
  std::vector<std::string> lines;
  for (const PhaseTimes& micro : r.micro_step_times) lines.push_back(format_phase_times(micro, "_microstep"));
  lines.push_back(format_phase_times(r.times));
  return lines;
}

std::string Engine::format_io(const StepReport& r) {
  if (!r.io) return "";
  char line[128];
  std::snprintf(line, sizeof line, " | io read %.1f MB written %.1f MB wait %.0f ms", r.io->bytes_read / 1e6,
                r.io->bytes_written / 1e6, r.io->wait_seconds * 1e3);
  return line;
}

std::string Engine::format_report(const StepReport& r, bool wall_clock_breakdown) {
  char line[256];
  std::snprintf(line, sizeof line, "step %lld | loss %.4f | lr %.3e | grad norm %.3f | %.1f samples/s | %.0f tok/s",
                static_cast<long long>(r.step), r.loss, r.lr, r.grad_norm, r.samples_per_second, r.tokens_per_second);
  std::string out = line;
  if (r.loss_scale != 1.0 || r.skipped_steps > 0) {
    std::snprintf(line, sizeof line, " | scale 2^%.0f | skipped %lld%s", std::log2(r.loss_scale),
                  static_cast<long long>(r.skipped_steps), r.skipped ? " (this step: overflow)" : "");
    out += line;
  }
  out += format_io(r);
  if (wall_clock_breakdown) {
    std::snprintf(line, sizeof line, " | forward %.1f ms | backward %.1f ms | step %.1f ms", r.times.forward_ms,
                  r.times.backward_ms, r.times.step_ms);
    out += line;
  }
  return out;
}

}  // namespace fathom
