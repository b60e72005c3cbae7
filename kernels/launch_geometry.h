#pragma once
// Launch geometry of the CUDA kernels as plain host functions: the arithmetic that decides grid
// sizes, vector widths and rows per block is where off-by-one and overflow bugs hide, and here
// it is tested on the CPU (tests/kernels/test_launch_geometry.cpp) rather than only on a GPU.
// No CUDA include: .cu launchers and CPU tests both use it.

#include <cstdint>

namespace fathom::launch {

// Blocks for a grid-stride loop over `n` items, `threads` per block: enough to cover n once,
// capped at `max_blocks` (the loop strides over the rest). At least 1 so a launch is valid.
constexpr int grid_stride_blocks(int64_t n, int threads, int64_t max_blocks = 65535 * 16) {
  const int64_t wanted = (n + threads - 1) / threads;
  const int64_t capped = wanted < max_blocks ? wanted : max_blocks;
  return static_cast<int>(capped < 1 ? 1 : capped);
}

}  // namespace fathom::launch
