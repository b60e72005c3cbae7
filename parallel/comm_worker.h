#pragma once
// One communicator's progress thread: runs its operations one at a time in issue order (so
// every rank pairs them up the same way) while the caller computes, and a watchdog that ends
// the job when one runs past FATHOM_COMM_TIMEOUT instead of letting it hang.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "parallel/communicator.h"

namespace fathom::distributed {

// FATHOM_COMM_TIMEOUT in seconds (default 1800, DeepSpeed's 30 minutes); a malformed value
// is an error naming the variable.
std::chrono::duration<double> collective_timeout();

class CommWorker {
 public:
  using Task = std::function<void()>;
  // `name` labels reports: the communicator's name and backend.
  explicit CommWorker(std::string name);
  // Runs what is queued, then stops: every rank must complete the collectives it issued.
  ~CommWorker();
  CommWorker(const CommWorker&) = delete;
  CommWorker& operator=(const CommWorker&) = delete;

  // Queues `task`; its exception, if any, is rethrown by the handle's wait().
  WorkHandle submit(std::string description, Task task);
  // Runs `task` on the worker and waits for it (for operations that must not overlap the
  // worker's collectives, such as splitting the communicator).
  void run(std::string description, Task task) { submit(std::move(description), std::move(task))->wait(); }

 private:
  struct Item;
  void work_loop();
  void watch_loop();

  std::string name_;
  std::chrono::duration<double> timeout_;
  std::mutex mutex_;
  std::condition_variable queued_, watch_;
  std::deque<std::shared_ptr<Item>> queue_;
  std::shared_ptr<Item> running_;
  std::chrono::steady_clock::time_point running_since_;
  bool stopping_ = false;
  std::thread worker_, watchdog_;
};

}  // namespace fathom::distributed
