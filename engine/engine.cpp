#include "engine/engine.h"

#include <cmath>
#include <cstdio>

#include "autograd/functions.h"
#include "core/logging.h"
#include "kernels/elementwise.h"
#include "kernels/reduction.h"
#include "nn/dropout.h"
#include "nn/grad_clipping.h"

namespace fathom {
namespace {
double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace

Engine::Engine(std::shared_ptr<nn::Module> model, std::shared_ptr<nn::Optimizer> optimizer,
               std::shared_ptr<nn::LRScheduler> scheduler, EngineOptions options, MixedPrecision mixed,
               DataParallel data_parallel)
    : model_(std::move(model)), optimizer_(std::move(optimizer)), scheduler_(std::move(scheduler)),
      options_(options), mixed_(std::move(mixed)), data_parallel_(std::move(data_parallel)) {
  if (mixed_.fp16) {
    FATHOM_CHECK(mixed_.masters != nullptr || data_parallel_.zero != nullptr,
                 "Engine: fp16 loss scaling needs fp32 master weights");
    scaler_.emplace(*mixed_.fp16);
  }
  FATHOM_CHECK(model_ != nullptr, "Engine: no model");
  FATHOM_CHECK(optimizer_ != nullptr, "Engine: no optimizer");
  FATHOM_CHECK(options_.gradient_accumulation_steps >= 1 && options_.micro_batch_size >= 1 &&
                   options_.dp_world_size >= 1,
               "Engine: micro_batch_size, gradient_accumulation_steps and dp_world_size must be >= 1");
  const int64_t dp_ranks = data_parallel_.group ? data_parallel_.group->size() : 1;
  FATHOM_CHECK(options_.dp_world_size == dp_ranks, "Engine: dp_world_size is ", options_.dp_world_size,
               " but the data-parallel communicator has ", dp_ranks, " ranks");
  FATHOM_CHECK(dp_ranks == 1 || data_parallel_.reducer || data_parallel_.zero,
               "Engine: data parallelism needs a gradient reducer or a ZeRO optimizer");
  FATHOM_CHECK(options_.gradient_clipping >= 0, "Engine: gradient_clipping must be >= 0, got ",
               options_.gradient_clipping);
  apply_scheduled_lr();  // the lr in force before the first step, as DeepSpeed sets it
  nn::assign_dropout_streams(*model_);  // dropout masks keyed by module name, the same everywhere
}

void Engine::apply_scheduled_lr() {
  if (!scheduler_) return;
  const std::vector<double>& lrs = scheduler_->get_lrs();
  for (size_t g = 0; g < lrs.size() && g < optimizer_->param_groups().size(); ++g) optimizer_->set_lr(g, lrs[g]);
}

double Engine::lr() const { return optimizer_->lr(0); }

autograd::Variable Engine::operator()(const autograd::Variable& input, const Tensor& sample_index) {
  if (!cycle_started_) {
    cycle_start_ = Clock::now();
    cycle_started_ = true;
  }
  nn::set_dropout_context({options_.seed, static_cast<uint64_t>(global_steps_), sample_index});
  if (!is_floating_point(input.dtype())) tokens_ += input.numel();
  const auto start = Clock::now();
  autograd::Variable out = (*model_)(input);
  forward_ms_ += ms_since(start);
  return out;
}

void Engine::backward(const autograd::Variable& loss) {
  FATHOM_CHECK(loss.numel() == 1, "engine.backward: the loss must be a scalar, got shape ", shape_str(loss.sizes()));
  const auto start = Clock::now();
  const Tensor loss_value = loss.data().reshape({1}).to(DType::F64);
  loss_sum_ = loss_sum_.defined() ? add(loss_sum_, loss_value) : loss_value.clone();
  const double scale = loss_scale() / static_cast<double>(options_.gradient_accumulation_steps);
  const bool boundary = is_gradient_accumulation_boundary();
  if (data_parallel_.reducer) data_parallel_.reducer->prepare_backward(boundary);
  if (data_parallel_.zero) data_parallel_.zero->prepare_backward(boundary);
  (scale == 1.0 ? loss : autograd::mul(loss, scale)).backward();
  if (data_parallel_.reducer) data_parallel_.reducer->finish_backward();
  if (data_parallel_.zero) data_parallel_.zero->finish_backward();
  backward_ms_ += ms_since(start);
}

bool Engine::is_gradient_accumulation_boundary() const {
  return (micro_steps_ + 1) % options_.gradient_accumulation_steps == 0;
}

autograd::VariableList Engine::optimizer_parameters() const {
  if (!mixed_.masters) return model_->parameters();
  autograd::VariableList out;
  for (const auto& [name, master] : mixed_.masters->masters()) out.push_back(master);
  return out;
}

void Engine::step() {
  const bool boundary = is_gradient_accumulation_boundary();
  ++micro_steps_;
  if (!boundary) return;
  const auto start = Clock::now();
  StepReport report;
  report.loss_scale = loss_scale();

  // fp16: an overflow anywhere skips the whole step; nothing but the scaler changes.
  if (scaler_ && gradients_overflow()) {
    report.skipped = true;
    ++skipped_steps_;
    scaler_->update(/*overflow=*/true);
    zero_gradients();
    report.lr = optimizer_->lr(0);
    finish_cycle(report, start);
    return;
  }
  unscale_gradients();
  report.grad_norm = clip_gradients();
  if (data_parallel_.zero) data_parallel_.zero->step();  // the shard's step, then all-gather
  else optimizer_->step();
  report.lr = optimizer_->lr(0);  // the lr this step used
  if (mixed_.masters) mixed_.masters->copy_masters_to_model();
  if (scaler_) scaler_->update(/*overflow=*/false);
  if (scheduler_) {
    scheduler_->step();
    apply_scheduled_lr();
  }
  zero_gradients();
  finish_cycle(report, start);
}

bool Engine::gradients_overflow() const {
  if (data_parallel_.zero) return data_parallel_.zero->gradients_overflow();
  return mixed_.masters->gradients_overflow();
}

void Engine::unscale_gradients() {
  if (loss_scale() == 1.0) return;
  if (data_parallel_.zero) data_parallel_.zero->unscale_gradients(1.0 / loss_scale());
  else if (mixed_.masters) mixed_.masters->unscale_gradients(1.0 / loss_scale());
}

double Engine::clip_gradients() {
  if (data_parallel_.zero) {
    // The global norm over every rank's shard; torch's and DeepSpeed's clipping coefficient.
    const double norm = data_parallel_.zero->gradient_norm();
    if (options_.gradient_clipping > 0 && std::isfinite(norm)) {
      const double coefficient = options_.gradient_clipping / (norm + 1e-6);
      if (coefficient < 1.0) data_parallel_.zero->scale_gradients(coefficient);
    }
    return norm;
  }
  const auto params = optimizer_parameters();
  if (options_.gradient_clipping > 0) return nn::clip_grad_norm(params, options_.gradient_clipping);
  std::vector<Tensor> grads;
  for (const auto& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  return global_norm(grads);
}

void Engine::zero_gradients() {
  if (data_parallel_.zero) data_parallel_.zero->zero_grad();
  else if (mixed_.masters) mixed_.masters->zero_grad();
  else optimizer_->zero_grad();
}

void Engine::finish_cycle(StepReport& report, Clock::time_point step_start) {
  // Skipped steps still count, as DeepSpeed's global_steps do.
  ++global_steps_;
  global_samples_ += options_.train_batch_size();
  report.step = global_steps_;
  report.samples = global_samples_;
  report.skipped_steps = skipped_steps_;
  report.loss = (loss_sum_.defined() ? loss_sum_.item() : 0.0) / static_cast<double>(options_.gradient_accumulation_steps);
  if (data_parallel_.group) report.loss = data_parallel_.group->all_reduce_scalar(report.loss, distributed::ReduceOp::Avg);
  report.seconds = cycle_started_ ? ms_since(cycle_start_) / 1000.0 : 0.0;
  if (report.seconds > 0) {
    report.samples_per_second = static_cast<double>(options_.train_batch_size()) / report.seconds;
    report.tokens_per_second = static_cast<double>(tokens_ * options_.dp_world_size) / report.seconds;
  }
  report.forward_ms = forward_ms_;
  report.backward_ms = backward_ms_;
  report.step_ms = ms_since(step_start);
  last_report_ = report;
  loss_sum_ = Tensor();
  tokens_ = 0;
  forward_ms_ = backward_ms_ = 0;
  cycle_started_ = false;

  if (on_step_) on_step_(report);
  else if (options_.steps_per_print > 0 && global_steps_ % options_.steps_per_print == 0)
    FATHOM_LOG(Info, format_report(report, options_.wall_clock_breakdown));
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
  if (wall_clock_breakdown) {
    std::snprintf(line, sizeof line, " | forward %.1f ms | backward %.1f ms | step %.1f ms", r.forward_ms,
                  r.backward_ms, r.step_ms);
    out += line;
  }
  return out;
}

}  // namespace fathom
