#include "parallel/runtime.h"

#include <exception>

#include "core/cuda/cuda_runtime.h"
#include "core/logging.h"
#include "parallel/job_abort.h"
#include "parallel/mpi_check.h"
#include "parallel/mpi_communicator.h"
#include "parallel/nccl_communicator.h"

namespace fathom::parallel {

Runtime::Runtime(int& argc, char**& argv) { start(&argc, &argv); }
Runtime::Runtime() { start(nullptr, nullptr); }

void Runtime::start(int* argc, char*** argv) {
  uncaught_at_start_ = std::uncaught_exceptions();
  int initialized = 0;
  FATHOM_MPI_CHECK(MPI_Initialized(&initialized));
  // Communicators run their collectives on their own threads, possibly several at once.
  int provided = 0;
  if (!initialized) {
    FATHOM_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided));
    owns_mpi_ = true;
  } else {
    FATHOM_MPI_CHECK(MPI_Query_thread(&provided));
  }
  FATHOM_CHECK(provided >= MPI_THREAD_MULTIPLE, "distributed runtime: the MPI library provides thread level ",
               provided, ", but Fathom needs MPI_THREAD_MULTIPLE (communicators progress on their own threads); "
               "use an MPI built with thread support (Open MPI and MPICH are by default)");
  install_abort_on_uncaught_exception();
  FATHOM_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  world_ = mpi_world_communicator();

  MPI_Comm node = MPI_COMM_NULL;
  FATHOM_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_->rank(), MPI_INFO_NULL, &node));
  MPI_Comm_rank(node, &local_rank_);
  MPI_Comm_size(node, &local_size_);
  MPI_Comm_free(&node);

  if (const int gpus = cuda::device_count(); gpus > 0) {
    device_ = Device::cuda(local_rank_ % gpus);
    cuda::set_device(device_.index);
    // NCCL refuses two ranks on one GPU: then there is no NCCL world, and device tensors go
    // through the MPI backend's host staging. Every rank must agree (creating it is collective).
    const bool own_gpu = local_size_ <= gpus && nccl_available();
    if (world_->all_reduce_scalar(own_gpu ? 1.0 : 0.0, ReduceOp::Min) == 1.0)
      nccl_world_ = make_nccl_communicator(*world_, device_.index, "world");
  }
}

Runtime::~Runtime() {
  // Unwinding past the runtime in a multi-rank job: the other ranks may be blocked in a
  // collective this rank will never join, so end them all instead of finalising alone.
  if (std::uncaught_exceptions() > uncaught_at_start_ && size() > 1)
    abort("left the distributed runtime by an exception (catch it inside the Runtime's scope to see its "
          "message here)");
  nccl_world_.reset();
  world_.reset();
  if (owns_mpi_) MPI_Finalize();
}

ProcessGroups Runtime::groups(int pipeline_parallel_size, int tensor_parallel_size) const {
  ProcessGroups groups(world_, Topology(size(), pipeline_parallel_size, tensor_parallel_size));
  // Every rank has its own GPU (the NCCL world exists): each axis gets an NCCL communicator over
  // the same ranks, bootstrapped through the axis's MPI group. Collective, in axis order.
  if (nccl_world_) {
    const auto nccl = [&](Axis axis) { return make_nccl_communicator(groups.group(axis), device_.index, axis_name(axis)); };
    auto pipeline = nccl(Axis::Pipeline);
    auto data = nccl(Axis::Data);
    auto tensor = nccl(Axis::Tensor);
    groups.set_device_groups(std::move(pipeline), std::move(data), std::move(tensor));
  }
  return groups;
}

void Runtime::abort(const std::string& message, int exit_code) const { abort_job(message, exit_code); }

}  // namespace fathom::parallel
