#include "core/simt/streams.h"

#include <algorithm>

#include "core/simt/device_memory.h"
#include "core/simt/submit.h"

namespace fathom::simt {
namespace {

struct Registry {
  std::shared_ptr<StreamQueue> legacy = std::make_shared<StreamQueue>();
  std::vector<std::weak_ptr<StreamQueue>> streams;  // in creation order
  std::exception_ptr kept_failure;
};
// Never destroyed: device memory may be freed (and streams drained) by static destructors.
Registry& registry() {
  static auto* r = new Registry();
  return *r;
}

// Counts an item as completed even when its work throws: it is gone from the queue either way.
struct CompleteOnExit {
  StreamQueue& queue;
  ~CompleteOnExit() { ++queue.completed; }
};

void run_front(StreamQueue& queue) {
  StreamQueue::Item item = std::move(queue.items.front());
  queue.items.pop_front();
  CompleteOnExit complete{queue};
  for (const StreamQueue::Wait& wait : item.waits) run_until(*wait.queue, wait.position);
  if (item.work) item.work();
}

}  // namespace

std::recursive_mutex& runtime_mutex() {
  static auto* mutex = new std::recursive_mutex();
  return *mutex;
}

void run_until(StreamQueue& queue, uint64_t position) {
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  while (queue.completed < position && !queue.items.empty()) run_front(queue);
}

void run_one(StreamQueue& queue) {
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  if (!queue.items.empty()) run_front(queue);
}

void run_everything() {
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  Registry& r = registry();
  std::vector<std::shared_ptr<StreamQueue>> queues;
  for (auto it = r.streams.rbegin(); it != r.streams.rend(); ++it)
    if (auto queue = it->lock()) queues.push_back(std::move(queue));
  queues.push_back(r.legacy);
  for (const auto& queue : queues) run_until(*queue, queue->submitted);
}

void enqueue(const std::shared_ptr<StreamQueue>& queue, std::function<void()> work,
             std::vector<StreamQueue::Wait> waits) {
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  Registry& r = registry();
  StreamQueue::Item item{std::move(waits), nullptr};
  if (queue == r.legacy) {
    for (const auto& weak : r.streams)
      if (auto other = weak.lock(); other && other->blocking && other->submitted > other->completed)
        item.waits.push_back({other, other->submitted});
  } else if (queue->blocking && r.legacy->submitted > r.legacy->completed) {
    item.waits.push_back({r.legacy, r.legacy->submitted});
  }
  item.work = std::move(work);
  queue->items.push_back(std::move(item));
  ++queue->submitted;
}

std::shared_ptr<StreamQueue> legacy_queue() { return registry().legacy; }

std::shared_ptr<StreamQueue> create_queue(bool blocking) {
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  auto queue = std::make_shared<StreamQueue>();
  queue->blocking = blocking;
  auto& streams = registry().streams;
  std::erase_if(streams, [](const std::weak_ptr<StreamQueue>& w) { return w.expired(); });
  streams.push_back(queue);
  return queue;
}

void retire_queue(const std::shared_ptr<StreamQueue>& queue) {
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  run_until(*queue, queue->submitted);
}

void keep_failure(std::exception_ptr failure) {
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  if (!registry().kept_failure) registry().kept_failure = std::move(failure);
}

void rethrow_kept_failure() {
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  if (auto failure = std::exchange(registry().kept_failure, nullptr)) std::rethrow_exception(failure);
}

// The emulated runtime's half of core/simt/submit.h.
void submit(void* stream, std::function<void()> work) {
  // nullptr, cudaStreamLegacy (1) and cudaStreamPerThread (2) all name the legacy default stream.
  const bool legacy = reinterpret_cast<uintptr_t>(stream) <= 2;
  enqueue(legacy ? legacy_queue() : static_cast<CUstream_st*>(stream)->queue, std::move(work));
}

bool is_device_address(const void* pointer) { return pointer == nullptr || find_allocation(pointer).has_value(); }

}  // namespace fathom::simt
