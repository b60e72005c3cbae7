#include "engine/monitor/tensorboard_monitor.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "core/error.h"
#include "engine/monitor/output_folder.h"
#include "engine/monitor/tensorboard_events.h"

namespace fathom {
namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

TensorBoardMonitor::TensorBoardMonitor(const std::string& folder) {
  create_output_folder(folder, "tensorboard", "output_path");
  char host[256] = "localhost";
  gethostname(host, sizeof host - 1);
  const double start = now_seconds();
  // TensorBoard's own name, with the pid so that two runs in one second do not share a file.
  path_ = (std::filesystem::path(folder) / ("events.out.tfevents." + std::to_string(static_cast<int64_t>(start)) + "." +
                                            host + "." + std::to_string(getpid())))
              .string();
  file_ = std::fopen(path_.c_str(), "wb");
  FATHOM_CHECK(file_ != nullptr, "tensorboard: cannot write ", path_);
  write(file_version_event(start));
}

TensorBoardMonitor::~TensorBoardMonitor() {
  if (file_) std::fclose(file_);
}

void TensorBoardMonitor::write(const std::string& event) {
  const std::string record = tfrecord(event);
  FATHOM_CHECK(std::fwrite(record.data(), 1, record.size(), file_) == record.size(), "tensorboard: writing ", path_,
               " failed (disk full?)");
}

void TensorBoardMonitor::write_events(const std::vector<MonitorEvent>& events) {
  const double wall_time = now_seconds();
  for (const MonitorEvent& event : events)
    write(scalar_event(wall_time, event.step, event.tag, static_cast<float>(event.value)));
  std::fflush(file_);
}

}  // namespace fathom
