#include "offload/io_chunks.h"

#include <unistd.h>
#if FATHOM_WITH_LIBURING
#include <liburing.h>
#endif

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "offload/io_faults.h"

namespace fathom::offload::detail {
namespace {

using ::fathom::detail::concat;

std::string piece_error(const IoRequest& r, int64_t offset, int64_t bytes, int error) {
  if (error == ENOSPC)
    return concat("no space left on device writing ", bytes, " bytes at offset ", offset, " of '", r.path,
                  "': free space on that file system or point nvme_path elsewhere");
  std::string hint;
  if (error == EINVAL)
    hint = " (the kernel refused the direct-I/O request: this file system may need more alignment than it reports)";
  if (error == EIO) hint = " (the device reported an error: check the kernel log, dmesg)";
  return concat(r.is_write ? "write" : "read", " of ", bytes, " bytes at offset ", offset, " of '", r.path,
                "' failed: ", std::strerror(error), hint);
}

std::string end_of_file_error(const IoRequest& r, int64_t offset, int64_t done, int64_t bytes) {
  if (r.is_write)  // a write that makes no progress and reports no error: treat as a device error
    return piece_error(r, offset, bytes, EIO);
  return concat("read ", done, " of ", bytes, " bytes at offset ", offset, " of '", r.path,
                "': the file is shorter (truncated?)");
}

}  // namespace

// Blocking pread/pwrite, one piece at a time: the Threads backend, and the fallback of a worker
// whose ring broke.
void run_chunk_blocking(const Chunk& chunk) {
  IoRequest& r = *chunk.request;
  for (int64_t position = 0; position < chunk.bytes && !r.failed.load(); position += chunk.piece_bytes) {
    const int64_t bytes = std::min(chunk.piece_bytes, chunk.bytes - position);
    const int64_t offset = chunk.offset + position;
    char* data = chunk.data + position;
    if (r.is_write && !take_write_space(bytes)) return r.fail(piece_error(r, offset, bytes, ENOSPC));
    int64_t done = 0;
    while (done < bytes) {
      const ssize_t got = r.is_write ? ::pwrite(r.fd, data + done, bytes - done, offset + done)
                                     : ::pread(r.fd, data + done, bytes - done, offset + done);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) return r.fail(piece_error(r, offset, bytes, errno));
      if (got == 0) return r.fail(end_of_file_error(r, offset, done, bytes));
      done += got;
      r.count(got);
    }
  }
}

#if FATHOM_WITH_LIBURING
struct IoRing::State {
  io_uring ring{};
  bool open = false;
  bool broken = false;
};

IoRing::IoRing() : state_(std::make_unique<State>()) {}
IoRing::~IoRing() {
  if (state_->open) io_uring_queue_exit(&state_->ring);
}
int IoRing::open(int64_t entries) {
  if (io_faults().refuse_io_uring) return EPERM;
  const int rc = io_uring_queue_init(static_cast<unsigned>(entries), &state_->ring, 0);
  if (rc < 0) return -rc;
  state_->open = true;
  return 0;
}
bool IoRing::usable() const { return state_->open && !state_->broken; }
void IoRing::mark_broken() { state_->broken = true; }

namespace {
// A piece in flight: where the rest of it goes (short transfers are resubmitted from there).
struct Slot {
  int64_t piece_offset = 0, piece_bytes = 0;
  int64_t offset = 0, left = 0;
  char* data = nullptr;
};

bool transient(int error) { return error == EINTR || error == EAGAIN || error == EBUSY; }

}  // namespace

