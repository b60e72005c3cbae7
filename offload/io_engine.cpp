#include "offload/io_engine.h"

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
#include "offload/io_chunks.h"
#include "offload/io_faults.h"
#include "offload/io_request.h"

namespace fathom::offload {
namespace {

using detail::Chunk;
using detail::IoRequest;
using detail::IoRing;
using ::fathom::detail::concat;

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
  std::vector<std::unique_ptr<IoRing>> rings;  // one per thread on io_uring, none on Threads
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

  void loop(IoRing* ring) {
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

  void run(IoRing* ring, const Chunk& chunk) noexcept {
    try {
      if (ring == nullptr || !ring->usable()) return detail::run_chunk_blocking(chunk);
      if (!ring->run(chunk, options)) {
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
      auto ring = std::make_unique<IoRing>();
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
