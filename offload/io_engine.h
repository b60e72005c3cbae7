#pragma once
// IoEngine: asynchronous direct I/O between host buffers and DirectFiles, the engine under NVMe
// offload (DeepSpeed's "aio"). A request is cut into block_size pieces and the pieces are shared
// out in contiguous chunks to intra_op_parallelism worker threads. On io_uring each thread keeps
// up to queue_depth pieces in flight through its own ring; where io_uring is unavailable (Docker's
// default seccomp profile, kernel.io_uring_disabled) the threads use blocking pread/pwrite, one
// piece at a time each.
//
// Backend choice: IoBackend::Auto (overridden by FATHOM_AIO_BACKEND=auto|io_uring|threads) tries
// io_uring and falls back to threads with one warning per process; an explicit IoUring that
// cannot be set up is an error.
//
// Misaligned I/O cannot be expressed: buffer address, offset and length must each be a multiple
// of the file's alignment(), and a request that is not is refused before anything is submitted.
// The caller keeps the buffer and the DirectFile alive until the ticket completes (the engine
// keeps the descriptor open on its own, but cannot keep the caller's memory alive).

#include <cstdint>
#include <memory>

#include "offload/aio_options.h"
#include "offload/direct_file.h"

namespace fathom::offload {

namespace detail {
struct IoRequest;
struct IoCounterState;
}  // namespace detail

// A handle to one read or write: copies share it. wait() throws the request's first error every
// time it is called; a ticket dropped without waiting is harmless (the engine still finishes it).
class IoTicket {
 public:
  IoTicket() = default;  // a completed zero-byte request
  void wait();
  bool done() const;
  int64_t bytes() const;

 private:
  friend class IoEngine;
  explicit IoTicket(std::shared_ptr<detail::IoRequest> request) : request_(std::move(request)) {}
  std::shared_ptr<detail::IoRequest> request_;
};

class IoEngine {
 public:
  explicit IoEngine(AioOptions options = {}, IoBackend backend = IoBackend::Auto);
  // Finishes every queued and in-flight piece (the kernel must never be left writing into memory
  // the caller is about to free), then joins the workers.
  ~IoEngine();
  IoEngine(const IoEngine&) = delete;
  IoEngine& operator=(const IoEngine&) = delete;

  IoTicket write(const DirectFile& file, int64_t offset, const void* data, int64_t bytes);
  IoTicket read(const DirectFile& file, int64_t offset, void* data, int64_t bytes);

  struct Counters {
    int64_t bytes_read = 0, bytes_written = 0, requests = 0;
    double wait_seconds = 0;  // time callers spent blocked in wait()
  };
  Counters counters() const;
  void reset_counters();

  IoBackend backend() const { return backend_; }  // IoUring or Threads, never Auto
  const AioOptions& options() const { return options_; }

 private:
  struct Workers;  // the task queue, the threads and their rings
  IoTicket submit(bool is_write, const DirectFile& file, int64_t offset, void* data, int64_t bytes);

  AioOptions options_;
  IoBackend backend_ = IoBackend::Threads;
  // Shared with the tickets, which add their wait time after the engine may be gone.
  std::shared_ptr<detail::IoCounterState> counters_;
  std::unique_ptr<Workers> workers_;
};

}  // namespace fathom::offload
