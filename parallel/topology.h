#pragma once
// The process grid: pipeline x data x tensor, in Megatron's and DeepSpeed's rank order (tensor
// fastest, then data, then pipeline), so tensor-parallel peers are neighbours on a node:
//
//   rank = (pipeline * data_size + data) * tensor_size + tensor
//
// Topology is pure arithmetic (testable anywhere); ProcessGroups holds this rank's
// communicator along each axis, made by splitting the world: an MPI one for host tensors
// (checkpoint checksums, config agreement, scalars) and, when every rank has its own GPU, an
// NCCL one for device tensors (gradient reductions, ZeRO's gathers). for_device() picks.

#include <memory>
#include <string>
#include <vector>

#include "parallel/communicator.h"

namespace fathom::parallel {

enum class Axis { Pipeline, Data, Tensor };
const char* axis_name(Axis axis);  // "pipe", "data", "tensor"

struct GridCoord {
  int pipeline = 0, data = 0, tensor = 0;
  int operator[](Axis axis) const;
  friend bool operator==(const GridCoord&, const GridCoord&) = default;
};

class Topology {
 public:
  // The data-parallel size is what is left: world / (pipeline * tensor), which must divide.
  Topology(int world_size, int pipeline_parallel_size = 1, int tensor_parallel_size = 1);

  int world_size() const { return pipeline_ * data_ * tensor_; }
  int size(Axis axis) const;
  int rank_of(const GridCoord& coord) const;
  GridCoord coord_of(int rank) const;
  // The ranks that share every coordinate with `rank` except `axis`, in axis order: the
  // members of `rank`'s group along that axis.
  std::vector<int> group_of(int rank, Axis axis) const;
  // Which group along `axis` the rank belongs to (the split colour): 0 .. world/size(axis)-1.
  int group_index(int rank, Axis axis) const;
  std::string str() const;  // "pipe 2 x data 2 x tensor 1"

 private:
  int pipeline_, data_, tensor_;
};

class ProcessGroups {
 public:
  // Collective over `world`: splits it into one communicator per axis.
  ProcessGroups(const std::shared_ptr<Communicator>& world, const Topology& topology);
  // Data parallelism only, over an existing communicator (the tensor and pipeline groups are
  // one-rank local communicators). Not collective.
  static ProcessGroups data_parallel(std::shared_ptr<Communicator> data);

  const Topology& topology() const { return topology_; }
  // Every rank of the job (the host communicator the groups were split from).
  const std::shared_ptr<Communicator>& world_ptr() const { return world_; }
  GridCoord coord() const { return coord_; }
  Communicator& group(Axis axis) const { return *group_ptr(axis); }
  const std::shared_ptr<Communicator>& group_ptr(Axis axis) const;
  Communicator& data() const { return group(Axis::Data); }
  const std::shared_ptr<Communicator>& data_ptr() const { return group_ptr(Axis::Data); }
  const std::shared_ptr<Communicator>& tensor_ptr() const { return group_ptr(Axis::Tensor); }
  const std::shared_ptr<Communicator>& pipeline_ptr() const { return group_ptr(Axis::Pipeline); }
  Communicator& tensor() const { return group(Axis::Tensor); }
  Communicator& pipeline() const { return group(Axis::Pipeline); }

  // The communicator for tensors on `device` along `axis`: the axis's device communicator when
  // it takes tensors on that device, the host one otherwise (MPI also takes device tensors,
  // staged through host memory).
  const std::shared_ptr<Communicator>& for_device(Axis axis, Device device) const;
  // Device (NCCL) communicators, one per axis, with the same ranks as the host ones.
  void set_device_groups(std::shared_ptr<Communicator> pipeline, std::shared_ptr<Communicator> data,
                         std::shared_ptr<Communicator> tensor);
  bool has_device_groups() const { return device_data_ != nullptr; }

 private:
  explicit ProcessGroups(const Topology& topology) : topology_(topology) {}
  Topology topology_;
  GridCoord coord_;
  std::shared_ptr<Communicator> world_, pipeline_, data_, tensor_;
  std::shared_ptr<Communicator> device_pipeline_, device_data_, device_tensor_;  // null without
};

}  // namespace fathom::parallel
