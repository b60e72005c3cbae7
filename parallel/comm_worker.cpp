#include "parallel/comm_worker.h"

#include <cstdlib>
#include <string>

#include "core/error.h"
#include "parallel/job_abort.h"

namespace fathom::parallel {

std::chrono::duration<double> collective_timeout() {
  const char* text = std::getenv("FATHOM_COMM_TIMEOUT");
  if (!text || !*text) return std::chrono::duration<double>(1800.0);
  char* end = nullptr;
  const double seconds = std::strtod(text, &end);
  FATHOM_CHECK(end && *end == '\0' && seconds > 0, "FATHOM_COMM_TIMEOUT=\"", text,
               "\" is not a positive number of seconds (e.g. FATHOM_COMM_TIMEOUT=600)");
  return std::chrono::duration<double>(seconds);
}

// A queued operation and the handle its caller waits on.
struct CommWorker::Item final : Work {
  Describe describe;
  Task task;
  std::mutex mutex;
  std::condition_variable finished;
  bool done = false;
  std::exception_ptr error;

  void wait() override {
    std::unique_lock lock(mutex);
    finished.wait(lock, [&] { return done; });
    if (error) std::rethrow_exception(error);
  }
  bool test() override {
    std::lock_guard lock(mutex);
    return done;
  }
  void complete(std::exception_ptr failure) {
    {
      std::lock_guard lock(mutex);
      done = true;
      error = std::move(failure);
    }
    finished.notify_all();
  }
};

CommWorker::CommWorker(std::string name) : name_(std::move(name)), timeout_(collective_timeout()) {
  worker_ = std::thread([this] { work_loop(); });
  watchdog_ = std::thread([this] { watch_loop(); });
}

CommWorker::~CommWorker() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  queued_.notify_all();
  watch_.notify_all();
  worker_.join();
  watchdog_.join();
}

WorkHandle CommWorker::submit(Describe describe, Task task) {
  auto item = std::make_shared<Item>();
  item->describe = std::move(describe);
  item->task = std::move(task);
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(item);
  }
  queued_.notify_one();
  return item;
}

WorkHandle CommWorker::run_or_submit(Describe describe, Task task) {
  auto item = std::make_shared<Item>();
  item->describe = std::move(describe);
  item->task = std::move(task);
  {
    std::lock_guard lock(mutex_);
    if (running_ || !queue_.empty()) {
      queue_.push_back(item);
      queued_.notify_one();
      return item;
    }
    running_ = item;  // the worker waits while an inline operation runs; the watchdog sees it
    running_since_ = std::chrono::steady_clock::now();
  }
  execute(*item);
  return item;
}

void CommWorker::execute(Item& item) {
  std::exception_ptr failure;
  try {
    item.task();
  } catch (...) {
    failure = std::current_exception();
  }
  bool more = false;
  {
    std::lock_guard lock(mutex_);
    running_.reset();
    more = !queue_.empty();
  }
  // What the operation captured (its tensors) is released before the caller sees completion,
  // so memory accounting after a wait is exact.
  item.task = nullptr;
  item.describe = nullptr;
  if (more) queued_.notify_one();  // operations queued during an inline one may start now
  item.complete(failure);
}

void CommWorker::work_loop() {
  for (;;) {
    std::shared_ptr<Item> item;
    {
      std::unique_lock lock(mutex_);
      queued_.wait(lock, [&] { return (stopping_ && !running_) || (!queue_.empty() && !running_); });
      if (queue_.empty()) return;  // stopping, and everything issued has run
      item = std::move(queue_.front());
      queue_.pop_front();
      running_ = item;
      running_since_ = std::chrono::steady_clock::now();
    }
    execute(*item);
  }
}

void CommWorker::watch_loop() {
  // Polls a few times per timeout period (at least once a second) whether the running
  // operation has overstayed; it is not woken per operation, which would cost every
  // collective a thread wake-up.
  const auto poll = std::min(std::chrono::duration<double>(1.0), timeout_ / 8);
  std::unique_lock lock(mutex_);
  while (!stopping_ || running_ || !queue_.empty()) {
    watch_.wait_for(lock, poll);
    if (!running_) continue;
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - running_since_;
    if (elapsed < timeout_) continue;
    abort_job(detail::concat(running_->describe(), " on communicator ", name_, " did not complete within ",
                             timeout_.count(), " s (FATHOM_COMM_TIMEOUT); another rank is probably not issuing "
                             "it, or issues collectives in a different order (FATHOM_COMM_DEBUG=1 checks)"));
  }
}

}  // namespace fathom::parallel
