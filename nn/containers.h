#pragma once
// Sequential (runs its children in order) and ModuleList (holds children, runs nothing).
// Children are named "0", "1", ... as in PyTorch, so "transformer.h.3.attn" addresses them.

#include "nn/module.h"

namespace fathom::nn {

class ModuleList : public Module {
 public:
  ModuleList() = default;
  template <typename M>
  std::shared_ptr<M> push_back(std::shared_ptr<M> module) {
    register_module(std::to_string(modules_.size()), module);
    modules_.push_back(module);
    return module;
  }
  size_t size() const { return modules_.size(); }
  Module& operator[](size_t i) const { return *modules_.at(i); }
  const std::vector<std::shared_ptr<Module>>& modules() const { return modules_; }
  std::string type_name() const override { return "ModuleList"; }

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};

class Sequential : public ModuleList {
 public:
  Sequential() = default;
  Variable forward(const Variable& x) override;
  VariableList forward(const VariableList& inputs) override;
  std::string type_name() const override { return "Sequential"; }
};

}  // namespace fathom::nn
