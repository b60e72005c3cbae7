#pragma once
// DeepSpeed's CSV monitor: one file per tag in output_path/job_name, the tag's '/' as '_'
// (Train_Samples_train_loss.csv), a header "step,<last part of the tag>" and one "step,value" row
// per event. A resumed run appends to the same files without a second header (DeepSpeed writes
// the header again).

#include <map>
#include <string>

#include "engine/monitor/monitor.h"

namespace fathom {

class CsvMonitor : public Monitor {
 public:
  explicit CsvMonitor(std::string folder);
  void write_events(const std::vector<MonitorEvent>& events) override;
  static std::string file_name(const std::string& tag);

 private:
  std::string folder_;
};

}  // namespace fathom
