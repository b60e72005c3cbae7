#pragma once
// Monitors: where the engine writes its training curves, DeepSpeed's "tensorboard" and
// "csv_monitor" sections (docs/monitoring.md). Events are (tag, value, step) with DeepSpeed's tags
// and x-axis — the global samples seen: Train/Samples/train_loss, Train/Samples/lr, ...
// Rank 0 writes them at each accumulation boundary; a program adds its own (fathom-train its
// validation loss and tokens/s). The config's monitors: engine/monitor/make_monitors.h.

#include <cstdint>
#include <string>
#include <vector>

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

}  // namespace fathom
