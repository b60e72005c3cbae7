#include "core/simt/device_memory.h"

#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>

namespace fathom::simt {
namespace {

struct Memory {
  std::mutex mutex;
  std::map<uintptr_t, size_t> allocations;  // start -> bytes
  size_t in_use = 0;
};
Memory& memory() {
  static auto* m = new Memory();  // never destroyed: static destructors still free device memory
  return *m;
}

}  // namespace

void* device_malloc(size_t bytes) {
  Memory& m = memory();
  std::lock_guard<std::mutex> lock(m.mutex);
  if (bytes > kDeviceMemoryBytes - m.in_use) return nullptr;
  void* ptr = nullptr;  // exactly `bytes`, so that AddressSanitizer's redzone starts where they end
  if (posix_memalign(&ptr, 256, bytes) != 0) return nullptr;
  m.allocations.emplace(reinterpret_cast<uintptr_t>(ptr), bytes);
  m.in_use += bytes;
  return ptr;
}

bool device_free(void* ptr) {
  Memory& m = memory();
  std::lock_guard<std::mutex> lock(m.mutex);
  const auto it = m.allocations.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == m.allocations.end()) return false;
  m.in_use -= it->second;
  m.allocations.erase(it);
  std::free(ptr);
  return true;
}

std::optional<Allocation> find_allocation(const void* address) {
  Memory& m = memory();
  std::lock_guard<std::mutex> lock(m.mutex);
  const auto a = reinterpret_cast<uintptr_t>(address);
  auto it = m.allocations.upper_bound(a);
  if (it == m.allocations.begin()) return std::nullopt;
  --it;
  if (a - it->first > it->second) return std::nullopt;
  return Allocation{reinterpret_cast<const char*>(it->first), it->second};
}

bool is_device_range(const void* address, size_t bytes) {
  if (bytes == 0) return true;
  const auto allocation = find_allocation(address);
  return allocation && static_cast<const char*>(address) + bytes <= allocation->base + allocation->bytes;
}

size_t device_memory_in_use() {
  Memory& m = memory();
  std::lock_guard<std::mutex> lock(m.mutex);
  return m.in_use;
}

}  // namespace fathom::simt
