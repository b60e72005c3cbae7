#include "parallel/backend_info.h"

#include <mpi.h>

#include "core/cuda/cuda_runtime.h"
#include "core/error.h"
#include "parallel/nccl_communicator.h"

namespace fathom::parallel {

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(text, &length);
  std::string version(text);  // Open MPI counts the terminating NUL in `length`
  if (const size_t newline = version.find('\n'); newline != std::string::npos) version.resize(newline);
  return version;
}

std::string mpi_standard_version() {
  int major = 0, minor = 0;
  MPI_Get_version(&major, &minor);
  return detail::concat("MPI ", major, ".", minor);
}

bool nccl_built() {
#ifdef FATHOM_WITH_CUDA
  return true;
#else
  return false;
#endif
}

std::string nccl_version() { return nccl_loaded_version(); }

BackendCheck check_mpi() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized) return {false, "MPI was already finalised in this process"};
  const bool owns = !initialized;
  if (owns) {
    int provided = 0;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
      return {false, "MPI_Init_thread failed"};
  }
  int size = 0, provided = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Query_thread(&provided);
  int sum = 0, one = 1;
  const int rc = MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (owns) MPI_Finalize();
  if (rc != MPI_SUCCESS || sum != size) return {false, detail::concat("MPI_Allreduce over ", size, " ranks failed")};
  return {true, detail::concat("all-reduce over ", size, size == 1 ? " rank" : " ranks", ", thread level ",
                               provided == MPI_THREAD_MULTIPLE ? "MPI_THREAD_MULTIPLE" : "below MULTIPLE")};
}

BackendCheck check_nccl() {
  if (!nccl_built()) return {false, "not built (FATHOM_CUDA=OFF)"};
  if (!nccl_available()) return {false, nccl_unavailable_reason()};
  if (cuda::device_count() == 0) return {false, "no GPU: " + cuda::unavailable_reason()};
  const std::string failure = nccl_self_test(0);
  if (!failure.empty()) return {false, failure};
  return {true, "one-rank all-reduce on cuda:0"};
}

}  // namespace fathom::parallel
