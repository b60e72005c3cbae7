#pragma once
// The config's offload_optimizer, offload_param, sub_group_size and aio blocks as the ZeRO
// state's placement (zero/optimizer_offload.h, zero/parameter_offload.h), checked against the
// rest of the config, with each rank's swap directory: <nvme_path>/<job>/rank<r> (docs/offload.md).

#include "engine/config/config.h"
#include "parallel/topology.h"
#include "zero/optimizer_offload.h"
#include "zero/parameter_offload.h"

namespace fathom {

struct OffloadPlacement {
  zero::OptimizerOffload optimizer;
  zero::ParameterOffload parameters;
};

// Collective over the job's ranks (they agree on the job's directory name) when anything is
// offloaded to nvme.
OffloadPlacement offload_placement(const Config& config, const parallel::ProcessGroups& groups);

}  // namespace fathom
