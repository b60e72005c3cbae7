// Launch geometry of the CUDA kernels, checked on the CPU.
#include <catch2/catch.hpp>

#include "kernels/launch_geometry.h"

using namespace fathom::launch;

TEST_CASE("grid_stride_blocks covers n once and stays within the cap", "[launch_geometry]") {
  CHECK(grid_stride_blocks(0, 256) == 1);
  CHECK(grid_stride_blocks(1, 256) == 1);
  CHECK(grid_stride_blocks(256, 256) == 1);
  CHECK(grid_stride_blocks(257, 256) == 2);
  CHECK(grid_stride_blocks(int64_t{1} << 40, 256) == 65535 * 16);
  CHECK(grid_stride_blocks(1000, 128, 4) == 4);
}
