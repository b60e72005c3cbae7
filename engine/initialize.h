#pragma once
// fathom::initialize: the C++ counterpart of deepspeed.initialize.
//
//   auto [engine, optimizer, loader, scheduler] = fathom::initialize(config, model, nullptr, dataset);
//
// Builds the optimizer from the config's "optimizer" section unless one is passed, the LR
// schedule from "scheduler", the data loader over `training_data` (when given) with the
// resolved batch sizes, and the engine. Config features this build cannot run yet are errors
// here (Config::check_supported), never silently ignored.

#include <memory>

#include "engine/config/config.h"
#include "engine/data/loader.h"
#include "engine/engine.h"

namespace fathom {

struct Initialized {
  std::shared_ptr<Engine> engine;
  std::shared_ptr<nn::Optimizer> optimizer;
  std::shared_ptr<DataLoader> loader;  // null without training data
  std::shared_ptr<nn::LRScheduler> scheduler;  // null without a "scheduler" section
};

// groups: the job's process groups (runtime.groups(pp, tp)). The batch sizes are checked against
// the data group's size, the model's parameters are broadcast from rank 0 of their data group
// (and of the tensor group for replicated ones, nn/placement.h), the loader gives each data rank
// its part of every global batch, and the training state reduces over the groups.
Initialized initialize(Config config, std::shared_ptr<nn::Module> model, std::shared_ptr<nn::Optimizer> optimizer,
                       std::shared_ptr<const Dataset> training_data, const parallel::ProcessGroups& groups);

// An engine without an optimizer, for evaluation and inference (RLHF's frozen reference and
// reward models beside the trained actor and critic): the config's "optimizer" and "scheduler"
// sections are not used, precision and ZeRO are — at stage 3 the parameters stay sharded and are
// gathered around each module's forward. engine.step() is an error; backward still reduces
// gradients, for programs that want them.
std::shared_ptr<Engine> initialize_for_evaluation(Config config, std::shared_ptr<nn::Module> model,
                                                  const parallel::ProcessGroups& groups);

// Data parallelism only: data_parallel_group is the ranks that train on different data
// (runtime.world_ptr()); null for one process.
Initialized initialize(Config config, std::shared_ptr<nn::Module> model,
                       std::shared_ptr<nn::Optimizer> optimizer = nullptr,
                       std::shared_ptr<const Dataset> training_data = nullptr,
                       std::shared_ptr<parallel::Communicator> data_parallel_group = nullptr);

}  // namespace fathom
