#pragma once
// The distributed runtime of one process, RAII:
//
//   int main(int argc, char** argv) {
//     fathom::parallel::Runtime runtime(argc, argv);   // MPI up (+ GPU and NCCL when present)
//     auto groups = runtime.groups();                      // pipeline x data x tensor grid
//     ... fathom::initialize(config, model, nullptr, data, groups.data_ptr()) ...
//   }
//
// Works under `mpirun -np N` and as one process without mpirun (a one-rank MPI job). The world
// communicator is a duplicate of MPI_COMM_WORLD, so Fathom's traffic never mixes with the
// program's own MPI calls. With GPUs, each rank takes device local_rank % device_count and an
// NCCL communicator over all ranks is built from a unique id broadcast over MPI.
//
// Failure: an exception that escapes main ends the whole job through MPI_Abort with this
// rank's message ("fathom: rank 2 failed: ..."); so does leaving the Runtime's scope by an
// exception in a multi-rank job — other ranks may be waiting in a collective for this one.

#include <memory>
#include <string>

#include "core/device.h"
#include "parallel/communicator.h"
#include "parallel/topology.h"

namespace fathom::parallel {

class Runtime {
 public:
  Runtime(int& argc, char**& argv);
  Runtime();  // without the program's arguments
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  int rank() const { return world_->rank(); }
  int size() const { return world_->size(); }
  int local_rank() const { return local_rank_; }  // among the ranks on this node
  int local_size() const { return local_size_; }
  bool is_main_process() const { return rank() == 0; }

  // Host collectives over every rank (MPI).
  Communicator& world() const { return *world_; }
  const std::shared_ptr<Communicator>& world_ptr() const { return world_; }
  // Device collectives over every rank (NCCL); null without a GPU, without the NCCL backend,
  // or when ranks share a GPU (NCCL refuses that; the MPI world then stages device tensors).
  const std::shared_ptr<Communicator>& nccl_world() const { return nccl_world_; }
  // This rank's GPU, or the CPU when there is none.
  Device device() const { return device_; }

  // The pipeline x data x tensor grid and this rank's communicator along each axis: MPI, and
  // NCCL too when nccl_world() exists (ProcessGroups::for_device picks per tensor). Collective:
  // every rank calls it with the same sizes.
  ProcessGroups groups(int pipeline_parallel_size = 1, int tensor_parallel_size = 1) const;

  // Prints "fathom: rank R failed: <message>" and ends every rank of the job.
  [[noreturn]] void abort(const std::string& message, int exit_code = 1) const;

 private:
  void start(int* argc, char*** argv);

  bool owns_mpi_ = false;
  int uncaught_at_start_ = 0;
  int local_rank_ = 0, local_size_ = 1;
  Device device_ = kCPU;
  std::shared_ptr<Communicator> world_, nccl_world_;
};

}  // namespace fathom::parallel
