// The CUDA runtime API as the emulation build links it in place of cudart (docs/gpu.md, "CUDA
// emulation"): the functions Fathom calls, with CUDA's signatures (from its own header) and
// semantics, over the emulated device of core/simt — one H200, its memory host allocations
// (device_memory.h), its streams and events queues run deferred (streams.h).
//
// A call that CUDA would refuse returns CUDA's error code and sets the thread's last error as
// cudart does; misuse that a GPU reports as cudaErrorInvalidValue is also described on stderr
// (the code alone would not say which copy ran off its allocation). Work that fails while it runs
// (a kernel's barrier error, a bad copy) throws fathom::Error from the call that ran it.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "core/simt/device_memory.h"
#include "core/simt/launch.h"
#include "core/simt/streams.h"
#include "core/simt/submit.h"

namespace fathom::simt {
namespace {

thread_local cudaError_t last_error = cudaSuccess;
thread_local int current_device = 0;

cudaError_t status(cudaError_t code) {
  if (code != cudaSuccess) last_error = code;
  return code;
}

cudaError_t invalid(const char* call, const char* why) {
  std::fprintf(stderr, "fathom simt: %s: %s (cudaErrorInvalidValue)\n", call, why);
  return status(cudaErrorInvalidValue);
}

std::shared_ptr<StreamQueue> queue_of(cudaStream_t stream) {
  return reinterpret_cast<uintptr_t>(stream) <= 2 ? legacy_queue() : stream->queue;
}

// Runs `queue` through everything queued on it so far (first any kept failure is reported).
void finish(const std::shared_ptr<StreamQueue>& queue) {
  rethrow_kept_failure();
  run_until(*queue, queue->submitted);
}

// For calls that may not throw (they run in destructors): a failure is kept for the next
// synchronising call.
template <class F>
void without_throwing(F&& f) {
  try {
    f();
  } catch (...) {
    keep_failure(std::current_exception());
  }
}

// Streams and events are read and changed only under the runtime's one lock.
std::unique_lock<std::recursive_mutex> runtime_lock() {
  return std::unique_lock<std::recursive_mutex>(runtime_mutex());
}

bool is_host(const void* p) { return !find_allocation(p).has_value(); }

// What a copy reads and writes, checked against where its pointers are.
cudaError_t check_copy(const char* call, void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  const bool dst_device = !is_host(dst), src_device = !is_host(src);
  const bool want_dst_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool want_src_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (kind != cudaMemcpyDefault && kind != cudaMemcpyHostToHost &&
      (dst_device != want_dst_device || src_device != want_src_device))
    return invalid(call, "a pointer is not on the side the copy kind names");
  if (dst_device && !is_device_range(dst, bytes)) return invalid(call, "the destination runs past its allocation");
  if (src_device && !is_device_range(src, bytes)) return invalid(call, "the source runs past its allocation");
  return cudaSuccess;
}

// A copy queued on `stream`, as cudart does it with pageable host memory: a host source is read
// now (the caller may reuse it when the call returns), a host destination is written before the
// call returns.
cudaError_t copy(const char* call, void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;
  if (const cudaError_t e = check_copy(call, dst, src, bytes, kind); e != cudaSuccess) return e;
  const auto queue = queue_of(stream);
  if (is_host(src)) {
    auto staged =
        std::make_shared<std::vector<char>>(static_cast<const char*>(src), static_cast<const char*>(src) + bytes);
    enqueue(queue, [dst, staged] { std::memcpy(dst, staged->data(), staged->size()); });
  } else {
    enqueue(queue, [dst, src, bytes] { std::memmove(dst, src, bytes); });
  }
  if (is_host(dst)) finish(queue);
  return cudaSuccess;
}

// The properties of an H200 SXM (sm_90, 132 SMs, 141 GB of HBM3e).
cudaDeviceProp h200_properties() {
  cudaDeviceProp p{};
  std::snprintf(p.name, sizeof p.name, "NVIDIA H200 (Fathom SIMT emulation)");
  p.totalGlobalMem = kDeviceMemoryBytes;
  p.sharedMemPerBlock = Limits::kStaticSharedPerBlock;
  p.sharedMemPerBlockOptin = Limits::kMaxSharedPerBlock;
  p.sharedMemPerMultiprocessor = 228 * 1024;
  p.reservedSharedMemPerBlock = 1024;
  p.regsPerBlock = p.regsPerMultiprocessor = 65536;
  p.warpSize = kWarpSize;
  p.maxThreadsPerBlock = static_cast<int>(Limits::kMaxThreadsPerBlock);
  p.maxThreadsPerMultiProcessor = 2048;
  p.maxBlocksPerMultiProcessor = 32;
  p.maxThreadsDim[0] = Limits::kMaxBlockX, p.maxThreadsDim[1] = Limits::kMaxBlockY,
  p.maxThreadsDim[2] = Limits::kMaxBlockZ;
  p.maxGridSize[0] = static_cast<int>(Limits::kMaxGridX), p.maxGridSize[1] = Limits::kMaxGridY,
  p.maxGridSize[2] = Limits::kMaxGridZ;
  p.totalConstMem = 64 * 1024;
  p.major = 9, p.minor = 0;
  p.multiProcessorCount = 132;
  p.l2CacheSize = 50 << 20;
  p.memoryBusWidth = 6144;
  p.concurrentKernels = p.unifiedAddressing = p.managedMemory = p.cooperativeLaunch = p.clusterLaunch = 1;
  p.asyncEngineCount = 3;
  p.textureAlignment = 512;
  return p;
}

const char* error_name(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration:
      return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle:
      return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady:
      return "cudaErrorNotReady";
    case cudaErrorNoDevice:
      return "cudaErrorNoDevice";
    case cudaErrorInsufficientDriver:
      return "cudaErrorInsufficientDriver";
    case cudaErrorLaunchFailure:
      return "cudaErrorLaunchFailure";
    default:
      return "cudaErrorUnknown";
  }
}

const char* error_string(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorInvalidConfiguration:
      return "invalid configuration argument";
    case cudaErrorInvalidDevice:
      return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle:
      return "invalid resource handle";
    case cudaErrorNotReady:
      return "device not ready";
    case cudaErrorNoDevice:
      return "no CUDA-capable device is detected";
    case cudaErrorInsufficientDriver:
      return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorLaunchFailure:
      return "unspecified launch failure";
    default:
      return "unknown error";
  }
}

}  // namespace
}  // namespace fathom::simt

