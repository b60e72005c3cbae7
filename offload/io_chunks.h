#pragma once
// How an I/O worker moves one chunk (offload/io_request.h): blocking pread/pwrite a piece at a
// time (the threads backend, and the fallback of a worker whose ring broke), or up to
// queue_depth pieces in flight on the worker's own io_uring ring. Internal to offload/.

#include <cstdint>
#include <memory>

#include "offload/aio_options.h"
#include "offload/io_request.h"

namespace fathom::offload::detail {

void run_chunk_blocking(const Chunk& chunk);

// One worker's io_uring instance, used by its thread only (no lock). Without liburing (the GPU
// machine's image) io_uring "does not exist": open() fails and the engine runs on threads.
class IoRing {
 public:
  IoRing();
  ~IoRing();
  IoRing(const IoRing&) = delete;
  IoRing& operator=(const IoRing&) = delete;
  // 0, or the errno io_uring setup failed with.
  int open(int64_t entries);
  bool usable() const;
  void mark_broken();
  // Keeps up to queue_depth pieces of the chunk in flight. Returns false when the ring failed in
  // a way that leaves it unusable (not expected of a healthy kernel; the worker then goes on with
  // blocking calls). Either way every piece the kernel accepted has completed.
  bool run(const Chunk& chunk, const AioOptions& options);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace fathom::offload::detail
