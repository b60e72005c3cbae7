#pragma once
// From the parsed command line and what the launcher found on its machine to the job to run.
// Kept apart from main() so the whole decision is a pure function the tests can call.

#include <optional>
#include <vector>

#include "launcher/hostfile.h"
#include "launcher/launch_command.h"
#include "launcher/launcher_options.h"
#include "launcher/rank_environment.h"

namespace fathom::launcher {

struct LaunchContext {
  std::vector<EnvVar> environment;         // the launcher's environment
  std::vector<EnvVar> env_file;            // ./.fathom_env, parsed (empty when absent)
  std::optional<std::vector<Host>> hosts;  // the hostfile, parsed, when --hostfile was given
  bool as_root = false;
  int local_cores = 1;
};

// Without a hostfile the job runs on `localhost`, which has --num_procs slots (default 1);
// --include/--exclude pick among them (and then pin CUDA_VISIBLE_DEVICES), and --num_nodes
// may only be 1. With a hostfile, every selected host gets one app context and pinned devices.
LaunchSpec plan_launch(const LauncherOptions& options, const LaunchContext& context);

}  // namespace fathom::launcher
