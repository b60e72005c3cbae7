#include "apps/train/train_progress.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/allocator.h"
#include "core/threads.h"
#include "engine/monitor/memory_report.h"

namespace fathom::apps {

std::string clock_text(double seconds) {
  const int s = static_cast<int>(std::lround(seconds));
  char out[32];
  std::snprintf(out, sizeof out, "%02d:%02d", s / 60, s % 60);
  return out;
}

void print_run_header(const TrainPlan& plan, const models::ModelSpec& model, int64_t parameter_count,
                      const TrainData& data, int64_t tokens_per_step, int world_size, Device device) {
  const std::string source = plan.options.model_dir.empty() ? "preset " + plan.options.preset : plan.options.model_dir;
  std::printf("fathom-train: %s (%s): %.2fM parameters, sequences of %lld\n", model.describe().c_str(),
              source.c_str(), parameter_count / 1e6, static_cast<long long>(plan.sequence_length));
  std::string layout;
  if (plan.pipeline_size > 1) layout += "pipeline " + std::to_string(plan.pipeline_size) + " x ";
  if (plan.tensor_size > 1) layout += "tensor " + std::to_string(plan.tensor_size) + " x ";
  if (!layout.empty())
    layout = " (" + layout + "data " + std::to_string(plan.data_size) +
             (plan.pipeline_size > 1 ? ", " + plan.config.pipeline.schedule : "") + ")";
  std::printf("fathom-train: data %s: %lld train / %lld val sequences (val: %s); %lld tokens per step; %d rank%s%s x %s\n",
              data.name.c_str(), (long long)data.train->size(), (long long)data.val->size(), data.val_source.c_str(),
              (long long)tokens_per_step, world_size, world_size == 1 ? "" : "s", layout.c_str(),
              device.is_cpu() ? (std::to_string(num_threads()) + " threads").c_str() : device.str().c_str());
  std::fflush(stdout);
}

ProgressLine::ProgressLine(Engine& engine, int64_t steps, bool main_rank, Device device)
    : engine_(&engine), steps_(steps), main_rank_(main_rank), device_(device), start_(std::chrono::steady_clock::now()) {}

double ProgressLine::elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void ProgressLine::operator()(const StepReport& r) const {
  const bool last = r.step == steps_;
  if (Monitor* monitor = engine_->monitor())
    monitor->write_events({{"Train/Samples/tokens_per_second", r.tokens_per_second, r.samples}});
  if (!main_rank_) return;
  // After the first step, with the gradients at their peak (they live through backward and the
  // step frees them), so the line adds up to docs/zero.md's totals (16 bytes/parameter at stage 0).
  if (r.step == 1) {
    ModelStateBytes bytes = model_state_bytes();
    bytes.gradients = model_state_bytes(/*peak=*/true).gradients;
    std::printf("memory per rank (gradients at their peak): %s\n", format_model_state_bytes(bytes).c_str());
  }
  if (r.step % std::max<int64_t>(1, engine_->options().steps_per_print) != 0 && r.step != 1 && !last) return;
  const double spent = elapsed();
  const double eta = spent / static_cast<double>(r.step) * static_cast<double>(steps_ - r.step);
  const double mem_gib = static_cast<double>(memory_snapshot(device_).total.current) / (1u << 30);
  // fp16: the loss scale and the steps skipped on overflow so far.
  char scale[64] = "";
  if (r.loss_scale != 1.0 || r.skipped_steps > 0)
    std::snprintf(scale, sizeof scale, " | scale 2^%.0f | skipped %lld", std::log2(r.loss_scale),
                  (long long)r.skipped_steps);
  // nvme offload: what the swap files moved during the step and how long it waited for them.
  const std::string io = Engine::format_io(r);
  std::printf("step %lld/%lld | loss %.3f | lr %.1e | %.1fk tok/s | grad norm %.2f%s | mem %.2f GiB%s | %s < %s\n",
              (long long)r.step, (long long)steps_, r.loss, r.lr, r.tokens_per_second / 1e3, r.grad_norm, scale,
              mem_gib, io.c_str(), clock_text(spent).c_str(), clock_text(eta).c_str());
  if (engine_->options().wall_clock_breakdown)
    for (const std::string& line : Engine::format_timers(r)) std::printf("%s\n", line.c_str());
  for (const std::string& line : r.memory_breakdown) std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

}  // namespace fathom::apps
