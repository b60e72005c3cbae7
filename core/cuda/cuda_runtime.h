#pragma once
// Fathom's view of the CUDA runtime: device discovery, streams, events, device memory and
// copies. This header includes no CUDA header, so any layer can use it; builds without
// CUDA get the same API, reporting that CUDA is not built in.
//
// "No GPU" is a normal state: device_count() is then 0 and require_device() throws
// "no CUDA device: <reason>" with the runtime's own explanation (cudaErrorNoDevice,
// cudaErrorInsufficientDriver, ...).

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/device.h"

namespace fathom {
class Allocator;
}
namespace fathom::cuda {
class CachingAllocator;  // core/cuda/caching_allocator.h
}

namespace fathom::cuda {

bool built_with_cuda();
// Number of usable CUDA devices; 0 when there is no GPU or driver (never throws).
int device_count();
// Why device_count() is 0 ("" when it is not), e.g. "CUDA driver version is insufficient ...".
std::string unavailable_reason();
// Throws "no CUDA device: <reason>" unless device `index` exists.
void require_device(int index = 0);

struct DeviceProperties {
  std::string name;
  int major = 0, minor = 0;  // compute capability
  size_t total_memory = 0;
  int multiprocessors = 0;
  int driver_version = 0;   // e.g. 13000
  int runtime_version = 0;  // e.g. 13000
};
DeviceProperties device_properties(int index);

// An owned cudaStream_t (non-blocking with respect to the legacy default stream).
class Stream {
 public:
  explicit Stream(int device = 0);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  Stream(Stream&& other) noexcept;
  Stream& operator=(Stream&& other) noexcept;
  void synchronize() const;
  void* handle() const { return handle_; }  // a cudaStream_t
  int device() const { return device_; }

 private:
  void* handle_ = nullptr;
  int device_ = 0;
};

// An owned cudaEvent_t, optionally timing.
class Event {
 public:
  explicit Event(bool timing = false);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  void record(const Stream& stream);
  void record_on_current_stream();  // on current_stream(): after the compute kernels enqueued so far
  // Work enqueued on `stream` (or current_stream()) from now on waits for what this event
  // recorded, without blocking the host: how two streams are ordered.
  void wait_on(const Stream& stream) const;
  void wait_on_current_stream() const;
  void synchronize() const;
  bool query() const;  // true when the recorded work has completed
  // Milliseconds between two recorded timing events.
  float elapsed_ms(const Event& later) const;
  void* handle() const { return handle_; }

 private:
  void* handle_ = nullptr;
};

// The stream compute kernels of this thread launch on (a cudaStream_t; nullptr is the legacy
// default stream, the initial choice). Every kernel launcher passes current_stream(), so code
// that wants its kernels elsewhere (a CUDA graph capture, a side stream) sets it for a scope.
void* current_stream();
class CurrentStreamGuard {
 public:
  explicit CurrentStreamGuard(const Stream& stream);
  ~CurrentStreamGuard();
  CurrentStreamGuard(const CurrentStreamGuard&) = delete;
  CurrentStreamGuard& operator=(const CurrentStreamGuard&) = delete;

 private:
  void* previous_;
};

// The allocator of device `index`: a caching allocator with per-stream free lists and exact
// tagged counters (core/cuda/caching_allocator.h describes it). Allocations are ordered on
// current_stream().
Allocator& device_allocator(int index);
CachingAllocator& caching_allocator(int index);
// Returns every cached (free) block of device `device` to the device; blocks in use, and freed
// blocks still awaiting another stream's work (record_stream), stay.
void empty_cache(int device);
// Declares that the allocation containing `ptr` is used on `stream` as well as on the stream
// it was allocated on (like PyTorch's Tensor.record_stream): when it is freed, it is reused
// only after the work enqueued on `stream` until then has completed. Call it for a buffer that
// a side stream (communication, prefetch) reads or writes. The second form takes a raw
// cudaStream_t of device `device`.
void record_stream(void* ptr, const Stream& stream);
void record_stream(void* ptr, int device, void* stream);
// Fills every new device allocation with 0xFF bytes (NaN for every float dtype), so a kernel
// that leaves part of its output unwritten fails its test. Starts as FATHOM_CUDA_POISON=1 says.
void set_allocation_poison(bool enabled);
bool allocation_poison();
// Copies `bytes` between any two of host and device memory; ordered after the work enqueued
// on current_stream() so far, and complete when it returns.
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes);
void synchronize_device(int index);
// The same copy enqueued on `stream` and not waited for: the caller orders it with events. With
// pinned host memory (below) it overlaps kernels on other streams.
void copy_bytes_async(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes,
                      const Stream& stream);
// Page-locked host memory (cudaHostAlloc), which device copies read and write directly, at full
// speed and asynchronously; offload's host tier allocates it (offload/host_memory.h). `alignment`
// (a power of two <= 4096) is what cudaHostAlloc's page-aligned blocks already give. Throws
// without a device.
void* allocate_pinned(size_t alignment, size_t bytes);
void free_pinned(void* ptr);

// Kernel launches this process has issued so far: Fathom's kernels (each launch passes its
// launch check) and cuBLASLt GEMMs; library-internal launches (NCCL, a sort's passes) count
// once or not at all. The GPU benchmark reports launches per step with it: a step of many
// short kernels is bound by the host's launch rate. 0 without CUDA.
int64_t kernel_launches();
void count_kernel_launch();  // for launchers outside core (cuBLASLt)
// Makes `index` this thread's current device (cudaSetDevice): Runtime picks one per local rank.
void set_device(int index);

}  // namespace fathom::cuda
