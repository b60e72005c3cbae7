#pragma once
// The `fathom` launcher's command line: `fathom [options] program [args...]`. The first
// argument that is not an option (or the one after `--`) starts the program; it and everything
// after it go to the ranks unchanged.

#include <optional>
#include <string>
#include <vector>

#include "launcher/host_selection.h"

namespace fathom::launcher {

inline constexpr int kDefaultMasterPort = 29500;

struct LauncherOptions {
  std::string hostfile;            // empty: run on this machine
  SelectionOptions selection;      // --include/--exclude/--num_nodes/--num_procs
  std::string master_addr;         // empty: the first selected host
  int master_port = kDefaultMasterPort;
  std::vector<std::string> launcher_args;  // --launcher_args split on whitespace (repeats append)
  int stop_timeout = 30;  // --stop_timeout: seconds the ranks get after SIGTERM to save (launcher/run_process.h)
  int max_restarts = 0;   // --max_restarts: relaunch a failed job up to this many times
  int min_procs = 0;      // --min_procs: on a restart, go on with the hosts still reachable if they have this many slots
  bool dry_run = false;
  bool help = false;
  std::vector<std::string> program;  // the program and its arguments
};

// `args` excludes argv[0]. Throws naming the bad option or value.
LauncherOptions parse_launcher_options(const std::vector<std::string>& args);
const char* launcher_usage();

}  // namespace fathom::launcher
