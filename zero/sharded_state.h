#pragma once
// ShardedState: ZeRO stages 1, 2 and 3 (DeepSpeed's DeepSpeedZeroOptimizer and stage 3) as a
// TrainingState (zero/training_state.h), from small pieces: FlatParameters (the parameters as
// views of one padded buffer), Partition (each rank's shard of the data-parallel group) and an
// ordinary optimizer over this rank's shard.
//
// Stages 1 and 2 keep full parameters on every rank; all stages give each rank the fp32 master weights
// (16-bit models) and optimizer states of its shard only. After the optimizer step the updated
// shards are all-gathered into the parameters (in allgather_bucket_size pieces).
//   stage 1: gradients are full, accumulating in a flat buffer across micro-steps; the
//            backward that ends a cycle reduce-scatters them, so each rank gets its shard.
//   stage 2: gradients are sharded too: every micro-step, as gradients become ready (grad-ready
//            hooks), they are copied into reduce_bucket_size buckets that are reduce-scattered
//            while backward runs (overlap_comm) and accumulated into the rank's gradient shard;
//            a parameter's full gradient is released once copied, and at most two buckets exist.
//   stage 3: as stage 2, and parameters are sharded too: a rank stores only its shard, and a
//            ParameterGatherer gathers each module's parameters around its forward and its
//            backward; after the step nothing is all-gathered.
// In mixed precision without gradient accumulation the persistent gradients are 16-bit (the
// ZeRO paper's 2 bytes/param); their reductions accumulate in f32 (parallel/communicator.h) and
// the optimizer sees fp32. With accumulation over micro-steps (accumulate_in_fp32) they are
// fp32, as DeepSpeed's bf16 optimizer keeps them, so that summing micro-batches does not round
// in 16 bits — at stage 0 Fathom always accumulates in fp32.
// Overflow (fp16) is agreed by all ranks; the gradient norm for clipping is global: each rank
// counts its own shard, summed over the data group (and the model-parallel groups).
// The optimizer side — fp32 masters and optimizer states — is an OptimizerShard
// (zero/optimizer_shard.h), which places it on the device, the host tier or NVMe (offload); the
// gradient shard (zero/gradient_shard.h) lives beside it: in the host tier with offload cpu,
// each reduced bucket copied there as it completes during backward, in swap files by sub-group
// with offload nvme.

#include <functional>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "parallel/gradient_averaging.h"
#include "parallel/gradient_buckets.h"
#include "zero/flat_optimizer_state.h"
#include "zero/flat_parameters.h"
#include "zero/gradient_shard.h"
#include "zero/optimizer_shard.h"
#include "zero/parameter_offload.h"
#include "zero/parameter_gatherer.h"
#include "zero/training_state.h"

namespace fathom::zero {

struct ShardedOptions {
  int stage = 1;
  int64_t reduce_bucket_elements = kDefaultReduceBucketElements;        // reduce_bucket_size
  int64_t allgather_bucket_elements = kDefaultAllgatherBucketElements;  // allgather_bucket_size
  bool overlap_comm = false;                        // stage 2: reduce buckets while backward runs
  bool accumulate_in_fp32 = false;                  // 16-bit models: fp32 gradients across micro-steps
  parallel::GradientAveraging averaging;            // prescaling, predivision, communication dtype
  GatherOptions gather;                             // stage 3: persistence, prefetch, live cap
  OptimizerOffload offload;                         // where masters, optimizer state and gradients live
  ParameterOffload parameter_offload;               // stage 3: where the parameter shard lives
};

class ShardedState final : public TrainingState, public FlatStateView, public IoCounters {
 public:
  // `model` (stage 3): whose modules get the hooks that gather their parameters on demand.
  // The shards are over layout.groups.data(). `make_optimizer` null: no optimizer (evaluation).
  ShardedState(const NamedParameters& params, ParallelLayout layout, ShardedOptions options,
               const OptimizerFactory& make_optimizer, nn::Module* model = nullptr);

