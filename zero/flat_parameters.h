#pragma once
// The model's parameters moved into one contiguous, padded buffer (ZeRO's flat parameter
// group): each parameter's data becomes a view of its slot, so a whole-buffer all-gather
// refreshes every parameter at once and a rank's shard is one slice. Slots follow the model's
// parameter order; the buffer's tail past the last slot is the partition's padding (zeros).

#include <string>
#include <utility>
#include <vector>

#include "autograd/variable.h"
#include "zero/partition.h"

namespace fathom::zero {

class FlatParameters {
 public:
  using Named = std::vector<std::pair<std::string, autograd::Variable>>;
  struct Slot {
    std::string name;
    autograd::Variable param;
    int64_t offset = 0, numel = 0;
    Range range() const { return {offset, offset + numel}; }
  };

  // All parameters must share one floating dtype. Their data is copied into the buffer
  // (charged to MemoryTag::Parameters) and replaced by views of it.
  FlatParameters(const Named& params, int world_size);

  const Tensor& buffer() const { return buffer_; }
  DType dtype() const { return buffer_.dtype(); }
  const Partition& partition() const { return partition_; }
  const std::vector<Slot>& slots() const { return slots_; }
  // A buffer laid out like this one (padded), e.g. flat gradients or a staging copy.
  Tensor empty_like(DType dtype, MemoryTag tag) const;
  // Makes every parameter's grad a view of `flat` (same layout): autograd accumulates there.
  void attach_gradients(const Tensor& flat) const;

 private:
  std::vector<Slot> slots_;
  Partition partition_;
  Tensor buffer_;
};

}  // namespace fathom::zero
