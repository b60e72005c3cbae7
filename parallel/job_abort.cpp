#include "parallel/job_abort.h"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <exception>

#include "core/error.h"

namespace fathom::parallel {
namespace {
bool mpi_active() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

void on_terminate() {
  std::string message = "terminate called without an active exception";
  if (std::exception_ptr current = std::current_exception()) {
    try {
      std::rethrow_exception(current);
    } catch (const Error& error) {
      message = error.message() + " (" + error.location() + ")";
    } catch (const std::exception& error) {
      message = error.what();
    } catch (...) {
      message = "an exception that is not a std::exception";
    }
  }
  abort_job(message);
}
}  // namespace

void abort_job(const std::string& message, int exit_code) {
  if (mpi_active()) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    std::fprintf(stderr, "fathom: rank %d failed: %s\n", rank, message.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, exit_code);
  }
  std::fprintf(stderr, "fathom: failed: %s\n", message.c_str());
  std::fflush(stderr);
  std::abort();
}

void install_abort_on_uncaught_exception() { std::set_terminate(on_terminate); }

}  // namespace fathom::parallel
