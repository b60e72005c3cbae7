#pragma once
// TensorDataset: samples are rows of two tensors held in memory — inputs [N, ...] and
// targets [N, ...] — e.g. features [N, 768] f32 with labels [N] i64 for the quick-start.

#include "engine/data/dataset.h"

namespace fathom {

class TensorDataset : public Dataset {
 public:
  // Both tensors must be CPU tensors with the same first dimension N >= 1. Samples are views
  // (select(0, i)), so no data is copied until a micro-batch is stacked.
  TensorDataset(Tensor inputs, Tensor targets);

  int64_t size() const override { return inputs_.size(0); }
  Sample get(int64_t index) const override;

  const Tensor& inputs() const { return inputs_; }
  const Tensor& targets() const { return targets_; }

 private:
  Tensor inputs_;
  Tensor targets_;
};

}  // namespace fathom
