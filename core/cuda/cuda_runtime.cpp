// The CUDA backend of core/cuda/cuda_runtime.h (compiled only when FATHOM_WITH_CUDA).
#include "core/cuda/cuda_runtime.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <utility>

#include "core/cuda/cuda_check.h"
#include "core/cuda/device_guard.h"
#include "core/cuda/launch_check.h"

namespace fathom::cuda {
namespace {

struct Availability {
  int count = 0;
  std::string reason;
};

// Asked once: a machine without a driver answers cudaErrorInsufficientDriver or
// cudaErrorNoDevice here, which is a state to report, not a failure.
const Availability& availability() {
  static const Availability result = [] {
    Availability a;
    const cudaError_t status = cudaGetDeviceCount(&a.count);
    if (status != cudaSuccess) {
      a.count = 0;
      a.reason = std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status);
      cudaGetLastError();  // clear the sticky error so later calls are not confused by it
    } else if (a.count == 0) {
      a.reason = "the CUDA runtime reports zero devices";
    }
    return a;
  }();
  return result;
}

}  // namespace

bool built_with_cuda() { return true; }
int device_count() { return availability().count; }
std::string unavailable_reason() { return availability().reason; }

void require_device(int index) {
  const Availability& a = availability();
  FATHOM_CHECK(a.count > 0, "no CUDA device: ", a.reason);
  FATHOM_CHECK(index >= 0 && index < a.count, "no CUDA device cuda:", index, " (this machine has ", a.count,
               " device", a.count == 1 ? "" : "s", ")");
}

DeviceProperties device_properties(int index) {
  require_device(index);
  cudaDeviceProp prop{};
  FATHOM_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  DeviceProperties out;
  out.name = prop.name;
  out.major = prop.major;
  out.minor = prop.minor;
  out.total_memory = prop.totalGlobalMem;
  out.multiprocessors = prop.multiProcessorCount;
  FATHOM_CUDA_CHECK(cudaDriverGetVersion(&out.driver_version));
  FATHOM_CUDA_CHECK(cudaRuntimeGetVersion(&out.runtime_version));
  return out;
}

Stream::Stream(int device) : device_(device) {
  require_device(device);
  DeviceGuard guard(device);
  cudaStream_t stream = nullptr;
  FATHOM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  handle_ = stream;
}
Stream::~Stream() {
  if (handle_) cudaStreamDestroy(static_cast<cudaStream_t>(handle_));
}
Stream::Stream(Stream&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)), device_(other.device_) {}
Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    if (handle_) cudaStreamDestroy(static_cast<cudaStream_t>(handle_));
    handle_ = std::exchange(other.handle_, nullptr);
    device_ = other.device_;
  }
  return *this;
}
void Stream::synchronize() const { FATHOM_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(handle_))); }

Event::Event(bool timing) {
  require_device(0);
  cudaEvent_t event = nullptr;
  FATHOM_CUDA_CHECK(cudaEventCreateWithFlags(&event, timing ? cudaEventDefault : cudaEventDisableTiming));
  handle_ = event;
}
Event::~Event() {
  if (handle_) cudaEventDestroy(static_cast<cudaEvent_t>(handle_));
}
Event::Event(Event&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    if (handle_) cudaEventDestroy(static_cast<cudaEvent_t>(handle_));
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}
void Event::record(const Stream& stream) {
  FATHOM_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(handle_), static_cast<cudaStream_t>(stream.handle())));
}
void Event::record_on_current_stream() {
  FATHOM_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(handle_), static_cast<cudaStream_t>(current_stream())));
}
void Event::wait_on(const Stream& stream) const {
  FATHOM_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream.handle()), static_cast<cudaEvent_t>(handle_), 0));
}
void Event::wait_on_current_stream() const {
  FATHOM_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(current_stream()), static_cast<cudaEvent_t>(handle_), 0));
}
void Event::synchronize() const { FATHOM_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(handle_))); }
bool Event::query() const {
  const cudaError_t status = cudaEventQuery(static_cast<cudaEvent_t>(handle_));
  if (status == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  FATHOM_CUDA_CHECK(status);
  return true;
}
float Event::elapsed_ms(const Event& later) const {
  float ms = 0;
  FATHOM_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(handle_), static_cast<cudaEvent_t>(later.handle_)));
  return ms;
}

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  if (bytes == 0) return;
  if (dst_device.is_cuda()) require_device(dst_device.index);
  if (src_device.is_cuda()) require_device(src_device.index);
  // A plain cudaMemcpy runs on the legacy default stream, which does not wait for the
  // non-blocking streams kernels may run on: the copy joins the current stream instead.
  // cudaMemcpyDefault: unified addressing tells the directions apart.
  const auto stream = static_cast<cudaStream_t>(current_stream());
  FATHOM_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream));
  FATHOM_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void copy_bytes_async(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes,
                      const Stream& stream) {
  if (bytes == 0) return;
  if (dst_device.is_cuda()) require_device(dst_device.index);
  if (src_device.is_cuda()) require_device(src_device.index);
  FATHOM_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream.handle())));
}

void* allocate_pinned(size_t alignment, size_t bytes) {
  FATHOM_CHECK(alignment <= 4096, "allocate_pinned: alignment ", alignment, " is more than a page");
  require_device(0);
  void* ptr = nullptr;
  // Portable: usable from every device's streams.
  FATHOM_CUDA_CHECK(cudaHostAlloc(&ptr, bytes, cudaHostAllocPortable));
  return ptr;
}

void free_pinned(void* ptr) {
  if (ptr != nullptr) FATHOM_CUDA_CHECK(cudaFreeHost(ptr));
}

void set_device(int index) {
  require_device(index);
  FATHOM_CUDA_CHECK(cudaSetDevice(index));
}

void synchronize_device(int index) {
  require_device(index);
  DeviceGuard guard(index);
  FATHOM_CUDA_CHECK(cudaDeviceSynchronize());
}

namespace {
std::atomic<int64_t> launches_issued{0};
}  // namespace

int64_t kernel_launches() { return launches_issued.load(std::memory_order_relaxed); }
void count_kernel_launch() { launches_issued.fetch_add(1, std::memory_order_relaxed); }

void check_last_launch(const char* kernel, const char* file, int line) {
  count_kernel_launch();
  cudaError_t status = cudaGetLastError();
#ifndef NDEBUG
  if (status == cudaSuccess) status = cudaDeviceSynchronize();
#endif
  if (status != cudaSuccess)
    detail::throw_error(file, line,
                        detail::concat("kernel ", kernel, " failed: ", cudaGetErrorName(status), " (",
                                       cudaGetErrorString(status), ")"));
}

void fail(const char* message, const char* file, int line) { detail::throw_error(file, line, message); }

namespace {
thread_local void* t_current_stream = nullptr;
}

void* current_stream() { return t_current_stream; }

CurrentStreamGuard::CurrentStreamGuard(const Stream& stream) : previous_(t_current_stream) {
  t_current_stream = stream.handle();
}

CurrentStreamGuard::~CurrentStreamGuard() { t_current_stream = previous_; }

}  // namespace fathom::cuda
