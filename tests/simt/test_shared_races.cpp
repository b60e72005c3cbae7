// The SIMT emulator's shared-memory race checker (core/simt/shared_memory_checker.h). This file is
// compiled as the emulated kernel sources are, with the checker's instrumentation
// (FATHOM_SIMT_RACE_CHECK_OPTIONS): races between the threads of a block — read after write,
// write after read, write after write, plain accesses against atomics — and reads of unwritten
// shared memory fail the launch with a message naming both threads, even where every thread
// order gives the same output (tests/simt/race_fixtures.h); correct synchronisation passes.
#include <catch2/catch.hpp>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/simt/device.h"
#include "tests/simt/race_fixtures.h"
#include "tests/support/test_util.h"

using fathom::simt::Dim3;
using fathom::simt::launch_kernel;
using fathom::simt::LaunchSpec;
using fathom::testing::error_of;

#if !defined(__SANITIZE_THREAD__)
#error "test_shared_races.cpp must be compiled with FATHOM_SIMT_RACE_CHECK_OPTIONS (tests/CMakeLists.txt)"
#endif

namespace {

// ---- correct kernels: nothing to report ----

__global__ void tree_sum(const float* in, float* out) {
  FATHOM_SHARED(partial, float[128]);
  const int t = threadIdx.x;
  partial[t] = in[blockIdx.x * blockDim.x + t];
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (t < stride) partial[t] += partial[t + stride];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = partial[0];
}

// The warp-synchronous reduction done right: a __syncwarp between every read and write step.
__global__ void warp_shared_sum(const float* in, float* out) {
  FATHOM_SHARED(s, float[64]);
  const int t = threadIdx.x;
  s[t] = in[t];
  s[t + 32] = in[t + 32];
  __syncwarp();
  for (int offset = 32; offset > 0; offset /= 2) {
    const float v = s[t] + s[t + offset];
    __syncwarp();
    s[t] = v;
    __syncwarp();
  }
  if (t == 0) out[0] = s[0];
}

// One buffer reused across barrier epochs, a broadcast slot read by every thread, atomics on a
// counter read after a barrier, and dynamic shared memory.
__global__ void reuse_and_broadcast(const int* in, int* out) {
  FATHOM_SHARED(buffer, int[64]);
  FATHOM_SHARED(total, int);
  int* scratch = static_cast<int*>(fathom::simt::dynamic_shared());
  const int t = threadIdx.x;
  if (t == 0) total = 0;
  buffer[t] = in[t];
  scratch[t] = 2 * in[t];
  __syncthreads();
  const int mirrored = buffer[63 - t] + scratch[63 - t];
  atomicAdd(&total, buffer[0]);
  __syncthreads();
  buffer[t] = mirrored;  // after every read of the first epoch
  __syncthreads();
  out[t] = buffer[t] + total;
}

// Each thread writes one byte of a shared array (four threads share every word), then reads its
// neighbour's after the barrier; and reads four threads' floats as one 16-byte vector.
struct alignas(16) Four {
  float x, y, z, w;
};
__global__ void neighbouring_bytes(unsigned char* out, float* sums) {
  FATHOM_SHARED(flags, unsigned char[64]);
  FATHOM_SHARED(quads, Four[16]);
  const int t = threadIdx.x;
  flags[t] = static_cast<unsigned char>(t);
  reinterpret_cast<float*>(quads)[t] = static_cast<float>(t);
  __syncthreads();
  out[t] = flags[(t + 1) % 64];
  const Four four = quads[t % 16];
  sums[t] = four.x + four.y + four.z + four.w;
}

// ---- broken kernels ----

// More __shared__ variables than sm_90's 48 KiB of static shared memory.
__global__ void too_much_shared(float* out) {
  FATHOM_SHARED(first, float[8192]);
  FATHOM_SHARED(second, float[8192]);
  first[threadIdx.x] = 1.0f;
  second[threadIdx.x] = 2.0f;
  __syncthreads();
  out[threadIdx.x] = first[threadIdx.x] + second[threadIdx.x];
}

// Neighbouring bytes again, the barrier between the second writes and the reads missing.
__global__ void neighbouring_bytes_racing(unsigned char* out) {
  FATHOM_SHARED(flags, unsigned char[64]);
  flags[threadIdx.x] = 0;
  __syncthreads();
  flags[threadIdx.x] = static_cast<unsigned char>(threadIdx.x);
  out[threadIdx.x] = flags[(threadIdx.x + 1) % 64];
}

// Each pair of threads writes one slot.
__global__ void write_twice(int* out) {
  FATHOM_SHARED(slot, int[32]);
  slot[threadIdx.x / 2] = threadIdx.x;
  __syncthreads();
  out[threadIdx.x] = slot[threadIdx.x / 2];
}

// Lanes of one warp read their neighbour's write with nothing between (the slots were written
// once before the barrier, so the lanes that run first read the old values).
__global__ void read_neighbour_lane(float* out) {
  FATHOM_SHARED(slot, float[32]);
  slot[threadIdx.x] = 0.0f;
  __syncthreads();
  slot[threadIdx.x] = 1.0f;
  out[threadIdx.x] = slot[(threadIdx.x + 1) % 32];
}

// Only the first half of the slots is written before every thread reads its own.
__global__ void read_unwritten(float* out) {
  FATHOM_SHARED(slot, float[64]);
  if (threadIdx.x < 32) slot[threadIdx.x] = 1.0f;
  __syncthreads();
  out[threadIdx.x] = slot[threadIdx.x];
}

__global__ void read_unwritten_dynamic(float* out) {
  float* scratch = static_cast<float*>(fathom::simt::dynamic_shared());
  if (threadIdx.x != 3) scratch[threadIdx.x] = 1.0f;
  __syncthreads();
  out[threadIdx.x] = scratch[threadIdx.x];
}

// Correct in block 0; block 1's thread 5 reads before the barrier.
__global__ void race_in_second_block(float* out) {
  FATHOM_SHARED(slot, float[32]);
  slot[threadIdx.x] = 2.0f;
  if (blockIdx.x == 1 && threadIdx.x == 5) out[32 + 5] = slot[4];
  __syncthreads();
  out[blockIdx.x * 32 + threadIdx.x] = slot[31 - threadIdx.x];
}

// A function template, as most kernels are (GCC once dropped such kernels' shared memory from
// the checker's view: it ignores a storage section on a template's statics).
template <typename T>
__global__ void templated_read_across_warps(T* out) {
  FATHOM_SHARED(slot, T[64]);
  slot[threadIdx.x] = static_cast<T>(threadIdx.x);
  __syncwarp();
  out[threadIdx.x] = slot[(threadIdx.x + 32) % 64];
}

template <class Out, class... Args>
std::string run(const char* name, Dim3 grid, Dim3 block, size_t dynamic, void (*kernel)(Out*, Args...), Out* out,
                Args... args) {
  return error_of([&] {
    launch_kernel(LaunchSpec{name, grid, block, dynamic, FATHOM_SIMT_SITE}, kernel, out, args...);
  });
}

}  // namespace

