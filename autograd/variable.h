#pragma once
// Variable: a handle to a tensor that takes part in automatic differentiation.
//
// Copies of a Variable share one implementation, so a parameter held by a module, an
// optimizer and a ZeRO partitioner is one parameter. A leaf (no grad_fn) that requires grad
// accumulates gradients into grad(); a non-leaf remembers the node that produced it.
//
// What the parallel layers rely on:
//  - grad-ready hooks on leaves run once per backward, when the leaf's gradient is final
//    (data parallelism and ZeRO 2/3 start reducing from them while backward goes on);
//  - grad() may be a view into a flat buffer owned elsewhere; accumulation writes into it;
//  - set_data() swaps the tensor without touching the graph (ZeRO-3 gathers/partitions), and
//    backward nodes read a saved parameter through its Variable, so they see the current data.

#include <functional>
#include <memory>
#include <string>

#include "autograd/hook_handle.h"
#include "autograd/node.h"
#include "core/tensor.h"

namespace fathom::autograd {

class Variable;
using GradReadyHook = std::function<void(const Variable&)>;

struct VariableImpl {
  Tensor data;
  Tensor grad;
  std::shared_ptr<Node> grad_fn;  // null for leaves
  uint32_t output_nr = 0;         // which output of grad_fn this is
  bool requires_grad = false;
  std::string name;
  std::weak_ptr<Node> grad_accumulator;  // a leaf's AccumulateGrad, shared by every use
  std::vector<std::pair<int, GradReadyHook>> grad_ready_hooks;  // (id, hook), in install order
  int next_hook_id = 0;
};

class Variable {
 public:
  Variable() = default;
  explicit Variable(Tensor data, bool requires_grad = false, std::string name = "");
  // A non-leaf: output `output_nr` of `grad_fn`.
  static Variable from_node(Tensor data, std::shared_ptr<Node> grad_fn, uint32_t output_nr);
  // Another handle to an existing implementation (e.g. from a node that saved it).
  static Variable from_impl(std::shared_ptr<VariableImpl> impl) { return Variable(std::move(impl)); }

  bool defined() const { return impl_ != nullptr; }
  const Tensor& data() const;
  // Replaces the tensor (any shape; e.g. a gathered or released ZeRO-3 parameter). The graph,
  // grad and hooks are kept; no version bump.
  void set_data(Tensor data) const;
  const Tensor& grad() const;
  void set_grad(Tensor grad) const;  // e.g. a view into a flat gradient buffer
  void zero_grad(bool set_to_none = true) const;
  bool requires_grad() const;
  void set_requires_grad(bool requires_grad) const;  // leaves only
  const std::shared_ptr<Node>& grad_fn() const;
  uint32_t output_nr() const;
  bool is_leaf() const { return grad_fn() == nullptr; }
  const std::string& name() const;
  void set_name(std::string name) const;
  // The same data, cut from the graph.
  Variable detach() const;
  // Runs `hook` each backward once this leaf's gradient is final, until the handle is reset or
  // destroyed. Hooks run in the order they were installed.
  HookHandle add_grad_ready_hook(GradReadyHook hook) const;
  size_t grad_ready_hook_count() const;
  // backward from this scalar (or with an explicit gradient of the same shape).
  void backward(const Tensor& grad_output = Tensor(), bool retain_graph = false) const;

  // The edge gradients for this variable flow along: its grad_fn, or its leaf accumulator.
  Edge gradient_edge() const;
  bool same(const Variable& other) const { return impl_ == other.impl_; }
  const std::shared_ptr<VariableImpl>& impl() const { return impl_; }

  // Tensor-like conveniences.
  const Shape& sizes() const { return data().sizes(); }
  int64_t size(int64_t dim) const { return data().size(dim); }
  int64_t dim() const { return data().dim(); }
  int64_t numel() const { return data().numel(); }
  DType dtype() const { return data().dtype(); }
  Device device() const { return data().device(); }
  double item() const { return data().item(); }

 private:
  explicit Variable(std::shared_ptr<VariableImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<VariableImpl> impl_;
};

using VariableList = std::vector<Variable>;

// The node at the end of a leaf's edges: accumulates incoming gradients into the leaf's grad
// and then runs its grad-ready hooks.
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(std::shared_ptr<VariableImpl> leaf);
  TensorList apply(TensorList&& grad_outputs) override;
  std::string name() const override { return "AccumulateGrad"; }
  const std::shared_ptr<VariableImpl>& leaf() const { return leaf_; }

 private:
  std::shared_ptr<VariableImpl> leaf_;
};

}  // namespace fathom::autograd
