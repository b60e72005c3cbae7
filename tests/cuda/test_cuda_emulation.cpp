// The emulated CUDA runtime itself (the CUDA emulation build only, docs/gpu.md "CUDA
// emulation"): work is deferred per stream, so a missing event wait between streams is seen;
// kernels refuse host pointers; copies are checked against their allocations; and, under
// AddressSanitizer, the caching allocator's tails and cached blocks are poisoned in stream order.
#if defined(FATHOM_CUDA_EMULATION)

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

#include "core/allocator.h"
#include "core/error.h"
#include "core/simt/shared_memory_checker.h"
#include "core/tensor.h"
#include "kernels/softmax.h"
#include "require_cuda.h"
// Last: in emulation it defines CUDA's kernel-side names (threadIdx, __global__, ...) as macros.
#include "core/cuda/kernel_launch.h"

using namespace fathom;

namespace {

__global__ void set_all(float* out, int n, float value) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = value;
}

// Half of the block waits at a barrier the other half never reaches.
__global__ void divergent_barrier(float* out) {
  if (threadIdx.x < 16) __syncthreads();
  out[threadIdx.x] = 1.0f;
}

std::vector<float> read_back(const float* device, int n) {
  std::vector<float> host(static_cast<size_t>(n));
  REQUIRE(cudaMemcpy(host.data(), device, sizeof(float) * n, cudaMemcpyDeviceToHost) == cudaSuccess);
  return host;
}

}  // namespace

TEST_CASE("emulation: a stream's work waits for another stream only through an event", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  constexpr int n = 300;
  float *a = nullptr, *b = nullptr;
  REQUIRE(cudaMalloc(reinterpret_cast<void**>(&a), sizeof(float) * n) == cudaSuccess);
  REQUIRE(cudaMalloc(reinterpret_cast<void**>(&b), sizeof(float) * n) == cudaSuccess);
  REQUIRE(cudaMemset(a, 0, sizeof(float) * n) == cudaSuccess);
  cudaStream_t producer = nullptr, consumer = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking) == cudaSuccess);
  REQUIRE(cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking) == cudaSuccess);

  // Without a wait the consumer's copy runs before the producer's kernel, which has not run yet.
  FATHOM_LAUNCH(3, 128, 0, producer, set_all)(a, n, 7.0f);
  REQUIRE(cudaMemcpyAsync(b, a, sizeof(float) * n, cudaMemcpyDeviceToDevice, consumer) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(consumer) == cudaSuccess);
  CHECK(read_back(b, n) == std::vector<float>(n, 0.0f));
  REQUIRE(cudaStreamSynchronize(producer) == cudaSuccess);
  CHECK(read_back(a, n) == std::vector<float>(n, 7.0f));

  // With the event the consumer sees the producer's output.
  cudaEvent_t done = nullptr;
  REQUIRE(cudaEventCreateWithFlags(&done, cudaEventDisableTiming) == cudaSuccess);
  FATHOM_LAUNCH(3, 128, 0, producer, set_all)(a, n, 9.0f);
  REQUIRE(cudaEventRecord(done, producer) == cudaSuccess);
  CHECK(cudaEventQuery(done) == cudaErrorNotReady);
  CHECK(cudaGetLastError() == cudaErrorNotReady);
  REQUIRE(cudaStreamWaitEvent(consumer, done, 0) == cudaSuccess);
  REQUIRE(cudaMemcpyAsync(b, a, sizeof(float) * n, cudaMemcpyDeviceToDevice, consumer) == cudaSuccess);
  REQUIRE(cudaStreamSynchronize(consumer) == cudaSuccess);
  CHECK(cudaEventQuery(done) == cudaSuccess);
  CHECK(read_back(b, n) == std::vector<float>(n, 9.0f));

  cudaEventDestroy(done);
  cudaStreamDestroy(consumer);
  cudaStreamDestroy(producer);
  cudaFree(b);
  cudaFree(a);
}

