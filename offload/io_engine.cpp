#include "offload/io_engine.h"

#include <unistd.h>
#if FATHOM_WITH_LIBURING
#include <liburing.h>
#endif

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/logging.h"
#include "offload/io_faults.h"

namespace fathom::offload {

namespace detail {

struct IoCounterState {
  std::atomic<int64_t> bytes_read{0}, bytes_written{0}, requests{0}, wait_nanos{0};
};

// One read or write as the ticket sees it: the chunks still running and the first error.
struct IoRequest {
  bool is_write = false;
  int fd = -1;
  std::string path;
  std::shared_ptr<const void> keep_open;  // the DirectFile's descriptor, open until we finish
  int64_t bytes = 0;
  std::shared_ptr<IoCounterState> counters;

  // Set with the first error, so that the other chunks stop submitting new pieces.
  std::atomic<bool> failed{false};
  std::mutex mutex;
  std::condition_variable finished;
  int64_t chunks_left = 0;
  std::string error;

  void fail(std::string message) {
    std::lock_guard<std::mutex> lock(mutex);
    if (error.empty()) error = std::move(message);
    failed.store(true);
  }
  void chunk_done() {
    std::lock_guard<std::mutex> lock(mutex);
    if (--chunks_left == 0) finished.notify_all();
  }
  void count(int64_t transferred) const {
    (is_write ? counters->bytes_written : counters->bytes_read).fetch_add(transferred, std::memory_order_relaxed);
  }
};

}  // namespace detail

namespace {

using detail::IoRequest;
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

// Part of one request for one worker: a contiguous run of its pieces.
struct Chunk {
  std::shared_ptr<IoRequest> request;
  int64_t offset = 0;
  char* data = nullptr;
  int64_t bytes = 0;
  int64_t piece_bytes = 0;
};

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
// One worker's io_uring instance. Used by its worker thread only, so it needs no lock.
class Ring {
 public:
  // 0 or the errno io_uring setup failed with.
  int open(int64_t entries) {
    if (io_faults().refuse_io_uring) return EPERM;
    const int rc = io_uring_queue_init(static_cast<unsigned>(entries), &ring_, 0);
    if (rc < 0) return -rc;
    open_ = true;
    return 0;
  }
  ~Ring() {
    if (open_) io_uring_queue_exit(&ring_);
  }
  io_uring* get() { return &ring_; }
  bool usable() const { return open_ && !broken_; }
  void mark_broken() { broken_ = true; }

 private:
  io_uring ring_{};
  bool open_ = false;
  bool broken_ = false;
};

// A piece in flight: where the rest of it goes (short transfers are resubmitted from there).
struct Slot {
  int64_t piece_offset = 0, piece_bytes = 0;
  int64_t offset = 0, left = 0;
  char* data = nullptr;
};

bool transient(int error) { return error == EINTR || error == EAGAIN || error == EBUSY; }

// Keeps up to queue_depth pieces of the chunk in flight on the worker's ring. Returns false when
// the ring failed in a way that leaves it unusable (not expected of a healthy kernel; the worker
// then goes on with blocking calls). Either way every piece the kernel accepted has completed.
bool run_chunk_uring(Ring& ring_holder, const Chunk& chunk, const AioOptions& options) {
  IoRequest& r = *chunk.request;
  io_uring* ring = ring_holder.get();
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
// Built without liburing (the GPU machine's image): io_uring "does not exist", and the engine
// runs on its threads backend, as where io_uring is forbidden.
class Ring {
 public:
  int open(int64_t) { return io_faults().refuse_io_uring ? EPERM : ENOSYS; }
  bool usable() const { return false; }
  void mark_broken() {}
};
bool run_chunk_uring(Ring&, const Chunk&, const AioOptions&) { return false; }
#endif

std::atomic<bool>& fallback_warned() {
  static std::atomic<bool> warned{false};
  return warned;
}

void check_options(const AioOptions& o) {
  FATHOM_CHECK(o.block_size > 0 && o.block_size <= (int64_t{1} << 30), "aio.block_size ", o.block_size,
               " is out of range: use 1 byte to 1 GiB (it is rounded up to the file's direct-I/O alignment)");
  FATHOM_CHECK(o.queue_depth >= 1 && o.queue_depth <= 4096, "aio.queue_depth ", o.queue_depth,
               " is out of range: use 1 to 4096 pieces in flight per thread");
  FATHOM_CHECK(o.intra_op_parallelism >= 1 && o.intra_op_parallelism <= 256, "aio.intra_op_parallelism ",
               o.intra_op_parallelism, " is out of range: use 1 to 256 I/O threads");
}

IoBackend requested_backend(IoBackend backend) {
  if (backend != IoBackend::Auto) return backend;
  const char* env = std::getenv("FATHOM_AIO_BACKEND");
  if (env == nullptr || *env == '\0') return backend;
  try {
    return parse_io_backend(env);
  } catch (const Error& e) {
    FATHOM_FAIL("FATHOM_AIO_BACKEND='", env, "': ", e.message());
  }
}

}  // namespace

struct IoEngine::Workers {
  const AioOptions options;
  std::mutex mutex;
  std::condition_variable work_ready;
  std::deque<Chunk> queue;
  bool stopping = false;
  std::vector<std::unique_ptr<Ring>> rings;  // one per thread on io_uring, none on Threads
  std::vector<std::thread> threads;

