#pragma once
// DeepSpeed's TensorBoard monitor, written by Fathom itself (engine/monitor/tensorboard_events.h): one
// events.out.tfevents.<time>.<host> file per run in output_path/job_name, scalars flushed after
// every write so a live `tensorboard --logdir` sees them.

#include <cstdio>
#include <string>

#include "engine/monitor/monitor.h"

namespace fathom {

class TensorBoardMonitor : public Monitor {
 public:
  explicit TensorBoardMonitor(const std::string& folder);
  ~TensorBoardMonitor() override;
  TensorBoardMonitor(const TensorBoardMonitor&) = delete;
  TensorBoardMonitor& operator=(const TensorBoardMonitor&) = delete;

  void write_events(const std::vector<MonitorEvent>& events) override;
  const std::string& path() const { return path_; }

 private:
  void write(const std::string& event);
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace fathom
