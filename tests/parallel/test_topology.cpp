// The process grid's arithmetic, without MPI: Megatron's rank order (tensor fastest, then
// data, then pipeline) and the members of each axis's groups.
#include <algorithm>

#include "parallel/topology.h"
#include "test_util.h"

using namespace fathom::distributed;
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
