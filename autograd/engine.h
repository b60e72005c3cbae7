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
// upstream at once; W, the parameters' gradients, run later to fill the pipeline's bubble.
// backward_deferring runs the whole graph but holds back the gradients bound for every leaf
// except `now` (a received activation): nothing accumulates into a parameter and no grad-ready
// hook fires until DeferredAccumulation::run() hands them over (inside the training state's
// begin/end_backward, so reductions start from there). The weight gradients are computed in B
// and only their accumulation is deferred: the split is exact, what it saves is the reductions'
// place in time, not B's arithmetic.
class DeferredAccumulation {
 public:
  using Pending = std::vector<std::pair<std::shared_ptr<Node>, TensorList>>;
  bool empty() const { return pending_.empty(); }
  // Accumulates the held gradients into their leaves in backward's order, running their hooks.
  void run();

 private:
  friend void backward_deferring(const VariableList&, const TensorList&, const VariableList&, DeferredAccumulation&);
  Pending pending_;
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