TEST_CASE("race checker: barriers, __syncwarp, atomics and reused buffers pass under every order", "[simt]") {
  for (const char* order : {"forward", "reverse", "random:5"}) {
    INFO(order);
    setenv("FATHOM_SIMT_ORDER", order, 1);
    std::vector<float> in(3 * 128), sums(3), expected(3, 0.0f);
    for (size_t i = 0; i < in.size(); ++i) expected[i / 128] += in[i] = static_cast<float>(i % 5);
    CHECK(error_of([&] {
            launch_kernel(LaunchSpec{"tree_sum", Dim3(3), Dim3(128), 0, FATHOM_SIMT_SITE}, tree_sum, in.data(),
                          sums.data());
          }) == "(no error)");
    CHECK(sums == expected);  // small integers: exact

    float warp_total = 0;
    CHECK(error_of([&] {
            launch_kernel(LaunchSpec{"warp_shared_sum", Dim3(1), Dim3(32), 0, FATHOM_SIMT_SITE}, warp_shared_sum,
                          in.data(), &warp_total);
          }) == "(no error)");
    CHECK(warp_total == 126.0f);  // 64 values of i % 5

    std::vector<int> ints(64), out(64);
    for (int i = 0; i < 64; ++i) ints[i] = i;
    CHECK(error_of([&] {
            launch_kernel(LaunchSpec{"reuse_and_broadcast", Dim3(1), Dim3(64), 64 * sizeof(int), FATHOM_SIMT_SITE},
                          reuse_and_broadcast, ints.data(), out.data());
          }) == "(no error)");
    for (int t = 0; t < 64; ++t) CHECK(out[t] == 3 * (63 - t));  // total: 64 × buffer[0] = 0

    std::vector<unsigned char> bytes(64);
    std::vector<float> four_sums(64);
    CHECK(error_of([&] {
            launch_kernel(LaunchSpec{"neighbouring_bytes", Dim3(1), Dim3(64), 0, FATHOM_SIMT_SITE}, neighbouring_bytes,
                          bytes.data(), four_sums.data());
          }) == "(no error)");
    for (int t = 0; t < 64; ++t) {
      CHECK(bytes[t] == (t + 1) % 64);
      CHECK(four_sums[t] == static_cast<float>(16 * (t % 16) + 6));
    }
  }
  unsetenv("FATHOM_SIMT_ORDER");
}

