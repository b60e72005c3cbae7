#pragma once
// Kernel launches in the SIMT emulator: the grid's blocks one after another on the calling OS
// thread, each by a BlockScheduler, with the launch limits of an H100/H200 (sm_90) enforced as the
// GPU enforces them — an oversized launch is an error, not a silently different run.
//
// Shared memory, per block: a kernel's `__shared__` variables (FATHOM_SHARED, laid out as the
// block first reaches their declarations) and its dynamic shared memory are filled with 0xFF
// bytes — a NaN in every float and double — before the block uses them, so a read of shared
// memory no thread of the block wrote shows up.

#include <cstddef>
#include <functional>
#include <initializer_list>

#include "core/simt/block_scheduler.h"

namespace fathom::simt {

// sm_90's limits (CUDA C++ Programming Guide, "Features and Technical Specifications").
struct Limits {
  static constexpr unsigned kMaxThreadsPerBlock = 1024;
  static constexpr unsigned kMaxBlockX = 1024, kMaxBlockY = 1024, kMaxBlockZ = 64;
  static constexpr unsigned kMaxGridX = 2147483647u, kMaxGridY = 65535, kMaxGridZ = 65535;
  static constexpr size_t kStaticSharedPerBlock = 48 * 1024;
  static constexpr size_t kMaxSharedPerBlock = 227 * 1024;  // with the opt-in attribute
};

struct LaunchSpec {
  const char* kernel = "?";
  Dim3 grid, block;
  size_t dynamic_shared = 0;
  Site site;  // the launch's place in the source
  const void* function = nullptr;  // the kernel (for its cudaFuncSetAttribute settings)
};

// Fails, as the GPU's launch would, for a grid or block beyond sm_90's limits, or more dynamic
// shared memory than the kernel may have: above 48 KiB only what cudaFuncSetAttribute
// (cudaFuncAttributeMaxDynamicSharedMemorySize) allowed it.
void check_launch(const LaunchSpec& spec);
// cudaFuncSetAttribute(function, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes); false
// (cudaErrorInvalidValue) beyond what a block may have.
bool set_max_dynamic_shared(const void* function, size_t bytes);
// Fails naming the argument when a pointer argument is not a device address (core/simt/submit.h):
// a kernel handed host memory faults on a GPU. `pointers` has one entry per parameter, nullptr for
// those that are not pointers.
void check_pointer_arguments(const LaunchSpec& spec, std::initializer_list<const void*> pointers);

// Runs body() once per thread of every block. Errors name the kernel, the launch site and, for
// what happens inside, the block and thread.
void launch(const LaunchSpec& spec, const std::function<void()>& body);

// The calling block's dynamic shared memory (extern __shared__), 128-byte aligned.
void* dynamic_shared();
// The calling block's storage for the `__shared__` variable `declaration` (one address per
// declaration): laid out, within sm_90's 48 KiB of static shared memory, and poisoned the first
// time a thread of the block reaches it; the same bytes for every thread of the block after.
void* static_shared(const void* declaration, size_t bytes, size_t alignment);

}  // namespace fathom::simt
