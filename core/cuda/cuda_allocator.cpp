// The plain device allocator: cudaMalloc/cudaFree per request with exact tagged counters.
// (A caching allocator with per-stream free lists replaces it with the CUDA-kernels work.)
#include <cuda_runtime_api.h>

#include <memory>
#include <mutex>
#include <vector>

#include "core/allocator.h"
#include "core/cuda/cuda_check.h"
#include "core/cuda/cuda_runtime.h"

namespace fathom::cuda {
namespace {

class CudaAllocator final : public Allocator {
 public:
  explicit CudaAllocator(int index) : index_(index) {}

  void* allocate(size_t bytes, MemoryTag tag) override {
    if (bytes == 0) return nullptr;
    int previous = 0;
    FATHOM_CUDA_CHECK(cudaGetDevice(&previous));
    FATHOM_CUDA_CHECK(cudaSetDevice(index_));
    void* ptr = nullptr;
    const cudaError_t status = cudaMalloc(&ptr, bytes);
    cudaSetDevice(previous);
    if (status != cudaSuccess) {
      cudaGetLastError();
      FATHOM_FAIL("out of memory on cuda:", index_, " allocating ", bytes, " bytes for ", memory_tag_name(tag), " (",
                  stats_.snapshot().total.current, " bytes in use by Fathom): ", cudaGetErrorString(status));
    }
    stats_.on_allocate(tag, static_cast<int64_t>(bytes));
    stats_.on_reserve(static_cast<int64_t>(bytes));
    return ptr;
  }

  void deallocate(void* ptr, size_t bytes, MemoryTag tag) override {
    if (ptr == nullptr) return;
    cudaFree(ptr);  // never throws from a destructor path; a failure here means a dead context
    stats_.on_free(tag, static_cast<int64_t>(bytes));
    stats_.on_unreserve(static_cast<int64_t>(bytes));
  }

  Device device() const override { return Device::cuda(index_); }

 private:
  int index_;
};

}  // namespace

Allocator& device_allocator(int index) {
  require_device(index);
  static std::vector<std::unique_ptr<CudaAllocator>> allocators;
  static std::once_flag once;
  std::call_once(once, [] {
    for (int i = 0; i < device_count(); ++i) allocators.push_back(std::make_unique<CudaAllocator>(i));
  });
  return *allocators[index];
}

}  // namespace fathom::cuda
