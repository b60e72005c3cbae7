#include "engine/monitor/csv_monitor.h"

#include "engine/monitor/output_folder.h"

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/json_writer.h"

namespace fathom {

CsvMonitor::CsvMonitor(std::string folder) : folder_(std::move(folder)) {
  create_output_folder(folder_, "csv_monitor", "output_path");
}

std::string CsvMonitor::file_name(const std::string& tag) {
  std::string name = tag;
  for (char& c : name)
    if (c == '/') c = '_';
  return name + ".csv";
}

void CsvMonitor::write_events(const std::vector<MonitorEvent>& events) {
  for (const MonitorEvent& event : events) {
    const std::filesystem::path path = std::filesystem::path(folder_) / file_name(event.tag);
    const bool fresh = !std::filesystem::exists(path) || std::filesystem::file_size(path) == 0;
    std::ofstream out(path, std::ios::app);
    FATHOM_CHECK(out, "csv_monitor: cannot write ", path.string());
    if (fresh) out << "step," << event.tag.substr(event.tag.rfind('/') + 1) << "\n";
    out << event.step << "," << json_number(event.value) << "\n";
  }
}

}  // namespace fathom
