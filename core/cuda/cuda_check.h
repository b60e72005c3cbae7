#pragma once
// FATHOM_CUDA_CHECK(call): throws fathom::Error naming the failing call and the runtime's
// error name and string. For the CUDA backend's sources only (includes the runtime API).

#include <cuda_runtime_api.h>

#include "core/error.h"

#define FATHOM_CUDA_CHECK(call)                                                                     \
  do {                                                                                              \
    const cudaError_t fathom_cuda_status = (call);                                                  \
    if (fathom_cuda_status != cudaSuccess) [[unlikely]]                                             \
      ::fathom::detail::throw_error(__FILE__, __LINE__,                                             \
                                    ::fathom::detail::concat(#call, " failed: ",                    \
                                                             cudaGetErrorName(fathom_cuda_status), " (", \
                                                             cudaGetErrorString(fathom_cuda_status), ")")); \
  } while (0)
