#pragma once
// Watching the collectives a process runs: what the comms logger (parallel/comms_logger.h) and
// the step timeline (engine/monitor/trace.h) are built on. Backends report each collective's execution
// span as it completes: the MPI backend the time its progress thread spent in the MPI call
// (exact), point-to-point and NCCL collectives from issue until the host sees them complete.
// Nothing is measured while no observer is registered (one relaxed atomic load per collective).

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "parallel/communicator.h"

namespace fathom::parallel {

struct CollectiveSpan {
  CollectiveKind kind = CollectiveKind::Barrier;
  DType dtype = DType::F32;
  // nccl-tests' message size: the whole buffer an op moves — the tensor of an all-reduce,
  // broadcast, send or recv; the input of a reduce-scatter or all-to-all; the output of an all-gather.
  int64_t bytes = 0;
  int group_size = 1;   // the communicator's ranks: what the bus bandwidth depends on
  std::string group;    // the communicator's name ("world", "data", ...)
  int64_t sequence = 0; // the communicator's collective number
  std::chrono::steady_clock::time_point begin, end;
  double seconds() const { return std::chrono::duration<double>(end - begin).count(); }
};

// nccl-tests' message size of a collective (see CollectiveSpan::bytes).
int64_t message_bytes(const Collective& collective);
// nccl-tests' bus-bandwidth factor for a group of n ranks: all-reduce 2(n-1)/n, reduce-scatter,
// all-gather and all-to-all (n-1)/n, broadcast, send and recv 1, barrier 0. busbw = algbw * factor, with
// algbw = bytes / time: the bandwidth each rank's link must carry, comparable across n.
double bus_bandwidth_factor(CollectiveKind kind, int n);

class CollectiveObserver {
 public:
  virtual ~CollectiveObserver() = default;
  // Called on the thread that saw the collective complete (a progress thread, or the caller's):
  // implementations synchronise themselves.
  virtual void on_collective(const CollectiveSpan& span) = 0;
};

// Registers `observer` process-wide for as long as the returned handle lives.
class CollectiveObservation {
 public:
  explicit CollectiveObservation(std::shared_ptr<CollectiveObserver> observer);
  ~CollectiveObservation();
  CollectiveObservation(const CollectiveObservation&) = delete;
  CollectiveObservation& operator=(const CollectiveObservation&) = delete;

 private:
  std::shared_ptr<CollectiveObserver> observer_;
};

// For backends: whether any observer is registered, and the report of a completed collective.
bool collectives_observed();
void report_collective(const Collective& collective, const std::string& group, int group_size,
                       std::chrono::steady_clock::time_point begin, std::chrono::steady_clock::time_point end);

// For backends whose work completes out of sight (point-to-point requests, NCCL's stream):
// reports the collective from its issue until the first time the host sees it complete.
class CompletionReport {
 public:
  CompletionReport(const Collective& collective, const Communicator& communicator);
  void completed();  // reports once; later calls do nothing

 private:
  std::unique_ptr<Collective> collective_;  // null when nothing observes
  std::string group_;
  int group_size_ = 1;
  std::chrono::steady_clock::time_point issued_;
};

}  // namespace fathom::parallel
