#include "parallel/topology.h"

#include "parallel/local_communicator.h"

#include "core/error.h"

namespace fathom::parallel {

const char* axis_name(Axis axis) {
  switch (axis) {
    case Axis::Pipeline: return "pipe";
    case Axis::Data: return "data";
    case Axis::Tensor: return "tensor";
  }
  return "?";
}

int GridCoord::operator[](Axis axis) const {
  return axis == Axis::Pipeline ? pipeline : axis == Axis::Data ? data : tensor;
}

Topology::Topology(int world_size, int pipeline_parallel_size, int tensor_parallel_size)
    : pipeline_(pipeline_parallel_size), tensor_(tensor_parallel_size) {
  FATHOM_CHECK(world_size >= 1, "topology: world size must be >= 1, got ", world_size);
  FATHOM_CHECK(pipeline_ >= 1 && tensor_ >= 1, "topology: pipeline and tensor parallel sizes must be >= 1, got ",
               pipeline_, " and ", tensor_);
  FATHOM_CHECK(world_size % (pipeline_ * tensor_) == 0, "topology: the world size ", world_size,
               " is not divisible by pipeline (", pipeline_, ") x tensor (", tensor_,
               ") parallel sizes; launch a multiple of ", pipeline_ * tensor_, " processes");
  data_ = world_size / (pipeline_ * tensor_);
}

int Topology::size(Axis axis) const {
  return axis == Axis::Pipeline ? pipeline_ : axis == Axis::Data ? data_ : tensor_;
}

int Topology::rank_of(const GridCoord& c) const {
  FATHOM_CHECK(c.pipeline >= 0 && c.pipeline < pipeline_ && c.data >= 0 && c.data < data_ && c.tensor >= 0 &&
                   c.tensor < tensor_,
               "topology: coordinate (pipe ", c.pipeline, ", data ", c.data, ", tensor ", c.tensor,
               ") is outside the grid ", str());
  return (c.pipeline * data_ + c.data) * tensor_ + c.tensor;
}

GridCoord Topology::coord_of(int rank) const {
  FATHOM_CHECK(rank >= 0 && rank < world_size(), "topology: rank ", rank, " is outside the grid ", str());
  return {.pipeline = rank / (data_ * tensor_), .data = rank / tensor_ % data_, .tensor = rank % tensor_};
}

std::vector<int> Topology::group_of(int rank, Axis axis) const {
  std::vector<int> ranks;
  GridCoord c = coord_of(rank);
  for (int i = 0; i < size(axis); ++i) {
    (axis == Axis::Pipeline ? c.pipeline : axis == Axis::Data ? c.data : c.tensor) = i;
    ranks.push_back(rank_of(c));
  }
  return ranks;
}

int Topology::group_index(int rank, Axis axis) const {
  const GridCoord c = coord_of(rank);
  switch (axis) {
    case Axis::Pipeline: return c.data * tensor_ + c.tensor;
    case Axis::Data: return c.pipeline * tensor_ + c.tensor;
    case Axis::Tensor: return c.pipeline * data_ + c.data;
  }
  return 0;
}

std::string Topology::str() const {
  return detail::concat("pipe ", pipeline_, " x data ", data_, " x tensor ", tensor_);
}

ProcessGroups::ProcessGroups(const std::shared_ptr<Communicator>& world, const Topology& topology)
    : topology_(topology) {
  FATHOM_CHECK(world->size() == topology.world_size(), "process groups: the grid ", topology.str(), " has ",
               topology.world_size(), " ranks but the communicator \"", world->name(), "\" has ", world->size());
  coord_ = topology.coord_of(world->rank());
  world_ = world;
  const auto split = [&](Axis axis) {
    return world->split(topology.group_index(world->rank(), axis), coord_[axis], axis_name(axis));
  };
  pipeline_ = split(Axis::Pipeline);
  data_ = split(Axis::Data);
  tensor_ = split(Axis::Tensor);
}

ProcessGroups ProcessGroups::data_parallel(std::shared_ptr<Communicator> data) {
  FATHOM_CHECK(data != nullptr, "process groups: no data-parallel communicator");
  ProcessGroups groups(Topology(data->size()));
  groups.coord_ = {0, data->rank(), 0};
  groups.pipeline_ = std::make_shared<LocalCommunicator>();
  groups.tensor_ = std::make_shared<LocalCommunicator>();
  groups.world_ = data;
  groups.data_ = std::move(data);
  return groups;
}

void ProcessGroups::set_device_groups(std::shared_ptr<Communicator> pipeline, std::shared_ptr<Communicator> data,
                                      std::shared_ptr<Communicator> tensor) {
  FATHOM_CHECK(pipeline && data && tensor, "process groups: a device communicator for every axis, or none");
  const auto check = [](const Communicator& device, const Communicator& host) {
    FATHOM_CHECK(device.size() == host.size() && device.rank() == host.rank(), "process groups: the device "
                 "communicator \"", device.name(), "\" has rank ", device.rank(), " of ", device.size(),
                 " but its host group has rank ", host.rank(), " of ", host.size());
  };
  check(*pipeline, *pipeline_);
  check(*data, *data_);
  check(*tensor, *tensor_);
  device_pipeline_ = std::move(pipeline);
  device_data_ = std::move(data);
  device_tensor_ = std::move(tensor);
}

const std::shared_ptr<Communicator>& ProcessGroups::for_device(Axis axis, Device device) const {
  const std::shared_ptr<Communicator>& on_device =
      axis == Axis::Pipeline ? device_pipeline_ : axis == Axis::Data ? device_data_ : device_tensor_;
  return on_device && on_device->accepts(device) ? on_device : group_ptr(axis);
}

const std::shared_ptr<Communicator>& ProcessGroups::group_ptr(Axis axis) const {
  return axis == Axis::Pipeline ? pipeline_ : axis == Axis::Data ? data_ : tensor_;
}

}  // namespace fathom::parallel
