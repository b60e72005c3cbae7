#pragma once
// What the communication backends are and whether they work here (for fathom-report).

#include <string>

namespace fathom::parallel {

// MPI_Get_library_version's first line, e.g. "Open MPI v4.1.4, package: Debian OpenMPI, ...".
std::string mpi_library_version();
// "MPI 3.1" (the standard version the library implements).
std::string mpi_standard_version();
// True when this build has the NCCL backend.
bool nccl_built();
// "2.28.3" from ncclGetVersion; "" when NCCL is not built.
std::string nccl_version();

struct BackendCheck {
  bool ok = false;
  std::string detail;  // what was tried and what happened
};
// Initialises MPI (as a one-process job when not under mpirun) and all-reduces a value over
// MPI_COMM_WORLD. Safe to call with or without a Runtime alive.
BackendCheck check_mpi();
// Creates a one-rank NCCL communicator on device 0 and all-reduces a buffer; "no GPU" when
// there is none; "not built" without the NCCL backend.
BackendCheck check_nccl();

}  // namespace fathom::parallel
