#include "offload/host_memory.h"

#include <cstdlib>

#include "core/cuda/cuda_runtime.h"

namespace fathom::offload {
namespace {

void* pinned_or_aligned(size_t alignment, size_t bytes) {
  if (pinned_is_page_locked()) return cuda::allocate_pinned(alignment, bytes);
  return std::aligned_alloc(alignment, bytes);
}

void free_pinned_or_aligned(void* ptr) {
  if (pinned_is_page_locked())
    cuda::free_pinned(ptr);
  else
    std::free(ptr);
}

}  // namespace

bool pinned_is_page_locked() {
  static const bool locked = cuda::device_count() > 0;
  return locked;
}

Allocator& host_tier_allocator(bool pinned) {
  static CpuAllocator host(CpuAllocator::Blocks{.name = "host tier", .alignment = kHostTierAlignment});
  static CpuAllocator page_locked(CpuAllocator::Blocks{.name = "pinned",
                                                       .alignment = kHostTierAlignment,
                                                       .allocate = pinned_or_aligned,
                                                       .release = free_pinned_or_aligned});
  return pinned ? page_locked : host;
}

}  // namespace fathom::offload
