#pragma once
// Differentiable ops from the op registry: apply_op runs an op on Variables and, when a
// gradient is needed, records an OpNode whose backward is the registry entry's gradient
// definition, with exactly the tensors that definition says it uses saved.

#include "autograd/saved_tensor.h"
#include "kernels/op_registry.h"

namespace fathom::autograd {

class OpNode final : public Node {
 public:
  OpNode(const OpInfo& op, Attributes attrs, const VariableList& inputs, const TensorList& outputs);
  TensorList apply(TensorList&& grad_outputs) override;
  std::string name() const override { return op_.name + "_backward"; }
  void release_saved() override;
  // Gradient definitions skip the inputs GradientContext::needs_input_grad leaves out.
  bool splittable() const override { return true; }
  TensorList apply_part(const TensorList& grad_outputs, const std::vector<bool>& wanted) override;

 private:
  TensorList gradients(TensorList grad_outputs, const std::vector<bool>& needed);

  const OpInfo& op_;
  Attributes attrs_;
  std::vector<SavedTensor> saved_inputs_;
  std::vector<SavedTensor> saved_outputs_;
  std::vector<Shape> input_sizes_;
  std::vector<DType> input_dtypes_;
  std::vector<bool> needs_input_grad_;
  std::vector<Shape> output_sizes_;
  std::vector<DType> output_dtypes_;
  std::vector<Device> output_devices_;
};

// Runs `op` on the inputs' data. An undefined Variable is an absent optional input (the op
// sees an undefined tensor). Outputs past op.differentiable_outputs never require grad.
VariableList apply_op(const OpInfo& op, const VariableList& inputs, const Attributes& attrs = {});
// Shorthand: the op by registry name (looked up once per call site by the wrappers).
VariableList apply_op(const std::string& name, const VariableList& inputs, const Attributes& attrs = {});

}  // namespace fathom::autograd
