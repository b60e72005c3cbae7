#include "launcher/launch_plan.h"

#include "core/error.h"

namespace fathom::launcher {
namespace {

std::vector<HostSlots> local_slots(const SelectionOptions& selection) {
  FATHOM_CHECK(selection.num_nodes.value_or(1) == 1, "--num_nodes ", *selection.num_nodes,
               " needs --hostfile; without one, fathom runs on this machine only");
  const std::vector<Host> localhost = {{"localhost", selection.num_procs.value_or(1)}};
  SelectionOptions filter_only;  // --num_procs already sized the host
  filter_only.include = selection.include;
  filter_only.exclude = selection.exclude;
  try {
    return select_slots(localhost, filter_only);
  } catch (const Error& error) {
    FATHOM_FAIL(error.message(), "; without --hostfile the only host is localhost, with --num_procs slots (default 1)");
  }
}

}  // namespace

LaunchSpec plan_launch(const LauncherOptions& options, const LaunchContext& context) {
  LaunchSpec spec;
  const std::string* mpirun = find_variable(context.environment, "FATHOM_MPIRUN");
  if (mpirun != nullptr && !mpirun->empty()) spec.mpirun = *mpirun;
  spec.as_root = context.as_root;
  spec.local = !context.hosts.has_value();
  spec.local_cores = context.local_cores;
  if (spec.local) {
    spec.hosts = local_slots(options.selection);
    spec.pin_devices = !options.selection.include.empty() || !options.selection.exclude.empty();
  } else {
    spec.hosts = select_slots(*context.hosts, options.selection);
    spec.pin_devices = true;
  }
  const std::string master_addr = options.master_addr.empty() ? spec.hosts.front().name : options.master_addr;
  spec.environment = rank_environment(context.environment, context.env_file, master_addr, options.master_port);
  spec.launcher_args = options.launcher_args;
  spec.program = options.program;
  return spec;
}

}  // namespace fathom::launcher
