#pragma once
// Offload's host tier: where the states that offload moves off the device live.
//
// Two host allocators beside the CPU device's, each with its own tagged counters, so that a
// rank's device, host-tier and pinned bytes are counted apart — on a CPU-only run the device tier
// is host memory too, and only these counters tell the tiers apart:
//   host tier: page-aligned blocks (offload_optimizer.pin_memory false);
//   pinned: page-locked blocks from cudaHostAlloc when a GPU is present, so device copies to and
//           from them run asynchronously at full speed; page-aligned blocks otherwise.
// Page alignment makes every block usable as an O_DIRECT buffer (offload/io_engine.h), and the
// FATHOM_CPU_MEMORY_LIMIT_MB cap covers these bytes too (core/allocator.h).

#include "core/allocator.h"

namespace fathom::offload {

inline constexpr size_t kHostTierAlignment = 4096;

// The tier's allocator: pinned or not.
Allocator& host_tier_allocator(bool pinned);
// Whether pinned blocks really are page-locked (a CUDA device is present).
bool pinned_is_page_locked();

// Host tensors created on this thread while the scope is alive live in the host tier.
class HostTierScope {
 public:
  explicit HostTierScope(bool pinned) : scope_(host_tier_allocator(pinned)) {}

 private:
  HostAllocatorScope scope_;
};

}  // namespace fathom::offload
