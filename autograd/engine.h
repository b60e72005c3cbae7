#pragma once
// The backward engine.
//
// backward(outputs, grad_outputs) runs every node reachable from `outputs` once, in
// dependency order (among ready nodes, the most recently created first, i.e. the reverse of
// the forward), summing the gradients that meet at a node before it runs. Several graphs may
// be alive at once (pipeline 1F1B keeps micro-batches' graphs and runs their backwards in any
// order). Saved tensors are freed as nodes run unless retain_graph is set.

#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "autograd/variable.h"

namespace fathom::autograd {

// grad_outputs[i] may be undefined for a one-element output (taken as 1).
void backward(const VariableList& outputs, const TensorList& grad_outputs = {}, bool retain_graph = false);

// Zero-bubble pipelines split a backward in two: B, the gradient of the stage's input, sent
// upstream at once; W, the parameters' gradients, computed later to fill the pipeline's bubble.
// backward_deferring runs B: the graph from `outputs` down to the leaves in `now` (a received
// activation), with every op that also feeds a parameter (any other leaf) computing only its
// other inputs' gradients (a matmul: dX = dY·Wᵀ, not Xᵀ·dY) and keeping what it saved; nothing
// accumulates into a parameter and no grad-ready hook fires. DeferredAccumulation::run() is W:
// those ops' parameter gradients, each parameter's summed and accumulated once, its hooks run
// (inside the training state's begin/end_backward, so reductions start from there). Nodes that
// cannot compute part of their inputs' gradients (Node::splittable) run whole in B, and only
// their parameter gradients' accumulation waits for W.
class DeferredAccumulation {
 public:
  bool empty() const { return leaves_.empty() && parts_.empty(); }
  // W: the deferred weight gradients, accumulated into their leaves, their hooks run.
  void run();

 private:
  friend struct DeferredParts;  // engine.cpp: B fills the lists
  // A node whose parameter inputs' gradients wait for W (those `wanted`), with its output gradients.
  struct Part {
    std::shared_ptr<Node> node;
    TensorList grad_outputs;
    std::vector<bool> wanted;
  };
  std::vector<std::pair<std::shared_ptr<Node>, TensorList>> leaves_;  // parameters' accumulators, in B's order
  std::vector<Part> parts_;
};
void backward_deferring(const VariableList& outputs, const TensorList& grad_outputs, const VariableList& now,
                        DeferredAccumulation& deferred);

// Runs `callback` when the backward currently executing on this thread finishes (after every
// node and grad-ready hook). Called outside a backward it is an error. (The training states
// finish their reductions in end_backward, which the engine calls after backward returns.)
void queue_backward_callback(std::function<void()> callback);
// Runs `callback` at the end of every backward on this thread, until removed (returns an id).
int add_post_backward_callback(std::function<void()> callback);
void remove_post_backward_callback(int id);
bool in_backward();

}  // namespace fathom::autograd
