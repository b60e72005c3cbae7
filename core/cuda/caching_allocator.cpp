#include "core/cuda/caching_allocator.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <string>

#include "core/error.h"

namespace fathom::cuda {

size_t CachingAllocator::round_size(size_t bytes) {
  if (bytes <= kSmallLimit) {
    size_t size = kMinBlock;
    while (size < bytes) size <<= 1;
    return size;
  }
  // A request this close to the address space cannot be served anyway; leave it for the
  // device to refuse rather than wrap around to a tiny size.
  if (bytes > std::numeric_limits<size_t>::max() - kLargeGranularity) return bytes;
  return (bytes + kLargeGranularity - 1) / kLargeGranularity * kLargeGranularity;
}

bool CachingAllocator::poison_from_environment() {
  const char* env = std::getenv("FATHOM_CUDA_POISON");
  if (env == nullptr || *env == '\0' || std::string(env) == "0") return false;
  FATHOM_CHECK(std::string(env) == "1", "FATHOM_CUDA_POISON=\"", env,
               "\": expected 1 (fill every device allocation with 0xFF bytes) or 0 (off)");
  return true;
}

CachingAllocator::CachingAllocator(int device_index, std::unique_ptr<DeviceMemoryBackend> backend, bool poison)
    : device_index_(device_index), backend_(std::move(backend)), poison_(poison) {
  FATHOM_CHECK(backend_ != nullptr, "CachingAllocator: no backend");
}

CachingAllocator::~CachingAllocator() {
  std::lock_guard<std::mutex> lock(mutex_);
  try {
    wait_pending();
  } catch (...) {
    // A dead context cannot complete events; the process is ending, the memory goes with it.
  }
  release_free_blocks();
  for (void* event : idle_events_) backend_->destroy_event(event);
}

void* CachingAllocator::allocate(size_t bytes, MemoryTag tag) {
  return allocate_on(bytes, tag, backend_->current_stream());
}

void* CachingAllocator::allocate_on(size_t bytes, MemoryTag tag, void* stream) {
  if (bytes == 0) return nullptr;
  const size_t rounded = round_size(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  if (!pending_.empty()) poll_pending();
  void* ptr = take_cached(rounded, stream);
  if (ptr == nullptr) {
    ptr = device_malloc(rounded);
    if (ptr == nullptr) {
      // Everything the cache holds goes back to the device, then one more try.
      wait_pending();
      release_free_blocks();
      ptr = device_malloc(rounded);
      if (ptr == nullptr) fail_out_of_memory(bytes, tag);
    }
    Block block;
    block.size = rounded;
    block.stream = stream;
    blocks_.emplace(reinterpret_cast<uintptr_t>(ptr), std::move(block));
  }
  Block& block = blocks_.at(reinterpret_cast<uintptr_t>(ptr));
  backend_->mark_in_use(ptr, bytes, block.size, stream);
  if (poison_) {
    try {
      backend_->memset(ptr, 0xFF, bytes, stream);
    } catch (...) {
      make_free(reinterpret_cast<uintptr_t>(ptr), block);
      throw;
    }
  }
  block.state = State::Live;
  block.requested = bytes;
  stats_.on_allocate(tag, static_cast<int64_t>(bytes));
  return ptr;
}

void* CachingAllocator::take_cached(size_t rounded, void* stream) {
  const auto list = free_.find(stream);
  if (list == free_.end()) return nullptr;
  const auto it = list->second.lower_bound({rounded, 0});
  if (it == list->second.end() || !reusable(it->first, rounded)) return nullptr;
  const uintptr_t address = it->second;
  list->second.erase(it);
  return reinterpret_cast<void*>(address);
}

void* CachingAllocator::device_malloc(size_t rounded) {
  void* ptr = backend_->malloc(rounded);
  if (ptr == nullptr) return nullptr;
  ++info_.device_mallocs;
  stats_.on_reserve(static_cast<int64_t>(rounded));
  return ptr;
}

void CachingAllocator::deallocate(void* ptr, size_t bytes, MemoryTag tag) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  const uintptr_t address = reinterpret_cast<uintptr_t>(ptr);
  const auto it = blocks_.find(address);
  FATHOM_CHECK(it != blocks_.end() && it->second.state == State::Live, "cuda:", device_index_, ": freeing ", ptr,
               ", which is not a live allocation of this device's allocator (freed twice?)");
  Block& block = it->second;
  FATHOM_CHECK(bytes == block.requested, "cuda:", device_index_, ": freeing ", ptr, " as ", bytes,
               " bytes, but it was allocated as ", block.requested);
  stats_.on_free(tag, static_cast<int64_t>(bytes));
  block.requested = 0;
  if (block.used_on.empty()) {
    make_free(address, block);
    return;
  }
  // Other streams may still be reading or writing the block: it becomes free once the work
  // they have enqueued so far has completed.
  PendingFree pending{address, {}};
  for (void* stream : block.used_on) {
    pending.events.push_back(get_event());
    backend_->record_event(pending.events.back(), stream);
  }
  block.used_on.clear();
  block.state = State::Pending;
  pending_.push_back(std::move(pending));
}

void CachingAllocator::make_free(uintptr_t address, Block& block) {
  block.state = State::Free;
  block.requested = 0;
  block.used_on.clear();
  free_[block.stream].emplace(block.size, address);
  backend_->mark_cached(reinterpret_cast<void*>(address), block.size, block.stream);
}

void CachingAllocator::record_stream(void* ptr, void* stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  const uintptr_t address = reinterpret_cast<uintptr_t>(ptr);
  auto it = blocks_.upper_bound(address);
  const bool inside = it != blocks_.begin() && (--it, address - it->first < it->second.size);
  FATHOM_CHECK(inside && it->second.state == State::Live, "record_stream: ", ptr,
               " is not inside a live allocation of cuda:", device_index_, "'s allocator");
  Block& block = it->second;
  if (stream == block.stream) return;
  if (std::find(block.used_on.begin(), block.used_on.end(), stream) == block.used_on.end())
    block.used_on.push_back(stream);
}

void* CachingAllocator::get_event() {
  if (idle_events_.empty()) return backend_->create_event();
  void* event = idle_events_.back();
  idle_events_.pop_back();
  return event;
}

void CachingAllocator::poll_pending() {
  for (size_t i = 0; i < pending_.size();) {
    PendingFree& pending = pending_[i];
    const bool done = std::all_of(pending.events.begin(), pending.events.end(),
                                  [&](void* event) { return backend_->query_event(event); });
    if (!done) {
      ++i;
      continue;
    }
    idle_events_.insert(idle_events_.end(), pending.events.begin(), pending.events.end());
    make_free(pending.address, blocks_.at(pending.address));
    pending_[i] = std::move(pending_.back());
    pending_.pop_back();
  }
}

void CachingAllocator::wait_pending() {
  while (!pending_.empty()) {
    PendingFree& pending = pending_.back();
    for (void* event : pending.events) backend_->synchronize_event(event);
    idle_events_.insert(idle_events_.end(), pending.events.begin(), pending.events.end());
    make_free(pending.address, blocks_.at(pending.address));
    pending_.pop_back();
  }
}

void CachingAllocator::release_free_blocks() {
  for (const auto& [stream, list] : free_) {
    for (const auto& [size, address] : list) {
      backend_->free(reinterpret_cast<void*>(address));
      ++info_.device_frees;
      stats_.on_unreserve(static_cast<int64_t>(size));
      blocks_.erase(address);
    }
  }
  free_.clear();
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!pending_.empty()) poll_pending();
  release_free_blocks();
}

