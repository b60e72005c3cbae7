#pragma once
// A read or write as the I/O engine's workers see it (offload/io_engine.h): the request that a
// ticket waits on, and the contiguous part of it one worker moves (a chunk). Internal to offload/.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

namespace fathom::offload::detail {

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


// Part of one request for one worker: a contiguous run of its pieces.
struct Chunk {
  std::shared_ptr<IoRequest> request;
  int64_t offset = 0;
  char* data = nullptr;
  int64_t bytes = 0;
  int64_t piece_bytes = 0;
};


}  // namespace fathom::offload::detail
