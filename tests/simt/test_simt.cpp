// The SIMT emulator runs kernels written in CUDA's syntax as the GPU would — indexing, shared
// memory, barriers, warp operations, atomics, launch limits — and catches what it is for: the
// broken kernels below (a missing barrier, a barrier in a divergent branch, a shuffle with a wrong
// mask, a read of unwritten shared memory, a warp-synchronous reduction without __syncwarp, an
// oversized launch) each fail with a message naming the problem, or give outputs that differ
// between thread orders.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#define FATHOM_CUDA_EMULATION 1  // the launch macro's emulated form
#include "core/cuda/kernel_launch.h"
#include "core/error.h"
#include "core/simt/device.h"
#include "tests/simt/race_fixtures.h"

using fathom::simt::Dim3;
using fathom::simt::launch_kernel;
using fathom::simt::LaunchSpec;

namespace {

// Runs `fn` with FATHOM_SIMT_ORDER set to `order`.
template <class Fn>
void with_order(const char* order, Fn&& fn) {
  setenv("FATHOM_SIMT_ORDER", order, 1);
  try {
    fn();
  } catch (...) {
    unsetenv("FATHOM_SIMT_ORDER");
    throw;
  }
  unsetenv("FATHOM_SIMT_ORDER");
}
const char* const kOrders[] = {"forward", "reverse", "random:7", "random:123"};

// ---- kernels as the CUDA sources write them ----

__global__ void block_sum(const float* in, float* out, int n) {
  FATHOM_SHARED(partial, float[256]);
  const int t = threadIdx.x;
  const int i = blockIdx.x * blockDim.x + t;
  partial[t] = i < n ? in[i] : 0.0f;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (t < stride) partial[t] += partial[t + stride];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = partial[0];
}

__device__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

__global__ void warp_ops(const float* in, float* sums, float* xor_sums, unsigned* ballots, float* broadcast,
                         int* scans, float* halves) {
  const int t = threadIdx.x, lane = t % warpSize;
  const float v = in[t];
  const float sum = warp_sum(v);
  if (lane == 0) sums[t / warpSize] = sum;
  float x = v;
  for (int m = 16; m > 0; m /= 2) x += __shfl_xor_sync(0xffffffffu, x, m);
  xor_sums[t] = x;  // every lane holds the warp's sum
  ballots[t] = __ballot_sync(0xffffffffu, v > 0.5f);
  broadcast[t] = __shfl_sync(0xffffffffu, v, 3);  // lane 3's value
  int s = lane;  // inclusive prefix sum of the lane numbers
  for (int d = 1; d < 32; d *= 2) {
    const int up = __shfl_up_sync(0xffffffffu, s, d);
    if (lane >= d) s += up;
  }
  scans[t] = s;
  float h = v;  // sums over 16-lane halves (width 16)
  for (int offset = 8; offset > 0; offset /= 2) h += __shfl_down_sync(0xffffffffu, h, offset, 16);
  halves[t] = h;
}

__global__ void indices(int* out) {
  const int tx = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const int bx = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  out[bx * (blockDim.x * blockDim.y * blockDim.z) + tx] = bx * 1000 + tx;
}

__global__ void count_positive(const float* in, int n, int* count) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && in[i] > 0) atomicAdd(count, 1);
}

__global__ void dynamic_reverse(const int* in, int* out) {
  int* buffer = static_cast<int*>(fathom::simt::dynamic_shared());
  const int t = threadIdx.x, n = blockDim.x;
  buffer[t] = in[blockIdx.x * n + t];
  __syncthreads();
  out[blockIdx.x * n + t] = buffer[n - 1 - t];
}

template <typename T, int Factor>
__global__ void __launch_bounds__(128) scale(T* x, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) x[i] *= Factor;
}

// ---- broken kernels (the emulator's test fixtures) ----

// Reads its neighbour's slot without a __syncthreads after the writes.
__global__ void missing_barrier(float* out) {
  FATHOM_SHARED(slot, float[64]);
  const int t = threadIdx.x;
  slot[t] = static_cast<float>(t);
  out[t] = slot[(t + 1) % blockDim.x];
}

// Only the first half of the block reaches the barrier.
__global__ void divergent_barrier(float* out) {
  if (threadIdx.x < blockDim.x / 2) __syncthreads();
  out[threadIdx.x] = 1.0f;
}

// Thread 0 returns early; the rest wait at a barrier it never reaches.
__global__ void early_exit_barrier(float* out) {
  if (threadIdx.x == 0) return;
  __syncthreads();
  out[threadIdx.x] = 1.0f;
}

// A full-warp shuffle whose mask leaves out the upper half.
__global__ void wrong_mask(float* out) { out[threadIdx.x] = __shfl_down_sync(0x0000ffffu, 1.0f, 1); }

