#pragma once
// Dropout whose mask reproduces the single-process run under any parallel layout.
//
// Where the random numbers come from (DESIGN.md, "What makes equivalence possible"): a
// DropoutContext set by the engine for each micro-batch — the seed, the optimizer step and
// each batch row's global sample index — plus the module's id (its construction order) and
// how many times it has run in this step. Element (row, column) then depends only on those
// and on its place in the unsharded tensor, never on the rank. Without a context (plain user
// code) rows are numbered locally and the step is 0.
//
// Checkpointed segments replay the per-step call counts, so a recomputed dropout draws the
// same mask.

#include "nn/module.h"

namespace fathom::nn {

struct DropoutContext {
  uint64_t seed = 0;
  uint64_t step = 0;
  Tensor sample_index;  // i64 [B]: the global sample index of each batch row (undefined: 0..B-1)
};
// Sets this thread's context and restarts the per-step call counts.
void set_dropout_context(DropoutContext context);
const DropoutContext& dropout_context();

class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Variable forward(const Variable& x) override;
  std::string type_name() const override { return "Dropout"; }

  const double p;
  const uint64_t module_id;
};

}  // namespace fathom::nn