using namespace fathom::simt;

extern "C" {

// Devices: one, number 0.
cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
  if (device != 0) return status(cudaErrorInvalidDevice);
  current_device = device;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  *device = current_device;
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device != 0) return status(cudaErrorInvalidDevice);
  *prop = h200_properties();
  return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int* version) {
  *version = CUDART_VERSION;
  return cudaSuccess;
}
cudaError_t cudaRuntimeGetVersion(int* version) {
  *version = CUDART_VERSION;
  return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize(void) {
  rethrow_kept_failure();
  run_everything();
  return cudaSuccess;
}

// Errors.
cudaError_t cudaGetLastError(void) { return std::exchange(last_error, cudaSuccess); }
cudaError_t cudaPeekAtLastError(void) { return last_error; }
const char* cudaGetErrorName(cudaError_t error) { return error_name(error); }
const char* cudaGetErrorString(cudaError_t error) { return error_string(error); }

// Memory.
cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  *ptr = nullptr;
  if (bytes == 0) return cudaSuccess;
  *ptr = device_malloc(bytes);
  return *ptr ? cudaSuccess : status(cudaErrorMemoryAllocation);
}
// Like cudart's, waits for the device first: queued work may still use the memory.
cudaError_t cudaFree(void* ptr) {
  if (!ptr) return cudaSuccess;
  without_throwing([] { run_everything(); });
  return device_free(ptr) ? cudaSuccess : invalid("cudaFree", "the pointer is not a cudaMalloc allocation");
}
// Pinned host memory is host memory here: page-aligned, as cudart's.
cudaError_t cudaHostAlloc(void** ptr, size_t bytes, unsigned int) {
  *ptr = bytes == 0 ? nullptr : std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  return *ptr || bytes == 0 ? cudaSuccess : status(cudaErrorMemoryAllocation);
}
cudaError_t cudaFreeHost(void* ptr) {
  std::free(ptr);
  return cudaSuccess;
}
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  const cudaError_t e = copy("cudaMemcpy", dst, src, bytes, kind, nullptr);
  if (e == cudaSuccess) finish(legacy_queue());
  return e;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  return copy("cudaMemcpyAsync", dst, src, bytes, kind, stream);
}
cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;
  if (!is_device_range(ptr, bytes)) return invalid("cudaMemsetAsync", "the range is not inside one device allocation");
  enqueue(queue_of(stream), [ptr, value, bytes] { std::memset(ptr, value, bytes); });
  return cudaSuccess;
}
cudaError_t cudaMemset(void* ptr, int value, size_t bytes) {
  const cudaError_t e = cudaMemsetAsync(ptr, value, bytes, nullptr);
  if (e == cudaSuccess) finish(legacy_queue());
  return e;
}