  int stage() const override { return options_.stage; }
  Device device() const override { return flat_.device(); }
  void begin_backward(bool boundary) override;
  void end_backward() override;
  void scale_gradients(double factor) override;
  void set_gradient_reduction(bool on) override;
  void step() override;  // optimizer step on the shard, then all-gather the parameters (stages 1-2)
  void zero_grad() override;
  void sum_tied_gradients(parallel::Communicator& tie, const std::vector<size_t>& parameters) override;
  // Stage 3's gatherer; null below, where every rank keeps the parameters whole.
  ParameterResidency* residency() override { return gatherer_.get(); }
  FlatStateView& flat_view() override { return *this; }
  const IoCounters* io_counters() const override;

  // FlatStateView
  std::vector<FlatSlot> flat_slots() const override;
  DType parameter_dtype() const override { return flat_.dtype(); }
  std::vector<FlatRange> flat_ranges(Range wanted) const override;
  void load_flat_ranges(const FlatReader& read, const SavedStates& saved) override;
  int64_t optimizer_steps() const override;
  std::vector<std::string> optimizer_state_names() const override;

  // IoCounters: the optimizer shard's, the gradient shard's and the parameter shard's swap files.
  IoTotals io_totals() const override;

  const FlatParameters& flat_parameters() const { return flat_; }
  parallel::Communicator& group() const { return *group_; }
  // The optimizer's variable: this rank's fp32 master shard (f32 models: a view of the
  // parameters' shard), over flat_parameters().partition().owned(rank) — its first sub-group.
  const autograd::Variable& master() const { return shard_->master(); }
  const OptimizerShard& optimizer_shard() const { return *shard_; }
  // Stage 3's gatherer (null below stage 3).
  const ParameterGatherer* gatherer() const { return gatherer_.get(); }

 protected:
  bool local_overflow() const override;
  double local_norm() const override;
  bool data_parallel_sharded() const override { return true; }

 private:
  struct Bucket {
    Range range;                  // in the flat buffer
    Tensor flat, received;        // alive only while the bucket is in use
    parallel::WorkHandle work;
  };
  void build_buckets();
  void on_gradient_ready(size_t slot);
  void fold_into_flat_gradients(size_t slot);  // stage 1, fp32 accumulation of 16-bit gradients
  void launch_ready_buckets();
  void complete(size_t bucket);
  void land_arriving_gradients();  // offloaded from a GPU: the buckets' host copies added in
  std::unique_ptr<GradientShard> make_gradient_shard() const;
  std::vector<Range> counted_ranges() const;  // the shard's parts this rank counts in the norm
  void all_gather_parameters();
  void reduce_scatter_flat_gradients();
  // The dtype stage 2-3 buckets travel in: the configured one, or the parameters'.
  DType communication_dtype() const { return options_.averaging.dtype_for(flat_.dtype()); }

  FlatParameters flat_;
  std::shared_ptr<parallel::Communicator> group_;  // the data-parallel group for the shards' device
  ShardedOptions options_;
  DType gradient_dtype_;      // of the persistent gradients: the model's, or f32 (accumulate_in_fp32)
  Range owned_;               // this rank's real elements, in buffer coordinates
  Tensor flat_gradients_;     // stage 1: padded, gradient_dtype_
  std::unique_ptr<OptimizerShard> shard_;  // masters and optimizer, wherever offload puts them
  std::unique_ptr<GradientShard> gradient_;  // the shard's gradient, beside them
  std::unique_ptr<ParameterGatherer> gatherer_;
  std::optional<parallel::GradientBuckets> plan_;  // stages 2-3: which slots go together
  std::vector<Bucket> buckets_;
  struct Arriving {
    Tensor host;     // a completed bucket's part of this shard, on its way to the host
    int64_t offset;  // in the shard
  };
  std::vector<Arriving> arriving_;
  bool every_slot_counted_ = true;  // no tensor-parallel replicas or tie followers among the slots
  std::vector<autograd::HookHandle> hooks_;
  size_t next_complete_ = 0;
  bool boundary_ = false, in_backward_ = false;
};

// The state as a ShardedState, or null at stage 0 (for tests, benchmarks and tools that look
// inside ZeRO: the gatherer's counters, the shard's layout).
inline const ShardedState* as_sharded(const TrainingState& state) { return dynamic_cast<const ShardedState*>(&state); }

}  // namespace fathom::zero
