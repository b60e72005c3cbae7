#pragma once
// The comms logger (DeepSpeed's "comms_logger" section): per collective, group and message size
// the count, total and mean latency, and the algorithmic and bus bandwidth, with nccl-tests'
// definitions (parallel/collective_observer.h): algbw = bytes / mean latency, busbw = algbw times
// the op's factor for the size of the group the op actually ran on. DeepSpeed's own logger
// differs: it takes the world size for n whatever the group, and 2·size/t for an all-reduce's
// algbw; its Gbps are bits, these GB/s are bytes (10^9), as nccl-tests prints them.
//
//   auto logger = std::make_shared<CommsLogger>(options);
//   CollectiveObservation watching(logger);   // every communicator of the process, from here
//   ...
//   std::cout << logger->summary();

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "parallel/collective_observer.h"

namespace fathom::parallel {

struct CommsLoggerOptions {
  bool verbose = false;   // a line per collective as it completes (through `print`)
  bool prof_all = true;   // every op; false: only those in prof_ops
  bool debug = false;     // verbose lines also name the collective's number and dtype
  std::vector<std::string> prof_ops;  // "all_reduce", ...; "reduce_scatter" covers reduce_scatter_v too
};

struct CommsRow {
  std::string op, group;
  int group_size = 1;
  int64_t bytes = 0;  // the message size
  int64_t count = 0;
  double total_ms = 0;
  double mean_ms() const { return count ? total_ms / static_cast<double>(count) : 0.0; }
  double algbw_gbps() const;  // GB/s: bytes / mean latency
  double busbw_gbps() const;
};

class CommsLogger final : public CollectiveObserver {
 public:
  using Print = std::function<void(const std::string& line)>;
  // `print` gets the verbose lines (default: the log, at Info).
  explicit CommsLogger(CommsLoggerOptions options, Print print = nullptr);
  void on_collective(const CollectiveSpan& span) override;

  // By op, then group, then message size.
  std::vector<CommsRow> rows() const;
  // The table: "op | group | message size | count | total latency (ms) | mean latency (ms) |
  // algbw (GB/s) | busbw (GB/s)", one row per op, group and message size.
  std::string summary() const;
  void reset();
  bool logs(CollectiveKind kind) const;  // per prof_all / prof_ops

 private:
  CommsLoggerOptions options_;
  Print print_;
  mutable std::mutex mutex_;
  std::map<std::tuple<std::string, std::string, int64_t>, CommsRow> rows_;
};

}  // namespace fathom::parallel
