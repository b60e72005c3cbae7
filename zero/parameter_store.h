#pragma once
// ParameterStore: where a ZeRO rank's shard of the flat parameters lives, behind one interface
// for the two sides that use it:
//   - stage 3's gatherer (zero/parameter_gatherer.h) takes the shard piece by piece — one piece
//     per parameter, this rank's part of it — around each all-gather, and may ask for pieces
//     ahead of use (prefetch) in the order the first step recorded;
//   - the optimizer side (zero/optimizer_shard.h) and checkpoints read and write ranges.
// Two kinds:
//   resident: the whole shard in one tensor on the model's device or in offload's host tier
//             (stages 1-2's view of the flat buffer, stage 3, offload_param cpu);
//   swapped:  the pieces in swap files, at most max_in_cpu elements of them in host memory
//             (offload_param nvme, zero/swapped_parameters.h).
// Every kind stores the same values: placement moves data, never arithmetic.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "offload/io_engine.h"
#include "zero/parameter_offload.h"
#include "zero/partition.h"

namespace fathom::zero {

class ParameterStore {
 public:
  // A parameter's part of this rank's shard, in shard coordinates (empty when it has none).
  struct Piece {
    std::string name;
    Range range;
  };

  virtual ~ParameterStore() = default;
  ParameterStore(const ParameterStore&) = delete;
  ParameterStore& operator=(const ParameterStore&) = delete;

  int64_t numel() const { return numel_; }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }  // where the gatherer's pieces are
  const std::vector<Piece>& pieces() const { return pieces_; }

  // The whole shard when it is in memory as one tensor; undefined when swapped.
  virtual Tensor resident() const = 0;

  // The gatherer's side. acquire: the piece's values, readable until release (waits for its read).
  virtual Tensor acquire(size_t piece) = 0;
  virtual void release(size_t piece) = 0;
  // Whether all-gathers may start ahead of use (stage3_prefetch_bucket_size). Every rank must
  // issue them in the same order, so only a store whose pieces are always at hand allows it; a
  // swapped one reads ahead instead (prefetch), which each rank does on its own.
  virtual bool gathers_ahead() const = 0;
  // Starts reading a piece that will be acquired soon; false when nothing was started (it is in
  // memory already, or the buffers or the memory bound do not allow another read now).
  virtual bool prefetch(size_t piece) = 0;
  // Reads ahead that nobody acquired (the path changed, e.g. evaluation) are finished and count
  // as cached: called at the end of each backward.
  virtual void settle() = 0;
  // A module's parameters are gathered together (a persistent parameter alone): a store that
  // bounds its memory refuses one whose part of this rank's shard (`elements`) it cannot hold.
  virtual void check_module(const std::string& module, int64_t elements) const {}

  // The optimizer's and checkpoints' side, over shard ranges. read: the values (a view of the
  // shard when resident, a copy otherwise). assign: new values (any floating dtype, rounded
  // once); flush waits until every assigned value is stored.
  virtual Tensor read(Range range) = 0;
  virtual void assign(Range range, const Tensor& values) = 0;
  virtual void flush() = 0;
  // Swapped: what its I/O engine moved so far.
  virtual std::optional<offload::IoEngine::Counters> io_counters() const { return std::nullopt; }

 protected:
  ParameterStore(std::vector<Piece> pieces, int64_t numel, DType dtype, Device device)
      : pieces_(std::move(pieces)), numel_(numel), dtype_(dtype), device_(device) {}

 private:
  std::vector<Piece> pieces_;
  int64_t numel_;
  DType dtype_;
  Device device_;
};

// The shard in memory: `shard` itself (its views are the pieces and ranges).
std::unique_ptr<ParameterStore> resident_parameters(Tensor shard, std::vector<ParameterStore::Piece> pieces);
// A new zeroed shard of `numel` elements where `offload` places it: the device, the host tier, or
// swap files.
std::unique_ptr<ParameterStore> make_parameter_store(const ParameterOffload& offload,
                                                     std::vector<ParameterStore::Piece> pieces, int64_t numel,
                                                     DType dtype, Device device);

}  // namespace fathom::zero
