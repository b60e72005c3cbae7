#pragma once
// The config's offload_optimizer, sub_group_size and aio blocks as the ZeRO state's placement
// (zero/optimizer_offload.h), checked against the rest of the config, with each rank's swap
// directory: <nvme_path>/<job>/rank<r> (docs/offload.md).

#include <string>

#include "engine/config.h"
#include "parallel/topology.h"
#include "zero/optimizer_offload.h"

namespace fathom {

// Collective over the job's ranks (they agree on the job's directory name) when the optimizer
// is offloaded to nvme.
zero::OptimizerOffload optimizer_offload(const Config& config, const parallel::ProcessGroups& groups);

}  // namespace fathom
