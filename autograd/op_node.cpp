#include "autograd/op_node.h"

#include "autograd/grad_mode.h"
#include "autograd/op_observer.h"

namespace fathom::autograd {

OpNode::OpNode(const OpInfo& op, Attributes attrs, const VariableList& inputs, const TensorList& outputs)
    : Node(static_cast<uint32_t>(op.differentiable_outputs)), op_(op), attrs_(std::move(attrs)) {
  for (const Variable& input : inputs) {
    const bool present = input.defined();  // an optional input (e.g. no bias) may be absent
    input_sizes_.push_back(present ? input.sizes() : Shape{});
    input_dtypes_.push_back(present ? input.dtype() : DType::F32);
    needs_input_grad_.push_back(present && input.requires_grad());
    add_next_edge(needs_input_grad_.back() ? input.gradient_edge() : Edge{});
    saved_inputs_.push_back(present && op.gradient_uses_inputs ? SavedTensor(input.data(), input) : SavedTensor());
  }
  for (const Tensor& output : outputs) {
    output_sizes_.push_back(output.sizes());
    output_dtypes_.push_back(output.dtype());
    output_devices_.push_back(output.device());
    saved_outputs_.push_back(op.gradient_uses_outputs ? SavedTensor(output) : SavedTensor());
  }
}

TensorList OpNode::apply(TensorList&& grad_outputs) { return gradients(std::move(grad_outputs), needs_input_grad_); }

TensorList OpNode::apply_part(const TensorList& grad_outputs, const std::vector<bool>& wanted) {
  std::vector<bool> needed = needs_input_grad_;
  for (size_t i = 0; i < needed.size(); ++i) needed[i] = needed[i] && i < wanted.size() && wanted[i];
  return gradients(grad_outputs, needed);
}

TensorList OpNode::gradients(TensorList grad_outputs, const std::vector<bool>& needed) {
  GradientContext ctx;
  ctx.attrs = attrs_;
  ctx.input_sizes = input_sizes_;
  ctx.input_dtypes = input_dtypes_;
  ctx.needs_input_grad = needed;
  for (size_t i = 0; i < saved_inputs_.size(); ++i)
    ctx.inputs.push_back(op_.gradient_uses_inputs ? saved_inputs_[i].unpack(name(), "input " + std::to_string(i))
                                                  : Tensor());
  for (size_t i = 0; i < saved_outputs_.size(); ++i)
    ctx.outputs.push_back(op_.gradient_uses_outputs ? saved_outputs_[i].unpack(name(), "output " + std::to_string(i))
                                                    : Tensor());
  // A differentiable output that received no gradient contributes zero.
  for (size_t k = 0; k < grad_outputs.size(); ++k)
    if (!grad_outputs[k].defined())
      grad_outputs[k] = Tensor::zeros(output_sizes_[k], output_dtypes_[k], output_devices_[k]);
  ctx.grad_outputs = std::move(grad_outputs);
  TensorList grads = op_.gradient(ctx);
  grads.resize(needed.size());
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!needed[i]) grads[i] = Tensor();
    else if (grads[i].defined() && grads[i].dtype() != input_dtypes_[i]) grads[i] = grads[i].to(input_dtypes_[i]);
  }
  return grads;
}

void OpNode::release_saved() {
  for (SavedTensor& s : saved_inputs_) s.reset();
  for (SavedTensor& s : saved_outputs_) s.reset();
}

VariableList apply_op(const OpInfo& op, const VariableList& inputs, const Attributes& attrs) {
  TensorList tensors;
  bool needs_graph = false;
  for (const Variable& input : inputs) {
    tensors.push_back(input.defined() ? input.data() : Tensor());  // absent optional inputs stay undefined
    needs_graph = needs_graph || (input.defined() && input.requires_grad());
  }
  const TensorList outputs = op.run(tensors, attrs);
  if (OpObserver* observer = current_op_observer()) observer->on_op(op, tensors, outputs, attrs);
  needs_graph = needs_graph && is_grad_enabled();
  FATHOM_CHECK(!needs_graph || op.gradient, op.name, ": this op is not differentiable; its inputs must not require grad "
               "(detach() them or run it under NoGradGuard)");
  VariableList result;
  std::shared_ptr<OpNode> node;
  if (needs_graph) node = std::make_shared<OpNode>(op, attrs, inputs, outputs);
  for (size_t k = 0; k < outputs.size(); ++k) {
    if (node && static_cast<int>(k) < op.differentiable_outputs && is_floating_point(outputs[k].dtype()))
      result.push_back(Variable::from_node(outputs[k], node, static_cast<uint32_t>(k)));
    else
      result.push_back(Variable(outputs[k]));
  }
  return result;
}

VariableList apply_op(const std::string& name, const VariableList& inputs, const Attributes& attrs) {
  return apply_op(find_op(name), inputs, attrs);
}

}  // namespace fathom::autograd
