#pragma once
// The device side of the SIMT emulator: what a kernel source compiled by the host compiler sees
// in place of CUDA's built-ins. Each intrinsic records its call site, so the scheduler's errors
// (core/simt/block_scheduler.h) name the file and line of the barrier or warp operation.
//
// `__shared__` variables are written FATHOM_SHARED(name, type) (core/cuda/kernel_launch.h): a
// reference to the block's storage for that declaration (core/simt/launch.h), poisoned with 0xFF
// for each block. (A `static` in a section would do for plain functions, but GCC drops the
// section attribute of a static in a function template, which most kernels are: so `__shared__`
// itself is an error here.) Atomics are plain read-modify-writes: the
// threads of a block are fibers that switch only at barriers and warp operations, so nothing
// runs between the read and the write. Kernel sources compiled with -fsanitize=thread have their
// shared-memory accesses checked for races (core/simt/shared_memory_checker.h).

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

#include "core/simt/block_scheduler.h"
#include "core/simt/device_math.h"
#include "core/simt/launch.h"
#include "core/simt/shared_memory_checker.h"
#include "core/simt/submit.h"

namespace fathom::simt {

inline const ThreadContext& this_thread() { return BlockScheduler::thread(); }
inline void syncthreads(Site site) { BlockScheduler::current().syncthreads(site); }

template <class T>
T warp_shuffle(BlockScheduler::WarpKind kind, unsigned mask, T value, int arg, Site site, int width = kWarpSize) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 16, "a shuffled value is at most 16 plain bytes");
  const auto result = BlockScheduler::current().warp_op(kind, mask, &value, sizeof(T), arg, width, site);
  T out;
  std::memcpy(&out, result.bytes, sizeof(T));
  return out;
}
inline unsigned warp_ballot(unsigned mask, bool predicate, Site site) {
  const unsigned char vote = predicate ? 1 : 0;
  const auto result =
      BlockScheduler::current().warp_op(BlockScheduler::WarpKind::Ballot, mask, &vote, 1, 0, kWarpSize, site);
  unsigned bits;
  std::memcpy(&bits, result.bytes, sizeof bits);
  return bits;
}
inline void warp_sync(Site site, unsigned mask = 0xffffffffu) {
  BlockScheduler::current().warp_op(BlockScheduler::WarpKind::Sync, mask, nullptr, 0, 0, kWarpSize, site);
}
inline unsigned active_mask() { return BlockScheduler::current().active_mask(); }

// Atomics are plain read-modify-writes (see above), kept out of the race checker's instrumentation
// and announced to it as atomics instead: they do not race with each other, only with plain
// accesses in the same barrier epoch. Only instrumented translation units (the emulated kernels)
// announce them; elsewhere the checker sees no plain accesses to meet them.
// (Two inline namespaces: the two kinds of translation unit must not share template instances.)
#if defined(__SANITIZE_THREAD__)
#define FATHOM_SIMT_ATOMIC(address) note_atomic(address, sizeof(*(address)))
inline namespace race_checked_atomics {
#else
#define FATHOM_SIMT_ATOMIC(address) ((void)0)
inline namespace plain_atomics {
#endif
#define FATHOM_SIMT_UNINSTRUMENTED __attribute__((no_sanitize_thread, noinline))

template <class T>
FATHOM_SIMT_UNINSTRUMENTED T atomic_add(T* address, T value) {
  FATHOM_SIMT_ATOMIC(address);
  const T old = *address;
  *address = old + value;
  return old;
}
template <class T>
FATHOM_SIMT_UNINSTRUMENTED T atomic_max(T* address, T value) {
  FATHOM_SIMT_ATOMIC(address);
  const T old = *address;
  *address = old < value ? value : old;
  return old;
}
template <class T>
FATHOM_SIMT_UNINSTRUMENTED T atomic_min(T* address, T value) {
  FATHOM_SIMT_ATOMIC(address);
  const T old = *address;
  *address = value < old ? value : old;
  return old;
}
template <class T>
FATHOM_SIMT_UNINSTRUMENTED T atomic_exchange(T* address, T value) {
  FATHOM_SIMT_ATOMIC(address);
  const T old = *address;
  *address = value;
  return old;
}
template <class T>
FATHOM_SIMT_UNINSTRUMENTED T atomic_compare_exchange(T* address, T expected, T desired) {
  FATHOM_SIMT_ATOMIC(address);
  const T old = *address;
  if (old == expected) *address = desired;
  return old;
}
}  // inline namespace
#undef FATHOM_SIMT_ATOMIC
#undef FATHOM_SIMT_UNINSTRUMENTED

// The storage of one FATHOM_SHARED declaration: `Declaration` (a lambda's type, distinct per
// declaration and per template instance) gives it an address of its own.
template <class T, class Declaration>
T& static_shared_variable(Declaration) {
  static_assert(std::is_trivially_default_constructible_v<std::remove_all_extents_t<T>>,
                "a __shared__ variable has no constructor (as in CUDA)");
  static const char declaration = 0;
  return *static_cast<T*>(static_shared(&declaration, sizeof(T), alignof(T)));
}

// A launch as CUDA makes it: the arguments converted to the kernel's parameter types once, then
// every thread called with its own copy.
template <class... Params, class... Args>
void launch_kernel(const LaunchSpec& spec, void (*kernel)(Params...), Args&&... args) {
  const std::tuple<std::decay_t<Params>...> values(std::forward<Args>(args)...);
  launch(spec, [&] {
    std::tuple<std::decay_t<Params>...> mine = values;
    std::apply(kernel, mine);
  });
}

// A kernel argument as launch checks see it: the address a pointer parameter holds, nullptr for
// every other parameter.
template <class T>
const void* pointer_argument(const T& value) {
  if constexpr (std::is_pointer_v<T>)
    return (const void*)value;
  else
    return nullptr;
}

// A launch through the CUDA runtime, as FATHOM_LAUNCH makes it: the configuration checked and the
// arguments converted to the kernel's parameter types now, as the GPU does at the launch; the
// blocks run when the stream gets to them (core/simt/submit.h).
template <class... Params, class... Args>
void submit_kernel(const LaunchSpec& spec, void* stream, void (*kernel)(Params...), Args&&... args) {
  check_launch(spec);
  auto values = std::make_shared<const std::tuple<std::decay_t<Params>...>>(std::forward<Args>(args)...);
  std::apply([&](const auto&... value) { check_pointer_arguments(spec, {pointer_argument(value)...}); }, *values);
  submit(stream, [spec, kernel, values] {
    launch(spec, [&] {
      std::tuple<std::decay_t<Params>...> mine = *values;
      std::apply(kernel, mine);
    });
  });
}

// FATHOM_LAUNCH's emulated form (core/cuda/kernel_launch.h): the launch's shape and stream, then
// the kernel, then the arguments.
struct PendingLaunch {
  LaunchSpec spec;
  void* stream;
  template <class... Params>
  auto of(void (*kernel)(Params...)) {
    spec.function = reinterpret_cast<const void*>(kernel);
    return [spec = spec, stream = stream, kernel](auto&&... args) {
      submit_kernel(spec, stream, kernel, std::forward<decltype(args)>(args)...);
    };
  }
};

}  // namespace fathom::simt

