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
