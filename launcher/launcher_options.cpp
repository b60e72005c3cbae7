#include "launcher/launcher_options.h"

#include "core/error.h"
#include "launcher/text_parsing.h"

namespace fathom::launcher {
namespace {

const char* kUsage = R"(usage: fathom [options] program [args...]

Runs `program args...` as an MPI job through Open MPI's mpirun (or $FATHOM_MPIRUN).

  --hostfile PATH           hosts to run on, one "hostname slots=N" per line (default: this machine)
  -i, --include FILTER      only these hosts/slots, e.g. worker-0:0,1@worker-1
  -e, --exclude FILTER      all but these hosts/slots (same syntax; not with --include)
  --num_nodes N             the first N hosts
  --num_procs N             the first N slots of each host; without a hostfile, N local
                            processes (default 1). Alias: --num_gpus
  --master_addr ADDR        MASTER_ADDR for the ranks (default: the first host)
  --master_port PORT        MASTER_PORT for the ranks (default: 29500)
  --launcher_args "ARGS"    extra mpirun options, split on whitespace
  --stop_timeout SECONDS    on SIGTERM the ranks get SIGUSR1 (stop after this step and save)
                            and this long before mpirun is stopped (default 30)
  --max_restarts N          relaunch the job up to N times when it fails (default 0); the
                            ranks see FATHOM_RESTART_COUNT and resume from their checkpoint
  --min_procs N             with --max_restarts and a hostfile: before a restart, drop the
                            hosts that no longer answer, and go on if N slots remain
  --dry-run                 print the mpirun command line and exit
  -h, --help                this help

The ranks get the launcher's FATHOM_*, NCCL_* and OMP_* variables, the KEY=VALUE lines of
./.fathom_env, MASTER_ADDR and MASTER_PORT; with a hostfile or --include/--exclude, also
CUDA_VISIBLE_DEVICES = the host's selected slots. See docs/launcher.md.
)";

int positive_int(const std::string& flag, const std::string& value, int maximum) {
  const std::optional<int> parsed = parse_non_negative_int(value);
  FATHOM_CHECK(parsed && *parsed >= 1 && *parsed <= maximum, flag, " must be an integer from 1 to ", maximum,
               ", not \"", value, "\"");
  return *parsed;
}

int non_negative_int(const std::string& flag, const std::string& value, int maximum) {
  const std::optional<int> parsed = parse_non_negative_int(value);
  FATHOM_CHECK(parsed && *parsed <= maximum, flag, " must be an integer from 0 to ", maximum, ", not \"", value, "\"");
  return *parsed;
}

bool takes_value(const std::string& flag) {
  for (const char* name : {"--hostfile", "-i", "--include", "-e", "--exclude", "--num_nodes", "--num_procs",
                           "--num_gpus", "--master_addr", "--master_port", "--launcher_args", "--stop_timeout",
                           "--max_restarts", "--min_procs"})
    if (flag == name) return true;
  return false;
}

void set_option(LauncherOptions& options, const std::string& flag, const std::string& value) {
  constexpr int kMaxCount = 1 << 20;
  FATHOM_CHECK(!value.empty() || flag == "--launcher_args", flag, " needs a non-empty value");
  if (flag == "--hostfile") options.hostfile = value;
  else if (flag == "-i" || flag == "--include") options.selection.include = value;
  else if (flag == "-e" || flag == "--exclude") options.selection.exclude = value;
  else if (flag == "--num_nodes") options.selection.num_nodes = positive_int(flag, value, kMaxCount);
  else if (flag == "--num_procs" || flag == "--num_gpus") options.selection.num_procs = positive_int(flag, value, kMaxCount);
  else if (flag == "--master_addr") options.master_addr = value;
  else if (flag == "--master_port") options.master_port = positive_int(flag, value, 65535);
  else if (flag == "--stop_timeout") options.stop_timeout = positive_int(flag, value, 86400);
  else if (flag == "--max_restarts") options.max_restarts = non_negative_int(flag, value, 1000);
  else if (flag == "--min_procs") options.min_procs = positive_int(flag, value, kMaxCount);
  else if (flag == "--launcher_args") {
    for (std::string& word : split_whitespace(value)) options.launcher_args.push_back(std::move(word));
  }
}

}  // namespace

LauncherOptions parse_launcher_options(const std::vector<std::string>& args) {
  LauncherOptions options;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.empty() || arg.front() != '-') break;  // the program
    if (arg == "-h" || arg == "--help") {
      options.help = true;
      return options;
    }
    if (arg == "--dry-run") {
      options.dry_run = true;
      continue;
    }
    const size_t equals = arg.find('=');
    const std::string flag = arg.starts_with("--") ? arg.substr(0, equals) : arg;
    FATHOM_CHECK(takes_value(flag), "unknown option ", arg, "; see fathom --help");
    if (flag != arg) {
      set_option(options, flag, arg.substr(equals + 1));
      continue;
    }
    FATHOM_CHECK(i + 1 < args.size(), flag, " needs a value; see fathom --help");
    set_option(options, flag, args[++i]);
  }
  options.program.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  FATHOM_CHECK(!options.program.empty(), "no program given; usage: fathom [options] program [args...]");
  FATHOM_CHECK(options.min_procs == 0 || (options.max_restarts > 0 && !options.hostfile.empty()),
               "--min_procs applies to restarts across hosts: give --max_restarts N and a --hostfile too");
  return options;
}

const char* launcher_usage() { return kUsage; }

}  // namespace fathom::launcher
