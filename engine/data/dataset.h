#pragma once
// Dataset: a fixed-size, random-access collection of (input, target) samples — the unit the
// DataLoader shuffles, shards across data-parallel ranks and stacks into micro-batches.
//
// A sample is two tensors because every model Fathom trains maps one input to one target:
// language modelling (input tokens [T] i64, next-token targets [T] i64) and classification
// (features [768] f32, label [] i64) alike. Every sample of a dataset has the same shapes and
// dtypes, so a micro-batch is just the samples stacked along a new first dimension.

#include <cstdint>

#include "core/tensor.h"

namespace fathom {

// Targets equal to this are padding / masked positions: not counted by loss_normaliser
// (nn::cross_entropy's default ignore_index).
inline constexpr int64_t kIgnoreIndex = -100;

struct Sample {
  Tensor input;
  Tensor target;
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  // Sample `index` in [0, size()). Implementations call check_index first.
  virtual Sample get(int64_t index) const = 0;
  // How many targets of sample `index` the loss counts: for integer targets, those not equal to
  // `ignore_index`; for floating targets (regression), every element. The DataLoader sums this
  // over a global batch for loss_normaliser; datasets that know the answer without building the
  // sample (a token stream has no ignored targets) override it.
  virtual int64_t count_targets(int64_t index, int64_t ignore_index = kIgnoreIndex) const;

 protected:
  // Throws naming the index, the dataset size and `dataset` (e.g. "TokenDataset").
  void check_index(int64_t index, const char* dataset) const;
};

// The target count rule above, applied to one target tensor.
int64_t count_targets(const Tensor& target, int64_t ignore_index = kIgnoreIndex);

}  // namespace fathom
