#pragma once
// TrainingState: the one owner of a model's gradients, fp32 master weights and optimizer state.
//
// Every training mode is one object behind this interface, and the engine holds exactly one:
//   ReplicatedState (zero/replicated_state.h): ZeRO stage 0 — one process, or data parallelism
//     with gradients averaged in buckets while backward runs; fp32 masters when the model is
//     16-bit;
//   ShardedState (zero/sharded_state.h): ZeRO stages 1-3 — masters, optimizer states and
//     (stage 2) gradients or (stage 3) gradients and parameters too exist for this rank's shard only.
// Mixed precision is a property of the state (whether it keeps fp32 masters), not a separate
// hook chain, and each state installs at most one grad-ready hook per parameter (none where
// autograd's own accumulation is all it needs), kept as a HookHandle: destroying the state
// removes everything it installed on the model.
//
// The interface is the training step (docs/architecture.md):
//   begin_backward(boundary) -> autograd's grad-ready hooks hand each gradient over as it becomes
//   final -> end_backward() (reductions finished) ... at the accumulation boundary:
//   gradients_overflow() (fp16), scale_gradients(1/loss scale), gradient_norm(), scale_gradients
//   (clipping), step(), zero_grad().
// What only some modes have, or only some callers need, the state hands out as objects of their
// own: residency() gathers parameters a state does not keep whole (stage 3; null otherwise),
// flat_view() is the state in flat coordinates for checkpoints, io_counters() counts swap-file
// I/O (null without swap files).
//
// Model parallelism: the state is given the job's process groups and each parameter's placement
// (nn/placement.h). Overflow decisions and the gradient norm are job-wide: every rank of every
// group gets the same answer, a sharded parameter's squares are summed over its group and a
// replicated one is counted once, so ranks never disagree on clipping or on skipping a step.

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nn/optimizer.h"
#include "nn/placement.h"
#include "parallel/topology.h"
#include "zero/flat_state_view.h"
#include "zero/io_totals.h"
#include "zero/parameter_residency.h"
#include "zero/partition.h"

namespace fathom::zero {

using NamedParameters = std::vector<std::pair<std::string, autograd::Variable>>;
// Builds the optimizer over the named variables it is to update (fp32 masters, a shard, ...).
using OptimizerFactory = std::function<std::shared_ptr<nn::Optimizer>(const NamedParameters&)>;

// Which groups the state reduces over, and where each parameter lives in them.
struct ParallelLayout {
  parallel::ProcessGroups groups;
  std::vector<nn::Placement> placements;  // one per parameter, in named order
};

class TrainingState {
 public:
  virtual ~TrainingState() = default;
  TrainingState(const TrainingState&) = delete;
  TrainingState& operator=(const TrainingState&) = delete;

  // 0 (replicated) or the ZeRO stage 1-3.
  virtual int stage() const = 0;
  // The optimizer over whatever this state updates (fp32 masters, a shard); null for a state
  // without one (an evaluation engine).
  const std::shared_ptr<nn::Optimizer>& optimizer() const { return optimizer_; }
  const parallel::ProcessGroups& groups() const { return layout_.groups; }
  parallel::Communicator& data_group() const { return layout_.groups.data(); }
  // Each parameter's placement over the tensor-parallel group, in named order.
  const std::vector<nn::Placement>& placements() const { return layout_.placements; }
  // Whether the model is 16-bit and the optimizer updates fp32 master weights.
  bool keeps_masters() const { return keeps_masters_; }
  // Where the state's buffers live (the parameters' device; later pinned host or NVMe).
  virtual Device device() const = 0;

  // Around each micro-batch's backward: `boundary` when it ends an accumulation cycle (the only
  // backward whose gradients are reduced at stage 0 and 1).
  virtual void begin_backward(bool boundary) = 0;
  virtual void end_backward() = 0;

  // At the boundary, on the gradients the optimizer reads:
  // Inf/NaN anywhere in the job (every rank gets the same answer).
  bool gradients_overflow() const;
  // The global L2 norm (every rank gets the same value).
  double gradient_norm() const;
  // grads *= factor: unscaling and clipping.
  virtual void scale_gradients(double factor) = 0;
  // The optimizer step, and the updated values written into the model's parameters.
  virtual void step() = 0;
  virtual void zero_grad() = 0;

  // The mean of a per-rank value (the step's loss) over the ranks that each hold one: the data
  // group of the pipeline's last stage, whose value every stage then gets.
  double mean_over_replicas(double value) const;

  // After the accumulation boundary's reductions, before the overflow check and the norm: the
  // gradients of `parameters` (indices in named order) summed over `tie`, the ranks that hold
  // copies of one parameter (a pipeline's tied embedding on its first and last stages), so that
  // every copy takes the same step. Collective over `tie` (and, at ZeRO, the data group).
  virtual void sum_tied_gradients(parallel::Communicator& tie, const std::vector<size_t>& parameters) = 0;

  // Whether backward averages gradients over the data group (on by default). An optimizer that
  // does its own data-parallel communication (1-bit Adam after its warm-up) turns it off; only
  // stage 0 can (ZeRO shards gradients by reducing them).
  virtual void set_gradient_reduction(bool on) = 0;

  // Parameter `index` (named order) as the unsplit model holds it, from this rank's `mine`: the
  // tensor itself, or a tensor-parallel shard assembled from every rank's (collective over the
  // tensor group; padding dropped).
  Tensor whole_parameter(size_t index, const Tensor& mine) const;

  // What gathers the parameters for code that reads them outside the model's forward and
  // backward; null where every parameter is always whole in the model (stages 0-2).
  virtual ParameterResidency* residency() { return nullptr; }
  // The state in flat coordinates, as checkpoints save and load it.
  virtual FlatStateView& flat_view() = 0;
  // Offload to nvme: this rank's I/O; null without swap files.
  virtual const IoCounters* io_counters() const { return nullptr; }

 protected:
  TrainingState(ParallelLayout layout, bool keeps_masters)
      : layout_(std::move(layout)), keeps_masters_(keeps_masters) {}
  // This rank's part of the answer: any Inf/NaN in its gradients; the L2 norm of the gradient
  // elements it counts (placement.counted_at, and its own shard's part at ZeRO).
  virtual bool local_overflow() const = 0;
  virtual double local_norm() const = 0;
  // Whether ranks of the data-parallel group hold different gradients (ZeRO shards) rather
  // than the same averaged ones (stage 0).
  virtual bool data_parallel_sharded() const = 0;
  // The groups whose ranks hold different parts of the answer, which it is reduced over.
  std::vector<parallel::Communicator*> reduction_groups() const;

  ParallelLayout layout_;
  bool keeps_masters_ = false;
  std::shared_ptr<nn::Optimizer> optimizer_;
};

// The flat tensor table of named parameters in order (offsets from 0, no padding).
std::vector<FlatSlot> flat_slots_of(const NamedParameters& params);
// A one-process layout: every group a one-rank LocalCommunicator, every parameter replicated.
ParallelLayout single_process_layout(size_t parameters);
// Every rank starts from one rank's weights, whatever each rank's initialisation drew: rank 0 of
// its data group, and of its tensor group for the tensors that group replicates. Collective.
void broadcast_initial_weights(const NamedParameters& params, const ParallelLayout& layout);
// grads *= factor, dense f32 ones in one multi-tensor kernel (unscaling, clipping).
void scale_tensors(const std::vector<Tensor>& tensors, double factor);

}  // namespace fathom::zero