  explicit Workers(const AioOptions& o) : options(o) {}

  // Drains: the threads take everything queued before they exit.
  ~Workers() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
    }
    work_ready.notify_all();
    for (std::thread& t : threads) t.join();
  }

  void start() {
    const auto count = static_cast<size_t>(options.intra_op_parallelism);
    for (size_t i = 0; i < count; ++i)
      threads.emplace_back([this, i] { loop(i < rings.size() ? rings[i].get() : nullptr); });
  }

  void loop(Ring* ring) {
    while (true) {
      Chunk chunk;
      {
        std::unique_lock<std::mutex> lock(mutex);
        work_ready.wait(lock, [&] { return stopping || !queue.empty(); });
        if (queue.empty()) return;  // stopping, and nothing left
        chunk = std::move(queue.front());
        queue.pop_front();
      }
      run(ring, chunk);
      chunk.request->chunk_done();
    }
  }

  void run(Ring* ring, const Chunk& chunk) noexcept {
    try {
      if (ring == nullptr || !ring->usable()) return run_chunk_blocking(chunk);
      if (!run_chunk_uring(*ring, chunk, options)) {
        ring->mark_broken();
        FATHOM_LOG(Warning,
                   "offload: an io_uring ring stopped working; its I/O thread goes on with blocking "
                   "pread/pwrite");
      }
    } catch (const std::exception& e) {  // e.g. bad_alloc: report it through the ticket
      // The ring may hold completions nobody will reap in order; never read it again.
      if (ring != nullptr) ring->mark_broken();
      chunk.request->fail(concat("I/O on '", chunk.request->path, "' failed: ", e.what()));
    }
  }
};

IoEngine::IoEngine(AioOptions options, IoBackend backend)
    : options_(options), counters_(std::make_shared<detail::IoCounterState>()) {
  check_options(options_);
  auto workers = std::make_unique<Workers>(options_);
  const IoBackend requested = requested_backend(backend);
  backend_ = IoBackend::Threads;
  if (requested != IoBackend::Threads) {
    int error = 0;
    for (int64_t i = 0; i < options_.intra_op_parallelism && error == 0; ++i) {
      auto ring = std::make_unique<Ring>();
      error = ring->open(options_.queue_depth);
      if (error == 0) workers->rings.push_back(std::move(ring));
    }
    const std::string why = io_faults().refuse_io_uring
                                ? std::string("refused by the fault injection, FATHOM_IO_FAULTS or set_io_faults")
                                : std::string(std::strerror(error));
    if (error == 0) {
      backend_ = IoBackend::IoUring;
    } else if (requested == IoBackend::IoUring) {
      FATHOM_FAIL("the io_uring I/O backend was requested",
                  backend == IoBackend::Auto ? " (by FATHOM_AIO_BACKEND=io_uring)" : "",
                  " but io_uring cannot be set up: ", why,
                  "; allow io_uring (kernel.io_uring_disabled=0; under Docker a seccomp profile that permits "
                  "io_uring_setup) or use the threads backend (FATHOM_AIO_BACKEND=threads)");
    } else if (error == EPERM || error == ENOSYS || error == EACCES) {
      workers->rings.clear();
      if (!fallback_warned().exchange(true))
        FATHOM_LOG(Warning, "offload: io_uring is unavailable (", why,
                   "), so NVMe offload I/O uses blocking threads (pread/pwrite: one request in flight per "
                   "thread instead of aio.queue_depth). Allow io_uring (kernel.io_uring_disabled=0; under Docker a "
                   "seccomp profile that permits io_uring_setup) for full speed, or set "
                   "FATHOM_AIO_BACKEND=threads to choose this and silence this warning");
    } else {
      FATHOM_FAIL("cannot set up io_uring with ", options_.queue_depth, " entries: ", why,
                  "; lower aio.queue_depth or use the threads backend (FATHOM_AIO_BACKEND=threads)");
    }
  }
  workers->start();
  workers_ = std::move(workers);
}

