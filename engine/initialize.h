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

#include "engine/config.h"
#include "engine/data_loader.h"
#include "engine/engine.h"

namespace fathom {

struct Initialized {
  std::shared_ptr<Engine> engine;
  std::shared_ptr<nn::Optimizer> optimizer;
  std::shared_ptr<data::DataLoader> loader;  // null without training data
  std::shared_ptr<nn::LRScheduler> scheduler;  // null without a "scheduler" section
};

// data_parallel_group: the ranks that train on different data (runtime.groups().data_ptr(), or
// runtime.world_ptr() without model parallelism); null for one process. With it, the batch
// sizes are checked against its size, the model's parameters are broadcast from its rank 0,
// the loader gives each rank its part of every global batch, and the engine averages gradients.
Initialized initialize(Config config, std::shared_ptr<nn::Module> model,
                       std::shared_ptr<nn::Optimizer> optimizer = nullptr,
                       std::shared_ptr<const data::Dataset> training_data = nullptr,
                       std::shared_ptr<distributed::Communicator> data_parallel_group = nullptr);

}  // namespace fathom
