// The main of the multi-rank test executables: starts the distributed runtime, then Catch2.
// A failed assertion on any rank ends the whole job at once (MPI_Abort) with that rank's
// file:line and expansion, so one rank's failure can never leave the others hanging in a
// collective until the CTest timeout.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "mpi_test_util.h"
#include "parallel/job_abort.h"

namespace {
fathom::parallel::Runtime* the_runtime = nullptr;

struct AbortJobOnFailure : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;
  bool assertionEnded(const Catch::AssertionStats& stats) override {
    const Catch::AssertionResult& result = stats.assertionResult;
    if (result.isOk()) return true;
    std::string what = result.getSourceInfo().file;
    what += ":" + std::to_string(result.getSourceInfo().line) + ": " + result.getExpressionInMacro();
    if (result.hasExpandedExpression()) what += " with expansion " + result.getExpandedExpression();
    if (result.hasMessage()) what += " — " + result.getMessage();
    for (const Catch::MessageInfo& info : stats.infoMessages) what += " [" + info.message + "]";
    fathom::parallel::abort_job("test \"" + currentTestCaseInfo->name + "\" failed at " + what);
  }
};
}  // namespace

CATCH_REGISTER_LISTENER(AbortJobOnFailure)

namespace fathom::testing {
parallel::Runtime& runtime() { return *the_runtime; }
}  // namespace fathom::testing

int main(int argc, char** argv) {
  fathom::parallel::Runtime runtime(argc, argv);
  the_runtime = &runtime;
  return Catch::Session().run(argc, argv);
}
