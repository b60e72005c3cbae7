#pragma once
// Ending the whole job from one rank: a rank that fails must not leave the others waiting in a
// collective forever. Prints "fathom: rank R failed: <message>" to stderr and calls MPI_Abort,
// which makes mpirun kill every rank and exit non-zero. Without MPI it calls std::abort.

#include <string>

namespace fathom::parallel {

[[noreturn]] void abort_job(const std::string& message, int exit_code = 1);

// Installs a std::terminate handler that reports an uncaught exception (its message and this
// rank) through abort_job. Runtime installs it.
void install_abort_on_uncaught_exception();

}  // namespace fathom::parallel
