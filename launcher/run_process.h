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

// How a SIGTERM or SIGHUP to the launcher reaches a job. Open MPI's mpirun, sent SIGTERM, gives
// the ranks SIGCONT, then SIGTERM only after odls_base_sigkill_timeout and SIGKILL after as long
// again — too late and too short for a rank to save. SIGUSR1 it forwards to every rank at once.
// So the first signal becomes `signal` (SIGUSR1) to the child: the ranks stop after their step
// and save (engine/stop_signals.h); when the child has not exited `timeout_seconds` later, or on
// a second signal, the child gets SIGTERM.
struct GracefulStop {
  int signal = 0;  // 0: pass SIGTERM and SIGHUP on unchanged
  int timeout_seconds = 30;
};

// Runs `argv` (argv[0] looked up on PATH) and waits for it. Returns its exit status, or
// 128 + the signal that killed it, as a shell would. SIGTERM and SIGHUP sent to the launcher
// are passed on to the child as `stop` says; SIGINT and SIGQUIT from a terminal reach the child
// through the process group, so the launcher only outlives them.
int run_and_wait(const std::vector<std::string>& argv, GracefulStop stop = {});

// The first stop signal (SIGTERM, SIGHUP, SIGINT or SIGQUIT) the launcher received while it ran
// a child, or 0: a job that was asked to stop is not restarted.
int stop_signal_received();

}  // namespace fathom::launcher
