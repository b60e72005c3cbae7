#pragma once
// The offload I/O engine's settings: DeepSpeed's "aio" config block, with what each knob means
// for this engine (offload/io_engine.h), and the choice of kernel interface underneath it.

#include <cstdint>
#include <string>

#include "core/error.h"

namespace fathom::offload {

struct AioOptions {
  // Bytes per piece a request is cut into. Rounded up to the file's O_DIRECT alignment; larger
  // pieces mean fewer system calls, smaller ones spread a request over more queue slots.
  int64_t block_size = 1 << 20;
  // Pieces each worker thread keeps in flight at once: its io_uring ring has this many entries.
  // The Threads backend issues one blocking call at a time per thread and ignores it.
  int64_t queue_depth = 8;
  // Worker threads a request is spread over, each taking a contiguous chunk of its pieces and,
  // on io_uring, owning its own ring (no locking between threads on the submission path).
  int64_t intra_op_parallelism = 1;
  // Enter the kernel once per piece instead of once per batch of up to queue_depth pieces.
  bool single_submit = false;
  // Refill the ring as each piece completes. False: submit a batch, wait for all of it, then
  // submit the next (lower peak queue occupancy, less overlap).
  bool overlap_events = true;
};

enum class IoBackend { Auto, IoUring, Threads };

inline const char* io_backend_name(IoBackend backend) {
  switch (backend) {
    case IoBackend::Auto:
      return "auto";
    case IoBackend::IoUring:
      return "io_uring";
    case IoBackend::Threads:
      return "threads";
  }
  return "?";
}

inline IoBackend parse_io_backend(const std::string& name) {
  if (name == "auto") return IoBackend::Auto;
  if (name == "io_uring") return IoBackend::IoUring;
  if (name == "threads") return IoBackend::Threads;
  FATHOM_FAIL("unknown I/O backend '", name, "': expected auto, io_uring or threads");
}

}  // namespace fathom::offload
