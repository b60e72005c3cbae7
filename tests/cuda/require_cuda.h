#pragma once
// Every CUDA test case starts with FATHOM_REQUIRE_CUDA(): on a machine without a GPU the
// binary fails loudly with "no CUDA device: <reason>" — it never passes silently.
#include <catch2/catch.hpp>

#include "core/cuda/cuda_runtime.h"

#define FATHOM_REQUIRE_CUDA()                                                             \
  do {                                                                                    \
    if (::fathom::cuda::device_count() == 0)                                              \
      FAIL("no CUDA device: " << ::fathom::cuda::unavailable_reason());                   \
  } while (0)

namespace fathom::testing {
// A case's size on a GPU, and under the SIMT emulator (CPU threads as fibers, under ASan), where a
// GPT-2-sized case takes minutes: the emulated size still runs every kernel and path the case
// exists for (several blocks, collisions, broadcasts, every dtype), on fewer elements.
template <typename T>
constexpr T gpu_or_emulated(T on_gpu, [[maybe_unused]] T emulated) {
#if defined(FATHOM_CUDA_EMULATION)
  return emulated;
#else
  return on_gpu;
#endif
}
}  // namespace fathom::testing
