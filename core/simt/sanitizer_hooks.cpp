// The ThreadSanitizer instrumentation ABI, implemented by the SIMT emulator instead of libtsan.
//
// Emulated kernel sources are compiled with -fsanitize=thread (and not linked with its runtime,
// cmake/FathomCuda.cmake), so GCC calls these for every load, store and atomic. An access to the
// shared memory of the running block goes to the race checker (core/simt/shared_memory_checker.h);
// every other access goes to AddressSanitizer's checks when the program has ASan, which a
// translation unit cannot be built with together with -fsanitize=thread: so the kernels keep
// ASan's bounds checks on device (heap) memory. Atomics run as what they are.

#include <cstddef>
#include <cstdint>

#include "core/simt/fiber.h"
#include "core/simt/shared_memory_checker.h"

// AddressSanitizer's public checks (weak: null without ASan).
extern "C" {
void __asan_loadN(const void*, size_t) __attribute__((weak));
void __asan_storeN(const void*, size_t) __attribute__((weak));
}

namespace fathom::simt {
namespace {

void to_checker(SharedMemoryChecker& checker, const void* address, size_t bytes, Access kind, const void* pc) {
  checker.access(address, bytes, kind, pc);
  // The racing thread stops here: its scheduler reports the race (core/simt/block_scheduler.cpp).
  if (checker.race() && Fiber::current()) Fiber::yield();
}

inline void on_access(const void* address, size_t bytes, Access kind, const void* pc) {
  SharedMemoryChecker* checker = SharedMemoryChecker::active();
  if (checker && checker->watches(address)) return to_checker(*checker, address, bytes, kind, pc);
  if (kind == Access::Read) {
    if (__asan_loadN) __asan_loadN(address, bytes);
  } else if (__asan_storeN) {
    __asan_storeN(address, bytes);
  }
}

}  // namespace

void note_atomic(const void* address, size_t bytes) {
  on_access(address, bytes, Access::Atomic, __builtin_return_address(0));
}

}  // namespace fathom::simt

using fathom::simt::Access;
using fathom::simt::on_access;

#define FATHOM_SIMT_ACCESS_HOOKS(N)                                                                        \
  void __tsan_read##N(void* p) { on_access(p, N, Access::Read, __builtin_return_address(0)); }             \
  void __tsan_write##N(void* p) { on_access(p, N, Access::Write, __builtin_return_address(0)); }           \
  void __tsan_unaligned_read##N(void* p) { on_access(p, N, Access::Read, __builtin_return_address(0)); }   \
  void __tsan_unaligned_write##N(void* p) { on_access(p, N, Access::Write, __builtin_return_address(0)); } \
  void __tsan_volatile_read##N(void* p) { on_access(p, N, Access::Read, __builtin_return_address(0)); }    \
  void __tsan_volatile_write##N(void* p) { on_access(p, N, Access::Write, __builtin_return_address(0)); }

// Atomics on memory outside shared memory (kernels' shared-memory atomics are core/simt/device.h's,
// which note themselves): the operation, sequentially consistent whatever was asked.
#define FATHOM_SIMT_ATOMIC_HOOKS(BITS, T)                                                                             \
  T __tsan_atomic##BITS##_load(const volatile T* a, int) { return __atomic_load_n(a, __ATOMIC_SEQ_CST); }             \
  void __tsan_atomic##BITS##_store(volatile T* a, T v, int) { __atomic_store_n(a, v, __ATOMIC_SEQ_CST); }             \
  T __tsan_atomic##BITS##_exchange(volatile T* a, T v, int) { return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST); }   \
  T __tsan_atomic##BITS##_fetch_add(volatile T* a, T v, int) { return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST); }   \
  T __tsan_atomic##BITS##_fetch_sub(volatile T* a, T v, int) { return __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST); }   \
  T __tsan_atomic##BITS##_fetch_and(volatile T* a, T v, int) { return __atomic_fetch_and(a, v, __ATOMIC_SEQ_CST); }   \
  T __tsan_atomic##BITS##_fetch_or(volatile T* a, T v, int) { return __atomic_fetch_or(a, v, __ATOMIC_SEQ_CST); }     \
  T __tsan_atomic##BITS##_fetch_xor(volatile T* a, T v, int) { return __atomic_fetch_xor(a, v, __ATOMIC_SEQ_CST); }   \
  T __tsan_atomic##BITS##_fetch_nand(volatile T* a, T v, int) { return __atomic_fetch_nand(a, v, __ATOMIC_SEQ_CST); } \
  int __tsan_atomic##BITS##_compare_exchange_strong(volatile T* a, T* expected, T desired, int, int) {                \
    return __atomic_compare_exchange_n(a, expected, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);              \
  }                                                                                                                   \
  int __tsan_atomic##BITS##_compare_exchange_weak(volatile T* a, T* expected, T desired, int, int) {                  \
    return __atomic_compare_exchange_n(a, expected, desired, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);               \
  }                                                                                                                   \
  T __tsan_atomic##BITS##_compare_exchange_val(volatile T* a, T expected, T desired, int, int) {                      \
    __atomic_compare_exchange_n(a, &expected, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                    \
    return expected;                                                                                                  \
  }

extern "C" {
FATHOM_SIMT_ACCESS_HOOKS(1)
FATHOM_SIMT_ACCESS_HOOKS(2)
FATHOM_SIMT_ACCESS_HOOKS(4)
FATHOM_SIMT_ACCESS_HOOKS(8)
FATHOM_SIMT_ACCESS_HOOKS(16)
void __tsan_read_range(void* p, unsigned long bytes) { on_access(p, bytes, Access::Read, __builtin_return_address(0)); }
void __tsan_write_range(void* p, unsigned long bytes) {
  on_access(p, bytes, Access::Write, __builtin_return_address(0));
}
// A virtual call's table pointer is object memory like any other.
void __tsan_vptr_read(void** p) { on_access(p, sizeof(void*), Access::Read, __builtin_return_address(0)); }
void __tsan_vptr_update(void** p, void*) { on_access(p, sizeof(void*), Access::Write, __builtin_return_address(0)); }

FATHOM_SIMT_ATOMIC_HOOKS(8, int8_t)
FATHOM_SIMT_ATOMIC_HOOKS(16, int16_t)
FATHOM_SIMT_ATOMIC_HOOKS(32, int32_t)
FATHOM_SIMT_ATOMIC_HOOKS(64, int64_t)
void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
void __tsan_atomic_signal_fence(int) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }

// Nothing to set up, and function entries are not instrumented (--param
// tsan-instrument-func-entry-exit=0); defined for objects built without that parameter.
void __tsan_init() {}
void __tsan_func_entry(void*) {}
void __tsan_func_exit() {}
}
