#pragma once
// The small regression the compressed-optimizer tests train: two linear layers fitting cosines of
// sines that depend on the rank and the step, a micro-batch of 2 rows per rank.
#include <memory>

#include "engine/engine.h"
#include "nn/containers.h"

namespace fathom::testing {

// The same weights for every seed-equal call (the layers' own init draws from a shared stream).
std::shared_ptr<nn::Sequential> regression_model(uint64_t seed = 5);
// This rank's loss for `step` (0-based) through the engine's forward; `scale` multiplies it.
autograd::Variable regression_loss(Engine& engine, int64_t step, int rank, double scale = 1.0);

}  // namespace fathom::testing