TEST_CASE("emulation: the legacy default stream waits for blocking streams, not for non-blocking ones", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  constexpr int n = 64;
  float* a = nullptr;
  REQUIRE(cudaMalloc(reinterpret_cast<void**>(&a), sizeof(float) * n) == cudaSuccess);
  REQUIRE(cudaMemset(a, 0, sizeof(float) * n) == cudaSuccess);
  cudaStream_t blocking = nullptr, non_blocking = nullptr;
  REQUIRE(cudaStreamCreate(&blocking) == cudaSuccess);
  REQUIRE(cudaStreamCreateWithFlags(&non_blocking, cudaStreamNonBlocking) == cudaSuccess);
  FATHOM_LAUNCH(1, 64, 0, non_blocking, set_all)(a, n, 1.0f);
  CHECK(read_back(a, n) == std::vector<float>(n, 0.0f));  // cudaMemcpy is on the legacy stream
  REQUIRE(cudaStreamSynchronize(non_blocking) == cudaSuccess);
  FATHOM_LAUNCH(1, 64, 0, blocking, set_all)(a, n, 2.0f);
  CHECK(read_back(a, n) == std::vector<float>(n, 2.0f));
  cudaStreamDestroy(non_blocking);
  cudaStreamDestroy(blocking);
  cudaFree(a);
}

TEST_CASE("emulation: a kernel handed host memory, and a copy off its allocation, are refused", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  std::vector<float> host(32);
  CHECK_THROWS_WITH(FATHOM_LAUNCH(1, 32, 0, nullptr, set_all)(host.data(), 32, 1.0f),
                    Catch::Contains("argument 0 is") && Catch::Contains("which is not device memory"));
  float* device = nullptr;
  REQUIRE(cudaMalloc(reinterpret_cast<void**>(&device), sizeof(float) * 32) == cudaSuccess);
  CHECK(cudaMemcpy(device, host.data(), sizeof(float) * 33, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
  CHECK(cudaMemcpy(host.data(), device, sizeof(float) * 32, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
  CHECK(cudaMemsetAsync(device + 1, 0, sizeof(float) * 32, nullptr) == cudaErrorInvalidValue);
  CHECK(cudaGetLastError() == cudaErrorInvalidValue);
  CHECK(cudaGetLastError() == cudaSuccess);
  cudaFree(device);
}

TEST_CASE("emulation: more than 48 KiB of dynamic shared memory needs the kernel's opt-in", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  float* device = nullptr;
  REQUIRE(cudaMalloc(reinterpret_cast<void**>(&device), sizeof(float) * 32) == cudaSuccess);
  CHECK_THROWS_WITH(FATHOM_LAUNCH(1, 32, 64 * 1024, nullptr, set_all)(device, 32, 1.0f),
                    Catch::Contains("cudaFuncAttributeMaxDynamicSharedMemorySize"));
  REQUIRE(cudaFuncSetAttribute(reinterpret_cast<const void*>(set_all), cudaFuncAttributeMaxDynamicSharedMemorySize,
                               64 * 1024) == cudaSuccess);
  FATHOM_LAUNCH(1, 32, 64 * 1024, nullptr, set_all)(device, 32, 1.0f);
  CHECK(read_back(device, 32) == std::vector<float>(32, 1.0f));
  CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(set_all), cudaFuncAttributeMaxDynamicSharedMemorySize,
                             228 * 1024) == cudaErrorInvalidValue);
  cudaGetLastError();
  cudaFree(device);
}

TEST_CASE("emulation: freeing what is not an allocation, destroying the default stream, a kernel failure kept",
          "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  int host = 0;
  CHECK(cudaFree(&host) == cudaErrorInvalidValue);
  CHECK(cudaStreamDestroy(nullptr) == cudaErrorInvalidResourceHandle);
  CHECK(cudaStreamDestroy(cudaStreamLegacy) == cudaErrorInvalidResourceHandle);
  CHECK(cudaGetLastError() == cudaErrorInvalidResourceHandle);

  // A kernel that fails while cudaFree drains the device has no caller to throw to: the failure
  // is kept and thrown by the next synchronising call, once.
  float* device = nullptr;
  float* other = nullptr;
  REQUIRE(cudaMalloc(reinterpret_cast<void**>(&device), sizeof(float) * 32) == cudaSuccess);
  REQUIRE(cudaMalloc(reinterpret_cast<void**>(&other), sizeof(float)) == cudaSuccess);
  FATHOM_LAUNCH(1, 32, 0, nullptr, divergent_barrier)(device);
  CHECK(cudaFree(other) == cudaSuccess);
  CHECK_THROWS_WITH(cudaDeviceSynchronize(), Catch::Contains("the __syncthreads at ") &&
                                                 Catch::Contains("cannot complete") &&
                                                 Catch::Contains("of kernel divergent_barrier"));
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
  cudaFree(device);
}

TEST_CASE("emulation: cuBLASLt refuses what it does not implement, and a GELU input with an odd leading dimension",
          "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  cublasLtMatmulDesc_t desc = nullptr;
  REQUIRE(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS);
  const int32_t scale_mode = 0;
  CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, &scale_mode, sizeof scale_mode) ==
        CUBLAS_STATUS_NOT_SUPPORTED);
  const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_GELU_AUX;
  REQUIRE(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue) ==
          CUBLAS_STATUS_SUCCESS);
  CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, 2) ==
        CUBLAS_STATUS_INVALID_VALUE);  // the wrong size for the attribute
  const int64_t aux_ld = 12;
  REQUIRE(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof aux_ld) ==
          CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulPreference_t preference = nullptr;
  REQUIRE(cublasLtMatmulPreferenceCreate(&preference) == CUBLAS_STATUS_SUCCESS);
  const uint64_t workspace = 1 << 20;
  CHECK(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                             sizeof workspace) == CUBLAS_STATUS_SUCCESS);
  CHECK(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, 4) ==
        CUBLAS_STATUS_INVALID_VALUE);
  CHECK(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_IMPL_MASK, &workspace,
                                             sizeof workspace) == CUBLAS_STATUS_NOT_SUPPORTED);
  cublasLtMatmulHeuristicResult_t result{};
  int count = -1;
  CHECK(cublasLtMatmulAlgoGetHeuristic(nullptr, desc, nullptr, nullptr, nullptr, nullptr, preference, 1, &result,
                                       &count) == CUBLAS_STATUS_NOT_SUPPORTED);
  CHECK(count == 0);
  const int64_t aligned_ld = 16;
  REQUIRE(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aligned_ld, sizeof aligned_ld) ==
          CUBLAS_STATUS_SUCCESS);
  CHECK(cublasLtMatmulAlgoGetHeuristic(nullptr, desc, nullptr, nullptr, nullptr, nullptr, preference, 1, &result,
                                       &count) == CUBLAS_STATUS_SUCCESS);
  CHECK(count == 1);
  cublasLtMatmulPreferenceDestroy(preference);
  cublasLtMatmulDescDestroy(desc);
}

