#pragma once
// FATHOM_LAUNCH(grid, block, shared_bytes, stream, kernel)(arguments...): a kernel launch that
// every launcher writes instead of `kernel<<<grid, block, shared_bytes, stream>>>(arguments...)`.
// Under nvcc it is exactly that; in the CUDA emulation build (FATHOM_CUDA_EMULATION, docs/gpu.md
// "CUDA emulation") the host compiler sees the SIMT emulator's launch instead, with the launch's
// file and line. The kernel comes last so that its template arguments may hold commas; name them
// all (an emulated launch takes the kernel's address, which deduction cannot give).
//
// FATHOM_DYNAMIC_SHARED(type, name, alignment): the block's dynamic shared memory (the launch's
// shared_bytes) as `type* name` — `extern __shared__ __align__(alignment) type name[]` under nvcc.
//
// FATHOM_SHARED(name, type): a `__shared__` variable, e.g. FATHOM_SHARED(partial, float[256]) —
// `__shared__ float partial[256]` under nvcc; in emulation the block's own storage for it (the
// host compiler cannot place a function template's statics where the emulator finds them).
#include <type_traits>
#if defined(FATHOM_CUDA_EMULATION)
#include "core/simt/device.h"
#define FATHOM_LAUNCH(grid, block, shared_bytes, stream, ...)                                           \
  ::fathom::simt::PendingLaunch{{#__VA_ARGS__, ::fathom::simt::Dim3(grid), ::fathom::simt::Dim3(block), \
                                 static_cast<size_t>(shared_bytes), FATHOM_SIMT_SITE},                  \
                                static_cast<void*>(stream)}                                             \
      .of(__VA_ARGS__)
#define FATHOM_DYNAMIC_SHARED(type, name, alignment) type* const name = static_cast<type*>(::fathom::simt::dynamic_shared())
#else
#define FATHOM_LAUNCH(grid, block, shared_bytes, stream, ...) __VA_ARGS__<<<grid, block, shared_bytes, stream>>>
#define FATHOM_DYNAMIC_SHARED(type, name, alignment) extern __shared__ __align__(alignment) type name[]
#define FATHOM_SHARED(name, ...) __shared__ ::std::type_identity_t<__VA_ARGS__> name
#endif
