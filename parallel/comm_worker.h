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

namespace fathom::parallel {

// FATHOM_COMM_TIMEOUT in seconds (default 1800, DeepSpeed's 30 minutes); a malformed value
// is an error naming the variable.
std::chrono::duration<double> collective_timeout();

class CommWorker {
 public:
  using Task = std::function<void()>;
  // What an operation is, for the timeout report; called only when one is due.
  using Describe = std::function<std::string()>;
  // `name` labels reports: the communicator's name and backend.
  explicit CommWorker(std::string name);
  // Runs what is queued, then stops: every rank must complete the collectives it issued.
  ~CommWorker();
  CommWorker(const CommWorker&) = delete;
  CommWorker& operator=(const CommWorker&) = delete;

  // Queues `task`; its exception, if any, is rethrown by the handle's wait().
  WorkHandle submit(Describe describe, Task task);
  // For a caller about to wait anyway: when nothing is queued or running, runs `task` on the
  // calling thread (no hand-off to the worker and back, which costs two thread wake-ups);
  // otherwise queues it behind the others. Either way the order of operations is kept.
  WorkHandle run_or_submit(Describe describe, Task task);
  // Runs `task` on the worker and waits for it (for operations that must not overlap the
  // worker's collectives, such as splitting the communicator).
  void run(Describe describe, Task task) { run_or_submit(std::move(describe), std::move(task))->wait(); }

 private:
  struct Item;
  void work_loop();
  void execute(Item& item);  // runs it, then marks the worker idle and completes the handle
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

}  // namespace fathom::parallel