TEST_CASE("emulation: the library's kernels run under the shared-memory race checker", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  // Softmax over rows longer than 1024 reduces each row across the block in shared memory: its
  // accesses reach the checker only if the library's .cu files carry the checker's
  // instrumentation (cmake/FathomCuda.cmake).
  const uint64_t before = simt::shared_memory_checker().accesses_checked();
  const Tensor x = Tensor::arange(2 * 2000).reshape({2, 2000}).to(Device::cuda(0));
  const Tensor y = softmax(x).to(kCPU);
  CHECK(y.data<float>()[1999] > y.data<float>()[0]);
  CHECK(simt::shared_memory_checker().accesses_checked() > before);
}

#if defined(__SANITIZE_ADDRESS__)
TEST_CASE("emulation: ASan sees the caching allocator's tails and cached blocks as unaddressable", "[cuda]") {
  FATHOM_REQUIRE_CUDA();
  const Device gpu = Device::cuda(0);
  Allocator& allocator = allocator_for(gpu);
  auto* block = static_cast<char*>(allocator.allocate(1000, MemoryTag::Other));  // a 1024-byte class
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);                               // the poisoning runs in stream order
  CHECK(__asan_address_is_poisoned(block + 999) == 0);
  CHECK(__asan_address_is_poisoned(block + 1000) != 0);
  allocator.deallocate(block, 1000, MemoryTag::Other);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(__asan_address_is_poisoned(block) != 0);
  auto* again = static_cast<char*>(allocator.allocate(1000, MemoryTag::Other));
  CHECK(again == block);  // the cached block, addressable again once its stream gets there
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(__asan_address_is_poisoned(again) == 0);
  allocator.deallocate(again, 1000, MemoryTag::Other);
}
#endif

#endif  // FATHOM_CUDA_EMULATION