bool IoRing::run(const Chunk& chunk, const AioOptions& options) {
  IoRequest& r = *chunk.request;
  io_uring* ring = &state_->ring;
  const auto depth = static_cast<size_t>(options.queue_depth);
  std::vector<Slot> slots(depth);
  std::vector<Slot*> free_slots;
  for (Slot& slot : slots) free_slots.push_back(&slot);
  int64_t next = 0;       // bytes of the chunk handed out so far
  int64_t in_flight = 0;  // pieces prepared and not yet completed
  bool stop = false;
  int ring_error = 0;

  auto prepare = [&](Slot* slot) {
    io_uring_sqe* sqe = io_uring_get_sqe(ring);
    if (sqe == nullptr) {  // cannot happen with in_flight <= depth; push what is queued and retry
      io_uring_submit(ring);
      sqe = io_uring_get_sqe(ring);
    }
    if (sqe == nullptr) return false;
    const auto length = static_cast<unsigned>(slot->left);
    if (r.is_write)
      io_uring_prep_write(sqe, r.fd, slot->data, length, static_cast<uint64_t>(slot->offset));
    else
      io_uring_prep_read(sqe, r.fd, slot->data, length, static_cast<uint64_t>(slot->offset));
    io_uring_sqe_set_data(sqe, slot);
    ++in_flight;
    return true;
  };
  // Entries the kernel refuses for now (EAGAIN, EBUSY) stay queued and go with the next wait.
  auto submit = [&] {
    while (io_uring_sq_ready(ring) > 0) {
      const int rc = io_uring_submit(ring);
      if (rc == -EINTR) continue;
      if (rc < 0 && !transient(-rc)) {
        ring_error = -rc;
        return;
      }
      if (rc <= 0) break;
    }
  };
  // Pushes anything still queued and waits for one completion.
  auto next_completion = [&]() -> io_uring_cqe* {
    while (true) {
      io_uring_cqe* cqe = nullptr;
      int rc = 0;
      if (io_uring_sq_ready(ring) > 0) {
        rc = io_uring_submit_and_wait(ring, 1);
        if (rc >= 0) rc = io_uring_peek_cqe(ring, &cqe);
      } else {
        rc = io_uring_wait_cqe(ring, &cqe);
      }
      if (rc == 0 && cqe != nullptr) return cqe;
      if (rc < 0 && !transient(-rc)) {
        ring_error = -rc;
        return nullptr;
      }
      if (rc == -EAGAIN || rc == -EBUSY) std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  };

  while (true) {
    const bool refill = options.overlap_events || in_flight == 0;
    while (refill && !stop && ring_error == 0 && next < chunk.bytes && in_flight < static_cast<int64_t>(depth)) {
      if (r.failed.load()) {
        stop = true;
        break;
      }
      const int64_t bytes = std::min(chunk.piece_bytes, chunk.bytes - next);
      const int64_t offset = chunk.offset + next;
      if (r.is_write && !take_write_space(bytes)) {
        r.fail(piece_error(r, offset, bytes, ENOSPC));
        stop = true;
        break;
      }
      Slot* slot = free_slots.back();
      free_slots.pop_back();
      *slot = Slot{offset, bytes, offset, bytes, chunk.data + next};
      if (!prepare(slot)) {
        ring_error = EBUSY;
        break;
      }
      next += bytes;
      if (options.single_submit) submit();
    }
    if (ring_error == 0) submit();
    if (in_flight == 0 || ring_error != 0) break;

    io_uring_cqe* cqe = next_completion();
    if (cqe == nullptr) break;
    auto* slot = static_cast<Slot*>(io_uring_cqe_get_data(cqe));
    const int res = cqe->res;
    io_uring_cqe_seen(ring, cqe);
    if ((res == -EINTR || res == -EAGAIN) && !stop && !r.failed.load()) {  // retry the same transfer
      --in_flight;
      if (!prepare(slot)) ring_error = EBUSY;
      continue;
    }
    if (res > 0) {
      r.count(res);
      slot->offset += res;
      slot->data += res;
      slot->left -= res;
    }
    --in_flight;
    if (res < 0) {
      r.fail(piece_error(r, slot->piece_offset, slot->piece_bytes, -res));
      stop = true;
    } else if (res == 0) {
      r.fail(end_of_file_error(r, slot->piece_offset, slot->piece_bytes - slot->left, slot->piece_bytes));
      stop = true;
    } else if (slot->left > 0 && !stop && !r.failed.load()) {  // short transfer: the rest goes again
      if (!prepare(slot)) ring_error = EBUSY;
      continue;
    }
    free_slots.push_back(slot);
  }
  if (ring_error == 0) return true;

  // The ring failed: wait for what the kernel has accepted (entries it never took stay in the
  // ring and are dropped with it), so that no transfer outlives the caller's buffers.
  r.fail(concat(r.is_write ? "write" : "read", " of ", r.bytes, " bytes of '", r.path,
                "' failed: io_uring stopped working (", std::strerror(ring_error),
                "); set FATHOM_AIO_BACKEND=threads to use blocking I/O threads instead"));
  int64_t accepted = in_flight - static_cast<int64_t>(io_uring_sq_ready(ring));
  while (accepted > 0) {
    io_uring_cqe* cqe = nullptr;
    const int rc = io_uring_wait_cqe(ring, &cqe);
    if (rc == -EINTR) continue;
    if (rc < 0) break;  // nothing more can be learned from this ring
    io_uring_cqe_seen(ring, cqe);
    --accepted;
  }
  return false;
}
#else
struct IoRing::State {};

IoRing::IoRing() = default;
IoRing::~IoRing() = default;
int IoRing::open(int64_t) { return io_faults().refuse_io_uring ? EPERM : ENOSYS; }
bool IoRing::usable() const { return false; }
void IoRing::mark_broken() {}
bool IoRing::run(const Chunk&, const AioOptions&) { return false; }
#endif

}  // namespace fathom::offload::detail
