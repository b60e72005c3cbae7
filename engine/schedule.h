#pragma once
// Schedules: what drives the micro-batches of one optimizer step through the engine's
// micro-step API (Engine::train_batch runs one). Gradient accumulation is the one every engine
// has; pipeline schedules plug in beside it (docs/architecture.md).

#include "engine/engine.h"

namespace fathom {

// Forward, loss, backward and step for each micro-batch until the accumulation boundary: one
// optimizer step of gradient_accumulation_steps micro-batches (fewer when the engine is already
// partway through a cycle).
class GradientAccumulation final : public Schedule {
 public:
  void run(Engine& engine, const NextBatch& next, const LossFunction& loss) override;
};

}  // namespace fathom
