#include "core/allocator.h"

#include <cstdlib>
#include <new>

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
}  // namespace

CpuAllocator::CpuAllocator() : cache_limit_(cache_limit_from_environment()) {}
CpuAllocator::~CpuAllocator() { empty_cache(); }

size_t CpuAllocator::rounded(size_t bytes) {
  // Large blocks round to 64 KiB so that nearly equal sizes share cache entries.
  const size_t unit = bytes >= kCachedMinimum ? size_t{1} << 16 : kAlignment;
  return (bytes + unit - 1) / unit * unit;
}

void* CpuAllocator::allocate(size_t bytes, MemoryTag tag) {
  if (bytes == 0) return nullptr;
  const size_t size = rounded(bytes);
  void* ptr = nullptr;
  if (size >= kCachedMinimum) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    auto it = cache_.find(size);
    if (it != cache_.end()) {
      ptr = it->second;
      cache_.erase(it);
      cached_bytes_ -= size;
    }
  }
  if (ptr == nullptr) {
    ptr = std::aligned_alloc(kAlignment, size);
    FATHOM_CHECK(ptr != nullptr, "out of host memory allocating ", bytes, " bytes for ", memory_tag_name(tag), " (",
                 stats_.snapshot().total.current, " bytes in use)");
    stats_.on_reserve(static_cast<int64_t>(size));
  }
  stats_.on_allocate(tag, static_cast<int64_t>(bytes));
  return ptr;
}

void CpuAllocator::deallocate(void* ptr, size_t bytes, MemoryTag tag) {
  if (ptr == nullptr) return;
  stats_.on_free(tag, static_cast<int64_t>(bytes));
  const size_t size = rounded(bytes);
  if (size >= kCachedMinimum) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cached_bytes_ + size <= cache_limit_) {
      cache_.emplace(size, ptr);
      cached_bytes_ += size;
      return;
    }
  }
  std::free(ptr);
  stats_.on_unreserve(static_cast<int64_t>(size));
}

void CpuAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(cache_mutex_);
  for (const auto& [size, ptr] : cache_) {
    std::free(ptr);
    stats_.on_unreserve(static_cast<int64_t>(size));
  }
  cache_.clear();
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

MemorySnapshot memory_snapshot(Device device) { return allocator_for(device).stats().snapshot(); }

}  // namespace fathom
