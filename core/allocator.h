#pragma once
// Allocators hand out raw device or host memory and keep the tagged byte counters.
// One allocator per device; allocator_for(device) finds it.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/device.h"
#include "core/memory_stats.h"

namespace fathom {

class Allocator {
 public:
  virtual ~Allocator() = default;
  // Returns memory for `bytes` bytes (nullptr for 0 bytes) charged to `tag`; throws on failure.
  virtual void* allocate(size_t bytes, MemoryTag tag) = 0;
  // `bytes` and `tag` must be those the block is currently charged to.
  virtual void deallocate(void* ptr, size_t bytes, MemoryTag tag) = 0;
  virtual Device device() const = 0;

  void retag(size_t bytes, MemoryTag from, MemoryTag to) { stats_.on_retag(static_cast<int64_t>(bytes), from, to); }
  MemoryStats& stats() { return stats_; }
  const MemoryStats& stats() const { return stats_; }

 protected:
  MemoryStats stats_;
};

// Host memory, 64-byte aligned (one cache line, one AVX-512 vector) and padded to 64 bytes.
//
// Blocks of 1 MiB and more are kept for reuse when freed (exact rounded size), up to a cache
// limit: a training step allocates the same large activations every step, and handing them
// back to the OS would make every step pay page faults and zeroing for them again. Cached
// bytes count as reserved, not as current. FATHOM_CPU_CACHE_MB sets the limit (default 4096,
// 0 disables); empty_cache() returns everything. Under a memory limit (below) cached blocks
// count against it too: a block is cached only while live and cached bytes fit under the limit,
// and every host allocator's cache is emptied before a new block would take them past it — so
// the limit bounds the memory the process holds, as a real per-rank cap does.
//
// An optional memory limit caps the live bytes of every host allocator together (the CPU
// device's and offload's host tier, not cached blocks): an allocation that would take them above
// it throws fathom::Error ("out of host memory: ..."), as if the host had no more — a per-rank
// memory cap. FATHOM_CPU_MEMORY_LIMIT_MB sets it at start; set_cpu_memory_limit() replaces it
// (0 = no limit, the default).
//
// Other host allocators differ only in how blocks are obtained (`Blocks`): offload's host tier
// (offload/host_memory.h) takes page-aligned or CUDA-pinned blocks and keeps its own counters.
class CpuAllocator final : public Allocator {
 public:
  static constexpr size_t kAlignment = 64;
  static constexpr size_t kCachedMinimum = size_t{1} << 20;
  struct Blocks {
    const char* name = "host";
    size_t alignment = kAlignment;  // a power of two; sizes are rounded to it as well
    void* (*allocate)(size_t alignment, size_t bytes) = nullptr;  // null: std::aligned_alloc
    void (*release)(void* ptr) = nullptr;                         // null: std::free
  };
  CpuAllocator();  // the CPU device's
  explicit CpuAllocator(Blocks blocks);
  ~CpuAllocator() override;
  void* allocate(size_t bytes, MemoryTag tag) override;
  void deallocate(void* ptr, size_t bytes, MemoryTag tag) override;
  Device device() const override { return kCPU; }
  void empty_cache();
  size_t cached_bytes() const;
  // The limit shared by every host allocator (0: none).
  static void set_limit(int64_t bytes);
  static int64_t limit() { return limit_.load(std::memory_order_relaxed); }
  // Live bytes of every host allocator together: what the limit caps.
  static int64_t live_host_bytes() { return live_.load(std::memory_order_relaxed); }
  size_t alignment() const { return blocks_.alignment; }

 private:
  size_t rounded(size_t bytes) const;
  [[noreturn]] void fail_over_limit(size_t bytes, MemoryTag tag, int64_t limit) const;
  Blocks blocks_;
  static inline std::mutex limit_mutex_;  // held from the check to the count while a limit is set
  static inline std::atomic<int64_t> limit_{0};
  static inline std::atomic<int64_t> live_{0};
  static inline std::atomic<int64_t> cached_{0};  // every host allocator's cached bytes
  static inline std::mutex registry_mutex_;
  static inline std::vector<CpuAllocator*> registry_;  // every host allocator, to empty their caches
  // Under a limit: whether `size` more bytes fit beside the live and cached ones.
  static bool fits_with_caches(int64_t size);
  static void empty_every_cache();
  mutable std::mutex cache_mutex_;
  std::unordered_multimap<size_t, void*> cache_;  // rounded size -> free block
  size_t cached_bytes_ = 0;
  size_t cache_limit_;
};

Allocator& allocator_for(Device device);

// Host allocations (kCPU tensors) made on this thread while the scope is alive come from
// `allocator` instead of the CPU device's: offload places the states it moves off the device in
// its host tier this way (offload/host_memory.h), so their bytes are counted apart. Storage
// remembers the allocator of each block, which frees and refills it.
class HostAllocatorScope {
 public:
  explicit HostAllocatorScope(Allocator& allocator);
  ~HostAllocatorScope();
  HostAllocatorScope(const HostAllocatorScope&) = delete;
  HostAllocatorScope& operator=(const HostAllocatorScope&) = delete;

 private:
  Allocator* previous_;
};
// Where new memory on `device` comes from: the innermost HostAllocatorScope's allocator for the
// host, allocator_for(device) otherwise.
Allocator& allocator_for_new(Device device);
// The CPU allocator's limit on live bytes (0 = none); FATHOM_CPU_MEMORY_LIMIT_MB sets it at start.
void set_cpu_memory_limit(int64_t bytes);
int64_t cpu_memory_limit();
// Shorthand for allocator_for(device).stats().snapshot().
MemorySnapshot memory_snapshot(Device device = kCPU);

}  // namespace fathom