#define FATHOM_SIMT_SITE (::fathom::simt::Site{__FILE__, __LINE__})

// After the CUDA headers, whose host-side definitions of these would make device code host-only
// or (__shared__) leave it without shared storage.
#undef __global__
#undef __device__
#undef __host__
#undef __forceinline__
#undef __launch_bounds__
#undef __shared__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ \
  _Pragma("GCC error \"write FATHOM_SHARED(name, type) in emulated kernels (core/cuda/kernel_launch.h)\"")
#define FATHOM_SHARED(name, ...) \
  ::std::type_identity_t<__VA_ARGS__>& name = ::fathom::simt::static_shared_variable<__VA_ARGS__>([] {})
#define threadIdx (::fathom::simt::this_thread().thread_idx)
#define blockIdx (::fathom::simt::this_thread().block_idx)
#define blockDim (::fathom::simt::this_thread().block_dim)
#define gridDim (::fathom::simt::this_thread().grid_dim)
#define warpSize (::fathom::simt::kWarpSize)

#define __syncthreads() ::fathom::simt::syncthreads(FATHOM_SIMT_SITE)
#define __syncwarp(...) ::fathom::simt::warp_sync(FATHOM_SIMT_SITE __VA_OPT__(, ) __VA_ARGS__)
#define __activemask() ::fathom::simt::active_mask()
#define __ballot_sync(mask, predicate) ::fathom::simt::warp_ballot((mask), (predicate), FATHOM_SIMT_SITE)
#define __any_sync(mask, predicate) (::fathom::simt::warp_ballot((mask), (predicate), FATHOM_SIMT_SITE) != 0u)
#define __all_sync(mask, predicate) \
  (::fathom::simt::warp_ballot((mask), (predicate), FATHOM_SIMT_SITE) == static_cast<unsigned>(mask))
#define FATHOM_SIMT_SHUFFLE(kind, mask, value, arg, ...)                                               \
  ::fathom::simt::warp_shuffle(::fathom::simt::BlockScheduler::WarpKind::kind, (mask), (value), (arg), \
                               FATHOM_SIMT_SITE __VA_OPT__(, ) __VA_ARGS__)
#define __shfl_sync(mask, value, lane, ...) FATHOM_SIMT_SHUFFLE(Index, mask, value, lane, __VA_ARGS__)
#define __shfl_up_sync(mask, value, delta, ...) FATHOM_SIMT_SHUFFLE(Up, mask, value, delta, __VA_ARGS__)
#define __shfl_down_sync(mask, value, delta, ...) FATHOM_SIMT_SHUFFLE(Down, mask, value, delta, __VA_ARGS__)
#define __shfl_xor_sync(mask, value, lane_mask, ...) FATHOM_SIMT_SHUFFLE(Xor, mask, value, lane_mask, __VA_ARGS__)

#define atomicAdd ::fathom::simt::atomic_add
#define atomicMax ::fathom::simt::atomic_max
#define atomicMin ::fathom::simt::atomic_min
#define atomicExch ::fathom::simt::atomic_exchange
#define atomicCAS ::fathom::simt::atomic_compare_exchange
