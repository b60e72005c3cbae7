#pragma once
// DeepSpeed's activation_checkpointing.partition_activations for a tensor-parallel model: each
// checkpointed layer keeps only this rank's slice of its input (split along the width over the
// tensor-parallel group) and the recompute all-gathers it back, so the kept activations take
// 1/tp of the memory. A CheckpointPolicy's `checkpoint` (nn/activation_checkpointing.h), not a
// branch in the model. (Under sequence parallelism a layer's input already is 1/tp: nothing to
// partition.)

#include <memory>

#include "nn/activation_checkpointing.h"
#include "parallel/communicator.h"

namespace fathom::parallel {

// `policy` with its checkpoint keeping slices over `group` (unchanged for a group of one rank).
nn::CheckpointPolicy partition_checkpoint_inputs(nn::CheckpointPolicy policy, std::shared_ptr<Communicator> group);

}  // namespace fathom::parallel
