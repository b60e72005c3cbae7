#include "core/allocator.h"

#include <malloc.h>

#include <algorithm>
#include <cstdlib>
#include <new>
#include <string>

#include "core/cuda/cuda_runtime.h"
#include "core/error.h"

namespace fathom {

namespace {
size_t cache_limit_from_environment() {
  const char* env = std::getenv("FATHOM_CPU_CACHE_MB");
  if (env == nullptr || *env == '\0') return size_t{4096} << 20;
  char* end = nullptr;
  const long long mb = std::strtoll(env, &end, 10);
  if (*end != '\0' || mb < 0) return size_t{4096} << 20;
  return static_cast<size_t>(mb) << 20;
}

int64_t memory_limit_from_environment() {
  const char* env = std::getenv("FATHOM_CPU_MEMORY_LIMIT_MB");
  if (env == nullptr || *env == '\0') return 0;
  char* end = nullptr;
  const long long mb = std::strtoll(env, &end, 10);
  FATHOM_CHECK(*end == '\0' && mb >= 0 && mb < (int64_t{1} << 43), "FATHOM_CPU_MEMORY_LIMIT_MB=\"", env,
               "\": expected a whole number of MiB (0 = no limit)");
  return static_cast<int64_t>(mb) << 20;
}
}  // namespace

// glibc raises its mmap threshold (up to 32 MiB) after the first large free, after which freed
// large blocks stay in its heaps and the process's resident memory drifts far above its live
// bytes. Fixing the threshold at the cache's minimum hands every block of 1 MiB and more back to
// the OS when it leaves the cache, and this allocator's cache already serves the reuse that the
// heap would have.
CpuAllocator::CpuAllocator() : CpuAllocator(Blocks{}) {
  limit_ = memory_limit_from_environment();
  ::mallopt(M_MMAP_THRESHOLD, static_cast<int>(kCachedMinimum));
}
CpuAllocator::CpuAllocator(Blocks blocks) : blocks_(blocks), cache_limit_(cache_limit_from_environment()) {
  FATHOM_CHECK(blocks_.alignment >= kAlignment && (blocks_.alignment & (blocks_.alignment - 1)) == 0,
               "host allocator \"", blocks_.name, "\": alignment ", blocks_.alignment, " is not a power of two >= ",
               kAlignment);
  std::lock_guard<std::mutex> lock(registry_mutex_);
  registry_.push_back(this);
}
CpuAllocator::~CpuAllocator() {
  {
    std::lock_guard<std::mutex> lock(registry_mutex_);
    registry_.erase(std::find(registry_.begin(), registry_.end(), this));
  }
  empty_cache();
}

bool CpuAllocator::fits_with_caches(int64_t size) {
  const int64_t limit = limit_.load(std::memory_order_relaxed);
  return limit <= 0 || live_.load() + cached_.load() + size <= limit;
}

void CpuAllocator::empty_every_cache() {
  std::lock_guard<std::mutex> lock(registry_mutex_);
  for (CpuAllocator* allocator : registry_) allocator->empty_cache();
}

size_t CpuAllocator::rounded(size_t bytes) const {
  // Large blocks round to 64 KiB so that nearly equal sizes share cache entries.
  const size_t unit = std::max(bytes >= kCachedMinimum ? size_t{1} << 16 : kAlignment, blocks_.alignment);
  return (bytes + unit - 1) / unit * unit;
}

void CpuAllocator::set_limit(int64_t bytes) {
  FATHOM_CHECK(bytes >= 0, "set_cpu_memory_limit: ", bytes, " bytes; expected >= 0 (0 = no limit)");
  limit_ = bytes;
}

void CpuAllocator::fail_over_limit(size_t bytes, MemoryTag tag, int64_t limit) const {
  const MemorySnapshot snap = stats_.snapshot();
  std::string by_tag;
  for (int t = 0; t < kNumMemoryTags; ++t)
    if (snap.by_tag[t].current != 0)
      by_tag += detail::concat(by_tag.empty() ? ": " : ", ", memory_tag_name(static_cast<MemoryTag>(t)), " ",
                               snap.by_tag[t].current);
  const bool device_allocator = std::string(blocks_.name) == "host";
  FATHOM_FAIL("out of host memory: allocating ", bytes, " bytes for ", memory_tag_name(tag),
              device_allocator ? "" : std::string(" in the ") + blocks_.name, " would exceed the limit of ", limit,
              " bytes (FATHOM_CPU_MEMORY_LIMIT_MB); ", live_.load(), " bytes in use",
              device_allocator ? "" : detail::concat(" (", snap.total.current, " of them in the ", blocks_.name, ")"),
              by_tag);
}

void* CpuAllocator::allocate(size_t bytes, MemoryTag tag) {
  if (bytes == 0) return nullptr;
  // With a limit, the check and the count happen under one lock, so that concurrent allocations
  // cannot pass it together; frees only lower the count and need no lock.
  std::unique_lock<std::mutex> limit_lock;
  if (const int64_t limit = limit_.load(std::memory_order_relaxed); limit > 0) {
    limit_lock = std::unique_lock<std::mutex>(limit_mutex_);
    if (live_.load() + static_cast<int64_t>(bytes) > limit) fail_over_limit(bytes, tag, limit);
  }
  const size_t size = rounded(bytes);
  void* ptr = nullptr;
  if (size >= kCachedMinimum) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    auto it = cache_.find(size);
    if (it != cache_.end()) {
      ptr = it->second;
      cache_.erase(it);
      cached_bytes_ -= size;
      cached_ -= static_cast<int64_t>(size);
    }
  }
  if (ptr == nullptr && !fits_with_caches(static_cast<int64_t>(size))) empty_every_cache();
  if (ptr == nullptr) {
    ptr = blocks_.allocate ? blocks_.allocate(blocks_.alignment, size) : std::aligned_alloc(blocks_.alignment, size);
    FATHOM_CHECK(ptr != nullptr, "out of host memory (", blocks_.name, ") allocating ", bytes, " bytes for ", memory_tag_name(tag), " (",
                 stats_.snapshot().total.current, " bytes in use)");
    stats_.on_reserve(static_cast<int64_t>(size));
  }
  stats_.on_allocate(tag, static_cast<int64_t>(bytes));
  live_.fetch_add(static_cast<int64_t>(bytes));
  return ptr;
}

