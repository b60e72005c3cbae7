#pragma once
// Starting mpirun: finding it on PATH and running it as a child whose exit status becomes
// the launcher's.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fathom::launcher {

// The path of the executable `program` on `search_path` (a PATH value), or nullopt; a name
// containing '/' is checked as it is.
std::optional<std::string> find_executable(const std::string& program, std::string_view search_path);

// Runs `argv` (argv[0] looked up on PATH) and waits for it. Returns its exit status, or
// 128 + the signal that killed it, as a shell would. SIGTERM and SIGHUP sent to the launcher
// are passed on to the child (mpirun then stops the ranks); SIGINT and SIGQUIT from a terminal
// reach the child through the process group, so the launcher only outlives them.
int run_and_wait(const std::vector<std::string>& argv);

}  // namespace fathom::launcher
