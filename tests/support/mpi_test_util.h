#pragma once
// Shared by the multi-rank tests (run under mpirun by CTest).

#include "parallel/runtime.h"

namespace fathom::testing {

// The runtime the test main started.
parallel::Runtime& runtime();

}  // namespace fathom::testing
