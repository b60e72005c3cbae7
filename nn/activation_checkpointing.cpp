#include "nn/activation_checkpointing.h"

#include "autograd/checkpoint.h"
#include "nn/layer_sequence.h"

namespace fathom::nn {

autograd::Variable checkpoint_layer(const LayerFunction& layer, const autograd::Variable& input) {
  // The segment outlives this call (backward reruns it): it holds its own copy of `layer`.
  return autograd::checkpoint([layer](const autograd::VariableList& in) { return autograd::VariableList{layer(in[0])}; },
                              {input})[0];
}

CheckpointPolicy checkpoint_layers_of_type(const LayerSequence& model, const std::string& type,
                                           bool synchronize_boundary) {
  return {.recompute = [&model, type](size_t layer) { return model.layer_type(layer) == type; },
          .checkpoint = checkpoint_layer,
          .synchronize_boundary = synchronize_boundary};
}

}  // namespace fathom::nn
