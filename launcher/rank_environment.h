#pragma once
// The environment every rank gets (exported with mpirun's -x): the launcher's FATHOM_*,
// NCCL_* and OMP_* variables, then the KEY=VALUE lines of ./.fathom_env (as DeepSpeed's
// .deepspeed_env), then MASTER_ADDR and MASTER_PORT. Later entries replace earlier ones of the
// same name, so .fathom_env overrides the shell, and --master_addr/--master_port override both.

#include <string>
#include <string_view>
#include <vector>

namespace fathom::launcher {

struct EnvVar {
  std::string name, value;
  bool operator==(const EnvVar&) const = default;
};

inline constexpr std::string_view kEnvFileName = ".fathom_env";

// This process's environment (environ), in its order.
std::vector<EnvVar> process_environment();
// The value of `name` in `environment`, or nullptr.
const std::string* find_variable(const std::vector<EnvVar>& environment, std::string_view name);
// Sets name=value, replacing an earlier entry of that name where it stands.
void set_variable(std::vector<EnvVar>& variables, const std::string& name, const std::string& value);

// KEY=VALUE lines; blank lines and lines starting with '#' are skipped. The value is everything
// after the first '=' up to the end of the line (trailing whitespace trimmed), taken literally:
// no quotes are removed, so a '#' inside a value stays. `source` names the file in errors.
std::vector<EnvVar> parse_env_file(std::string_view text, std::string_view source);
// The parsed file at `path`, or nothing when no such file exists.
std::vector<EnvVar> read_env_file_if_present(const std::string& path);

// The variables of `environment` whose names start with FATHOM_, NCCL_ or OMP_, sorted by name.
std::vector<EnvVar> forwarded_variables(const std::vector<EnvVar>& environment);
std::vector<EnvVar> rank_environment(const std::vector<EnvVar>& launcher_environment,
                                     const std::vector<EnvVar>& env_file, const std::string& master_addr,
                                     int master_port);

}  // namespace fathom::launcher
