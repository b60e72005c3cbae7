#pragma once
// The MPI backend: host tensors, Open MPI's tuned collectives run on the communicator's
// progress thread (parallel/comm_worker.h). Point-to-point transfers are posted at once as
// non-blocking MPI requests, outside the collective queue, so that two ranks sending to each
// other cannot deadlock behind one another's sends.

#include <memory>
#include <string>

#include "parallel/communicator.h"

namespace fathom::parallel {

class CommWorker;

class MpiCommunicator final : public Communicator {
 public:
  struct Native;  // holds the MPI_Comm (kept out of this header so it needs no <mpi.h>)
  MpiCommunicator(std::unique_ptr<Native> native, std::string name);
  ~MpiCommunicator() override;

  const char* backend() const override { return "mpi"; }
  Device device() const override { return kCPU; }
  bool accepts(Device device) const override { return device.is_cpu() || device.is_cuda(); }
  std::shared_ptr<Communicator> split(int color, int key, const std::string& name) override;
  const Native& native() const { return *native_; }

 protected:
  WorkHandle start(Collective collective, bool blocking) override;

 private:
  void run_collective(Collective& collective);
  // Device tensors through host memory (MPI here is not CUDA-aware): copy in, run, copy back.
  void run_host_staged(Collective& collective);
  WorkHandle start_point_to_point(const Collective& collective);

  std::unique_ptr<Native> native_;
  std::unique_ptr<CommWorker> worker_;
};

// MPI_COMM_WORLD and MPI_COMM_SELF as communicators (MPI must be initialised: see Runtime).
std::shared_ptr<Communicator> mpi_world_communicator();
std::shared_ptr<Communicator> mpi_self_communicator();

}  // namespace fathom::parallel
