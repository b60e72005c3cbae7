#pragma once
// The monitors a config enables ("tensorboard", "csv_monitor"): fathom::initialize builds them
// here, so the engine sees only the Monitor interface (engine/monitor/monitor.h) and never the
// config.

#include <memory>
#include <string>

#include "engine/config/config.h"
#include "engine/monitor/monitor.h"

namespace fathom {

// The monitors the config enables, writing into output_path/job_name; null when none is. Only the
// job's first rank should write (others pass write = false and get null).
std::unique_ptr<Monitor> make_monitors(const Config& config, bool write);

// output_path/job_name: DeepSpeed's folder for a monitor's files ("" output_path: the working
// directory's, as DeepSpeed's default).
std::string monitor_folder(const MonitorConfig& config);

}  // namespace fathom
