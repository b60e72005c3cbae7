#include "zero/training_state.h"

#include <cmath>

#include "kernels/elementwise.h"
#include "kernels/optimizer_kernels.h"
#include "nn/deferred_init.h"
#include "parallel/local_communicator.h"
#include "parallel/sharded_tensor.h"

namespace fathom::zero {

using parallel::Axis;
using parallel::ReduceOp;

std::vector<parallel::Communicator*> TrainingState::reduction_groups() const {
  std::vector<parallel::Communicator*> out;
  const auto& groups = layout_.groups;
  // Tensor and pipeline ranks hold different parameters (or different slices of them).
  for (Axis axis : {Axis::Tensor, Axis::Pipeline})
    if (groups.group(axis).size() > 1) out.push_back(&groups.group(axis));
  // Data-parallel ranks hold the same averaged gradients, unless ZeRO shards them.
  if (data_parallel_sharded() && groups.data().size() > 1) out.push_back(&groups.data());
  return out;
}

// Reducing over one axis after another gives every rank the same value: after the tensor axis
// all ranks of a tensor group agree, so the pipeline axis sums equal inputs on each of them.
bool TrainingState::gradients_overflow() const {
  double flag = local_overflow() ? 1.0 : 0.0;
  for (parallel::Communicator* group : reduction_groups()) flag = group->all_reduce_scalar(flag, ReduceOp::Max);
  return flag > 0;
}

double TrainingState::gradient_norm() const {
  const double local = local_norm();
  const auto groups = reduction_groups();
  if (groups.empty()) return local;
  double squares = local * local;
  for (parallel::Communicator* group : groups) squares = group->all_reduce_scalar(squares, ReduceOp::Sum);
  return std::sqrt(squares);
}

double TrainingState::mean_over_replicas(double value) const {
  parallel::Communicator& data = layout_.groups.data();
  if (data.size() > 1) value = data.all_reduce_scalar(value, ReduceOp::Avg);
  parallel::Communicator& pipeline = layout_.groups.pipeline();
  if (pipeline.size() == 1) return value;
  const bool last_stage = pipeline.rank() == pipeline.size() - 1;  // the only stage with a loss
  return pipeline.all_reduce_scalar(last_stage ? value : 0.0, ReduceOp::Sum);
}

Tensor TrainingState::whole_parameter(size_t index, const Tensor& mine) const {
  const nn::Placement& placement = layout_.placements.at(index);
  if (!placement.sharded()) return mine;
  return parallel::gather_shards(mine, placement, *layout_.groups.for_device(Axis::Tensor, mine.device()));
}

void broadcast_initial_weights(const NamedParameters& params, const ParallelLayout& layout) {
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& data = params[i].second.data();
    if (nn::is_deferred(params[i].second)) continue;  // every rank makes the same values from the seed
    if (layout.groups.data().size() > 1) layout.groups.for_device(Axis::Data, data.device())->broadcast(data, 0);
    if (layout.groups.tensor().size() > 1 && !layout.placements[i].sharded())
      layout.groups.for_device(Axis::Tensor, data.device())->broadcast(data, 0);
  }
}

std::vector<FlatSlot> flat_slots_of(const NamedParameters& params) {
  std::vector<FlatSlot> slots;
  int64_t offset = 0;
  for (const auto& [name, param] : params) {
    slots.push_back({name, param.sizes(), offset, param.numel()});
    offset += param.numel();
  }
  return slots;
}

ParallelLayout single_process_layout(size_t parameters) {
  return {parallel::ProcessGroups::data_parallel(std::make_shared<parallel::LocalCommunicator>()),
          std::vector<nn::Placement>(parameters)};
}

void scale_tensors(const std::vector<Tensor>& tensors, double factor) {
  if (factor == 1.0 || tensors.empty()) return;
  std::vector<ScaleTensors> dense_f32;
  for (const Tensor& tensor : tensors) {
    if (tensor.dtype() == DType::F32 && tensor.is_contiguous() && tensor.device() == tensors.front().device()) {
      dense_f32.push_back({tensor, Tensor()});
    } else {
      Tensor t = tensor;
      mul_(t, factor);
    }
  }
  scale_multi(dense_f32, factor);
}

}  // namespace fathom::zero
