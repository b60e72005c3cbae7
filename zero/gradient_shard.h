#pragma once
// GradientShard: a ZeRO rank's gradient for its shard of the flat parameters, behind one
// interface for the sides that use it:
//   - backward: stages 2-3 add each reduced bucket's part as it completes (in descending shard
//     order: buckets complete in the reverse order of the parameters); stage 1 hands over the
//     reduced shard whole at the boundary;
//   - the step's checks: the overflow flag, the norm for clipping, scaling (unscale, clipping),
//     pipeline ties;
//   - the optimizer: each sub-group's fp32 gradient, one after another.
// Two kinds:
//   resident: one tensor on the model's device, or in offload's host tier (offload_optimizer
//             none or cpu);
//   swapped:  one swap file per optimizer sub-group, at most two sub-groups and a write in host
//             memory (offload_optimizer nvme, zero/swapped_gradients.h).
// Both compute the same values: the norm is summed over fixed blocks of the shard (norm_pieces),
// so it does not depend on where the gradient lives nor on how it is cut into sub-groups.

#include <optional>
#include <vector>

#include "core/tensor.h"
#include "offload/io_engine.h"
#include "zero/partition.h"

namespace fathom::zero {

// The shard's norm is the sum, in this order, of the sums of squares of these pieces: the parts
// of `counted` (ascending, disjoint shard ranges) cut at every multiple of `block` elements.
std::vector<Range> norm_pieces(const std::vector<Range>& counted, int64_t block);
constexpr int64_t kNormBlockElements = int64_t{1} << 20;
// One piece's sum of squares, as global_norm (kernels/reduction.h) counts a CPU tensor's.
double sum_of_squares(const Tensor& piece);

class GradientShard {
 public:
  virtual ~GradientShard() = default;
  GradientShard(const GradientShard&) = delete;
  GradientShard& operator=(const GradientShard&) = delete;

  int64_t numel() const { return numel_; }

  // Backward (stages 2-3): each backward begins, then `part` (any floating dtype) added at `offset` in the shard.
  virtual void begin_backward(bool boundary) {}
  virtual void add(const Tensor& part, int64_t offset) = 0;
  // Stage 1 at the boundary: the reduced shard, given up by the caller.
  virtual void assign(Tensor reduced) = 0;
  // The end of a backward; at the boundary the gradient is complete and fp32.
  virtual void end_backward(bool boundary) = 0;
  // Between the boundary and zero(): whether there is a complete gradient.
  virtual bool complete() const = 0;

  // The complete gradient's checks and changes, each over the whole shard.
  virtual bool has_inf_or_nan() = 0;
  virtual double norm() = 0;  // over the counted pieces
  virtual void scale(double factor) = 0;
  // fp32 values over `range` (a copy, or a view when resident) and their replacement (ties).
  virtual Tensor read(Range range) = 0;
  virtual void write(Range range, const Tensor& values) = 0;
  // The optimizer's walk over its sub-groups: `range` will be read soon / is no longer needed.
  virtual void prefetch(Range range) {}
  virtual void done_with(Range range) {}

  // The next accumulation cycle starts from zeros.
  virtual void zero() = 0;
  // Where complete gradients are (a communicator for ties must be on this device).
  virtual Device device() const = 0;
  // Swapped: what its I/O engine moved so far.
  virtual std::optional<offload::IoEngine::Counters> io_counters() const { return std::nullopt; }

 protected:
  GradientShard(int64_t numel, std::vector<Range> counted, int64_t norm_block)
      : numel_(numel), pieces_(norm_pieces(counted, norm_block)) {}
  const std::vector<Range>& pieces() const { return pieces_; }

 private:
  int64_t numel_;
  std::vector<Range> pieces_;
};

// Where a resident gradient lives: the model's device, or the host tier when offloaded.
struct GradientPlacement {
  Device device = kCPU;
  bool host_tier = false;  // offloaded: allocated in offload's host tier (pinned when pin_memory)
  bool pin_memory = false;
};

class ResidentGradient final : public GradientShard {
 public:
  // `accumulated`: the dtype backward accumulates in; `accumulates` (stages 2-3): a zeroed buffer
  // is kept for backward to add into.
  ResidentGradient(int64_t numel, DType accumulated, bool accumulates, GradientPlacement placement,
                   std::vector<Range> counted, int64_t norm_block = kNormBlockElements);

  void add(const Tensor& part, int64_t offset) override;
  void assign(Tensor reduced) override;
  void end_backward(bool boundary) override;
  bool complete() const override { return complete_; }
  bool has_inf_or_nan() override;
  double norm() override;
  void scale(double factor) override;
  Tensor read(Range range) override;
  void write(Range range, const Tensor& values) override;
  void zero() override;
  Device device() const override { return placement_.device; }

 private:
  template <class Fn>
  void in_place(Fn&& fn) const;  // allocations where the gradient lives
  void allocate_zeros();

  DType accumulated_;
  bool accumulates_;
  GradientPlacement placement_;
  Tensor values_;  // accumulating (accumulated_), or complete (fp32)
  bool complete_ = false;
};

}  // namespace fathom::zero
