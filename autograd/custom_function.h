#pragma once
// Writing your own differentiable op: derive from Function, implement forward on plain
// tensors (it runs without recording a graph) and backward from output gradients to input
// gradients, and call it with apply_function. Used for tensor-parallel region ops, pipeline
// boundaries, view ops — anything whose backward is not a registry op's.
//
//   struct Scale : Function {
//     double factor;
//     explicit Scale(double f) : factor(f) {}
//     std::string name() const override { return "scale"; }
//     TensorList forward(const TensorList& in) override { return {mul(in[0], factor)}; }
//     TensorList backward(const TensorList& grads) override { return {mul(grads[0], factor)}; }
//   };
//   Variable y = apply_function(std::make_shared<Scale>(2.0), {x})[0];

#include <memory>
#include <string>

#include "autograd/saved_tensor.h"

namespace fathom::autograd {

class Function {
 public:
  virtual ~Function() = default;
  virtual std::string name() const = 0;
  virtual TensorList forward(const TensorList& inputs) = 0;
  // One gradient per forward input (undefined: none); grad_outputs has one tensor per output
  // (zeros where an output received no gradient).
  virtual TensorList backward(const TensorList& grad_outputs) = 0;

 protected:
  // Keeps tensors for backward, with the version checks of SavedTensor. Call from forward.
  void save_for_backward(const TensorList& tensors);
  // The saved tensors, in order. Call from backward.
  TensorList saved_tensors() const;
  // Which forward inputs need a gradient (set before backward runs).
  const std::vector<bool>& needs_input_grad() const { return needs_input_grad_; }

 private:
  friend class FunctionNode;
  friend VariableList apply_function(const std::shared_ptr<Function>&, const VariableList&);
  std::vector<SavedTensor> saved_;
  std::vector<bool> needs_input_grad_;
  const VariableList* current_inputs_ = nullptr;  // set while forward runs (to save leaves by reference)
};

VariableList apply_function(const std::shared_ptr<Function>& function, const VariableList& inputs);

}  // namespace fathom::autograd
