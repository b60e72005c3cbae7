#pragma once
// SampleMap: the fixed map from an epoch's sample order to (step, micro-step, rank).
//
// With micro-batch size B, gradient accumulation steps A and data-parallel world size D, one
// optimizer step consumes a global batch of G = B·A·D consecutive positions of the epoch's
// order: step s owns positions [s·G, (s+1)·G). Inside it, slot k = m·D + r (micro-step m, rank r)
// owns positions [s·G + k·B, s·G + (k+1)·B). So at each micro-step the D ranks read adjacent
// chunks, and the union over all slots of a step is the same G positions for every (A, D) with
// the same G — the property that lets DP and gradient-accumulation runs reproduce a
// single-process run. docs/data.md has a table for D = 2, A = 2.
//
// The last global batch, when drop_last is false and it is short (g < G positions), is split the
// same way over the A·D slots as evenly as possible: slot k gets g / (A·D) positions plus one if
// k < g mod (A·D). Every rank still runs A micro-steps (so collectives stay matched); a slot may
// get no rows when g < A·D.

#include <cstdint>

namespace fathom {

struct PositionRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

class SampleMap {
 public:
  // Arguments are checked by the DataLoader, which names them; here they are assumed valid.
  SampleMap(int64_t num_samples, int64_t micro_batch_size, int64_t gradient_accumulation_steps, int64_t dp_world_size,
            bool drop_last);

  int64_t global_batch_size() const { return micro_ * gas_ * dp_; }
  int64_t steps_per_epoch() const;
  // Positions of step `step`'s global batch (short for a kept tail).
  PositionRange global_batch(int64_t step) const;
  // Positions read by rank `dp_rank` at micro-step `micro_step` of step `step`.
  PositionRange micro_batch(int64_t step, int64_t micro_step, int64_t dp_rank) const;

 private:
  int64_t num_samples_;
  int64_t micro_;
  int64_t gas_;
  int64_t dp_;
  bool drop_last_;
};

}  // namespace fathom
