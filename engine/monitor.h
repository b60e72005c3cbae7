#pragma once
// Monitors: where the engine writes its training curves, DeepSpeed's "tensorboard" and
// "csv_monitor" sections (docs/monitoring.md). Events are (tag, value, step) with DeepSpeed's tags
// and x-axis — the global samples seen: Train/Samples/train_loss, Train/Samples/lr, ...
// Rank 0 writes them at each accumulation boundary; a program adds its own (fathom-train its
// validation loss and tokens/s).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/config.h"

namespace fathom {

struct MonitorEvent {
  std::string tag;  // "Train/Samples/train_loss"
  double value = 0;
  int64_t step = 0;  // DeepSpeed's x-axis: global samples
};

class Monitor {
 public:
  virtual ~Monitor() = default;
  virtual void write_events(const std::vector<MonitorEvent>& events) = 0;
};

// The monitors the config enables, writing into output_path/job_name; null when none is. Only the
// job's first rank should write (others pass write = false and get null).
std::unique_ptr<Monitor> make_monitors(const Config& config, bool write);

// output_path/job_name: DeepSpeed's folder for a monitor's files ("" output_path: the working
// directory's, as DeepSpeed's default).
std::string monitor_folder(const MonitorConfig& config);

}  // namespace fathom
