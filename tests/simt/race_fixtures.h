#pragma once
// Kernels with shared-memory races that every thread order runs alike: the threads of one warp
// wait for each other at __syncwarp, and the scheduler runs every warp up to that point before
// any goes on, so the other warps' accesses always land first. Only the race checker sees them
// (tests/simt/test_shared_races.cpp, compiled with the checker's instrumentation); test_simt.cpp,
// not instrumented, shows that their outputs do not depend on the order. Internal linkage: each
// including file compiles its own copy, with or without the instrumentation.

#include "core/simt/device.h"

namespace race_fixtures {
namespace {

constexpr int kThreads = 64;  // two warps

// Reads the other warp's slot with only a __syncwarp after the writes: a __syncthreads is missing.
__global__ void read_across_warps(float* out) {
  FATHOM_SHARED(slot, float[kThreads]);
  const int t = threadIdx.x;
  slot[t] = static_cast<float>(t);
  __syncwarp();
  out[t] = slot[(t + 32) % kThreads];
}

// Reads a mirrored slot, then overwrites its own slot, which the mirror thread (in the other warp)
// read in the same barrier epoch: a write after read without a barrier.
__global__ void overwrite_after_read(float* out) {
  FATHOM_SHARED(slot, float[kThreads]);
  const int t = threadIdx.x;
  slot[t] = static_cast<float>(t);
  __syncthreads();
  const float mirror = slot[kThreads - 1 - t];
  __syncwarp();
  slot[t] = -1.0f;
  out[t] = mirror;
}

// Counts the block's threads with shared-memory atomics (which meet each other freely) but reads
// the count without a __syncthreads after them.
__global__ void read_atomic_count_early(int* out) {
  FATHOM_SHARED(count, int);
  if (threadIdx.x == 0) count = 0;
  __syncthreads();
  atomicAdd(&count, 1);
  __syncwarp();
  out[threadIdx.x] = count;
}

}  // namespace
}  // namespace race_fixtures
