#pragma once
// What one fathom-train run is, decided before anything is built: its options (the command
// line's, completed from the checkpoint with --resume), the checkpoint it resumes, the --out
// folder checked, the DeepSpeed config as it will run, and how the job's ranks are laid out
// (pipeline x tensor x data). Everything a user can get wrong here fails before the first
// tensor is allocated.

#include <optional>

#include "apps/train/train_options.h"
#include "apps/train/train_resume.h"
#include "engine/config/config.h"
#include "models/model_spec.h"
#include "parallel/runtime.h"

namespace fathom::apps {

struct TrainPlan {
  TrainOptions options;
  std::optional<ResumePoint> resume;
  Config config;
  models::ModelSpec model;  // its vocabulary comes with the data unless a --model folder fixed it
  int64_t sequence_length = 0;
  int tensor_size = 1, pipeline_size = 1, data_size = 1;
};

// The plan, with what it filled in or took from a checkpoint printed on the first rank; nullopt
// (after saying so) when the checkpoint to resume already reached --steps.
std::optional<TrainPlan> plan_training(const TrainOptions& command_line, const parallel::Runtime& runtime);

}  // namespace fathom::apps
