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
// One training step through it (docs/architecture.md):
//   begin_backward(boundary) -> autograd's grad-ready hooks hand each gradient over as it becomes
//   final -> end_backward() (reductions finished) ... at the accumulation boundary:
//   gradients_overflow() (fp16), scale_gradients(1/loss scale), gradient_norm(), scale_gradients
//   (clipping), step(), zero_grad().
//
// Model parallelism: the state is given the job's process groups and each parameter's placement
// (nn/placement.h). Overflow decisions and the gradient norm are job-wide: every rank of every
// group gets the same answer, a sharded parameter's squares are summed over its group and a
// replicated one is counted once, so ranks never disagree on clipping or on skipping a step.

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nn/optimizer.h"
#include "nn/placement.h"
#include "parallel/topology.h"
#include "zero/partition.h"

namespace fathom::nn {
class Module;  // nn/module.h
}  // namespace fathom::nn

namespace fathom::zero {

using NamedParameters = std::vector<std::pair<std::string, autograd::Variable>>;
// Builds the optimizer over the named variables it is to update (fp32 masters, a shard, ...).
using OptimizerFactory = std::function<std::shared_ptr<nn::Optimizer>(const NamedParameters&)>;

// A parameter in flat coordinates: the model's parameters concatenated in named order
// [0, Ψ) — how checkpoints address every per-element state (docs/checkpoints.md).
struct FlatSlot {
  std::string name;
  Shape shape;
  int64_t offset = 0, numel = 0;
  Range range() const { return {offset, offset + numel}; }
};

// One per-element state over a range of flat coordinates: "param", "master", "optim.<state>".
// In memory (`values`), or streamed: states in swap files are read a part at a time when asked
// (`stream`, in `stream_dtype`), so that a checkpoint never holds a whole shard of them.
struct FlatRange {
  std::string name;
  Tensor values;  // 1-D, `covers.size()` elements; undefined when streamed
  Range covers;
  std::function<Tensor(Range part)> stream = {};  // the values over `part` (within covers)
  DType stream_dtype = DType::F32;

  DType dtype() const { return values.defined() ? values.dtype() : stream_dtype; }
  Tensor over(Range part) const {
    return values.defined() ? values.narrow(0, part.begin - covers.begin, part.size()) : stream(part);
  }
};

// How the optimizer's state_dict keys map onto flat coordinates (zero/flat_optimizer_state.h):
// one key per variable it updates, keys[i] covering slots[i] (offsets relative to covers.begin).
struct OptimizerLayout {
  std::vector<std::string> keys;
  std::vector<FlatSlot> slots;
  Range covers;
};

// Reads a per-element state of a checkpoint into `target` (flat over `covers`).
using FlatReader = std::function<void(const std::string& state, const Tensor& target, Range covers)>;

// What a checkpoint being loaded holds, besides its per-element states.
struct SavedStates {
  bool has_master = false;                    // it was written in mixed precision
  int64_t optimizer_step = 0;                 // 0: no optimizer state saved
  std::vector<std::string> optimizer_states;  // "exp_avg", ...
  nn::OptimizerStateDict scalars;             // the optimizer's per-group scalars (lr, ...)
};

// Which groups the state reduces over, and where each parameter lives in them.
struct ParallelLayout {
  parallel::ProcessGroups groups;
  std::vector<nn::Placement> placements;  // one per parameter, in named order
};

// What offload's I/O engines moved (nvme offload), for the step report.
struct IoTotals {
  int64_t bytes_read = 0, bytes_written = 0;
  double wait_seconds = 0;  // time training waited for I/O
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

  // Checkpoints: the model's tensor table, this rank's per-element states restricted to
  // `wanted` (flat coordinates), and loading them back from any saved layout.
  virtual std::vector<FlatSlot> flat_slots() const = 0;
  virtual DType parameter_dtype() const = 0;
  virtual std::vector<FlatRange> flat_ranges(Range wanted) const = 0;
  virtual void load_flat_ranges(const FlatReader& read, const SavedStates& saved) = 0;
  // The optimizer's step count (0 before the first step) and its per-element states' names
  // ("exp_avg", ...; sorted, none before the first step), the same on every rank.
  int64_t optimizer_steps() const;
  std::vector<std::string> optimizer_state_names() const;

  // Whether backward averages gradients over the data group (on by default). An optimizer that
  // does its own data-parallel communication (1-bit Adam after its warm-up) turns it off; only
  // stage 0 can (ZeRO shards gradients by reducing them).
  virtual void set_gradient_reduction(bool on) = 0;

  // Parameter `index` (named order) as the unsplit model holds it, from this rank's `mine`: the
  // tensor itself, or a tensor-parallel shard assembled from every rank's (collective over the
  // tensor group; padding dropped).
  Tensor whole_parameter(size_t index, const Tensor& mine) const;
  // Every parameter whole in the model (stage 3 gathers; collective), and back. No-ops below.
  virtual void gather_full_parameters() {}
  virtual void release_full_parameters() {}
  // The parameters of `part` (a module of the model) whole, and released again: for code that
  // reads them outside the module's forward, one part at a time (the hybrid engine's generation
  // without pin_parameters). Stage 3 gathers (collective); no-ops below.
  virtual void gather_parameters_of(const nn::Module& part) { (void)part; }
  virtual void release_parameters_of(const nn::Module& part) { (void)part; }
  // Whether gather_parameters_of is a collective over several ranks (stage 3 with a data group
  // of more than one): then every rank must call it the same number of times.
  virtual bool gathers_collectively() const { return false; }
  // After the stored parameters were overwritten (a checkpoint load). No-op below stage 3.
  virtual void reload_parameters() {}
  // Offload to nvme: this rank's I/O so far (none without swap files).
  virtual std::optional<IoTotals> io_totals() const { return std::nullopt; }

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
  OptimizerLayout optimizer_layout_;  // set by the state that builds the optimizer
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
