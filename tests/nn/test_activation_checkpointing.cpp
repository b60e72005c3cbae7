// Activation checkpointing applied from outside a model (nn/activation_checkpointing.h): the
// layers a policy selects rerun their forward in backward, the others do not, and the gradients
// are those of the model without it.
#include <catch2/catch.hpp>

#include <vector>

#include "autograd/functions.h"
#include "core/generator.h"
#include "nn/layer_sequence.h"
#include "nn/linear.h"
#include "test_util.h"

using namespace fathom;
using namespace fathom::nn;

namespace {

// Three layers: an input projection, a block, an output projection; each counts its forwards.
struct Counted : Module, LayerSequence {
  std::shared_ptr<Linear> in, block, out;
  std::vector<int> forwards = std::vector<int>(3, 0);
  Counted() {
    in = register_module("in", std::make_shared<Linear>(4, 8));
    block = register_module("block", std::make_shared<Linear>(8, 8));
    out = register_module("out", std::make_shared<Linear>(8, 2));
  }
  Variable forward(const Variable& x) override { return forward_layers(x); }
  size_t num_layers() const override { return 3; }
  Variable forward_layer(size_t layer, const Variable& x) override {
    ++forwards[layer];
    if (layer == 0) return autograd::tanh((*in)(x));
    if (layer == 1) return autograd::tanh((*block)(x));
    return (*out)(x);
  }
  std::vector<std::string> layer_parameters(size_t layer) const override {
    const char* prefix = layer == 0 ? "in." : layer == 1 ? "block." : "out.";
    return {std::string(prefix) + "weight", std::string(prefix) + "bias"};
  }
  std::string layer_type(size_t layer) const override { return layer == 1 ? "Block" : "Projection"; }
};

std::vector<Tensor> gradients(Counted& model) {
  Generator generator(11);
  Tensor x = Tensor::zeros({5, 4});
  fill_uniform(x, generator, -1.0, 1.0);
  autograd::sum(model(Variable(x))).backward();
  std::vector<Tensor> grads;
  for (const auto& [name, p] : model.named_parameters()) grads.push_back(p.grad().clone());
  return grads;
}

}  // namespace

TEST_CASE("a checkpoint policy set from outside recomputes the layers it selects, with the same gradients",
          "[nn][checkpoint]") {
  Counted plain;
  const std::vector<Tensor> expected = gradients(plain);
  CHECK(plain.forwards == std::vector<int>{1, 1, 1});

  Counted checkpointed;
  const auto source = plain.named_parameters(), target = checkpointed.named_parameters();
  for (size_t i = 0; i < target.size(); ++i) target[i].second.data().copy_(source[i].second.data());
  checkpointed.set_checkpointing(checkpoint_layers_of_type(checkpointed, "Block"));
  const std::vector<Tensor> got = gradients(checkpointed);
  CHECK(checkpointed.forwards == std::vector<int>{1, 2, 1});  // the block reran in backward
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) FATHOM_REQUIRE_CLOSE(got[i], expected[i], 0.0, 0.0);

  // A policy without `recompute` turns it off; no gradients recorded means nothing to recompute.
  checkpointed.set_checkpointing({});
  CHECK(checkpointed.checkpointing() == nullptr);
}

TEST_CASE("a checkpoint policy's own checkpoint function is what runs the selected layers", "[nn][checkpoint]") {
  Counted model;
  int calls = 0;
  CheckpointPolicy policy = checkpoint_layers_of_type(model, "Projection");
  policy.checkpoint = [&calls](const LayerFunction& layer, const Variable& x) {
    ++calls;
    return checkpoint_layer(layer, x);
  };
  model.set_checkpointing(policy);
  gradients(model);
  CHECK(calls == 2);                                     // layers 0 and 2
  CHECK(model.forwards == std::vector<int>{2, 1, 2});
}