void CachingAllocator::set_poison(bool enabled) {
  std::lock_guard<std::mutex> lock(mutex_);
  poison_ = enabled;
}

bool CachingAllocator::poison() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return poison_;
}

CachingAllocator::Info CachingAllocator::info() const {
  std::lock_guard<std::mutex> lock(mutex_);
  Info out = info_;
  for (const auto& [address, block] : blocks_) {
    switch (block.state) {
      case State::Live: ++out.live_blocks; break;
      case State::Free: out.cached_bytes += block.size; break;
      case State::Pending: out.pending_bytes += block.size; break;
    }
  }
  return out;
}

void CachingAllocator::fail_out_of_memory(size_t bytes, MemoryTag tag) {
  const MemorySnapshot snap = stats_.snapshot();
  std::string by_tag;
  for (int t = 0; t < kNumMemoryTags; ++t)
    if (snap.by_tag[t].current != 0)
      by_tag += detail::concat(by_tag.empty() ? "; in use: " : ", ", memory_tag_name(static_cast<MemoryTag>(t)), " ",
                               format_bytes(static_cast<double>(snap.by_tag[t].current)));
  FATHOM_FAIL("out of memory on cuda:", device_index_, " allocating ", format_bytes(static_cast<double>(bytes)), " (",
              bytes, " bytes) for ", memory_tag_name(tag), " (", format_bytes(static_cast<double>(snap.total.current)),
              " in use, ", format_bytes(static_cast<double>(snap.reserved)),
              " reserved/cached after returning the cache to the device", by_tag,
              "): use a smaller micro batch (train_micro_batch_size_per_gpu), a higher ZeRO stage "
              "(zero_optimization.stage) or activation checkpointing");
}

}  // namespace fathom::cuda
