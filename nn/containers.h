#pragma once
// Sequential (runs its children in order) and ModuleList (holds children, runs nothing).
// Children are named "0", "1", ... as in PyTorch, so "transformer.h.3.attn" addresses them.

#include <iterator>

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

  // `for (Module& block : *blocks)`: the list is a range of its modules, in order.
  class iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = Module;
    using difference_type = std::ptrdiff_t;
    using pointer = Module*;
    using reference = Module&;
    iterator() = default;
    explicit iterator(std::vector<std::shared_ptr<Module>>::const_iterator at) : at_(at) {}
    Module& operator*() const { return **at_; }
    Module* operator->() const { return at_->get(); }
    iterator& operator++() {
      ++at_;
      return *this;
    }
    iterator operator++(int) { return iterator(at_++); }
    bool operator==(const iterator&) const = default;

   private:
    std::vector<std::shared_ptr<Module>>::const_iterator at_;
  };
  iterator begin() const { return iterator(modules_.begin()); }
  iterator end() const { return iterator(modules_.end()); }
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
