// The CUDA runtime under the caching allocator (compiled only with CUDA). Every call makes the
// allocator's device current first: the legacy default stream, events and cudaMalloc all
// belong to the current device.
#include <cuda_runtime_api.h>

#if defined(FATHOM_CUDA_EMULATION) && defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_runtime.h"
#include "core/cuda/device_guard.h"
#include "core/cuda/device_memory_backend.h"

namespace fathom::cuda {
namespace {

class CudaMemoryBackend final : public DeviceMemoryBackend {
 public:
  explicit CudaMemoryBackend(int device) : device_(device) {}

  void* malloc(size_t bytes) override {
    DeviceGuard guard(device_);
    void* ptr = nullptr;
    const cudaError_t status = cudaMalloc(&ptr, bytes);
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // not sticky, but cleared so the next launch check does not report it
      return nullptr;
    }
    FATHOM_CUDA_CHECK(status);
    return ptr;
  }

  void free(void* ptr) noexcept override {
    int previous = 0;
    if (cudaGetDevice(&previous) != cudaSuccess) return;  // the runtime is shutting down
    if (previous != device_) cudaSetDevice(device_);
    cudaFree(ptr);
    if (previous != device_) cudaSetDevice(previous);
  }

  void memset(void* ptr, int value, size_t bytes, void* stream) override {
    DeviceGuard guard(device_);
    FATHOM_CUDA_CHECK(cudaMemsetAsync(ptr, value, bytes, static_cast<cudaStream_t>(stream)));
  }

  void* create_event() override {
    DeviceGuard guard(device_);
    cudaEvent_t event = nullptr;
    FATHOM_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    return event;
  }

  void destroy_event(void* event) noexcept override { cudaEventDestroy(static_cast<cudaEvent_t>(event)); }

  void record_event(void* event, void* stream) override {
    DeviceGuard guard(device_);
    FATHOM_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(stream)));
  }

  bool query_event(void* event) override {
    const cudaError_t status = cudaEventQuery(static_cast<cudaEvent_t>(event));
    if (status == cudaErrorNotReady) {
      cudaGetLastError();
      return false;
    }
    FATHOM_CUDA_CHECK(status);
    return true;
  }

  void synchronize_event(void* event) override {
    FATHOM_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event)));
  }

  void* current_stream() override { return cuda::current_stream(); }

#if defined(FATHOM_CUDA_EMULATION) && defined(__SANITIZE_ADDRESS__)
  // Emulated device memory is host memory ASan watches; it sees the allocator's blocks only as
  // the device's, so what a kernel may not touch is poisoned here, when the stream gets there.
  void mark_in_use(void* ptr, size_t bytes, size_t capacity, void* stream) override {
    poison_on(stream, ptr, bytes, false);
    poison_on(stream, static_cast<char*>(ptr) + bytes, capacity - bytes, true);
  }
  void mark_cached(void* ptr, size_t capacity, void* stream) override { poison_on(stream, ptr, capacity, true); }

  static void poison_on(void* stream, void* ptr, size_t bytes, bool poison) {
    struct Region {
      void* ptr;
      size_t bytes;
      bool poison;
    };
    const auto apply = [](void* data) {
      const auto* r = static_cast<Region*>(data);
      if (r->poison)
        ASAN_POISON_MEMORY_REGION(r->ptr, r->bytes);
      else
        ASAN_UNPOISON_MEMORY_REGION(r->ptr, r->bytes);
      delete r;
    };
    FATHOM_CUDA_CHECK(cudaLaunchHostFunc(static_cast<cudaStream_t>(stream), apply, new Region{ptr, bytes, poison}));
  }
#endif

 private:
  int device_;
};

}  // namespace

std::unique_ptr<DeviceMemoryBackend> make_cuda_memory_backend(int device) {
  return std::make_unique<CudaMemoryBackend>(device);
}

}  // namespace fathom::cuda