// Streams.
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  *stream = new CUstream_st{create_queue((flags & cudaStreamNonBlocking) == 0)};
  return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, cudaStreamDefault); }
// Returns at once on a GPU, the work still completing; here it runs first, then the stream goes.
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (reinterpret_cast<uintptr_t>(stream) <= 2) return status(cudaErrorInvalidResourceHandle);
  without_throwing([&] { retire_queue(stream->queue); });
  delete stream;
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  finish(queue_of(stream));
  return cudaSuccess;
}
cudaError_t cudaStreamQuery(cudaStream_t stream) {
  const auto lock = runtime_lock();
  const auto queue = queue_of(stream);
  if (queue->completed == queue->submitted) return cudaSuccess;
  run_one(*queue);
  return status(cudaErrorNotReady);
}
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int) {
  const auto lock = runtime_lock();
  const RecordedPoint& point = event->point;  // the record as it is now, as CUDA's wait takes it
  if (point.queue) enqueue(queue_of(stream), nullptr, {{point.queue, point.position}});
  return cudaSuccess;
}
cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* user_data) {
  enqueue(queue_of(stream), [fn, user_data] { fn(user_data); });
  return cudaSuccess;
}

// Events.
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  *event = new CUevent_st{(flags & cudaEventDisableTiming) == 0, {}};
  return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, cudaEventDefault); }
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete event;
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  const auto lock = runtime_lock();
  const auto queue = queue_of(stream);
  auto time = std::make_shared<std::chrono::steady_clock::time_point>();
  enqueue(queue, [time] { *time = std::chrono::steady_clock::now(); });
  event->point = RecordedPoint{queue, queue->submitted, time};
  return cudaSuccess;
}
// A poll that finds the event incomplete runs one more item of its stream, so a polling loop ends.
cudaError_t cudaEventQuery(cudaEvent_t event) {
  const auto lock = runtime_lock();
  if (event->point.complete()) return cudaSuccess;
  run_one(*event->point.queue);
  return status(cudaErrorNotReady);
}
cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  rethrow_kept_failure();
  const auto lock = runtime_lock();
  if (event->point.queue) run_until(*event->point.queue, event->point.position);
  return cudaSuccess;
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  const auto lock = runtime_lock();
  if (!start->timing || !end->timing || !start->point.queue || !end->point.queue)
    return status(cudaErrorInvalidResourceHandle);
  if (!start->point.complete() || !end->point.complete()) return status(cudaErrorNotReady);
  *ms = std::chrono::duration<float, std::milli>(*end->point.time - *start->point.time).count();
  return cudaSuccess;
}

// Kernels.
cudaError_t cudaFuncSetAttribute(const void* function, cudaFuncAttribute attribute, int value) {
  if (attribute != cudaFuncAttributeMaxDynamicSharedMemorySize) return cudaSuccess;
  return value >= 0 && set_max_dynamic_shared(function, static_cast<size_t>(value))
             ? cudaSuccess
             : invalid("cudaFuncSetAttribute", "more dynamic shared memory than an sm_90 block may have");
}

}  // extern "C"
