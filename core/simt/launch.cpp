#include "core/simt/launch.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/simt/shared_memory_checker.h"
#include "core/simt/submit.h"

namespace fathom::simt {
namespace {
constexpr unsigned char kPoison = 0xFF;  // NaN in every float and double

struct BlockMemory {
  std::vector<std::unique_ptr<FiberStack>> stacks;
  void* dynamic = nullptr;
  size_t dynamic_bytes = 0;
  // The block's `__shared__` variables (FATHOM_SHARED), laid out in the order the block first
  // reaches their declarations: declaration -> offset in `statics`.
  unsigned char* statics = static_cast<unsigned char*>(std::aligned_alloc(128, Limits::kStaticSharedPerBlock));
  size_t statics_used = 0;
  std::vector<std::pair<const void*, size_t>> placed;
  ~BlockMemory() {
    std::free(dynamic);
    std::free(statics);
  }
};
thread_local BlockMemory memory;
thread_local void* current_dynamic = nullptr;

size_t stack_bytes() {
  const char* text = std::getenv("FATHOM_SIMT_STACK_KIB");
  const long kib = text ? std::atol(text) : 128;
  FATHOM_CHECK(kib >= 16, "FATHOM_SIMT_STACK_KIB is \"", text ? text : "", "\"; give at least 16 (KiB per thread)");
  return static_cast<size_t>(kib) * 1024;
}

std::string launch_place(const LaunchSpec& s) {
  return std::string("launch of ") + s.kernel + " at " + site_str(s.site) + " with grid " + dim_str(s.grid) +
         ", block " + dim_str(s.block);
}

struct SharedOptIns {
  std::mutex mutex;
  std::unordered_map<const void*, size_t> bytes;  // kernel -> its MaxDynamicSharedMemorySize
};
SharedOptIns& shared_opt_ins() {
  static auto* o = new SharedOptIns();
  return *o;
}
size_t max_dynamic_shared(const void* function) {
  SharedOptIns& o = shared_opt_ins();
  std::lock_guard<std::mutex> lock(o.mutex);
  const auto it = o.bytes.find(function);
  return it == o.bytes.end() ? Limits::kStaticSharedPerBlock : it->second;
}
}  // namespace

bool set_max_dynamic_shared(const void* function, size_t bytes) {
  if (bytes > Limits::kMaxSharedPerBlock) return false;
  SharedOptIns& o = shared_opt_ins();
  std::lock_guard<std::mutex> lock(o.mutex);
  o.bytes[function] = bytes;
  return true;
}

void check_pointer_arguments(const LaunchSpec& spec, std::initializer_list<const void*> pointers) {
  int index = 0;
  for (const void* pointer : pointers) {
    FATHOM_CHECK(is_device_address(pointer), launch_place(spec), ": argument ", index, " is ", pointer,
                 ", which is not device memory (a host pointer handed to a kernel faults on a GPU: copy the data "
                 "to the device first)");
    ++index;
  }
}

void check_launch(const LaunchSpec& s) {
  const std::string where = launch_place(s);
  FATHOM_CHECK(s.block.count() >= 1 && s.grid.count() >= 1, where,
               ": every dimension must be at least 1 "
               "(cudaErrorInvalidConfiguration)");
  FATHOM_CHECK(s.block.count() <= Limits::kMaxThreadsPerBlock && s.block.x <= Limits::kMaxBlockX &&
                   s.block.y <= Limits::kMaxBlockY && s.block.z <= Limits::kMaxBlockZ,
               where, ": a block holds at most ", Limits::kMaxThreadsPerBlock, " threads, ", Limits::kMaxBlockX, " × ",
               Limits::kMaxBlockY, " × ", Limits::kMaxBlockZ, " (cudaErrorInvalidConfiguration)");
  FATHOM_CHECK(s.grid.x <= Limits::kMaxGridX && s.grid.y <= Limits::kMaxGridY && s.grid.z <= Limits::kMaxGridZ, where,
               ": a grid is at most ", Limits::kMaxGridX, " × ", Limits::kMaxGridY, " × ", Limits::kMaxGridZ,
               " blocks (cudaErrorInvalidConfiguration)");
  FATHOM_CHECK(s.dynamic_shared <= Limits::kMaxSharedPerBlock, where, ": ", s.dynamic_shared,
               " bytes of dynamic shared memory, more than the ", Limits::kMaxSharedPerBlock,
               " a block may have (cudaErrorInvalidValue)");
  FATHOM_CHECK(s.dynamic_shared <= Limits::kStaticSharedPerBlock || s.dynamic_shared <= max_dynamic_shared(s.function),
               where, ": ", s.dynamic_shared, " bytes of dynamic shared memory; above ", Limits::kStaticSharedPerBlock,
               " a kernel must be allowed them first with cudaFuncSetAttribute(kernel, "
               "cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) (cudaErrorInvalidValue)");
}

void* dynamic_shared() { return current_dynamic; }

void* static_shared(const void* declaration, size_t bytes, size_t alignment) {
  BlockMemory& m = memory;
  for (const auto& [placed, offset] : m.placed)
    if (placed == declaration) return m.statics + offset;
  const size_t offset = (m.statics_used + alignment - 1) / alignment * alignment;
  FATHOM_CHECK(offset + bytes <= Limits::kStaticSharedPerBlock, "the kernel's __shared__ variables need ",
               offset + bytes, " bytes, more than the ", Limits::kStaticSharedPerBlock,
               " of static shared memory a block may have (use dynamic shared memory beyond them)");
  std::memset(m.statics + offset, kPoison, bytes);
  m.placed.emplace_back(declaration, offset);
  m.statics_used = offset + bytes;
  return m.statics + offset;
}

void launch(const LaunchSpec& spec, const std::function<void()>& body) {
  check_launch(spec);
  const Schedule schedule = Schedule::from_environment();
  const size_t threads = static_cast<size_t>(spec.block.count());
  while (memory.stacks.size() < threads) memory.stacks.push_back(std::make_unique<FiberStack>(stack_bytes()));
  std::vector<FiberStack*> stacks;
  for (size_t t = 0; t < threads; ++t) stacks.push_back(memory.stacks[t].get());
  if (memory.dynamic_bytes < spec.dynamic_shared) {
    std::free(memory.dynamic);
    memory.dynamic = std::aligned_alloc(128, (spec.dynamic_shared + 127) / 128 * 128);
    memory.dynamic_bytes = spec.dynamic_shared;
  }
  void* outer_dynamic = std::exchange(current_dynamic, spec.dynamic_shared ? memory.dynamic : nullptr);
  struct Restore {
    void* outer;
    ~Restore() { current_dynamic = outer; }
  } restore{outer_dynamic};
  shared_memory_checker().watch(memory.statics, Limits::kStaticSharedPerBlock, current_dynamic, spec.dynamic_shared);
  for (unsigned z = 0; z < spec.grid.z; ++z)
    for (unsigned y = 0; y < spec.grid.y; ++y)
      for (unsigned x = 0; x < spec.grid.x; ++x) {
        memory.placed.clear();
        memory.statics_used = 0;
        if (spec.dynamic_shared) std::memset(memory.dynamic, kPoison, spec.dynamic_shared);
        BlockScheduler block(spec.kernel, spec.grid, Dim3(x, y, z), spec.block, schedule, stacks);
        try {
          block.run(body);
        } catch (const Error& e) {
          FATHOM_FAIL("in the launch at ", site_str(spec.site), " (grid ", dim_str(spec.grid), ", block ",
                      dim_str(spec.block), ", order ", schedule.str(), "): ", e.what());
        }
      }
}

}  // namespace fathom::simt
