#pragma once
// The mpirun command line for a job, and its shell-quoted form for --dry-run.
//
// Layout (Open MPI 4.1):
//   mpirun [--allow-run-as-root] [--oversubscribe] --bind-to none
//          -np K [--host HOST:K] -x NAME=VALUE... [-x CUDA_VISIBLE_DEVICES=...] LAUNCHER_ARGS PROGRAM ARGS
//        [ : -np K --host HOST2:K ... ]
// Only options that Open MPI treats as job-wide sit before the first app context. -x is per app
// context (an -x before the first ':' reaches the first host only), so the exports, and
// --launcher_args with them, are repeated in every context.

#include <string>
#include <string_view>
#include <vector>

#include "launcher/host_selection.h"
#include "launcher/rank_environment.h"

namespace fathom::launcher {

struct LaunchSpec {
  std::string mpirun = "mpirun";
  bool as_root = false;  // adds --allow-run-as-root
  // No hostfile: one app context on this machine without --host; --oversubscribe when the
  // ranks outnumber local_cores (the cores mpirun counts as slots).
  bool local = true;
  int local_cores = 1;
  // Each host's slot indices become its CUDA_VISIBLE_DEVICES. Always on with a hostfile; on
  // local runs only when --include/--exclude picked the slots.
  bool pin_devices = false;
  std::vector<HostSlots> hosts;  // local runs: one entry (localhost)
  std::vector<EnvVar> environment;
  std::vector<std::string> launcher_args;
  std::vector<std::string> program;  // the program and its arguments
};

std::vector<std::string> mpirun_command(const LaunchSpec& spec);

// `word` as one POSIX shell word: unchanged when it has no special characters, otherwise in
// single quotes (an embedded ' becomes '\'').
std::string shell_quote(std::string_view word);
// The words quoted and joined by spaces: a line a shell runs as exactly `words`.
std::string shell_command_line(const std::vector<std::string>& words);

}  // namespace fathom::launcher
