#pragma once
// OptimizerShard: what a ZeRO rank's optimizer updates — its shard of the flat parameters as fp32
// master weights, cut into sub-groups of sub_group_size elements, and the optimizer over them —
// placed on a memory tier (zero/optimizer_offload.h); the shard's gradient (zero/gradient_shard.h)
// is placed beside it by the training state and read sub-group by sub-group in the step:
//   device: beside the model, as without offload; an f32 model's masters are its parameters;
//   host:   the host tier (offload/host_memory.h): masters, gradient and optimizer states in
//           (pinned) host memory, the optimizer stepping there — the vectorised CPU Adam
//           (kernels/cpu/optimizer_cpu.cpp) for Adam and AdamW;
//   nvme:   swap files (offload/tensor_swapper.h): a sub-group's master and states are read in,
//           updated and written back one sub-group at a time, reading k+1 and writing k-1 while k
//           is updated when pipeline_read / pipeline_write are on.
// The optimizer writes the updated values into the model's 16-bit parameters in its update's own
// pass (nn::Optimizer::set_copy), rounded once — offloaded from a GPU, into pinned host memory
// that a stream of their own (offload/device_transfers.h) copies up, each sub-group's upload
// overlapping the next one's update; parameters in swap files (offload_param nvme) are assigned
// each sub-group's values after its update instead.
// Placement moves data and never arithmetic: every tier, and every sub-group size, computes the
// same values bit for bit (the optimizers it takes are elementwise; ZeRO refuses Lamb).

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "offload/io_engine.h"
#include "zero/flat_optimizer_state.h"
#include "zero/gradient_shard.h"
#include "zero/optimizer_offload.h"
#include "zero/parameter_store.h"
#include "zero/training_state.h"

namespace fathom::offload {
class DeviceTransfers;
class TensorSwapper;
}

namespace fathom::zero {

class OptimizerShard {
 public:
  // `params`: this rank's shard of the flat parameters (wherever it lives; it must outlive this),
  // covering `covers` in flat coordinates. `keeps_masters`: the model is 16-bit. `make_optimizer`
  // null: no optimizer (evaluation).
  OptimizerShard(ParameterStore& params, Range covers, bool keeps_masters, OptimizerOffload offload,
                 const OptimizerFactory& make_optimizer);
  ~OptimizerShard();
  OptimizerShard(const OptimizerShard&) = delete;
  OptimizerShard& operator=(const OptimizerShard&) = delete;

  const std::shared_ptr<nn::Optimizer>& optimizer() const { return optimizer_; }
  const OptimizerLayout& layout() const { return layout_; }
  const OptimizerOffload& offload() const { return offload_; }
  size_t sub_groups() const { return groups_.size(); }
  OptimizerOffload::Tier tier_of(size_t sub_group) const { return groups_.at(sub_group).tier; }
  // The first sub-group's master: the whole shard when there is one sub-group.
  const autograd::Variable& master(size_t sub_group = 0) const { return groups_.at(sub_group).master; }

  // The sub-groups' ranges within the shard, in order (a swapped gradient is cut the same way).
  std::vector<Range> sub_group_ranges() const;
  bool offloaded() const { return offload_.tier != OptimizerOffload::Tier::Device; }

  // Steps every sub-group with its part of the complete `gradient`, one sub-group after another,
  // and writes the updated values into the parameters (the constructor's).
  void step(GradientShard& gradient);
  // Checkpoints: "master" (when `with_master`) and "optim.<state>" over covers; with nvme
  // offload they are streamed (FlatRange::stream), read from the swap files a part at a time.
  std::vector<FlatRange> flat_ranges(bool with_master) const;
  // Loads the masters from `master_source` ("master" or "param") and the optimizer's state (with
  // nvme a sub-group at a time, never the whole shard in memory).
  void load(const FlatReader& read, const SavedStates& saved, const std::string& master_source);
  // nvme: what the I/O engine moved so far (and how long the step waited for it).
  std::optional<offload::IoEngine::Counters> io_counters() const;
  // Offloaded with the model on a GPU: the copy stream between the two (null otherwise).
  offload::DeviceTransfers* transfers() const { return transfers_.get(); }

 private:
  struct SubGroup {
    Range range;  // within the shard
    OptimizerOffload::Tier tier;
    autograd::Variable master;
    bool separate_master = false;  // false: a view of the parameters (f32 model, resident, on the device)
    size_t swap_group = 0;         // nvme: its group in swapper_
    bool has_states = false;       // nvme: the optimizer has created its states (after its first step)
    Tensor upload;                 // offloaded from a GPU: the rounded copy, in pinned memory, to upload
  };
  void build_sub_groups(bool keeps_masters);
  void check_buffer_count() const;
  // One optimizer step over sub-group k with its gradient, values written back.
  void step_group(size_t k, GradientShard& gradient);
  void attach_copies();
  void publish(const SubGroup& group) const;     // after a step: swapped parameters assigned, or uploaded
  void write_back(const SubGroup& group) const;  // after a load: the master rounded into the parameters
  void step_swapped(const std::vector<size_t>& groups, GradientShard& gradient);
  std::vector<Tensor> swapped_tensors(const SubGroup& group) const;
  void swap_in(size_t g) const;
  void swap_out(size_t g) const;
  void drop(size_t g) const;  // releases a swapped-in sub-group without writing it
  std::vector<FlatRange> resident_flat_ranges(bool with_master) const;
  void load_by_sub_group(const FlatReader& read, const SavedStates& saved, const std::string& master_source);
  // Checkpoints of a swapped shard: reads states over flat ranges, one sub-group in memory at a time.
  struct SwappedView {
    explicit SwappedView(const OptimizerShard& s) : shard(s) {}
    ~SwappedView();
    Tensor read(const std::string& name, Range part);
    const OptimizerShard& shard;
    std::optional<size_t> loaded;
  };
  std::vector<size_t> groups_on(OptimizerOffload::Tier tier) const;

  ParameterStore& params_;
  Range covers_;
  OptimizerOffload offload_;
  std::vector<SubGroup> groups_;
  std::unique_ptr<offload::TensorSwapper> swapper_;
  std::unique_ptr<offload::DeviceTransfers> transfers_;
  std::shared_ptr<nn::Optimizer> optimizer_;
  OptimizerLayout layout_;
};

}  // namespace fathom::zero
