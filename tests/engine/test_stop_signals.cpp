// StopSignals (preemption): the first SIGTERM or SIGINT is remembered for the step boundary, a
// second one ends the process at once with 128 + signal.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>

#include "engine/stop_signals.h"

using namespace fathom;

TEST_CASE("a stop signal is remembered, not fatal, while StopSignals lives", "[engine]") {
  {
    const StopSignals stop;
    CHECK(stop.stop_requested(nullptr) == 0);
    std::raise(SIGINT);
    CHECK(StopSignals::received() == SIGINT);
    CHECK(stop.stop_requested(nullptr) == SIGINT);
    CHECK(std::string(StopSignals::name(SIGINT)) == "SIGINT");
  }
  // Destroyed: the previous handler (here the default) is back, so a child's SIGTERM kills it.
  const pid_t child = fork();
  if (child == 0) {
    std::raise(SIGTERM);
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  CHECK(WIFSIGNALED(status));
}

TEST_CASE("a second stop signal exits at once with 128 + signal", "[engine]") {
  const pid_t child = fork();
  if (child == 0) {
    const StopSignals stop;
    std::raise(SIGTERM);
    std::raise(SIGTERM);
    _exit(0);  // not reached
  }
  int status = 0;
  waitpid(child, &status, 0);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 128 + SIGTERM);
}
