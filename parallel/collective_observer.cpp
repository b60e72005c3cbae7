#include "parallel/collective_observer.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

namespace fathom::parallel {
namespace {
std::mutex observers_mutex;
std::vector<std::shared_ptr<CollectiveObserver>>& observers() {
  static std::vector<std::shared_ptr<CollectiveObserver>> list;
  return list;
}
std::atomic<int> observer_count{0};
}  // namespace

int64_t message_bytes(const Collective& c) {
  switch (c.kind) {
    case CollectiveKind::ReduceScatter:
    case CollectiveKind::ReduceScatterV:
    case CollectiveKind::AllToAll:
    case CollectiveKind::Send: return static_cast<int64_t>(c.input.nbytes());
    case CollectiveKind::AllGather:
    case CollectiveKind::AllGatherV:
    case CollectiveKind::AllReduce:
    case CollectiveKind::Broadcast:
    case CollectiveKind::Recv: return static_cast<int64_t>(c.output.nbytes());
    case CollectiveKind::Barrier: return 0;
  }
  return 0;
}

double bus_bandwidth_factor(CollectiveKind kind, int n) {
  const double ranks = std::max(1, n);
  switch (kind) {
    case CollectiveKind::AllReduce: return 2.0 * (ranks - 1) / ranks;
    case CollectiveKind::ReduceScatter:
    case CollectiveKind::ReduceScatterV:
    case CollectiveKind::AllGather:
    case CollectiveKind::AllGatherV:
    case CollectiveKind::AllToAll: return (ranks - 1) / ranks;
    case CollectiveKind::Broadcast:
    case CollectiveKind::Send:
    case CollectiveKind::Recv: return 1.0;
    case CollectiveKind::Barrier: return 0.0;
  }
  return 0.0;
}

CollectiveObservation::CollectiveObservation(std::shared_ptr<CollectiveObserver> observer)
    : observer_(std::move(observer)) {
  std::lock_guard lock(observers_mutex);
  observers().push_back(observer_);
  observer_count.store(static_cast<int>(observers().size()), std::memory_order_relaxed);
}

CollectiveObservation::~CollectiveObservation() {
  std::lock_guard lock(observers_mutex);
  auto& list = observers();
  list.erase(std::find(list.begin(), list.end(), observer_));
  observer_count.store(static_cast<int>(list.size()), std::memory_order_relaxed);
}

bool collectives_observed() { return observer_count.load(std::memory_order_relaxed) > 0; }

void report_collective(const Collective& c, const std::string& group, int group_size,
                       std::chrono::steady_clock::time_point begin, std::chrono::steady_clock::time_point end) {
  if (!collectives_observed()) return;
  CollectiveSpan span;
  span.kind = c.kind;
  const Tensor& payload = c.input.defined() ? c.input : c.output;
  if (payload.defined()) span.dtype = payload.dtype();
  span.bytes = message_bytes(c);
  span.group_size = group_size;
  span.group = group;
  span.sequence = c.sequence;
  span.begin = begin;
  span.end = end;
  std::vector<std::shared_ptr<CollectiveObserver>> copy;
  {
    std::lock_guard lock(observers_mutex);
    copy = observers();
  }
  for (const auto& observer : copy) observer->on_collective(span);
}

CompletionReport::CompletionReport(const Collective& collective, const Communicator& communicator) {
  if (!collectives_observed()) return;
  collective_ = std::make_unique<Collective>(collective);
  group_ = communicator.name();
  group_size_ = communicator.size();
  issued_ = std::chrono::steady_clock::now();
}

void CompletionReport::completed() {
  if (!collective_) return;
  report_collective(*collective_, group_, group_size_, issued_, std::chrono::steady_clock::now());
  collective_.reset();
}

}  // namespace fathom::parallel
