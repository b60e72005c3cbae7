#include "core/allocator.h"

#include <cstdlib>
#include <new>

#include "core/cuda/cuda_runtime.h"
#include "core/error.h"

namespace fathom {

void* CpuAllocator::allocate(size_t bytes, MemoryTag tag) {
  if (bytes == 0) return nullptr;
  const size_t padded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* ptr = std::aligned_alloc(kAlignment, padded);
  FATHOM_CHECK(ptr != nullptr, "out of host memory allocating ", bytes, " bytes for ", memory_tag_name(tag),
               " (", stats_.snapshot().total.current, " bytes in use)");
  stats_.on_allocate(tag, static_cast<int64_t>(bytes));
  stats_.on_reserve(static_cast<int64_t>(bytes));
  return ptr;
}

void CpuAllocator::deallocate(void* ptr, size_t bytes, MemoryTag tag) {
  if (ptr == nullptr) return;
  std::free(ptr);
  stats_.on_free(tag, static_cast<int64_t>(bytes));
  stats_.on_unreserve(static_cast<int64_t>(bytes));
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
