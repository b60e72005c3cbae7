#pragma once
// Where a stage-3 rank's shard of the parameters lives (zero_optimization.offload_param;
// docs/offload.md): the options of the ParameterStore (zero/parameter_store.h).

#include <cstdint>
#include <string>

#include "offload/aio_options.h"
#include "zero/optimizer_offload.h"

namespace fathom::zero {

struct ParameterOffload {
  using Tier = OptimizerOffload::Tier;
  // device: beside the model (no offload); host: the host tier (offload_param.device cpu); nvme:
  // swap files under swap_directory, at most max_in_cpu elements in host memory.
  Tier tier = Tier::Device;
  bool pin_memory = false;
  // nvme only:
  std::string swap_directory;
  int64_t buffer_count = 5;                 // reads in flight at most
  int64_t buffer_elements = 100'000'000;    // buffer_size: the largest piece one buffer holds
  int64_t max_in_cpu = 1'000'000'000;       // elements of the shard in host memory at most
  offload::AioOptions aio;
  offload::IoBackend backend = offload::IoBackend::Auto;
};

}  // namespace fathom::zero