void CpuAllocator::deallocate(void* ptr, size_t bytes, MemoryTag tag) {
  if (ptr == nullptr) return;
  stats_.on_free(tag, static_cast<int64_t>(bytes));
  live_.fetch_sub(static_cast<int64_t>(bytes));
  const size_t size = rounded(bytes);
  if (size >= kCachedMinimum) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cached_bytes_ + size <= cache_limit_ && fits_with_caches(static_cast<int64_t>(size))) {
      cache_.emplace(size, ptr);
      cached_bytes_ += size;
      cached_ += static_cast<int64_t>(size);
      return;
    }
  }
  blocks_.release ? blocks_.release(ptr) : std::free(ptr);
  stats_.on_unreserve(static_cast<int64_t>(size));
}

void CpuAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(cache_mutex_);
  for (const auto& [size, ptr] : cache_) {
    blocks_.release ? blocks_.release(ptr) : std::free(ptr);
    stats_.on_unreserve(static_cast<int64_t>(size));
  }
  cache_.clear();
  cached_ -= static_cast<int64_t>(cached_bytes_);
  cached_bytes_ = 0;
}

size_t CpuAllocator::cached_bytes() const {
  std::lock_guard<std::mutex> lock(cache_mutex_);
  return cached_bytes_;
}

Allocator& allocator_for(Device device) {
  if (device.is_cpu()) {
    static CpuAllocator cpu;
    return cpu;
  }
  return cuda::device_allocator(device.index);
}

namespace {
thread_local Allocator* host_override = nullptr;
}

HostAllocatorScope::HostAllocatorScope(Allocator& allocator) : previous_(host_override) {
  FATHOM_CHECK(allocator.device().is_cpu(), "HostAllocatorScope: the allocator is for ", allocator.device().str(),
               ", not the host");
  host_override = &allocator;
}
HostAllocatorScope::~HostAllocatorScope() { host_override = previous_; }

Allocator& allocator_for_new(Device device) {
  if (device.is_cpu() && host_override != nullptr) return *host_override;
  return allocator_for(device);
}

void set_cpu_memory_limit(int64_t bytes) {
  allocator_for(kCPU);  // the limit from the environment is read first, then replaced
  CpuAllocator::set_limit(bytes);
}
int64_t cpu_memory_limit() {
  allocator_for(kCPU);
  return CpuAllocator::limit();
}

MemorySnapshot memory_snapshot(Device device) { return allocator_for(device).stats().snapshot(); }

}  // namespace fathom
