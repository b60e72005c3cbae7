#pragma once
// The MPI_Comm behind an MpiCommunicator, for code of the parallel layer (and benchmarks) that
// calls MPI directly: the NCCL bootstrap, raw-MPI baselines. Includes <mpi.h>.

#include <mpi.h>

#include "parallel/mpi_communicator.h"

namespace fathom::parallel {

struct MpiCommunicator::Native {
  MPI_Comm comm = MPI_COMM_NULL;
  bool owned = false;  // freed with the communicator (not WORLD / SELF)
};

// The MPI_Comm of an MPI communicator; throws for other backends.
MPI_Comm native_mpi_comm(const Communicator& communicator);

}  // namespace fathom::parallel
