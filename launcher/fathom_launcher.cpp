// fathom: starts a training program as an MPI job, like the `deepspeed` launcher, by building
// and running an Open MPI mpirun command line (see docs/launcher.md).
//
//   fathom --hostfile hosts --include worker-0:0,1@worker-1 train --config ds_config.json
//   fathom --num_procs 4 --dry-run ./train
//
// Exit status: the job's (a rank's non-zero exit makes mpirun's non-zero), 128 + signal when
// mpirun is killed by one, 2 for a usage or input error (nothing is launched).
#include <unistd.h>

#include <csignal>

#include <iostream>
#include <string>
#include <vector>

#include "core/error.h"
#include "launcher/cpu_cores.h"
#include "launcher/launch_plan.h"
#include "launcher/run_process.h"

using namespace fathom::launcher;

namespace {

constexpr int kUsageError = 2;

LaunchContext this_machine(const LauncherOptions& options) {
  LaunchContext context;
  context.environment = process_environment();
  context.env_file = read_env_file_if_present(std::string(kEnvFileName));
  if (!options.hostfile.empty()) context.hosts = read_hostfile(options.hostfile);
  context.as_root = geteuid() == 0;
  context.local_cores = allowed_physical_cores();
  return context;
}

void require_mpirun(const LaunchSpec& spec, const std::vector<EnvVar>& environment) {
  const std::string* path = find_variable(environment, "PATH");
  const bool chosen_by_user = find_variable(environment, "FATHOM_MPIRUN") != nullptr;
  FATHOM_CHECK(find_executable(spec.mpirun, path ? *path : "").has_value(), spec.mpirun, " not found",
               spec.mpirun.find('/') == std::string::npos ? " on PATH" : "",
               chosen_by_user ? " (from FATHOM_MPIRUN)" : "; install Open MPI or set FATHOM_MPIRUN to its mpirun");
}

// A missing or non-executable program is named here: Open MPI would exit 131, 132 or 134 for it,
// statuses that read as "killed by signal 3, 4 or 6" under the 128 + signal convention.
void require_program(const std::string& program, const std::vector<EnvVar>& environment) {
  const std::string* path = find_variable(environment, "PATH");
  if (find_executable(program, path ? *path : "")) return;
  const bool exists = program.find('/') != std::string::npos && access(program.c_str(), F_OK) == 0;
  FATHOM_FAIL(program, exists ? ": not executable (chmod +x it)"
                              : program.find('/') == std::string::npos ? ": no such program on PATH"
                                                                      : ": no such file");
}

// Whether `host` still runs a process for mpirun (a restart with --min_procs drops it otherwise).
bool host_answers(const LaunchSpec& spec, const std::string& host) {
  // Quietly: a host that is gone makes mpirun explain at length why it could not start there.
  std::vector<std::string> probe = {"sh", "-c", "exec \"$@\" >/dev/null 2>&1", "probe", "timeout", "60", spec.mpirun};
  if (spec.as_root) probe.push_back("--allow-run-as-root");
  probe.insert(probe.end(), {"-np", "1", "--host", host + ":1"});
  probe.insert(probe.end(), spec.launcher_args.begin(), spec.launcher_args.end());  // e.g. the rsh agent
  probe.push_back("true");
  return run_and_wait(probe) == 0;
}

// The hosts that answer, or an error when they have fewer than --min_procs slots.
std::vector<Host> reachable_hosts(const std::vector<Host>& hosts, const LaunchSpec& spec, int min_procs) {
  std::vector<Host> alive;
  int slots = 0;
  for (const Host& host : hosts) {
    if (host_answers(spec, host.name)) {
      alive.push_back(host);
      slots += host.slots;
    } else {
      std::cerr << "fathom: host " << host.name << " does not answer; restarting without it\n";
    }
  }
  FATHOM_CHECK(slots >= min_procs, "--min_procs ", min_procs, ": the hosts that still answer have ", slots,
               " slots; not restarting");
  return alive;
}

// Runs the job, and relaunches it when it fails, up to --max_restarts times: each attempt's ranks
// see FATHOM_RESTART_COUNT (0, 1, ...) and resume from their latest checkpoint (fathom-train does
// by itself). A job stopped by a signal to the launcher is not restarted.
int run_with_restarts(const LauncherOptions& options, LaunchContext context) {
  for (int attempt = 0;; ++attempt) {
    if (options.max_restarts > 0) set_variable(context.environment, "FATHOM_RESTART_COUNT", std::to_string(attempt));
    const LaunchSpec spec = plan_launch(options, context);
    const int status = run_and_wait(mpirun_command(spec), {SIGUSR1, options.stop_timeout});
    if (const int signal = stop_signal_received()) return 128 + signal;
    if (status == 0 || attempt == options.max_restarts) {
      if (status != 0 && options.max_restarts > 0)
        std::cerr << "fathom: the job failed (exit status " << status << ") after " << attempt << " restart"
                  << (attempt == 1 ? "" : "s") << "; giving up (--max_restarts " << options.max_restarts << ")\n";
      return status;
    }
    std::cerr << "fathom: the job failed (exit status " << status << "); restart " << attempt + 1 << " of "
              << options.max_restarts << "\n";
    if (options.min_procs > 0) context.hosts = reachable_hosts(*context.hosts, spec, options.min_procs);
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const LauncherOptions options = parse_launcher_options(std::vector<std::string>(argv + 1, argv + argc));
    if (options.help) {
      std::cout << launcher_usage();
      return 0;
    }
    const LaunchContext context = this_machine(options);
    const LaunchSpec spec = plan_launch(options, context);
    const std::vector<std::string> command = mpirun_command(spec);
    if (options.dry_run) {
      std::cout << shell_command_line(command) << "\n";
      return 0;
    }
    require_mpirun(spec, context.environment);
    require_program(options.program.front(), context.environment);
    std::cout.flush();
    return run_with_restarts(options, context);
  } catch (const fathom::Error& error) {
    std::cerr << "fathom: " << error.message() << "\n";
  } catch (const std::exception& error) {
    std::cerr << "fathom: " << error.what() << "\n";
  }
  return kUsageError;
}
