#pragma once
// What a training state's swap files (offload nvme) moved: a plain record for the step report
// (engine/monitor/step_report.h), which needs nothing else of ZeRO, and the counters that give it.

#include <cstdint>

namespace fathom::zero {

struct IoTotals {
  int64_t bytes_read = 0, bytes_written = 0;
  double wait_seconds = 0;  // time training waited for I/O
};

// A state hands these out (TrainingState::io_counters()) only when it has swap files.
class IoCounters {
 public:
  virtual ~IoCounters() = default;
  // This rank's I/O so far, over all of the state's I/O engines.
  virtual IoTotals io_totals() const = 0;
};

}  // namespace fathom::zero
