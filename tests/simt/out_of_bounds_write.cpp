// A test fixture that must crash: a kernel writes one float past the end of its output. The file
// is compiled as the emulated kernel sources are, with the race checker's instrumentation in place
// of ASan's (FATHOM_SIMT_RACE_CHECK_OPTIONS), so AddressSanitizer sees the write only through the
// checker's hooks (core/simt/sanitizer_hooks.cpp); the test (tests/CMakeLists.txt) expects ASan's
// report of a heap-buffer-overflow.
#include <cstdio>
#include <memory>

#include "core/simt/device.h"

__global__ void write_one_too_many(float* out) { out[threadIdx.x] = 1.0f; }

int main() {
  constexpr int kLength = 64;
  const auto out = std::make_unique<float[]>(kLength);
  fathom::simt::launch_kernel(fathom::simt::LaunchSpec{"write_one_too_many", fathom::simt::Dim3(1),
                                                       fathom::simt::Dim3(kLength + 1), 0, FATHOM_SIMT_SITE},
                              write_one_too_many, out.get());
  std::puts("the out-of-bounds write was not reported");
  return 0;
}
