#include "engine/monitor/make_monitors.h"

#include <filesystem>

#include "engine/monitor/csv_monitor.h"
#include "engine/monitor/tensorboard_monitor.h"

namespace fathom {
namespace {

class MonitorList : public Monitor {
 public:
  void add(std::unique_ptr<Monitor> monitor) { monitors_.push_back(std::move(monitor)); }
  bool empty() const { return monitors_.empty(); }
  void write_events(const std::vector<MonitorEvent>& events) override {
    for (const auto& monitor : monitors_) monitor->write_events(events);
  }

 private:
  std::vector<std::unique_ptr<Monitor>> monitors_;
};

}  // namespace

std::string monitor_folder(const MonitorConfig& config) {
  return (std::filesystem::path(config.output_path) / config.job_name).string();
}

std::unique_ptr<Monitor> make_monitors(const Config& config, bool write) {
  if (!write) return nullptr;
  auto list = std::make_unique<MonitorList>();
  if (config.tensorboard.enabled) list->add(std::make_unique<TensorBoardMonitor>(monitor_folder(config.tensorboard)));
  if (config.csv_monitor.enabled) list->add(std::make_unique<CsvMonitor>(monitor_folder(config.csv_monitor)));
  if (list->empty()) return nullptr;
  return list;
}

}  // namespace fathom
