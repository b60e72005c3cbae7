#pragma once
// The emulated GPU's memory (CUDA emulation build only): host allocations, 256-byte aligned like
// cudaMalloc's, each recorded, so that copies and kernel launches can tell a device address from
// a host one — which on a GPU is the difference between working and faulting. The device holds
// an H200's 143 771 MiB at most; a request beyond what is left fails as cudaMalloc would.
// Under AddressSanitizer each allocation is an ordinary heap block, so ASan sees a kernel that
// writes past its end.

#include <cstddef>
#include <optional>

namespace fathom::simt {

inline constexpr size_t kDeviceMemoryBytes = size_t{143771} << 20;

void* device_malloc(size_t bytes);  // nullptr when the device (or the host) has no more
bool device_free(void* ptr);        // false unless `ptr` is an allocation's start

struct Allocation {
  const char* base;
  size_t bytes;
};
// The allocation `address` is in, or one past the end of.
std::optional<Allocation> find_allocation(const void* address);
// Whether [address, address + bytes) lies in one allocation (an empty range always does).
bool is_device_range(const void* address, size_t bytes);
size_t device_memory_in_use();

}  // namespace fathom::simt
