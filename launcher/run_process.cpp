#include "launcher/run_process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "launcher/text_parsing.h"

namespace fathom::launcher {
namespace {

volatile sig_atomic_t child_pid = 0;
volatile sig_atomic_t stop_signal = 0;

void remember(int signal_number) {
  if (stop_signal == 0) stop_signal = signal_number;
}

volatile sig_atomic_t graceful_signal = 0, graceful_timeout = 30, stops = 0;

// Runs in the parent only: child_pid is still 0 in a child that has not reached exec yet.
void forward_signal(int signal_number) {
  remember(signal_number);
  if (child_pid <= 0) return;
  if (graceful_signal != 0 && stops++ == 0) {
    kill(child_pid, graceful_signal);
    alarm(static_cast<unsigned>(graceful_timeout));
  } else {
    kill(child_pid, SIGTERM);
  }
}

// The graceful stop's time is up.
void stop_now(int) {
  if (child_pid > 0) kill(child_pid, SIGTERM);
}

void outlive_signal(int signal_number) { remember(signal_number); }

void install_handler(int signal_number, void (*handler)(int)) {
  struct sigaction action {};
  action.sa_handler = handler;
  sigemptyset(&action.sa_mask);
  sigaction(signal_number, &action, nullptr);
}

[[noreturn]] void exec_child(const std::vector<std::string>& argv) {
  std::vector<char*> pointers;
  for (const std::string& word : argv) pointers.push_back(const_cast<char*>(word.c_str()));
  pointers.push_back(nullptr);
  execvp(pointers[0], pointers.data());
  std::fprintf(stderr, "fathom: cannot run %s: %s\n", pointers[0], std::strerror(errno));
  _exit(127);
}

}  // namespace

std::optional<std::string> find_executable(const std::string& program, std::string_view search_path) {
  if (program.find('/') != std::string::npos) {
    if (access(program.c_str(), X_OK) == 0) return program;
    return std::nullopt;
  }
  for (std::string_view directory : split(search_path, ':')) {
    // An empty PATH entry means the current directory.
    const std::string candidate = (directory.empty() ? std::string(".") : std::string(directory)) + "/" + program;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

int run_and_wait(const std::vector<std::string>& argv, GracefulStop stop) {
  FATHOM_CHECK(!argv.empty(), "run_and_wait: empty command");
  graceful_signal = stop.signal;
  graceful_timeout = stop.timeout_seconds;
  stops = 0;
  install_handler(SIGALRM, stop_now);
  install_handler(SIGTERM, forward_signal);
  install_handler(SIGHUP, forward_signal);
  install_handler(SIGINT, outlive_signal);
  install_handler(SIGQUIT, outlive_signal);
  const pid_t pid = fork();
  FATHOM_CHECK(pid >= 0, "cannot start ", argv[0], ": fork failed (", std::strerror(errno), ")");
  if (pid == 0) exec_child(argv);
  child_pid = pid;

  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    FATHOM_CHECK(errno == EINTR, "waiting for ", argv[0], " failed (", std::strerror(errno), ")");
  }
  alarm(0);
  child_pid = 0;
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

int stop_signal_received() { return stop_signal; }

}  // namespace fathom::launcher