IoEngine::~IoEngine() = default;  // ~Workers drains and joins

IoTicket IoEngine::write(const DirectFile& file, int64_t offset, const void* data, int64_t bytes) {
  // The engine only reads from `data` on a write; one code path serves both directions.
  return submit(true, file, offset, const_cast<void*>(data), bytes);
}

IoTicket IoEngine::read(const DirectFile& file, int64_t offset, void* data, int64_t bytes) {
  return submit(false, file, offset, data, bytes);
}

IoTicket IoEngine::submit(bool is_write, const DirectFile& file, int64_t offset, void* data, int64_t bytes) {
  const char* op = is_write ? "write" : "read";
  const int64_t alignment = file.alignment();
  FATHOM_CHECK(bytes >= 0 && offset >= 0, "IoEngine::", op, " of ", bytes, " bytes at offset ", offset, " of '",
               file.path(), "': size and offset must be >= 0");
  FATHOM_CHECK(reinterpret_cast<uintptr_t>(data) % static_cast<uintptr_t>(alignment) == 0, "IoEngine::", op, " of ",
               bytes, " bytes at offset ", offset, " of '", file.path(), "': the buffer address ", data,
               " is not a multiple of the file's direct-I/O alignment ", alignment,
               "; allocate it with std::aligned_alloc(", alignment, ", ...) or from the host tier");
  FATHOM_CHECK(offset % alignment == 0, "IoEngine::", op, " of ", bytes, " bytes at offset ", offset, " of '",
               file.path(), "': the offset ", offset, " is not a multiple of the file's direct-I/O alignment ",
               alignment, "; place data at offsets rounded up with DirectFile::round_up");
  FATHOM_CHECK(bytes % alignment == 0, "IoEngine::", op, " of ", bytes, " bytes at offset ", offset, " of '",
               file.path(), "': the size ", bytes, " is not a multiple of the file's direct-I/O alignment ", alignment,
               "; pad the buffer and round the size up with DirectFile::round_up");

  auto request = std::make_shared<IoRequest>();
  request->is_write = is_write;
  request->fd = file.fd();
  request->path = file.path();
  request->keep_open = file.handle_;
  request->bytes = bytes;
  request->counters = counters_;
  counters_->requests.fetch_add(1, std::memory_order_relaxed);
  if (bytes == 0) return IoTicket(std::move(request));

  const int64_t piece = DirectFile::round_up(options_.block_size, alignment);
  const int64_t pieces = (bytes + piece - 1) / piece;
  const int64_t chunks = std::min(pieces, options_.intra_op_parallelism);
  request->chunks_left = chunks;
  {
    std::lock_guard<std::mutex> lock(workers_->mutex);
    for (int64_t i = 0; i < chunks; ++i) {
      const int64_t first = i * pieces / chunks * piece;
      const int64_t last = std::min((i + 1) * pieces / chunks * piece, bytes);
      workers_->queue.push_back(Chunk{request, offset + first, static_cast<char*>(data) + first, last - first, piece});
    }
  }
  workers_->work_ready.notify_all();
  return IoTicket(std::move(request));
}

IoEngine::Counters IoEngine::counters() const {
  Counters c;
  c.bytes_read = counters_->bytes_read.load();
  c.bytes_written = counters_->bytes_written.load();
  c.requests = counters_->requests.load();
  c.wait_seconds = static_cast<double>(counters_->wait_nanos.load()) * 1e-9;
  return c;
}

void IoEngine::reset_counters() {
  counters_->bytes_read.store(0);
  counters_->bytes_written.store(0);
  counters_->requests.store(0);
  counters_->wait_nanos.store(0);
}

void IoTicket::wait() {
  if (!request_) return;
  IoRequest& r = *request_;
  const auto start = std::chrono::steady_clock::now();
  std::string error;
  {
    std::unique_lock<std::mutex> lock(r.mutex);
    r.finished.wait(lock, [&] { return r.chunks_left == 0; });
    error = r.error;
  }
  const auto waited = std::chrono::steady_clock::now() - start;
  r.counters->wait_nanos.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(waited).count(),
                                   std::memory_order_relaxed);
  if (!error.empty()) FATHOM_FAIL(error);
}

bool IoTicket::done() const {
  if (!request_) return true;
  std::lock_guard<std::mutex> lock(request_->mutex);
  return request_->chunks_left == 0;
}

int64_t IoTicket::bytes() const { return request_ ? request_->bytes : 0; }

}  // namespace fathom::offload
