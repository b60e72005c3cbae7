#pragma once
// For .cu files, which stay free of heavy headers: checks the last kernel launch and throws
// fathom::Error naming the kernel (in debug builds it also waits, so a fault is reported at
// the launch that caused it rather than at some later call).

namespace fathom::cuda {
void check_last_launch(const char* kernel, const char* file, int line);
// Throws fathom::Error with `message` (for .cu files, which cannot include core/error.h cheaply).
[[noreturn]] void fail(const char* message, const char* file, int line);
}

#define FATHOM_CUDA_CHECK_LAUNCH(kernel) ::fathom::cuda::check_last_launch(kernel, __FILE__, __LINE__)
