#pragma once
// What the caching allocator (core/cuda/caching_allocator.h) needs from a device: raw memory,
// an asynchronous memset and events. The CUDA implementation (cuda_memory_backend.cpp) is
// compiled only with CUDA; tests drive the allocator through a fake over host memory whose
// events complete when the test says so, so the bookkeeping is tested on every machine.
//
// Streams and events are opaque handles (a cudaStream_t / cudaEvent_t for CUDA); the stream
// nullptr is the legacy default stream.

#include <cstddef>
#include <memory>

namespace fathom::cuda {

class DeviceMemoryBackend {
 public:
  virtual ~DeviceMemoryBackend() = default;
  // `bytes` of device memory, or nullptr when the device has no more; throws on other errors.
  virtual void* malloc(size_t bytes) = 0;
  // Returns memory from malloc() to the device. Must not throw (it runs on destruction paths).
  virtual void free(void* ptr) noexcept = 0;
  // Sets `bytes` bytes at `ptr` to `value`, ordered on `stream`.
  virtual void memset(void* ptr, int value, size_t bytes, void* stream) = 0;
  virtual void* create_event() = 0;
  virtual void destroy_event(void* event) noexcept = 0;
  // The event completes once the work enqueued on `stream` so far has completed.
  virtual void record_event(void* event, void* stream) = 0;
  virtual bool query_event(void* event) = 0;  // true when complete; never blocks
  virtual void synchronize_event(void* event) = 0;  // blocks until complete
  // The stream new allocations are ordered on (cuda::current_stream() for CUDA).
  virtual void* current_stream() = 0;
  // For memory checkers, in the order of `stream`'s work: the block at `ptr` (`capacity` bytes)
  // is handed out for its first `bytes`, or goes back to the cache. The CUDA emulation build
  // under AddressSanitizer poisons what no kernel may touch then (a block's rounded-up tail, a
  // cached block); on a GPU there is nothing to do.
  virtual void mark_in_use(void* ptr, size_t bytes, size_t capacity, void* stream) {}
  virtual void mark_cached(void* ptr, size_t capacity, void* stream) {}
};

// The CUDA runtime backend of device `device` (defined only in CUDA builds).
std::unique_ptr<DeviceMemoryBackend> make_cuda_memory_backend(int device);

}  // namespace fathom::cuda