// A full-warp mask while the upper half has already returned.
__global__ void shuffle_after_exit(float* out) {
  if (threadIdx.x >= 16) return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.0f, 1);
}

// A full-warp mask in a block of 16 threads: lanes 16-31 do not exist.
__global__ void mask_beyond_block(float* out) { out[threadIdx.x] = __shfl_sync(0xffffffffu, 1.0f, 0); }

// Reads a slot of shared memory no thread wrote.
__global__ void uninitialised_shared(float* out) {
  FATHOM_SHARED(slot, float[64]);
  if (threadIdx.x < 32) slot[threadIdx.x] = 1.0f;
  __syncthreads();
  out[threadIdx.x] = slot[threadIdx.x];
}

// The pre-Volta warp-synchronous reduction: no __syncwarp between the steps.
__global__ void warp_synchronous_sum(const float* in, float* out) {
  FATHOM_SHARED(s, float[64]);
  const int t = threadIdx.x;
  s[t] = in[t];
  s[t + 32] = in[t + 32];
  __syncthreads();
  volatile float* v = s;
  for (int offset = 32; offset > 0; offset /= 2) v[t] = v[t] + v[t + offset];
  if (t == 0) out[0] = v[0];
}

__global__ void fails_inside(int* out) {
  FATHOM_CHECK(threadIdx.x != 5, "thread 5 refuses");
  out[threadIdx.x] = 1;
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const fathom::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("SIMT emulator: a shared-memory tree reduction with barriers, under every thread order", "[simt]") {
  constexpr int kBlocks = 5, kThreads = 256, n = kBlocks * kThreads - 77;
  std::vector<float> in(n);
  for (int i = 0; i < n; ++i) in[i] = static_cast<float>((i * 37) % 11) - 5.0f;
  for (const char* order : kOrders) {
    INFO(order);
    std::vector<float> out(kBlocks, -1.0f);
    with_order(order, [&] {
      launch_kernel(LaunchSpec{"block_sum", Dim3(kBlocks), Dim3(kThreads), 0, FATHOM_SIMT_SITE}, block_sum, in.data(),
                    out.data(), n);
    });
    for (int b = 0; b < kBlocks; ++b) {
      float expected = 0;
      for (int i = b * kThreads; i < std::min(n, (b + 1) * kThreads); ++i) expected += in[i];
      CHECK(out[b] == expected);  // small integers: exact in any order
    }
  }
}

TEST_CASE("SIMT emulator: warp shuffles, ballots and widths as CUDA defines them", "[simt]") {
  constexpr int kThreads = 64;
  std::vector<float> in(kThreads);
  for (int i = 0; i < kThreads; ++i) in[i] = static_cast<float>(i % 7) / 7.0f;
  std::vector<float> sums(2), xor_sums(kThreads), broadcast(kThreads), halves(kThreads);
  std::vector<unsigned> ballots(kThreads);
  std::vector<int> scans(kThreads);
  for (const char* order : kOrders) {
    INFO(order);
    with_order(order, [&] {
      launch_kernel(LaunchSpec{"warp_ops", Dim3(1), Dim3(kThreads), 0, FATHOM_SIMT_SITE}, warp_ops, in.data(),
                    sums.data(), xor_sums.data(), ballots.data(), broadcast.data(), scans.data(), halves.data());
    });
    for (int w = 0; w < 2; ++w) {
      float sum = 0;
      unsigned ballot = 0;
      for (int l = 0; l < 32; ++l) {
        sum += in[w * 32 + l];
        if (in[w * 32 + l] > 0.5f) ballot |= 1u << l;
      }
      CHECK(sums[w] == Approx(sum).epsilon(1e-6));
      for (int l = 0; l < 32; ++l) {
        const int t = w * 32 + l;
        CHECK(xor_sums[t] == Approx(sum).epsilon(1e-6));
        CHECK(ballots[t] == ballot);
        CHECK(broadcast[t] == in[w * 32 + 3]);
        CHECK(scans[t] == l * (l + 1) / 2);
      }
      // Width 16: lane 0 of each half holds its half's sum.
      for (int half = 0; half < 2; ++half) {
        float h = 0;
        for (int l = 0; l < 16; ++l) h += in[w * 32 + half * 16 + l];
        CHECK(halves[w * 32 + half * 16] == Approx(h).epsilon(1e-6));
      }
    }
  }
}

TEST_CASE("SIMT emulator: 3-D grids and blocks, atomics, dynamic shared memory", "[simt]") {
  const Dim3 grid(3, 2, 2), block(4, 3, 2);
  std::vector<int> out(grid.count() * block.count(), -1);
  launch_kernel(LaunchSpec{"indices", grid, block, 0, FATHOM_SIMT_SITE}, indices, out.data());
  for (size_t b = 0; b < grid.count(); ++b)
    for (size_t t = 0; t < block.count(); ++t) CHECK(out[b * block.count() + t] == static_cast<int>(b * 1000 + t));

  std::vector<float> values(1000);
  int positive = 0;
  for (int i = 0; i < 1000; ++i) positive += (values[i] = std::sin(0.1f * i)) > 0;
  int count = 0;
  launch_kernel(LaunchSpec{"count_positive", Dim3(4), Dim3(256), 0, FATHOM_SIMT_SITE}, count_positive, values.data(),
                1000, &count);
  CHECK(count == positive);

  std::vector<int> in(3 * 100), reversed(3 * 100);
  for (int i = 0; i < 300; ++i) in[i] = i;
  launch_kernel(LaunchSpec{"dynamic_reverse", Dim3(3), Dim3(100), 100 * sizeof(int), FATHOM_SIMT_SITE},
                dynamic_reverse, in.data(), reversed.data());
  for (int b = 0; b < 3; ++b)
    for (int t = 0; t < 100; ++t) CHECK(reversed[b * 100 + t] == b * 100 + 99 - t);
}

TEST_CASE("SIMT emulator: a missing barrier shows as outputs that differ between thread orders", "[simt]") {
  std::vector<float> forward(64), reverse(64);
  with_order("forward", [&] {
    launch_kernel(LaunchSpec{"missing_barrier", Dim3(1), Dim3(64), 0, FATHOM_SIMT_SITE}, missing_barrier,
                  forward.data());
  });
  with_order("reverse", [&] {
    launch_kernel(LaunchSpec{"missing_barrier", Dim3(1), Dim3(64), 0, FATHOM_SIMT_SITE}, missing_barrier,
                  reverse.data());
  });
  CHECK(forward != reverse);
  // Forward: each thread finishes before its neighbour writes, so it reads the poison.
  CHECK(std::isnan(forward[0]));
}

TEST_CASE("SIMT emulator: a warp-synchronous reduction without __syncwarp differs between orders", "[simt]") {
  std::vector<float> in(64);
  for (int i = 0; i < 64; ++i) in[i] = static_cast<float>(i);
  float forward = 0, reverse = 0;
  with_order("forward", [&] {
    launch_kernel(LaunchSpec{"warp_synchronous_sum", Dim3(1), Dim3(32), 0, FATHOM_SIMT_SITE}, warp_synchronous_sum,
                  in.data(), &forward);
  });
  with_order("reverse", [&] {
    launch_kernel(LaunchSpec{"warp_synchronous_sum", Dim3(1), Dim3(32), 0, FATHOM_SIMT_SITE}, warp_synchronous_sum,
                  in.data(), &reverse);
  });
  CHECK(forward != reverse);  // 2016 only when the lanes happen to run in lockstep
}

TEST_CASE("SIMT emulator: unwritten shared memory reads as NaN", "[simt]") {
  std::vector<float> out(64);
  launch_kernel(LaunchSpec{"uninitialised_shared", Dim3(1), Dim3(64), 0, FATHOM_SIMT_SITE}, uninitialised_shared,
                out.data());
  CHECK(out[0] == 1.0f);
  CHECK(std::isnan(out[40]));
}

TEST_CASE("SIMT emulator: divergent barriers, early exits and wrong masks are errors naming the place", "[simt]") {
  std::vector<float> out(64);
  const auto run = [&](const char* name, void (*kernel)(float*), unsigned threads) {
    return error_of([&] { launch_kernel(LaunchSpec{name, Dim3(1), Dim3(threads), 0, FATHOM_SIMT_SITE}, kernel, out.data()); });
  };
  const std::string divergent = run("divergent_barrier", divergent_barrier, 64);
  CHECK_THAT(divergent, Catch::Contains("the __syncthreads at ") && Catch::Contains("test_simt.cpp:") &&
                            Catch::Contains("cannot complete") && Catch::Contains("of kernel divergent_barrier") &&
                            Catch::Contains("has exited"));
  const std::string early = run("early_exit_barrier", early_exit_barrier, 64);
  CHECK_THAT(early, Catch::Contains("cannot complete") && Catch::Contains("thread (0, 0, 0)") &&
                        Catch::Contains("has exited"));
  CHECK_THAT(run("wrong_mask", wrong_mask, 32),
             Catch::Contains("__shfl_down_sync at ") && Catch::Contains("test_simt.cpp:") &&
                 Catch::Contains("its mask 0xffff does not include the calling lane 16"));
  CHECK_THAT(run("shuffle_after_exit", shuffle_after_exit, 32),
             Catch::Contains("__shfl_xor_sync at") && Catch::Contains("cannot complete: lane 16 has exited"));
  CHECK_THAT(run("mask_beyond_block", mask_beyond_block, 16),
             Catch::Contains("__shfl_sync at") && Catch::Contains("the mask names lane 16, which this block does not "
                                                                  "have (16 threads)"));
  std::vector<int> ints(8);
  CHECK_THAT(error_of([&] {
               launch_kernel(LaunchSpec{"fails_inside", Dim3(1), Dim3(8), 0, FATHOM_SIMT_SITE}, fails_inside,
                             ints.data());
             }),
             Catch::Contains("thread (5, 0, 0) of block (0, 0, 0) of kernel fails_inside") &&
                 Catch::Contains("thread 5 refuses"));
}

TEST_CASE("SIMT emulator: launches beyond an H200's limits fail as they would on the GPU", "[simt]") {
  std::vector<int> out(4096);
  const auto launch_with = [&](Dim3 grid, Dim3 block, size_t shared) {
    return error_of([&] { launch_kernel(LaunchSpec{"indices", grid, block, shared, FATHOM_SIMT_SITE}, indices, out.data()); });
  };
  CHECK_THAT(launch_with(Dim3(1), Dim3(2048), 0), Catch::Contains("a block holds at most 1024 threads"));
  CHECK_THAT(launch_with(Dim3(1), Dim3(1, 1, 65), 0), Catch::Contains("1024 × 1024 × 64"));
  CHECK_THAT(launch_with(Dim3(1, 70000), Dim3(1), 0), Catch::Contains("a grid is at most"));
  CHECK_THAT(launch_with(Dim3(0), Dim3(32), 0), Catch::Contains("every dimension must be at least 1"));
  CHECK_THAT(launch_with(Dim3(1), Dim3(32), 300 * 1024), Catch::Contains("more than the 232448 a block may have"));
  setenv("FATHOM_SIMT_ORDER", "sideways", 1);
  CHECK_THAT(launch_with(Dim3(1), Dim3(32), 0),
             Catch::Contains("FATHOM_SIMT_ORDER is \"sideways\"; use forward, reverse or random:<seed>"));
  unsetenv("FATHOM_SIMT_ORDER");
}

TEST_CASE("SIMT emulator: FATHOM_LAUNCH, the launch every CUDA launcher writes, runs kernels and templates", "[simt]") {
  std::vector<float> in(300, 1.0f), out(3, 0.0f);
  FATHOM_LAUNCH(3, 128, 0, nullptr, block_sum)(in.data(), out.data(), 300);
  CHECK(out == std::vector<float>{128, 128, 44});
  std::vector<double> x(1000, 0.5);
  struct { unsigned x, y, z; } grid{2, 1, 1};  // anything with x, y and z, as CUDA's dim3
  FATHOM_LAUNCH(grid, 128, 0, nullptr, scale<double, 4>)(x.data(), 1000);
  CHECK(x == std::vector<double>(1000, 2.0));
  CHECK_THAT(error_of([&] { FATHOM_LAUNCH(1, 4096, 0, nullptr, scale<double, 4>)(x.data(), 1000); }),
             Catch::Contains("launch of scale<double, 4> at ") && Catch::Contains("a block holds at most 1024"));
}

TEST_CASE("SIMT emulator: the race fixtures' outputs do not depend on the thread order", "[simt]") {
  // Only the race checker finds these races (tests/simt/test_shared_races.cpp): this file is not
  // instrumented for it, and every order gives the same output.
  using namespace race_fixtures;
  std::vector<float> across_first, overwrite_first;
  std::vector<int> count_first;
  for (const char* order : kOrders) {
    INFO(order);
    std::vector<float> across(kThreads), overwrite(kThreads);
    std::vector<int> count(kThreads);
    with_order(order, [&] {
      launch_kernel(LaunchSpec{"read_across_warps", Dim3(1), Dim3(kThreads), 0, FATHOM_SIMT_SITE}, read_across_warps,
                    across.data());
      launch_kernel(LaunchSpec{"overwrite_after_read", Dim3(1), Dim3(kThreads), 0, FATHOM_SIMT_SITE},
                    overwrite_after_read, overwrite.data());
      launch_kernel(LaunchSpec{"read_atomic_count_early", Dim3(1), Dim3(kThreads), 0, FATHOM_SIMT_SITE},
                    read_atomic_count_early, count.data());
    });
    for (int t = 0; t < kThreads; ++t) {
      CHECK(across[t] == static_cast<float>((t + 32) % kThreads));
      CHECK(overwrite[t] == static_cast<float>(kThreads - 1 - t));
      CHECK(count[t] == kThreads);
    }
  }
}
