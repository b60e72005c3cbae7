#pragma once
// fathom-train's loop: optimizer steps until --steps, one micro-batch at a time (or one whole
// step per train_batch through a pipeline's schedule), and after each optimizer step the
// validation loss at --eval-interval and at the end, a checkpoint at --save-every and at the
// end, and a stop on SIGTERM/SIGINT at the step boundary, every rank together, saving first
// (engine/stop_signals.h, docs/reliability.md).

#include <cmath>
#include <optional>
#include <string>

#include "apps/train/train_data.h"
#include "apps/train/train_model.h"
#include "apps/train/train_options.h"
#include "engine/engine.h"
#include "engine/stop_signals.h"
#include "parallel/runtime.h"

namespace fathom::apps {

class TrainLoop {
 public:
  // `client_state`: what each checkpoint records of the run (train_run_client_state).
  TrainLoop(Engine& engine, DataLoader& loader, const TrainModel& model, const TrainOptions& options,
            const TrainData& data, const parallel::ProcessGroups& groups, const parallel::Runtime& runtime,
            std::string client_state, Device device);

  // Trains to --steps; the exit status when a stop signal ended the run early (128 + signal).
  std::optional<int> run();
  double last_val_loss() const { return last_val_; }

 private:
  std::optional<int> after_step();
  void save();

  Engine& engine_;
  DataLoader& loader_;
  const TrainModel& model_;
  const TrainOptions& options_;
  const TrainData& data_;
  const parallel::ProcessGroups& groups_;
  const parallel::Runtime& runtime_;
  std::string client_state_, checkpoint_dir_;
  Device device_;
  bool main_rank_;
  double last_val_ = std::nan("");
  StopSignals stop_signals_;
};

}  // namespace fathom::apps
