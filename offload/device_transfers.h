#pragma once
// DeviceTransfers: copies between a GPU and offload's host tier on a CUDA stream of their own,
// ordered by events, so that they overlap the kernels of the compute stream (and the CPU's work):
//   to_host(host, device): enqueued after the kernels enqueued on the compute stream so far, which
//     produced `device`;
//   to_device(device, host): enqueued at once; the kernels that read `device` come after finish();
//   finish(): blocks the host until every enqueued copy has landed and makes the compute stream
//     wait for them too; the CPU may then read what came to the host, the GPU what went to it.
// Both tensors of a copy are kept alive until finish(), which waits for the copy stream: the
// caching allocator cannot hand their memory out while a copy runs (no record_stream, which would
// tie the blocks to a stream that may be gone when they are freed). Host memory
// should be pinned (offload/host_memory.h), or the driver copies synchronously through a bounce
// buffer. Tensors: contiguous, the same dtype and element count.

#include <vector>

#include "core/cuda/cuda_runtime.h"
#include "core/tensor.h"

namespace fathom::offload {

class DeviceTransfers {
 public:
  explicit DeviceTransfers(int device);
  ~DeviceTransfers();
  DeviceTransfers(const DeviceTransfers&) = delete;
  DeviceTransfers& operator=(const DeviceTransfers&) = delete;

  void to_host(const Tensor& host, const Tensor& device);
  void to_device(const Tensor& device, const Tensor& host);
  void finish();
  // Copies enqueued since the transfers began (for tests: the path was taken).
  int64_t copies() const { return copies_; }

 private:
  void enqueue(const Tensor& destination, const Tensor& source);
  cuda::Stream stream_;
  std::vector<Tensor> in_flight_;
  int64_t copies_ = 0;
};

}  // namespace fathom::offload
