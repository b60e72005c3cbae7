#pragma once
// LayerSequence: a model written as a list of layers, each from one Variable to one Variable,
// so that a pipeline can cut it into stages and run a stage's layers only, and so that
// checkpoints can name layers by their global index whatever the pipeline degree.
//
//   struct MyModel : nn::Module, nn::LayerSequence { ... };
//   Variable hidden = model.forward_layers(x, 0, 3);        // stage 0: layers [0, 3)
//   Variable out = model.forward_layers(hidden, 3);         // stage 1: the rest
//
// Layer i uses the parameters layer_parameters(i) names (dotted, as named_parameters lists
// them). A parameter that two layers use — a tied token embedding and LM head — is a
// declared tie: ties() names the parameter and the layers that use it, so a pipeline knows to
// keep a copy on each of their stages and to sum their gradients, without discovering shared
// pointers.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "autograd/variable.h"
#include "nn/activation_checkpointing.h"

namespace fathom::nn {

// What a pipeline partition needs of a layer before anything is built (DeepSpeed's LayerSpec):
// its type name and its trainable parameter count.
struct LayerDescription {
  std::string type;        // e.g. "TransformerBlock"
  int64_t parameters = 0;  // trainable elements
};

struct Tie {
  std::string name;            // e.g. "embedding"
  std::string parameter;       // the dotted name named_parameters lists it under
  std::vector<size_t> layers;  // the layers that use it, in order
};

class LayerSequence {
 public:
  virtual ~LayerSequence() = default;
  virtual size_t num_layers() const = 0;
  virtual autograd::Variable forward_layer(size_t layer, const autograd::Variable& input) = 0;
  virtual std::vector<std::string> layer_parameters(size_t layer) const = 0;
  virtual std::vector<Tie> ties() const { return {}; }
  // The layer's type name, which "type:REGEX" pipeline partitions match (DeepSpeed matches the
  // layer's class name).
  virtual std::string layer_type(size_t /*layer*/) const { return "Layer"; }

  // Layers [begin, end) in order, each through run_layer; the whole model by default.
  autograd::Variable forward_layers(const autograd::Variable& input, size_t begin = 0,
                                    size_t end = std::numeric_limits<size_t>::max());
  // forward_layer under the checkpoint policy: recomputed in backward when the policy selects
  // the layer and gradients are being recorded.
  autograd::Variable run_layer(size_t layer, const autograd::Variable& input);

  // Activation checkpointing from outside the model (nn/activation_checkpointing.h); a policy
  // without `recompute` turns it off.
  void set_checkpointing(CheckpointPolicy policy);
  const CheckpointPolicy* checkpointing() const { return checkpointing_.get(); }

 private:
  std::shared_ptr<const CheckpointPolicy> checkpointing_;
};

}  // namespace fathom::nn
