#include "nn/module.h"

#include <algorithm>
#include <unordered_map>

#include "autograd/grad_mode.h"
#include "core/cuda/cuda_runtime.h"
#include "nn/deferred_init.h"

namespace fathom::nn {

Variable Module::forward(const Variable&) {
  FATHOM_FAIL(type_name(), ": forward(const Variable&) is not implemented; override it (or the VariableList form)");
}

VariableList Module::forward(const VariableList& inputs) {
  FATHOM_CHECK(inputs.size() == 1, type_name(), ": takes one input, got ", inputs.size(),
               "; override forward(const VariableList&) for several");
  return {forward(inputs[0])};
}

VariableList Module::operator()(const VariableList& inputs) {
  VariableList in = inputs;
  for (auto& [id, hook] : hooks_->pre) hook(*this, in);
  VariableList out = forward(in);
  for (auto& [id, hook] : hooks_->post) hook(*this, in, out);
  return out;
}

Variable Module::operator()(const Variable& input) {
  if (hooks_->pre.empty() && hooks_->post.empty()) return forward(input);
  const VariableList out = (*this)(VariableList{input});
  FATHOM_CHECK(out.size() == 1, type_name(), ": returned ", out.size(), " outputs where one was expected");
  return out[0];
}

Variable Module::with_hooks(const Variable& input, const std::function<Variable(const Variable&)>& body) {
  if (hooks_->pre.empty() && hooks_->post.empty()) return body(input);
  VariableList in{input};
  for (auto& [id, hook] : hooks_->pre) hook(*this, in);
  FATHOM_CHECK(in.size() == 1, type_name(), ": a forward pre-hook left ", in.size(), " inputs where one was expected");
  VariableList out{body(in[0])};
  for (auto& [id, hook] : hooks_->post) hook(*this, in, out);
  FATHOM_CHECK(out.size() == 1, type_name(), ": returned ", out.size(), " outputs where one was expected");
  return out[0];
}

void Module::check_new_name(const std::string& name) const {
  FATHOM_CHECK(!name.empty() && name.find('.') == std::string::npos, type_name(), ": invalid name \"", name,
               "\" (non-empty, no dots)");
  auto taken = [&](const auto& list) {
    return std::any_of(list.begin(), list.end(), [&](const auto& entry) { return entry.first == name; });
  };
  FATHOM_CHECK(!taken(parameters_) && !taken(buffers_) && !taken(children_), type_name(), ": the name \"", name,
               "\" is already registered");
}

Variable Module::register_parameter(const std::string& name, Tensor data, bool requires_grad) {
  return register_parameter(name, Variable(std::move(data), requires_grad, name));
}

Variable Module::register_parameter(const std::string& name, const Variable& parameter) {
  check_new_name(name);
  FATHOM_CHECK(parameter.defined() && parameter.is_leaf(), type_name(), ": parameter \"", name,
               "\" must be a defined leaf Variable");
  parameter.data().storage()->retag(MemoryTag::Parameters);
  parameters_.emplace_back(name, parameter);
  return parameter;
}

void Module::replace_parameter(const std::string& name, const Variable& parameter) {
  for (auto& entry : parameters_)
    if (entry.first == name) {
      entry.second = parameter;
      return;
    }
  FATHOM_FAIL(type_name(), ": no parameter \"", name, "\" to replace");
}

void Module::register_buffer(const std::string& name, Tensor data) {
  check_new_name(name);
  buffers_.emplace_back(name, std::move(data));
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name(name);
  FATHOM_CHECK(module != nullptr, type_name(), ": child module \"", name, "\" is null");
  release_if_deferred(*module);  // under nn::DeferredInit: one module's parameters in memory at a time
  children_.emplace_back(name, std::move(module));
}

void Module::collect_parameters(const std::string& prefix, std::vector<std::pair<std::string, Variable>>& out,
                                std::vector<const void*>& seen) const {
  for (const auto& [name, parameter] : parameters_) {
    const void* identity = parameter.impl().get();
    if (std::find(seen.begin(), seen.end(), identity) != seen.end()) continue;
    seen.push_back(identity);
    out.emplace_back(prefix + name, parameter);
  }
}

std::vector<std::pair<std::string, Variable>> Module::named_parameters(bool recurse) const {
  std::vector<std::pair<std::string, Variable>> out;
  std::vector<const void*> seen;
  std::function<void(const Module&, const std::string&)> visit = [&](const Module& m, const std::string& prefix) {
    m.collect_parameters(prefix, out, seen);
    if (!recurse) return;
    for (const auto& [name, child] : m.children_) visit(*child, prefix + name + ".");
  };
  visit(*this, "");
  return out;
}

VariableList Module::parameters(bool recurse) const {
  VariableList out;
  for (auto& [name, parameter] : named_parameters(recurse)) out.push_back(parameter);
  return out;
}

NamedTensors Module::named_buffers(bool recurse) const {
  NamedTensors out;
  std::function<void(const Module&, const std::string&)> visit = [&](const Module& m, const std::string& prefix) {
    for (const auto& [name, buffer] : m.buffers_) out.emplace_back(prefix + name, buffer);
    if (!recurse) return;
    for (const auto& [name, child] : m.children_) visit(*child, prefix + name + ".");
  };
  visit(*this, "");
  return out;
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out;
  std::function<void(Module&, const std::string&)> visit = [&](Module& m, const std::string& name) {
    out.emplace_back(name, &m);
    for (auto& [child_name, child] : m.children_) visit(*child, name.empty() ? child_name : name + "." + child_name);
  };
  visit(*this, "");
  return out;
}

Variable Module::parameter(const std::string& dotted_name) const {
  const auto all = named_parameters();
  for (const auto& [name, parameter] : all)
    if (name == dotted_name) return parameter;
  std::string close;
  for (const auto& [name, parameter] : all)
    if (name.find(dotted_name.substr(dotted_name.rfind('.') + 1)) != std::string::npos && close.size() < 200)
      close += (close.empty() ? "" : ", ") + name;
  FATHOM_FAIL(type_name(), ": no parameter named \"", dotted_name, "\"", close.empty() ? "" : "; similar: " + close);
}

void Module::set_placement(const std::string& name, Placement placement) {
  const bool known = std::any_of(parameters_.begin(), parameters_.end(), [&](const auto& p) { return p.first == name; });
  FATHOM_CHECK(known, type_name(), ": set_placement: no parameter \"", name, "\" registered here");
  FATHOM_CHECK(placement.num_shards >= 1 && placement.shard_index >= 0 && placement.shard_index < placement.num_shards,
               type_name(), ": placement of \"", name, "\": shard ", placement.shard_index, " of ",
               placement.num_shards, " does not exist");
  placements_[name] = std::move(placement);
}

Placement Module::placement(const std::string& dotted_name) const {
  const Module* owner = this;
  std::string rest = dotted_name;
  for (size_t dot; (dot = rest.find('.')) != std::string::npos;) {
    const std::string child = rest.substr(0, dot);
    const auto it = std::find_if(owner->children_.begin(), owner->children_.end(),
                                 [&](const auto& entry) { return entry.first == child; });
    if (it == owner->children_.end()) return {};
    owner = it->second.get();
    rest = rest.substr(dot + 1);
  }
  const auto found = owner->placements_.find(rest);
  return found == owner->placements_.end() ? Placement{} : found->second;
}

int64_t Module::parameter_count() const {
  int64_t total = 0;
  for (const auto& [name, parameter] : named_parameters()) total += parameter.numel();
  return total;
}

void Module::train(bool training) {
  apply([training](Module& m) { m.training_ = training; });
}

void Module::zero_grad(bool set_to_none) {
  for (const auto& [name, parameter] : named_parameters()) parameter.zero_grad(set_to_none);
}

void Module::apply(const std::function<void(Module&)>& fn) {
  for (auto& [name, child] : children_) child->apply(fn);
  fn(*this);
}

void Module::to(DType dtype) {
  FATHOM_CHECK(is_floating_point(dtype), type_name(), ".to: parameters need a floating-point dtype, got ",
               dtype_name(dtype));
  apply([dtype](Module& m) {
    for (auto& [name, parameter] : m.parameters_) {
      if (!is_floating_point(parameter.dtype()) || parameter.dtype() == dtype) continue;
      MemoryTagScope tag(MemoryTag::Parameters);
      if (is_deferred(parameter)) {  // values come later, converted then
        parameter.set_data(deferred_like(parameter.data(), dtype, parameter.data().device()));
        continue;
      }
      parameter.set_data(parameter.data().to(dtype));
      if (parameter.grad().defined()) parameter.set_grad(parameter.grad().to(dtype));
    }
    for (auto& [name, buffer] : m.buffers_)
      if (is_floating_point(buffer.dtype())) buffer = buffer.to(dtype);
  });
}

void Module::to(Device device) {
  if (device.is_cuda()) cuda::require_device(device.index);
  apply([device](Module& m) {
    for (auto& [name, parameter] : m.parameters_) {
      if (parameter.data().device() == device) continue;
      MemoryTagScope tag(MemoryTag::Parameters);
      if (is_deferred(parameter)) {
        parameter.set_data(deferred_like(parameter.data(), parameter.dtype(), device));
        continue;
      }
      parameter.set_data(parameter.data().to(device));
      if (parameter.grad().defined()) parameter.set_grad(parameter.grad().to(device));
    }
    for (auto& [name, buffer] : m.buffers_)
      if (buffer.device() != device) buffer = buffer.to(device);
  });
}

Device Module::device() const {
  const auto params = named_parameters();
  if (params.empty()) return kCPU;
  const Device first = params.front().second.data().device();
  for (const auto& [name, parameter] : params)
    FATHOM_CHECK(parameter.data().device() == first, type_name(), ": parameter \"", name, "\" is on ",
                 parameter.data().device().str(), " but \"", params.front().first, "\" is on ", first.str(),
                 "; call module.to(device) to move them all");
  return first;
}

NamedTensors Module::state_dict() const {
  NamedTensors out;
  for (const auto& [name, parameter] : named_parameters()) out.emplace_back(name, parameter.data());
  for (auto& entry : named_buffers()) out.push_back(entry);
  return out;
}

void Module::load_state_dict(const NamedTensors& state, bool strict) {
  std::unordered_map<std::string, const Tensor*> given;
  for (const auto& [name, tensor] : state) {
    FATHOM_CHECK(given.emplace(name, &tensor).second, "load_state_dict: \"", name, "\" appears twice");
  }
  // Check everything before writing anything: a failed load leaves the model as it was.
  std::vector<std::string> missing, unexpected;
  std::vector<std::pair<const Tensor*, const Tensor*>> copies;  // (target, source)
  const NamedTensors own = state_dict();
  for (const auto& [name, target] : own) {
    auto it = given.find(name);
    if (it == given.end()) {
      missing.push_back(name);
      continue;
    }
    FATHOM_CHECK(it->second->sizes() == target.sizes(), "load_state_dict: \"", name, "\" has shape ",
                 shape_str(it->second->sizes()), " in the state dict but ", shape_str(target.sizes()), " in the model");
    copies.emplace_back(&target, it->second);
    given.erase(it);
  }
  for (const auto& [name, tensor] : given) unexpected.push_back(name);
  std::sort(unexpected.begin(), unexpected.end());
  auto list = [](const std::vector<std::string>& names) {
    std::string out;
    for (size_t i = 0; i < names.size() && i < 10; ++i) out += (i ? ", " : "") + names[i];
    if (names.size() > 10) out += ", ... (" + std::to_string(names.size()) + " in all)";
    return out;
  };
  FATHOM_CHECK(!strict || missing.empty(), "load_state_dict: missing ", missing.size(), " entr",
               missing.size() == 1 ? "y" : "ies", ": ", list(missing), " (load with strict=false to allow it)");
  FATHOM_CHECK(!strict || unexpected.empty(), "load_state_dict: unexpected ", unexpected.size(), " entr",
               unexpected.size() == 1 ? "y" : "ies", ": ", list(unexpected), " (load with strict=false to ignore them)");
  autograd::NoGradGuard no_grad;
  for (const auto& [target, source] : copies) target->copy_(source->to(target->device()));
}

namespace {
template <typename Map>
autograd::HookHandle remover(const std::shared_ptr<Map>& hooks, int id) {
  return autograd::HookHandle([weak = std::weak_ptr<Map>(hooks), id] {
    if (const auto alive = weak.lock()) {
      alive->pre.erase(id);
      alive->post.erase(id);
    }
  });
}
}  // namespace

autograd::HookHandle Module::claim(const std::string& by) {
  FATHOM_CHECK(claimed_by_->empty(), type_name(), ": this model is already trained by ", *claimed_by_,
               "; one engine per model: destroy the first engine before initializing another on the same model (for "
               "several models side by side, e.g. actor and critic, give each engine its own model)");
  *claimed_by_ = by;
  return autograd::HookHandle([weak = std::weak_ptr<std::string>(claimed_by_)] {
    if (const auto claimed = weak.lock()) claimed->clear();
  });
}

autograd::HookHandle Module::register_forward_pre_hook(ForwardPreHook hook) {
  const int id = hooks_->next_id++;
  hooks_->pre[id] = std::move(hook);
  return remover(hooks_, id);
}

autograd::HookHandle Module::register_forward_hook(ForwardHook hook) {
  const int id = hooks_->next_id++;
  hooks_->post[id] = std::move(hook);
  return remover(hooks_, id);
}

}  // namespace fathom::nn
