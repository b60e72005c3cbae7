#include "apps/train/train_loop.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "apps/train/train_validation.h"

namespace fathom::apps {
namespace {

// Fault injection for the restart tests (docs/reliability.md): FATHOM_TEST_KILL_AT_STEP=N makes
// the last rank of a job's first attempt die by SIGKILL after step N, as a crashed node would.
void kill_if_asked(int64_t step, const parallel::Runtime& runtime) {
  static const char* at = std::getenv("FATHOM_TEST_KILL_AT_STEP");
  const char* restart = std::getenv("FATHOM_RESTART_COUNT");
  if (at && std::to_string(step) == at && (!restart || std::string(restart) == "0") &&
      runtime.rank() == runtime.size() - 1)
    std::raise(SIGKILL);
}

}  // namespace

TrainLoop::TrainLoop(Engine& engine, DataLoader& loader, const TrainModel& model, const TrainOptions& options,
                     const TrainData& data, const parallel::ProcessGroups& groups, const parallel::Runtime& runtime,
                     std::string client_state, Device device)
    : engine_(engine), loader_(loader), model_(model), options_(options), data_(data), groups_(groups),
      runtime_(runtime), client_state_(std::move(client_state)),
      checkpoint_dir_((std::filesystem::path(options.out_dir) / "checkpoints").string()), device_(device),
      main_rank_(runtime.is_main_process()) {}

std::optional<int> TrainLoop::run() {
  const int64_t steps = options_.steps;
  if (model_.pipeline()) {
    // One whole step per train_batch: the schedule draws the micro-batches (first and last stages).
    std::optional<DataLoader::Iterator> position;
    const NextBatch next = [&] {
      if (!position || *position == std::default_sentinel) position.emplace(loader_.begin());
      Batch batch = **position;
      ++*position;
      return batch;
    };
    const LossFunction loss = [&](const autograd::Variable& output, const Batch& batch) {
      return model_.loss(output, batch.targets.to(device_), batch.loss_normaliser);
    };
    while (engine_.global_steps() < steps) {
      engine_.train_batch(next, loss);
      if (const std::optional<int> code = after_step()) return code;
    }
  }
  while (engine_.global_steps() < steps) {
    for (const Batch& batch : loader_) {
      const autograd::Variable logits = engine_(autograd::Variable(batch.inputs.to(device_)), batch.sample_index);
      engine_.backward(model_.loss(logits, batch.targets.to(device_), batch.loss_normaliser));
      engine_.step();
      if (batch.micro_step + 1 < engine_.options().gradient_accumulation_steps) continue;
      if (const std::optional<int> code = after_step()) return code;
      if (engine_.global_steps() >= steps) break;
    }
  }
  return std::nullopt;
}

void TrainLoop::save() {
  engine_.save_checkpoint(checkpoint_dir_, "", client_state_);
  if (main_rank_)
    std::printf("step %lld/%lld | checkpoint %s/global_step%lld\n", (long long)engine_.global_steps(),
                (long long)options_.steps, checkpoint_dir_.c_str(), (long long)engine_.global_steps());
}

std::optional<int> TrainLoop::after_step() {
  const int64_t step = engine_.global_steps(), steps = options_.steps;
  if (step == steps || (options_.eval_interval > 0 && step % options_.eval_interval == 0)) {
    // The same validation samples at every layout (apps/train/train_validation.h).
    const int64_t val_samples = options_.eval_batches * engine_.options().train_batch_size();
    last_val_ = validation_loss(model_, *data_.val, val_samples, engine_.options().micro_batch_size, groups_.data());
    if (Monitor* monitor = engine_.monitor())
      monitor->write_events({{"Train/Samples/val_loss", last_val_, engine_.global_samples()}});
    if (main_rank_) std::printf("step %lld/%lld | val loss %.3f\n", (long long)step, (long long)steps, last_val_);
    std::fflush(stdout);
  }
  const bool saving = options_.save_every > 0;
  if (saving && (step % options_.save_every == 0 || step == steps)) save();
  kill_if_asked(step, runtime_);
  // Preemption: every rank has finished this step; all stop here or none does. After a signal
  // a rank has two steps' time (and 5 s) to get here, or it exits (a peer of it died).
  stop_signals_.set_boundary_timeout(5 + 2 * engine_.last_report().seconds);
  if (const int signal = stop_signals_.stop_requested(runtime_.world_ptr().get()); signal && step < steps) {
    if (saving && step % options_.save_every != 0) save();
    if (main_rank_) {
      std::printf("fathom-train: stopped by %s after step %lld/%lld; ", StopSignals::name(signal), (long long)step,
                  (long long)steps);
      if (saving) std::printf("continue with --resume %s\n", options_.out_dir.c_str());
      else std::printf("no checkpoint was saved (--save-every N saves one on a stop too)\n");
      std::fflush(stdout);
    }
    return 128 + signal;  // the shell's status for a process ended by that signal
  }
  return std::nullopt;
}

}  // namespace fathom::apps
