#pragma once
// One CUDA thread block run on one OS thread, each of its threads a fiber (core/simt/fiber.h),
// and the block-level and warp-level synchronisation of the SIMT emulator, checked strictly:
//   __syncthreads   every thread of the block that has not exited waits at one barrier — one
//                   call site; a thread that exits, or waits at another barrier or in a warp
//                   operation, while the others wait is an error naming both places;
//   warp operations (__shfl*_sync, __ballot_sync, __syncwarp) complete when every lane of their
//                   mask has reached one of the same kind with the same mask; a mask without the
//                   calling lane, a lane of the mask that has exited, waits elsewhere or does not
//                   exist, or a shuffle reading a lane outside the mask is an error.
// Between those points a thread runs alone, so the order in which the scheduler resumes threads
// (forward, reverse or seeded-random: Schedule) is the only source of nondeterminism; running a
// kernel under two orders exposes code that depends on it (a missing barrier, a warp-synchronous
// read without __syncwarp).

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/simt/fiber.h"

namespace fathom::simt {

struct SharedRace;  // core/simt/shared_memory_checker.h

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr Dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
  // From CUDA's dim3 (or anything with x, y and z), as a launch site passes it.
  template <class D>
    requires requires(const D& d) { d.x + d.y + d.z; }
  constexpr Dim3(const D& d) : x(d.x), y(d.y), z(d.z) {}
  constexpr uint64_t count() const { return uint64_t{x} * y * z; }
};
std::string dim_str(const Dim3& d);  // "(x, y, z)"

// A place in kernel source: where a barrier or warp operation is.
struct Site {
  const char* file = "?";
  int line = 0;
};
std::string site_str(const Site& s);  // "file:line"

enum class Order { Forward, Reverse, Random };
struct Schedule {
  Order order = Order::Forward;
  uint64_t seed = 0;
  // FATHOM_SIMT_ORDER: "forward" (default), "reverse" or "random:<seed>"; anything else is an
  // error naming the variable.
  static Schedule from_environment();
  std::string str() const;
};

// What kernel code sees of its thread (threadIdx and friends).
struct ThreadContext {
  Dim3 thread_idx, block_idx, block_dim, grid_dim;
  int linear = 0;  // threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)
  int lane = 0, warp = 0;
};
constexpr int kWarpSize = 32;

class BlockScheduler {
 public:
  // `kernel`: its name, for messages. Runs body() once per thread of `block_dim`.
  BlockScheduler(const char* kernel, Dim3 grid_dim, Dim3 block_idx, Dim3 block_dim, Schedule schedule,
                 std::vector<FiberStack*> stacks);
  void run(const std::function<void()>& body);

  // The calling thread's scheduler (kernel code only: inside run()).
  static BlockScheduler& current();
  // The running emulated thread's context (kernel code only); inline, as threadIdx and friends
  // are read in every loop of a kernel.
  static const ThreadContext& thread() {
    if (!running_thread) fail_outside_kernel();
    return *running_thread;
  }

  void syncthreads(Site site);
  enum class WarpKind { Sync, Ballot, Index, Up, Down, Xor };
  // A warp operation: posts this lane's value (up to 16 bytes) and waits for its mask; returns
  // the result's bytes (a shuffle's source value, or a ballot's mask in the first 4).
  struct WarpResult {
    unsigned char bytes[16];
  };
  WarpResult warp_op(WarpKind kind, unsigned mask, const void* value, size_t size, int arg, int width, Site site);
  unsigned active_mask() const;

 private:
  enum class State { Ready, Barrier, Warp, Done };
  struct Lane {
    State state = State::Ready;
    Site site;
    WarpKind kind = WarpKind::Sync;
    unsigned mask = 0;
    int arg = 0, width = kWarpSize;
    unsigned char value[16] = {};
    size_t size = 0;
    WarpResult result{};
  };
  std::vector<int> resume_order();
  bool release_warps();
  bool release_barrier();
  [[noreturn]] void fail_stuck();
  [[noreturn]] static void fail_outside_kernel();
  static constinit thread_local const ThreadContext* running_thread;  // set while a fiber runs
  std::string race_message(const SharedRace& race) const;
  std::string who(int t) const;  // "thread (x, y, z) of block (x, y, z) of kernel K"
  std::string lane_place(int t) const;

  const char* kernel_;
  Schedule schedule_;
  uint64_t random_state_;
  std::vector<FiberStack*> stacks_;
  std::vector<ThreadContext> threads_;
  std::vector<Lane> lanes_;
  std::vector<Fiber> fibers_;
  int running_ = -1;
  Site last_barrier_{nullptr, 0};  // the last completed __syncthreads (none yet: file null)
};

}  // namespace fathom::simt
