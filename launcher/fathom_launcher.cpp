// fathom: starts a training program as an MPI job, like the `deepspeed` launcher, by building
// and running an Open MPI mpirun command line (see docs/launcher.md).
//
//   fathom --hostfile hosts --include worker-0:0,1@worker-1 train --config ds_config.json
//   fathom --num_procs 4 --dry-run ./train
//
// Exit status: the job's (a rank's non-zero exit makes mpirun's non-zero), 128 + signal when
// mpirun is killed by one, 2 for a usage or input error (nothing is launched).
#include <unistd.h>

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
    std::cout.flush();
    return run_and_wait(command);
  } catch (const fathom::Error& error) {
    std::cerr << "fathom: " << error.message() << "\n";
  } catch (const std::exception& error) {
    std::cerr << "fathom: " << error.what() << "\n";
  }
  return kUsageError;
}
