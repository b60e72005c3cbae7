#pragma once
// Graph nodes: the backward half of an op. A node receives the gradients of its forward's
// outputs and returns the gradients of its forward's inputs, which flow along its edges to
// the nodes that produced those inputs (or to a leaf's AccumulateGrad).

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace fathom::autograd {

using TensorList = std::vector<Tensor>;
class Node;

// Where a gradient goes: input `input_nr` of `node` (null node: the input needs no gradient).
struct Edge {
  std::shared_ptr<Node> node;
  uint32_t input_nr = 0;
  bool valid() const { return node != nullptr; }
};

// Called with the gradients arriving at a node, before it runs; may replace them.
using NodePreHook = std::function<void(TensorList& grad_outputs)>;

class Node : public std::enable_shared_from_this<Node> {
 public:
  explicit Node(uint32_t num_outputs);
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // grads of the forward outputs (undefined where none arrived) -> grads of the forward inputs,
  // one per next edge (undefined where there is none).
  virtual TensorList apply(TensorList&& grad_outputs) = 0;
  virtual std::string name() const = 0;
  // Frees saved tensors once backward has used them (unless retain_graph).
  virtual void release_saved() {}
  // Zero bubble's split backward (autograd/engine.h, backward_deferring): a node that can compute
  // the gradients of some of its inputs only — here `wanted`, the others undefined — keeping what
  // it saved for a second call that computes the rest. Others are applied whole.
  virtual bool splittable() const { return false; }
  virtual TensorList apply_part(const TensorList& grad_outputs, const std::vector<bool>& wanted);

  uint32_t num_outputs() const { return num_outputs_; }
  const std::vector<Edge>& next_edges() const { return next_edges_; }
  void add_next_edge(Edge edge) { next_edges_.push_back(std::move(edge)); }
  // Creation order: among ready nodes the engine runs the newest first (reverse of forward).
  uint64_t sequence_nr() const { return sequence_nr_; }

  void add_pre_hook(NodePreHook hook) { pre_hooks_.push_back(std::move(hook)); }
  const std::vector<NodePreHook>& pre_hooks() const { return pre_hooks_; }

 private:
  uint32_t num_outputs_;
  uint64_t sequence_nr_;
  std::vector<Edge> next_edges_;
  std::vector<NodePreHook> pre_hooks_;
};

}  // namespace fathom::autograd
