#pragma once
// A communicator of one rank without MPI: every collective is the identity (or a copy). Lets
// the code paths of data parallelism and ZeRO run in a plain single process — the
// equivalence tests' reference runs, a ZeRO config on one process — with no runtime started.

#include "parallel/communicator.h"

namespace fathom::parallel {

class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator() : Communicator(0, 1, "local") {}
  const char* backend() const override { return "local"; }
  Device device() const override { return kCPU; }
  // Any device: its collectives are the identity or a copy, on the tensor's own device.
  bool accepts(Device) const override { return true; }
  std::shared_ptr<Communicator> split(int color, int key, const std::string& name) override;

 protected:
  WorkHandle start(Collective collective, bool blocking) override;
};

}  // namespace fathom::parallel
