#pragma once
// A tensor-parallel parameter's unsplit form, from every rank's shard (nn/placement.h says which
// part of the full tensor each rank holds): what consolidation and exports write.

#include "core/tensor.h"
#include "nn/placement.h"
#include "parallel/communicator.h"

namespace fathom::parallel {

// Collective over `group`, the group the placement splits over: the full tensor (padding rows
// dropped) on every rank. A replicated placement returns `shard` itself.
Tensor gather_shards(const Tensor& shard, const nn::Placement& placement, Communicator& group);

}  // namespace fathom::parallel
