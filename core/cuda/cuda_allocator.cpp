// The device allocators: one CachingAllocator per device over the CUDA runtime backend, and
// the cuda_runtime.h functions that reach them (empty_cache, record_stream, poison).
#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "core/cuda/caching_allocator.h"
#include "core/cuda/cuda_runtime.h"
#include "core/cuda/device_memory_backend.h"
#include "core/error.h"

namespace fathom::cuda {
namespace {

std::atomic<bool>& poison_flag() {
  static std::atomic<bool> flag{CachingAllocator::poison_from_environment()};
  return flag;
}

// Created on first use and never destroyed: tensors in static storage may be freed after
// main returns, in any order relative to this function's statics, and must still find their
// allocator. The device memory goes back with the process.
const std::vector<CachingAllocator*>& allocators() {
  static const std::vector<CachingAllocator*>* list = [] {
    auto* out = new std::vector<CachingAllocator*>();
    for (int i = 0; i < device_count(); ++i)
      out->push_back(new CachingAllocator(i, make_cuda_memory_backend(i), poison_flag().load()));
    return out;
  }();
  return *list;
}

}  // namespace

CachingAllocator& caching_allocator(int index) {
  require_device(index);
  return *allocators()[index];
}

Allocator& device_allocator(int index) { return caching_allocator(index); }

void empty_cache(int device) { caching_allocator(device).empty_cache(); }

void record_stream(void* ptr, const Stream& stream) { record_stream(ptr, stream.device(), stream.handle()); }

void record_stream(void* ptr, int device, void* stream) { caching_allocator(device).record_stream(ptr, stream); }

void set_allocation_poison(bool enabled) {
  poison_flag() = enabled;
  for (CachingAllocator* allocator : allocators()) allocator->set_poison(enabled);
}

bool allocation_poison() { return poison_flag().load(); }

}  // namespace fathom::cuda
