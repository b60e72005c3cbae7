// The process grid's arithmetic, without MPI: Megatron's rank order (tensor fastest, then
// data, then pipeline) and the members of each axis's groups.
#include <algorithm>

#include "parallel/local_communicator.h"
#include "parallel/topology.h"
#include "test_util.h"

using namespace fathom::parallel;
using fathom::testing::error_of;

TEST_CASE("topology: rank <-> coordinate in Megatron order", "[parallel]") {
  const Topology grid(16, /*pipeline=*/2, /*tensor=*/4);  // data = 2
  CHECK(grid.size(Axis::Data) == 2);
  CHECK(grid.str() == "pipe 2 x data 2 x tensor 4");
  CHECK(grid.coord_of(0) == GridCoord{0, 0, 0});
  CHECK(grid.coord_of(5) == GridCoord{0, 1, 1});
  CHECK(grid.coord_of(11) == GridCoord{1, 0, 3});
  for (int rank = 0; rank < 16; ++rank) CHECK(grid.rank_of(grid.coord_of(rank)) == rank);
}

TEST_CASE("topology: each axis's group holds the ranks differing only along it", "[parallel]") {
  const Topology grid(16, 2, 4);
  CHECK(grid.group_of(5, Axis::Tensor) == std::vector<int>{4, 5, 6, 7});
  CHECK(grid.group_of(5, Axis::Data) == std::vector<int>{1, 5});
  CHECK(grid.group_of(5, Axis::Pipeline) == std::vector<int>{5, 13});
  // Every rank is in exactly one group per axis, and group_index tells the groups apart.
  for (Axis axis : {Axis::Pipeline, Axis::Data, Axis::Tensor}) {
    std::vector<int> seen(16, 0);
    for (int rank = 0; rank < 16; ++rank)
      for (int member : grid.group_of(rank, axis)) {
        CHECK(grid.group_index(member, axis) == grid.group_index(rank, axis));
        if (member == rank) ++seen[rank];
      }
    CHECK(std::count(seen.begin(), seen.end(), 1) == 16);
  }
}

TEST_CASE("topology: sizes that do not divide the world are errors naming the fix", "[parallel]") {
  CHECK(error_of([] { Topology(6, 4, 1); }) ==
        "topology: the world size 6 is not divisible by pipeline (4) x tensor (1) parallel sizes; launch a multiple "
        "of 4 processes");
  CHECK(error_of([] { Topology(4, 0, 1); }) == "topology: pipeline and tensor parallel sizes must be >= 1, got 0 and 1");
  CHECK(error_of([] { Topology(4, 1, 2).coord_of(4); }) == "topology: rank 4 is outside the grid pipe 1 x data 2 x tensor 2");
}

namespace {
// Stands in for an NCCL communicator: one rank whose tensors live on GPU 0.
class FakeDeviceCommunicator final : public Communicator {
 public:
  explicit FakeDeviceCommunicator(std::string name) : Communicator(0, 1, std::move(name)) {}
  const char* backend() const override { return "fake-nccl"; }
  fathom::Device device() const override { return fathom::Device::cuda(0); }
  std::shared_ptr<Communicator> split(int, int, const std::string& name) override {
    return std::make_shared<FakeDeviceCommunicator>(name);
  }

 protected:
  WorkHandle start(Collective, bool) override { FATHOM_FAIL("not for collectives"); }
};
}  // namespace

TEST_CASE("process groups give device tensors the device communicator, host tensors the host one", "[parallel]") {

  auto groups = ProcessGroups::data_parallel(std::make_shared<LocalCommunicator>());
  // Without device groups (no GPU, or ranks sharing one): the host communicator for everything.
  CHECK_FALSE(groups.has_device_groups());
  CHECK(std::string(groups.for_device(Axis::Data, fathom::Device::cuda(0))->backend()) == "local");
  groups.set_device_groups(std::make_shared<FakeDeviceCommunicator>("pipe"),
                           std::make_shared<FakeDeviceCommunicator>("data"),
                           std::make_shared<FakeDeviceCommunicator>("tensor"));
  CHECK(groups.has_device_groups());
  for (Axis axis : {Axis::Pipeline, Axis::Data, Axis::Tensor}) {
    CHECK(std::string(groups.for_device(axis, fathom::Device::cuda(0))->backend()) == "fake-nccl");
    CHECK(groups.for_device(axis, fathom::Device::cuda(0))->name() == axis_name(axis));
    CHECK(std::string(groups.for_device(axis, fathom::kCPU)->backend()) == "local");  // host tensors stay on MPI
    CHECK(std::string(groups.for_device(axis, fathom::Device::cuda(1))->backend()) == "local");  // another GPU's
  }
  // A device group must have the same ranks as its host group.
  auto mismatched = ProcessGroups::data_parallel(std::make_shared<LocalCommunicator>());
  CHECK_THROWS_WITH(mismatched.set_device_groups(std::make_shared<FakeDeviceCommunicator>("pipe"), nullptr,
                                                 std::make_shared<FakeDeviceCommunicator>("tensor")),
                    Catch::Contains("a device communicator for every axis, or none"));
}
