#include "launcher/launch_command.h"

#include <algorithm>

#include "core/error.h"

namespace fathom::launcher {
namespace {

std::string joined_slots(const std::vector<int>& slots) {
  std::string text;
  for (int slot : slots) {
    if (!text.empty()) text += ',';
    text += std::to_string(slot);
  }
  return text;
}

bool sets_binding(const std::vector<std::string>& launcher_args) {
  return std::any_of(launcher_args.begin(), launcher_args.end(), [](const std::string& arg) {
    return arg == "--bind-to" || arg == "-bind-to" || arg.starts_with("--bind-to=");
  });
}

int rank_count(const std::vector<HostSlots>& hosts) {
  int count = 0;
  for (const HostSlots& host : hosts) count += static_cast<int>(host.slots.size());
  return count;
}

void append_app_context(const LaunchSpec& spec, const HostSlots& host, std::vector<std::string>& command) {
  const std::string ranks = std::to_string(host.slots.size());
  command.insert(command.end(), {"-np", ranks});
  if (!spec.local) command.insert(command.end(), {"--host", host.name + ":" + ranks});
  std::vector<EnvVar> environment = spec.environment;
  if (spec.pin_devices) set_variable(environment, "CUDA_VISIBLE_DEVICES", joined_slots(host.slots));
  for (const EnvVar& var : environment) command.insert(command.end(), {"-x", var.name + "=" + var.value});
  command.insert(command.end(), spec.launcher_args.begin(), spec.launcher_args.end());
  command.insert(command.end(), spec.program.begin(), spec.program.end());
}

}  // namespace

std::vector<std::string> mpirun_command(const LaunchSpec& spec) {
  FATHOM_CHECK(!spec.program.empty(), "no program to launch");
  FATHOM_CHECK(!spec.hosts.empty(), "no host to launch on");
  FATHOM_CHECK(!spec.local || spec.hosts.size() == 1, "a local run has one host, got ", spec.hosts.size());
  std::vector<std::string> command = {spec.mpirun};
  if (spec.as_root) command.push_back("--allow-run-as-root");
  if (spec.local && rank_count(spec.hosts) > spec.local_cores) command.push_back("--oversubscribe");
  // Open MPI binds each rank to one core at -np <= 2 (to a socket above), which would leave a
  // rank a single CPU thread for data loading and CPU Adam; unbound, core/threads.h shares the
  // node's cores among its ranks instead.
  if (!sets_binding(spec.launcher_args)) command.insert(command.end(), {"--bind-to", "none"});
  for (size_t i = 0; i < spec.hosts.size(); ++i) {
    if (i > 0) command.push_back(":");
    append_app_context(spec, spec.hosts[i], command);
  }
  return command;
}

std::string shell_quote(std::string_view word) {
  const bool plain = !word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view("_-+=:,./@%").find(c) != std::string_view::npos;
  });
  if (plain) return std::string(word);
  std::string quoted = "'";
  for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string shell_command_line(const std::vector<std::string>& words) {
  std::string line;
  for (const std::string& word : words) {
    if (!line.empty()) line += ' ';
    line += shell_quote(word);
  }
  return line;
}

}  // namespace fathom::launcher
