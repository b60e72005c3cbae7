// core/cuda/cuda_runtime.h for builds without CUDA (FATHOM_CUDA=OFF or no nvcc): there are
// no devices, and every device operation says so and how to get a CUDA build.
#include "core/allocator.h"
#include "core/cuda/cuda_runtime.h"
#include "core/error.h"

namespace fathom::cuda {
namespace {
constexpr const char* kReason =
    "Fathom was built without CUDA; rebuild with the CUDA toolkit installed and -DFATHOM_CUDA=ON";
[[noreturn]] void no_cuda() { FATHOM_FAIL("no CUDA device: ", kReason); }
}

bool built_with_cuda() { return false; }
int device_count() { return 0; }
std::string unavailable_reason() { return kReason; }
void require_device(int) { no_cuda(); }
DeviceProperties device_properties(int index) {
  require_device(index);
  return {};
}
Stream::Stream(int device) { require_device(device); }
Stream::~Stream() = default;
Stream::Stream(Stream&&) noexcept = default;
Stream& Stream::operator=(Stream&&) noexcept = default;
void Stream::synchronize() const { require_device(device_); }
Event::Event(bool) { require_device(0); }
Event::~Event() = default;
Event::Event(Event&&) noexcept = default;
Event& Event::operator=(Event&&) noexcept = default;
void Event::record(const Stream&) { require_device(0); }
void Event::record_on_current_stream() { require_device(0); }
void Event::synchronize() const { require_device(0); }
void Event::wait_on(const Stream&) const { require_device(0); }
void Event::wait_on_current_stream() const { require_device(0); }
bool Event::query() const { require_device(0); return true; }
float Event::elapsed_ms(const Event&) const { require_device(0); return 0; }
Allocator& device_allocator(int) { no_cuda(); }
CachingAllocator& caching_allocator(int) { no_cuda(); }
void empty_cache(int) { no_cuda(); }
void record_stream(void*, const Stream&) { no_cuda(); }
void record_stream(void*, int, void*) { no_cuda(); }
void set_allocation_poison(bool) { no_cuda(); }
bool allocation_poison() { return false; }
void copy_bytes(void*, Device, const void*, Device, size_t) { require_device(0); }
void synchronize_device(int index) { require_device(index); }
void copy_bytes_async(void*, Device, const void*, Device, size_t, const Stream&) { require_device(0); }
void* allocate_pinned(size_t, size_t) { no_cuda(); }
void free_pinned(void*) { no_cuda(); }
void set_device(int index) { require_device(index); }
void* current_stream() { return nullptr; }
int64_t kernel_launches() { return 0; }
void count_kernel_launch() {}
CurrentStreamGuard::CurrentStreamGuard(const Stream& stream) : previous_(nullptr) { require_device(stream.device()); }
CurrentStreamGuard::~CurrentStreamGuard() = default;

}  // namespace fathom::cuda
