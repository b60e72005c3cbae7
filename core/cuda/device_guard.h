#pragma once
// Makes a device current for a scope (cudaSetDevice), restoring the previous one. For the CUDA
// backend's sources only (includes the runtime API).

#include <cuda_runtime_api.h>

#include "core/cuda/cuda_check.h"

namespace fathom::cuda {

class DeviceGuard {
 public:
  explicit DeviceGuard(int device) : device_(device) {
    FATHOM_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device) FATHOM_CUDA_CHECK(cudaSetDevice(device));
  }
  ~DeviceGuard() {
    if (previous_ != device_) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
  int device_ = 0;
};

}  // namespace fathom::cuda
