#pragma once
// FATHOM_MPI_CHECK(MPI_Allreduce(...)): throws fathom::Error naming the call and MPI's own
// error string. Communicators are created with MPI_ERRORS_RETURN so errors reach this check.
// Internal to the parallel layer (includes <mpi.h>).

#include <mpi.h>

#include <string>

#include "core/dtype.h"
#include "core/error.h"

namespace fathom::parallel::mpi_detail {

inline void check_mpi(int code, const char* call, const char* file, int line) {
  if (code == MPI_SUCCESS) [[likely]] return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(code, text, &length);
  ::fathom::detail::throw_error(file, line, ::fathom::detail::concat(call, " failed: ", text));
}

// The MPI datatype moving `dtype`'s bytes (16-bit floats travel as uint16: MPI has none).
MPI_Datatype mpi_datatype(DType dtype);
MPI_Op mpi_op(int reduce_op);

}  // namespace fathom::parallel::mpi_detail

#define FATHOM_MPI_CHECK(call) ::fathom::parallel::mpi_detail::check_mpi((call), #call, __FILE__, __LINE__)
