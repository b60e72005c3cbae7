#pragma once
// Module: the base of every layer and model.
//
// A module owns ordered, named parameters (Variables), buffers (plain tensors) and child
// modules. Dotted names ("transformer.h.0.attn.c_attn.weight") are a parameter's identity
// everywhere: state dicts, ZeRO partitions, tensor-parallel shards, checkpoints. A parameter
// registered in two places (a tied embedding) is one parameter, listed once under the name it
// was first reached by.
//
//   struct MyModel : fathom::nn::Module {
//     std::shared_ptr<nn::Linear> layer;
//     MyModel() { layer = register_module("layer", std::make_shared<nn::Linear>(768, 10)); }
//     Variable forward(const Variable& x) override { return (*layer)(x); }
//   };

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/variable.h"
#include "nn/placement.h"

namespace fathom::nn {

using autograd::Variable;
using autograd::VariableList;
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // Override one of these: the single-Variable form for the common case, the list form for
  // modules with several inputs or outputs.
  virtual Variable forward(const Variable& input);
  virtual VariableList forward(const VariableList& inputs);
  // Calls forward with the forward pre/post hooks.
  Variable operator()(const Variable& input);
  VariableList operator()(const VariableList& inputs);
  // A readable type name for messages ("Linear").
  virtual std::string type_name() const { return "Module"; }

  Variable register_parameter(const std::string& name, Tensor data, bool requires_grad = true);
  // Registers an existing Variable (e.g. a tied weight shared with another module).
  Variable register_parameter(const std::string& name, const Variable& parameter);
  void register_buffer(const std::string& name, Tensor data);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }

  // Registration order, depth first, dotted names; shared parameters once.
  std::vector<std::pair<std::string, Variable>> named_parameters(bool recurse = true) const;
  VariableList parameters(bool recurse = true) const;
  NamedTensors named_buffers(bool recurse = true) const;
  // The module itself first (name ""), then its descendants.
  std::vector<std::pair<std::string, Module*>> named_modules();
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const { return children_; }
  Variable parameter(const std::string& dotted_name) const;  // throws naming close matches
  // A parameter's parallel placement (nn/placement.h), set by the layer that registered it;
  // replicated unless set. `name` is local to this module; `dotted_name` as named_parameters.
  void set_placement(const std::string& name, Placement placement);
  Placement placement(const std::string& dotted_name) const;
  int64_t parameter_count() const;

  void train(bool training = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  void zero_grad(bool set_to_none = true);
  // fn(module) for this module and every descendant, children first.
  void apply(const std::function<void(Module&)>& fn);
  // Converts floating-point parameters and buffers (set_data: the Variables stay the same).
  void to(DType dtype);
  // Moves parameters (with their gradients) and buffers to `device`; the Variables stay the
  // same, so optimizers and hooks built afterwards see device tensors. Move before building the
  // optimizer or engine (as in PyTorch), since they keep references to the current data.
  void to(Device device);
  // The device of the parameters (CPU for a module without any); throws if they disagree.
  Device device() const;

  // Parameters then buffers, by dotted name.
  NamedTensors state_dict() const;
  // Copies values in (converting dtype). strict: missing and unexpected names are errors; a
  // shape mismatch always is. Messages name the entries and both shapes.
  void load_state_dict(const NamedTensors& state, bool strict = true);

  using ForwardPreHook = std::function<void(Module&, VariableList& inputs)>;
  using ForwardHook = std::function<void(Module&, const VariableList& inputs, VariableList& outputs)>;
  // One trainer at a time: an engine claims the model it trains and holds the claim while it
  // lives. A second claim is an error naming the first (two engines would both install
  // gradient hooks and reduce every gradient twice); destroying the first releases it.
  autograd::HookHandle claim(const std::string& by);

  // Installed until the returned handle is reset or destroyed (which may outlive the module).
  autograd::HookHandle register_forward_pre_hook(ForwardPreHook hook);
  autograd::HookHandle register_forward_hook(ForwardHook hook);
  size_t forward_hook_count() const { return hooks_->pre.size() + hooks_->post.size(); }

 protected:
  // For a forward with more than Variables to take (a shared context, a cache): `body` runs on
  // the input between the forward pre and post hooks, as operator() runs forward, so profilers,
  // traces and ZeRO-3 see the module called.
  Variable with_hooks(const Variable& input, const std::function<Variable(const Variable&)>& body);
  // Points an existing parameter name at another Variable (weight tying).
  void replace_parameter(const std::string& name, const Variable& parameter);

 private:
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  void check_new_name(const std::string& name) const;
  void collect_parameters(const std::string& prefix, std::vector<std::pair<std::string, Variable>>& out,
                          std::vector<const void*>& seen) const;

  std::vector<std::pair<std::string, Variable>> parameters_;
  std::map<std::string, Placement> placements_;  // by local parameter name; absent: replicated
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
  // Shared with the handles (weakly), so a handle outliving the module removes nothing.
  struct Hooks {
    std::map<int, ForwardPreHook> pre;
    std::map<int, ForwardHook> post;
    int next_id = 0;
  };
  std::shared_ptr<Hooks> hooks_ = std::make_shared<Hooks>();
  std::shared_ptr<std::string> claimed_by_ = std::make_shared<std::string>();  // "" unclaimed
};

}  // namespace fathom::nn
