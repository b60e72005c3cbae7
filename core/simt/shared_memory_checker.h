#pragma once
// The SIMT emulator's shared-memory race checker (docs/gpu.md, "CUDA emulation").
//
// Kernel sources are compiled with GCC's ThreadSanitizer instrumentation but without its runtime:
// every load and store calls a hook (core/simt/sanitizer_hooks.cpp) that sends accesses to the
// running block's shared memory here and everything else to AddressSanitizer's checks, when
// present. Each byte of shared memory has a shadow cell: the last writer and the barrier epoch of
// its write, and who read it in the current epoch. An access is reported when it meets another
// thread's access in the same epoch with at least one of them a write (atomics meet each other
// freely), unless both threads are in one warp and a __syncwarp of that warp has completed since
// the other access; a read of a byte no thread of the block has written is reported too. So a
// missing barrier is found even when every thread order happens to give the same output.
//
// Epochs: a counter advanced at the start of every block and at every completed __syncthreads,
// so shadow cells are never cleared between blocks — a cell from an earlier epoch is simply old.
// Granularity: a cell per 4-byte word while every access to the word covers all of it (every
// kernel's shared arrays hold 4- and 8-byte values, so checks cost one cell per word); the first
// access to part of a word splits it into a cell per byte, so threads writing neighbouring bytes
// (a __half array) are not taken for racing.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace fathom::simt {

enum class Access : uint8_t { Read, Write, Atomic };

// What the checker found: `thread` (the block's linear thread index) made `access` to `bytes`
// bytes at `offset` of the static or the dynamic shared memory; `other` is the thread whose access
// it conflicts with (-1: several threads; `uninitialised`: nobody wrote it in this block).
struct SharedRace {
  Access access = Access::Read;
  Access other_access = Access::Write;
  int thread = 0;
  int other = -1;
  bool uninitialised = false;
  bool dynamic = false;
  size_t offset = 0;
  size_t bytes = 0;
  const void* pc = nullptr;  // the instrumented access, for a symboliser
};

class SharedMemoryChecker {
 public:
  // The calling OS thread's checker while a block of it runs (inside BlockScheduler::run), else
  // null: the sanitizer hooks' test.
  static SharedMemoryChecker* active();  // (inline below: the hooks ask on every access)

  // The shared memory of the launch about to run: the block's `__shared__` arena and its dynamic
  // shared memory (either may be empty).
  void watch(void* static_begin, size_t static_bytes, void* dynamic_begin, size_t dynamic_bytes);
  // From the block scheduler: a block of `threads` begins (and becomes active() until end_block);
  // thread `t` runs next; a __syncthreads completed; a __syncwarp of warp `w` completed.
  void begin_block(int threads);
  void end_block();
  void set_running(int thread) { running_ = thread; }
  void barrier_completed() { advance_epoch(); }
  void warp_synced(int warp) { ++warp_syncs_[warp]; }

  bool watches(const void* address) const { return static_.contains(address) || dynamic_.contains(address); }
  // Checks and records an access of the running thread; the first race of the block is kept.
  void access(const void* address, size_t bytes, Access kind, const void* pc);
  const std::optional<SharedRace>& race() const { return race_; }
  // Shared-memory accesses checked on this OS thread so far (tests: the kernels are instrumented).
  uint64_t accesses_checked() const { return accesses_checked_; }

 private:
  // A byte's shadow. Thread fields hold (thread + 1); 0 is nobody.
  struct Cell {
    uint32_t write_epoch = 0, read_epoch = 0;
    uint16_t writer = 0;                     // | kAtomicBit for an atomic; kSeveral: atomics of several threads
    uint16_t reader = 0;                     // kWarpReaders | warp: several lanes of one warp; kSeveral: several warps
    uint16_t write_sync = 0, read_sync = 0;  // the accessing warp's __syncwarp count at the access
  };
  static constexpr uint16_t kAtomicBit = 0x8000, kWarpReaders = 0x4000, kSeveral = 0xFFFF;

  // One of the two shared memories and its shadow.
  struct Region {
    uintptr_t begin = 0;
    size_t bytes = 0;
    std::vector<Cell> words;     // a cell per 4-byte word...
    std::vector<uint8_t> split;  // ...until the word is split:
    std::vector<Cell> bytes_;    // then a cell per byte
    bool contains(const void* address) const { return reinterpret_cast<uintptr_t>(address) - begin < bytes; }
    void watch(void* start, size_t size);
    void clear();
  };

  void advance_epoch();
  bool ordered(int other_warp, uint16_t sync_then) const;  // a __syncwarp of this warp since?
  std::optional<SharedRace> check(Cell& cell, Access kind);
  // Checks [offset, end) of `region`, all in one 4-byte word; true on a race.
  bool check_word(Region& region, size_t offset, size_t end, Access kind);

  Region static_, dynamic_;
  uint32_t epoch_ = 0, block_start_ = 0;
  std::vector<uint16_t> warp_syncs_;
  int running_ = 0;
  std::optional<SharedRace> race_;
  uint64_t accesses_checked_ = 0;
};

extern constinit thread_local SharedMemoryChecker* active_shared_memory_checker;
inline SharedMemoryChecker* SharedMemoryChecker::active() { return active_shared_memory_checker; }

// The calling OS thread's checker (one per thread: blocks run one at a time on it).
SharedMemoryChecker& shared_memory_checker();

// An atomic operation of kernel code on `address` (core/simt/device.h's atomics, which are plain
// read-modify-writes and not instrumented).
void note_atomic(const void* address, size_t bytes);

}  // namespace fathom::simt
