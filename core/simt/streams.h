#pragma once
// The emulated device's streams and events (CUDA emulation build only): every piece of device
// work — a kernel, a copy, a memset, a GEMM, a host function — is queued on its stream and run
// only when the host has to see its effect: a stream, event or device synchronisation, a copy to
// host memory, or another stream's wait on an event recorded after it. Nothing else runs it, so
// work on independent streams runs in whatever order the host's waits imply and no other: a
// missing event wait between two streams makes the consumer run before the producer, and its
// test fails, where synchronous execution would hide it.
//
// Stream semantics follow CUDA's: the legacy default stream (nullptr, cudaStreamLegacy) waits for
// the work already queued on every blocking stream, and a blocking stream's work waits for the
// legacy stream's; non-blocking streams (cudaStreamNonBlocking, Fathom's own) wait for nothing but
// their events. The per-thread default stream is treated as the legacy one.
//
// One lock guards all of it, and the work runs on the thread that made it run: an emulated
// block's shared memory and race-checker shadow are its OS thread's (core/simt/launch.h), so one
// block runs at a time.

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace fathom::simt {

// What a stream is to its events and waits: its queue and how far it has run. Kept alive by
// events and waits after the stream is destroyed.
struct StreamQueue {
  struct Wait {
    std::shared_ptr<StreamQueue> queue;
    uint64_t position;  // done once queue->completed >= position
  };
  struct Item {
    std::vector<Wait> waits;     // run first
    std::function<void()> work;  // may be empty: an item that only waits
  };
  bool blocking = true;
  std::deque<Item> items;
  uint64_t submitted = 0, completed = 0;
};

// A recorded point: complete once its queue has run that far. `time` is stamped when the
// recording itself runs (for timing events).
struct RecordedPoint {
  std::shared_ptr<StreamQueue> queue;
  uint64_t position = 0;
  std::shared_ptr<std::chrono::steady_clock::time_point> time;
  bool complete() const { return !queue || queue->completed >= position; }
};

std::recursive_mutex& runtime_mutex();

// Runs `queue`'s items, and what they wait for, until it has completed `position` of them.
void run_until(StreamQueue& queue, uint64_t position);
// Runs one more item of `queue` (if it has one); a polling loop thus always gets somewhere.
void run_one(StreamQueue& queue);
// Runs every stream to its end, the newest stream first.
void run_everything();

// Queues `work` on `queue`, to run after `waits` (cudaStreamWaitEvent's) and the implicit waits
// of the legacy default stream.
void enqueue(const std::shared_ptr<StreamQueue>& queue, std::function<void()> work,
             std::vector<StreamQueue::Wait> waits = {});
std::shared_ptr<StreamQueue> legacy_queue();
std::shared_ptr<StreamQueue> create_queue(bool blocking);
void retire_queue(const std::shared_ptr<StreamQueue>& queue);  // runs it to its end first

// A failure of deferred work that had no caller to throw to (it ran inside cudaFree or a
// destructor): kept, and rethrown by the next synchronising call.
void keep_failure(std::exception_ptr failure);
void rethrow_kept_failure();

}  // namespace fathom::simt

// What a cudaStream_t and a cudaEvent_t point to in emulation (the CUDA headers only declare
// these).
struct CUstream_st {
  std::shared_ptr<fathom::simt::StreamQueue> queue;
};
struct CUevent_st {
  bool timing = true;
  fathom::simt::RecordedPoint point;
};
