#pragma once
// The model's parameters laid out as one contiguous, padded flat buffer (ZeRO's flat parameter
// group). Slots follow the model's parameter order; the tail past the last slot is the
// partition's padding (zeros).
//   Full (stages 1 and 2): the whole buffer exists and each parameter's data is a view of its slot,
//     so a whole-buffer all-gather refreshes every parameter at once.
//   ShardOnly (stage 3): only this rank's owned elements exist, where offload_param puts them
//     (a ParameterStore: the device, the host tier or swap files); parameters are released
//     (empty data) until a ParameterGatherer gathers them.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/variable.h"
#include "zero/parameter_store.h"
#include "zero/partition.h"

namespace fathom::zero {

class FlatParameters {
 public:
  using Named = std::vector<std::pair<std::string, autograd::Variable>>;
  struct Slot {
    std::string name;
    autograd::Variable param;
    Shape shape;  // the parameter's (its data is empty while released)
    int64_t offset = 0, numel = 0;
    Range range() const { return {offset, offset + numel}; }
  };

  enum class Storage { Full, ShardOnly };
  // All parameters must share one floating dtype. Their data is copied into the buffer
  // (charged to MemoryTag::Parameters) and replaced by views of it (Full) or released (ShardOnly).
  // ShardOnly: `offload` (zero_optimization.offload_param) says where the shard lives.
  FlatParameters(const Named& params, int world_size, int rank, Storage storage = Storage::Full,
                 const ParameterOffload& offload = {});

  Storage storage() const { return storage_; }
  // Full: the padded buffer. ShardOnly: undefined.
  const Tensor& buffer() const { return storage_ == Storage::Full ? buffer_ : kNone; }
  // This rank's owned elements (a view of the buffer, or the shard itself), piece by piece: one
  // piece per slot, in slot order.
  ParameterStore& shard() const { return *shard_; }
  DType dtype() const { return shard_->dtype(); }
  Device device() const { return device_; }
  const Partition& partition() const { return partition_; }
  const std::vector<Slot>& slots() const { return slots_; }
  // A buffer laid out like this one (padded), e.g. flat gradients or a staging copy.
  Tensor empty_like(DType dtype, MemoryTag tag) const;
  // What a released parameter's data is: an empty tensor (using it is a shape error).
  Tensor released(DType dtype) const;
  // Makes every parameter's grad a view of `flat` (same layout): autograd accumulates there.
  void attach_gradients(const Tensor& flat) const;

 private:
  static inline const Tensor kNone{};
  std::vector<Slot> slots_;
  Partition partition_;
  Storage storage_;
  Device device_ = kCPU;
  Tensor buffer_;
  std::unique_ptr<ParameterStore> shard_;
};

}  // namespace fathom::zero
