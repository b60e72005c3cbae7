#include "engine/stop_signals.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>

#include "core/error.h"

namespace fathom {
namespace {

std::atomic<int> g_received{0};
std::atomic<unsigned> g_boundary_seconds{10};
std::atomic<bool> g_installed{false};
struct sigaction g_previous_term, g_previous_int, g_previous_usr1, g_previous_alarm;

// Only async-signal-safe work: atomics, alarm() and _exit().
void on_stop_signal(int signal) {
  int none = 0;
  if (!g_received.compare_exchange_strong(none, signal)) _exit(128 + signal);
  alarm(g_boundary_seconds.load());
}

void on_boundary_timeout(int) { _exit(128 + g_received.load()); }

void install(int signal, void (*handler)(int), struct sigaction* previous) {
  struct sigaction action {};
  action.sa_handler = handler;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // a system call the signal interrupts goes on: the step finishes
  sigaction(signal, &action, previous);
}

}  // namespace

StopSignals::StopSignals() {
  FATHOM_CHECK(!g_installed.exchange(true), "StopSignals: one at a time (the handlers are per process)");
  g_received = 0;
  install(SIGTERM, on_stop_signal, &g_previous_term);
  install(SIGINT, on_stop_signal, &g_previous_int);
  install(SIGUSR1, on_stop_signal, &g_previous_usr1);
  install(SIGALRM, on_boundary_timeout, &g_previous_alarm);
}

StopSignals::~StopSignals() {
  alarm(0);
  sigaction(SIGTERM, &g_previous_term, nullptr);
  sigaction(SIGINT, &g_previous_int, nullptr);
  sigaction(SIGUSR1, &g_previous_usr1, nullptr);
  sigaction(SIGALRM, &g_previous_alarm, nullptr);
  g_installed = false;
}

void StopSignals::set_boundary_timeout(double seconds) {
  g_boundary_seconds = static_cast<unsigned>(std::clamp(std::ceil(seconds), 1.0, 86400.0));
}

int StopSignals::received() { return g_received.load(); }

int StopSignals::stop_requested(parallel::Communicator* group) const {
  const int mine = received();
  const int any =
      !group || group->size() == 1 ? mine : static_cast<int>(group->all_reduce_scalar(mine, parallel::ReduceOp::Max));
  if (any) alarm(0);
  return any;
}

const char* StopSignals::name(int signal) {
  switch (signal) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGUSR1:
      return "SIGUSR1";
    default:
      return "a signal";
  }
}

}  // namespace fathom
