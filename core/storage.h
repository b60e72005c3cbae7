#pragma once
// Storage: one block of device or host memory shared by every tensor view of it.
//
// Besides the bytes it keeps two things the layers above rely on:
//  - a version counter, bumped by in-place and accumulating writes through any view, so
//    autograd can tell that a tensor it saved for backward was overwritten;
//  - release()/refill(): ZeRO stage 3 frees a parameter's memory between uses and fills it
//    again later, keeping the same Storage (and so every view and every Variable) alive.
//    Neither bumps the version: refilled data is the same parameter, not a modification.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "core/device.h"
#include "core/memory_stats.h"

namespace fathom {

class Allocator;

class Storage {
 public:
  // Allocates `nbytes` on `device`, charged to `tag` (from allocator_for_new(device): a host
  // block may come from offload's host tier).
  Storage(size_t nbytes, Device device, MemoryTag tag);
  // Wraps memory owned elsewhere (e.g. a memory-mapped file); `deleter` runs on destruction.
  // External memory is not counted by any allocator and cannot be released.
  static std::shared_ptr<Storage> wrap_external(void* data, size_t nbytes, Device device,
                                                std::function<void(void*)> deleter);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  // Throws a clear error if the memory is currently released.
  void* data() const;
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  MemoryTag tag() const { return tag_; }
  // The allocator the block comes from (null for external memory).
  Allocator* allocator() const { return allocator_; }
  // Moves this block's bytes from its tag's counter to `tag`'s (e.g. a backward output
  // adopted as a parameter's gradient).
  void retag(MemoryTag tag);

  // Frees the memory, keeping the size; data() throws until refill().
  void release();
  // Allocates the memory again (contents undefined), charged to the current tag of this storage.
  void refill();
  bool is_released() const { return data_ == nullptr && nbytes_ > 0; }

  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

 private:
  Storage() = default;
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  Allocator* allocator_ = nullptr;
  MemoryTag tag_ = MemoryTag::Other;
  std::function<void(void*)> external_deleter_;  // set only for wrapped memory
  std::atomic<uint64_t> version_{0};
};

}  // namespace fathom
