#include "autograd/variable.h"

#include "autograd/engine.h"
#include "kernels/elementwise.h"

namespace fathom::autograd {

Variable::Variable(Tensor data, bool requires_grad, std::string name) : impl_(std::make_shared<VariableImpl>()) {
  FATHOM_CHECK(data.defined(), "Variable: the data tensor is undefined");
  FATHOM_CHECK(!requires_grad || is_floating_point(data.dtype()), "Variable \"", name,
               "\": only floating-point tensors can require gradients, got ", dtype_name(data.dtype()));
  impl_->data = std::move(data);
  impl_->requires_grad = requires_grad;
  impl_->name = std::move(name);
}

Variable Variable::from_node(Tensor data, std::shared_ptr<Node> grad_fn, uint32_t output_nr) {
  auto impl = std::make_shared<VariableImpl>();
  impl->data = std::move(data);
  impl->grad_fn = std::move(grad_fn);
  impl->output_nr = output_nr;
  impl->requires_grad = true;
  return Variable(std::move(impl));
}

namespace {
const VariableImpl& checked(const std::shared_ptr<VariableImpl>& impl) {
  FATHOM_CHECK(impl != nullptr, "use of an undefined Variable");
  return *impl;
}
}  // namespace

const Tensor& Variable::data() const { return checked(impl_).data; }
void Variable::set_data(Tensor data) const {
  checked(impl_);
  impl_->data = std::move(data);
}
const Tensor& Variable::grad() const { return checked(impl_).grad; }
void Variable::set_grad(Tensor grad) const {
  checked(impl_);
  FATHOM_CHECK(!grad.defined() || grad.sizes() == impl_->data.sizes(), "set_grad on \"", impl_->name,
               "\": gradient shape ", shape_str(grad.sizes()), " does not match the data's ",
               shape_str(impl_->data.sizes()));
  impl_->grad = std::move(grad);
}
void Variable::zero_grad(bool set_to_none) const {
  checked(impl_);
  if (set_to_none) impl_->grad = Tensor();
  else if (impl_->grad.defined()) impl_->grad.zero_();
}
bool Variable::requires_grad() const { return checked(impl_).requires_grad; }
void Variable::set_requires_grad(bool requires_grad) const {
  checked(impl_);
  FATHOM_CHECK(is_leaf(), "set_requires_grad on \"", impl_->name, "\": only leaf Variables can change it; use detach()");
  FATHOM_CHECK(!requires_grad || is_floating_point(impl_->data.dtype()), "Variable \"", impl_->name,
               "\": only floating-point tensors can require gradients, got ", dtype_name(impl_->data.dtype()));
  impl_->requires_grad = requires_grad;
}
const std::shared_ptr<Node>& Variable::grad_fn() const { return checked(impl_).grad_fn; }
uint32_t Variable::output_nr() const { return checked(impl_).output_nr; }
const std::string& Variable::name() const { return checked(impl_).name; }
void Variable::set_name(std::string name) const {
  checked(impl_);
  impl_->name = std::move(name);
}

Variable Variable::detach() const { return Variable(data(), false, name()); }

HookHandle Variable::add_grad_ready_hook(GradReadyHook hook) const {
  checked(impl_);
  FATHOM_CHECK(is_leaf(), "add_grad_ready_hook on \"", impl_->name, "\": grad-ready hooks are for leaf Variables");
  const int id = impl_->next_hook_id++;
  impl_->grad_ready_hooks.emplace_back(id, std::move(hook));
  // The handle must not keep the parameter alive, nor fail once it is gone.
  return HookHandle([weak = std::weak_ptr<VariableImpl>(impl_), id] {
    if (const auto impl = weak.lock())
      std::erase_if(impl->grad_ready_hooks, [id](const auto& entry) { return entry.first == id; });
  });
}

size_t Variable::grad_ready_hook_count() const { return checked(impl_).grad_ready_hooks.size(); }

void Variable::backward(const Tensor& grad_output, bool retain_graph) const {
  autograd::backward({*this}, {grad_output}, retain_graph);
}

Edge Variable::gradient_edge() const {
  checked(impl_);
  if (impl_->grad_fn) return Edge{impl_->grad_fn, impl_->output_nr};
  if (!impl_->requires_grad) return Edge{};
  std::shared_ptr<Node> accumulator = impl_->grad_accumulator.lock();
  if (!accumulator) {
    accumulator = std::make_shared<AccumulateGrad>(impl_);
    impl_->grad_accumulator = accumulator;
  }
  return Edge{accumulator, 0};
}

AccumulateGrad::AccumulateGrad(std::shared_ptr<VariableImpl> leaf) : Node(1), leaf_(std::move(leaf)) {}

TensorList AccumulateGrad::apply(TensorList&& grad_outputs) {
  Tensor incoming = std::move(grad_outputs[0]);
  if (incoming.defined()) {
    FATHOM_CHECK(incoming.sizes() == leaf_->data.sizes(), "gradient of \"", leaf_->name, "\" has shape ",
                 shape_str(incoming.sizes()), " but the parameter has shape ", shape_str(leaf_->data.sizes()),
                 leaf_->data.numel() == 0 && incoming.numel() > 0
                     ? ": its data was released (ZeRO stage 3 gathers a parameter only around the forward and "
                       "backward of the modules it belongs to; a module that uses another's parameter must "
                       "register it as its own, as a tied weight is)"
                     : "");
    if (leaf_->grad.defined()) {
      // In place, so a gradient that is a view into a flat buffer (ZeRO, DDP buckets) stays one.
      add_(leaf_->grad, incoming);
    } else if (incoming.storage().use_count() == 1 && incoming.is_contiguous() && incoming.offset() == 0) {
      incoming.storage()->retag(MemoryTag::Gradients);  // adopt: nobody else holds it
      leaf_->grad = std::move(incoming);
    } else {
      MemoryTagScope tag(MemoryTag::Gradients);
      leaf_->grad = incoming.clone();
    }
  }
  if (leaf_->grad_ready_hooks.empty()) return {};  // the common case: no copy on the hot path
  const Variable leaf = Variable::from_impl(leaf_);
  // A copy: a hook may remove itself (or others) while running.
  const auto hooks = leaf_->grad_ready_hooks;
  for (const auto& [id, hook] : hooks) hook(leaf);
  return {};
}

}  // namespace fathom::autograd