TEST_CASE("race checker: a missing __syncthreads is reported even where every order agrees", "[simt]") {
  std::vector<float> out(64);
  const std::string read = run("read_across_warps", Dim3(1), Dim3(64), 0, race_fixtures::read_across_warps, out.data());
  CHECK_THAT(read, Catch::Contains("in the launch at ") && Catch::Contains("shared-memory race: thread (") &&
                       Catch::Contains(" of block (0, 0, 0) of kernel read_across_warps reads 4 bytes at offset ") &&
                       Catch::Contains("of the block's __shared__ variables") &&
                       Catch::Contains("wrote with no barrier between them (since the block began)") &&
                       Catch::Contains("separate the accesses with __syncthreads"));
  // (Forward order: warp 0 resumes first after the __syncwarp.)
  CHECK_THAT(read,
             Catch::Contains("race: thread (0, 0, 0) of block") && Catch::Contains("which thread (32, 0, 0) wrote"));

  std::vector<double> doubles(64);
  CHECK_THAT(
      run("templated_read_across_warps", Dim3(1), Dim3(64), 0, templated_read_across_warps<double>, doubles.data()),
      Catch::Contains("race: thread (0, 0, 0) of block (0, 0, 0) of kernel templated_read_across_warps reads 8 "
                      "bytes at offset 256") &&
          Catch::Contains("which thread (32, 0, 0) wrote"));

  const std::string overwrite =
      run("overwrite_after_read", Dim3(1), Dim3(64), 0, race_fixtures::overwrite_after_read, out.data());
  CHECK_THAT(overwrite, Catch::Contains("shared-memory race: ") && Catch::Contains(" writes 4 bytes at offset ") &&
                            Catch::Contains(" read with no barrier between them (since the __syncthreads at ") &&
                            Catch::Contains("race_fixtures.h:"));

  std::vector<int> counts(64);
  CHECK_THAT(
      run("read_atomic_count_early", Dim3(1), Dim3(64), 0, race_fixtures::read_atomic_count_early, counts.data()),
      Catch::Contains(" reads 4 bytes at offset ") && Catch::Contains("several threads updated atomically"));
}

TEST_CASE("race checker: writes of two threads, lanes without __syncwarp, a race in a later block", "[simt]") {
  std::vector<int> ints(32);
  CHECK_THAT(run("write_twice", Dim3(1), Dim3(32), 0, write_twice, ints.data()),
             Catch::Contains(" writes 4 bytes at offset ") && Catch::Contains("wrote with no barrier between them"));
  std::vector<float> out(64);
  CHECK_THAT(run("read_neighbour_lane", Dim3(1), Dim3(32), 0, read_neighbour_lane, out.data()),
             Catch::Contains("shared-memory race: thread (1, 0, 0)") &&
                 Catch::Contains("kernel read_neighbour_lane writes 4 bytes") &&
                 Catch::Contains("which thread (0, 0, 0) read with no barrier"));
  // (Forward order: thread 4 writes before thread 5 runs.)
  CHECK_THAT(run("race_in_second_block", Dim3(2), Dim3(32), 0, race_in_second_block, out.data()),
             Catch::Contains("thread (5, 0, 0) of block (1, 0, 0) of kernel race_in_second_block reads 4 bytes") &&
                 Catch::Contains("which thread (4, 0, 0) wrote"));
  std::vector<unsigned char> bytes(64);
  CHECK_THAT(run("neighbouring_bytes_racing", Dim3(1), Dim3(64), 0, neighbouring_bytes_racing, bytes.data()),
             Catch::Contains("race: thread (1, 0, 0)") && Catch::Contains("writes 1 byte at offset ") &&
                 Catch::Contains("which thread (0, 0, 0) read"));
  // The checker starts afresh with the next launch.
  std::vector<float> in(128, 1.0f), sums(1);
  CHECK(error_of([&] {
          launch_kernel(LaunchSpec{"tree_sum", Dim3(1), Dim3(128), 0, FATHOM_SIMT_SITE}, tree_sum, in.data(),
                        sums.data());
        }) == "(no error)");
  CHECK(sums[0] == 128.0f);
}

TEST_CASE("race checker: a read of shared memory no thread wrote names the thread and the offset", "[simt]") {
  std::vector<float> out(64);
  CHECK_THAT(run("read_unwritten", Dim3(1), Dim3(64), 0, read_unwritten, out.data()),
             Catch::Contains("uninitialised shared memory: thread (32, 0, 0) of block (0, 0, 0) of kernel "
                             "read_unwritten reads 4 bytes at offset ") &&
                 Catch::Contains("that no thread of the block has written"));
  CHECK_THAT(run("read_unwritten_dynamic", Dim3(1), Dim3(8), 8 * sizeof(float), read_unwritten_dynamic, out.data()),
             Catch::Contains("thread (3, 0, 0) of block (0, 0, 0) of kernel read_unwritten_dynamic reads 4 bytes at "
                             "offset 12 of the block's dynamic shared memory"));
}

TEST_CASE("static shared memory: more than a block's 48 KiB is an error naming the sizes", "[simt]") {
  std::vector<float> out(32);
  CHECK_THAT(run("too_much_shared", Dim3(1), Dim3(32), 0, too_much_shared, out.data()),
             Catch::Contains("of kernel too_much_shared") &&
                 Catch::Contains("the kernel's __shared__ variables need 65536 bytes, more than the 49152 of static "
                                 "shared memory a block may have"));
}
