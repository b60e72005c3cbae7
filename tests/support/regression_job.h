#pragma once
// The small regression the compressed-optimizer tests train: two linear layers fitting cosines of
// sines that depend on the rank and the step, a micro-batch of 2 rows per rank, trained by the
// engine with the optimizer under test, optionally saved and resumed.
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "nn/containers.h"

namespace fathom::testing {

// The same weights for every seed-equal call (the layers' own init draws from a shared stream).
std::shared_ptr<nn::Sequential> regression_model(uint64_t seed = 5);
// This rank's loss for `step` (0-based) through the engine's forward; `scale` multiplies it.
autograd::Variable regression_loss(Engine& engine, int64_t step, int rank, double scale = 1.0);

struct RegressionJob {
  std::string optimizer;  // the config's "optimizer" section, as JSON
  int steps = 0;          // trains until the engine has taken this many
  // A twin's first step moves nothing, as the compressed optimizers' initialisation step: the
  // lr warms up from 0 (WarmupLR over 2 steps; with it, both runs of a comparison) and, for
  // zero_first_loss, the first step's loss is multiplied by 0 so the moments stay 0 too.
  bool warmup_lr = false;
  bool zero_first_loss = false;
  std::string checkpoint_dir;  // saved there at step save_at; resume: loaded from it first
  int save_at = -1;
  bool resume = false;
  std::shared_ptr<parallel::Communicator> world;  // null: the test runtime's world
};

struct RegressionRun {
  std::vector<double> losses;  // this rank's, one per step taken here
  std::vector<Tensor> weights;  // the final parameters
  std::shared_ptr<nn::Optimizer> optimizer;
};

RegressionRun run_regression(const RegressionJob& job);

// A fresh folder for one test's checkpoints (per world size, so concurrent CTest runs of one
// binary at several rank counts do not share it); collective.
std::string fresh_checkpoint_dir(const std::string& name, parallel::Communicator& world);

}  // namespace fathom::testing
