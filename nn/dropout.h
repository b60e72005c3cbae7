#pragma once
// Dropout whose mask reproduces the single-process run under any parallel layout.
//
// Where the random numbers come from (docs/architecture.md, "Equivalence"): a
// DropoutContext set by the engine for each micro-batch — the seed, the optimizer step and
// each batch row's global sample index — plus the module's stream id and how many times it has
// run in this step. The stream id is a hash of the module's dotted name in its model, set by
// assign_dropout_streams (the engine calls it), so every process and every copy of a model
// agree; before that it is the construction order. Element (row, column) then depends only on those
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
  // x (B, T, C) holds positions [first_position, first_position + T) of sequences of
  // `sequence_length` (sequence parallelism): the mask is those positions' mask in the whole.
  Variable forward_sequence_shard(const Variable& x, int64_t first_position, int64_t sequence_length);
  std::string type_name() const override { return "Dropout"; }

  uint64_t stream_id() const { return stream_id_; }
  void set_stream_id(uint64_t id) { stream_id_ = id; }

  const double p;

 private:
  Variable forward_rows(const Variable& x, int64_t first_row, int64_t rows_per_sample);
  uint64_t stream_id_;
};

// Gives every Dropout under `root` the stream id of its dotted name.
void assign_dropout_streams(Module& root);

}  // namespace fathom::nn
