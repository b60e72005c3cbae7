#pragma once
// The caching device allocator: every device's Allocator (cuda::device_allocator(i)) is one of
// these over the CUDA backend. cudaMalloc and cudaFree synchronise the device and cost tens of
// microseconds to milliseconds, and a training step allocates the same activation and
// gradient sizes every step; so freed blocks are kept and handed out again, and once a step
// pattern has been seen no allocation reaches the device (DeviceMemoryBackend::malloc).
//
// Size classes (no splitting, so a block is always exactly one device allocation):
//   - up to 1 MiB: the next power of two, at least 512 B (12 classes, at most 2x waste on
//     blocks that are small in absolute terms);
//   - above 1 MiB: the next multiple of 1 MiB (under 1 MiB waste per block).
// A request takes the smallest free block of its stream that is at least its rounded size and
// at most 5/4 of it (best fit with bounded waste: a 100 MiB block does not serve a 2 MiB
// request and leave the next 100 MiB request to allocate again).
//
// Streams: a block belongs to the stream that was current when it was allocated, and is
// handed out again only to allocations on that stream. That needs no synchronisation: work
// that used the old owner was enqueued on the same stream before the new owner's work, so the
// stream orders them. A block used on another stream too (e.g. a gradient that the
// communication stream reduces) must be announced with record_stream(ptr, stream); when it is
// freed, an event is recorded on each such stream and the block waits in a pending list until
// those events complete. Pending blocks are polled (without blocking) on every allocation and
// on empty_cache(); when the device is out of memory they are waited for.
//
// Counters (MemoryStats): current per tag = bytes requested by live allocations; reserved =
// bytes held from the device, cached and pending blocks included (rounded sizes); peaks.
// empty_cache() returns every free block to the device. When the device is out of memory the
// allocator waits for pending blocks, returns every free block and tries once more, then
// throws "out of memory on cuda:N ..." with the numbers and what to change.
//
// Poison (for tests): every allocation is filled with 0xFF bytes (NaN for every float dtype,
// -1 for integers), so a kernel that forgets to write part of its output is caught. On when
// FATHOM_CUDA_POISON=1 at creation, or through set_poison / cuda::set_allocation_poison.
//
// Thread-safe: one mutex guards the block tables.
// No CUDA include: compiled and tested (over a fake backend) in every build.

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/allocator.h"
#include "core/cuda/device_memory_backend.h"

namespace fathom::cuda {

class CachingAllocator final : public Allocator {
 public:
  static constexpr size_t kMinBlock = 512;
  static constexpr size_t kSmallLimit = size_t{1} << 20;
  static constexpr size_t kLargeGranularity = size_t{1} << 20;
  // The size class of a request of `bytes` (> 0).
  static size_t round_size(size_t bytes);
  // Whether a free block of `block` bytes may serve a request rounded to `rounded` bytes.
  static bool reusable(size_t block, size_t rounded) { return block >= rounded && block - rounded <= rounded / 4; }
  // FATHOM_CUDA_POISON: "1" on, unset / "" / "0" off; anything else is an error.
  static bool poison_from_environment();

  CachingAllocator(int device_index, std::unique_ptr<DeviceMemoryBackend> backend, bool poison);
  // Waits for pending blocks and returns every block that is not in use to the device.
  ~CachingAllocator() override;
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // On the backend's current stream.
  void* allocate(size_t bytes, MemoryTag tag) override;
  void* allocate_on(size_t bytes, MemoryTag tag, void* stream);
  void deallocate(void* ptr, size_t bytes, MemoryTag tag) override;
  Device device() const override { return Device::cuda(device_index_); }

  // Marks the live block containing `ptr` as used on `stream` until it is freed.
  void record_stream(void* ptr, void* stream);
  // Returns every free block to the device (blocks in use or awaiting events stay).
  void empty_cache();
  void set_poison(bool enabled);
  bool poison() const;

  struct Info {
    int64_t device_mallocs = 0;  // backend malloc calls that succeeded, ever
    int64_t device_frees = 0;
    size_t cached_bytes = 0;     // free blocks, ready for reuse
    size_t pending_bytes = 0;    // freed blocks awaiting other streams' events
    int64_t live_blocks = 0;
  };
  Info info() const;

 private:
  enum class State : uint8_t { Live, Free, Pending };
  struct Block {
    size_t size = 0;       // rounded: what the device holds
    size_t requested = 0;  // what the live allocation asked for (its charge)
    void* stream = nullptr;
    State state = State::Live;
    std::vector<void*> used_on;  // other streams, from record_stream
  };
  struct PendingFree {
    uintptr_t address;
    std::vector<void*> events;
  };
  using FreeList = std::set<std::pair<size_t, uintptr_t>>;  // (size, address): best fit first

  void* take_cached(size_t rounded, void* stream);  // nullptr when no free block fits
  void* device_malloc(size_t rounded);              // nullptr when the device is full
  void make_free(uintptr_t address, Block& block);
  void poll_pending();
  void wait_pending();
  void release_free_blocks();
  void* get_event();
  [[noreturn]] void fail_out_of_memory(size_t bytes, MemoryTag tag);

  const int device_index_;
  const std::unique_ptr<DeviceMemoryBackend> backend_;
  mutable std::mutex mutex_;
  bool poison_;
  std::map<uintptr_t, Block> blocks_;  // every block held from the device, by address
  std::unordered_map<void*, FreeList> free_;  // by stream
  std::vector<PendingFree> pending_;
  std::vector<void*> idle_events_;
  Info info_;
};

}  // namespace fathom::cuda
