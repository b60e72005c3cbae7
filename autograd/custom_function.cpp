#include "autograd/custom_function.h"

#include "autograd/grad_mode.h"

namespace fathom::autograd {

void Function::save_for_backward(const TensorList& tensors) {
  for (const Tensor& t : tensors) {
    Variable source;  // a leaf input is saved by reference (read at backward time)
    if (current_inputs_)
      for (const Variable& input : *current_inputs_)
        if (input.is_leaf() && input.data().defined() && input.data().shares_storage(t) &&
            input.data().sizes() == t.sizes() && input.data().offset() == t.offset())
          source = input;
    saved_.emplace_back(t, source);
  }
}

TensorList Function::saved_tensors() const {
  TensorList out;
  for (size_t i = 0; i < saved_.size(); ++i) out.push_back(saved_[i].unpack(name(), "saved tensor " + std::to_string(i)));
  return out;
}

class FunctionNode final : public Node {
 public:
  FunctionNode(std::shared_ptr<Function> function, const VariableList& inputs, const TensorList& outputs)
      : Node(static_cast<uint32_t>(outputs.size())), function_(std::move(function)) {
    for (const Variable& input : inputs) add_next_edge(input.requires_grad() ? input.gradient_edge() : Edge{});
    for (const Tensor& out : outputs) output_shapes_.push_back({out.sizes(), out.dtype(), out.device()});
  }
  TensorList apply(TensorList&& grad_outputs) override {
    for (size_t k = 0; k < grad_outputs.size(); ++k)
      if (!grad_outputs[k].defined()) {
        const auto& [sizes, dtype, device] = output_shapes_[k];
        grad_outputs[k] = Tensor::zeros(sizes, dtype, device);
      }
    TensorList grads = function_->backward(grad_outputs);
    FATHOM_CHECK(grads.size() == next_edges().size(), "custom function ", function_->name(), ": backward returned ",
                 grads.size(), " gradients for ", next_edges().size(), " inputs");
    return grads;
  }
  std::string name() const override { return function_->name() + "_backward"; }
  void release_saved() override {
    for (SavedTensor& s : function_->saved_) s.reset();
  }

 private:
  std::shared_ptr<Function> function_;
  std::vector<std::tuple<Shape, DType, Device>> output_shapes_;
};

VariableList apply_function(const std::shared_ptr<Function>& function, const VariableList& inputs) {
  TensorList tensors;
  bool needs_graph = false;
  for (const Variable& input : inputs) {
    FATHOM_CHECK(input.defined(), "custom function ", function->name(), ": an input Variable is undefined");
    tensors.push_back(input.data());
    function->needs_input_grad_.push_back(input.requires_grad());
    needs_graph = needs_graph || input.requires_grad();
  }
  needs_graph = needs_graph && is_grad_enabled();
  TensorList outputs;
  {
    NoGradGuard no_grad;
    function->current_inputs_ = &inputs;
    outputs = function->forward(tensors);
    function->current_inputs_ = nullptr;
  }
  VariableList result;
  std::shared_ptr<FunctionNode> node;
  if (needs_graph) node = std::make_shared<FunctionNode>(function, inputs, outputs);
  for (size_t k = 0; k < outputs.size(); ++k) {
    if (node && is_floating_point(outputs[k].dtype()))
      result.push_back(Variable::from_node(outputs[k], node, static_cast<uint32_t>(k)));
    else
      result.push_back(Variable(outputs[k]));
  }
  return result;
}

}  // namespace fathom::autograd
