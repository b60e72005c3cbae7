#pragma once
// Activation checkpointing applied to a model from outside it, as torchtitan applies its
// activation-checkpoint config to any model: a policy on an nn::LayerSequence says which layers
// recompute their activations in backward (autograd::checkpoint) instead of keeping them, and
// how. The model's own code knows nothing of it, so every model written as a list of layers
// gets DeepSpeed's "activation_checkpointing" section, and a new way to checkpoint (a
// tensor-parallel split of the kept input: parallel/partitioned_checkpoint.h) is a new
// `checkpoint` function, not a branch in each model.
//
//   model.set_checkpointing(nn::checkpoint_layers_of_type(model, "TransformerBlock"));

#include <cstddef>
#include <functional>
#include <string>

#include "autograd/variable.h"

namespace fathom::nn {

// One layer's forward, from its input to its output.
using LayerFunction = std::function<autograd::Variable(const autograd::Variable&)>;

struct CheckpointPolicy {
  // The layers that recompute (layer indices of the LayerSequence).
  std::function<bool(size_t layer)> recompute;
  // How a selected layer runs under a checkpoint: by default autograd::checkpoint around it,
  // keeping only its input.
  std::function<autograd::Variable(const LayerFunction& layer, const autograd::Variable& input)> checkpoint;
  // DeepSpeed's synchronize_checkpoint_boundary: wait for the device after each checkpointed
  // layer (a debugging and timing aid; nothing to wait for on the CPU).
  bool synchronize_boundary = false;
};

// autograd::checkpoint around `layer`: the default CheckpointPolicy::checkpoint.
autograd::Variable checkpoint_layer(const LayerFunction& layer, const autograd::Variable& input);

class LayerSequence;
// Every layer whose layer_type() is `type` (DeepSpeed checkpoints a model's transformer blocks).
CheckpointPolicy checkpoint_layers_of_type(const LayerSequence& model, const std::string& type,
                                           bool synchronize_boundary = false);

}  // namespace fathom::nn
