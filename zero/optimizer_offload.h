#pragma once
// Where a ZeRO rank's optimizer side lives (zero_optimization.offload_optimizer and
// sub_group_size; docs/offload.md): the options of OptimizerShard (zero/optimizer_shard.h).

#include <cstdint>
#include <string>

#include "offload/aio_options.h"

namespace fathom::zero {

inline constexpr int64_t kDefaultSubGroupElements = 1'000'000'000;  // sub_group_size

struct OptimizerOffload {
  // device: beside the model (no offload); host: the host tier (offload_optimizer.device cpu);
  // nvme: swap files under swap_directory, one sub-group in memory at a time (plus the pipelined
  // read and write).
  enum class Tier { Device, Host, Nvme };
  Tier tier = Tier::Device;
  bool pin_memory = false;
  // The fraction of sub-groups placed on `tier` (the first ones); the rest stay on the device.
  double ratio = 1.0;
  int64_t sub_group_elements = kDefaultSubGroupElements;
  // nvme only:
  std::string swap_directory;
  int64_t buffer_count = 4;     // tensors of the largest sub-group's size held in memory at most
  bool pipeline_read = false;   // read sub-group k+1 while k is updated
  bool pipeline_write = false;  // write sub-group k-1 while k is updated
  offload::AioOptions aio;
  offload::IoBackend backend = offload::IoBackend::Auto;
};

const char* tier_name(OptimizerOffload::Tier tier);

}  // namespace fathom::zero
