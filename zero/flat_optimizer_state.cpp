#include "zero/flat_optimizer_state.h"

#include <set>

#include "core/error.h"

namespace fathom::zero {

int64_t optimizer_step_count(const nn::Optimizer& optimizer, const OptimizerLayout& layout) {
  if (layout.keys.empty()) return 0;
  const nn::OptimizerStateDict dict = optimizer.state_dict();
  const double* step = dict.find_scalar(layout.keys.front() + ".step");
  return step ? static_cast<int64_t>(*step) : 0;
}

namespace {
std::vector<std::string> state_names_in(const nn::OptimizerStateDict& dict, const OptimizerLayout& layout) {
  if (layout.keys.empty() || !dict.find_scalar(layout.keys.front() + ".step")) return {};  // no step yet
  std::set<std::string> states;
  const std::string prefix = layout.keys.front() + ".";
  for (const auto& [name, tensor] : dict.tensors)
    if (name.rfind(prefix, 0) == 0) states.insert(name.substr(prefix.size()));
  return {states.begin(), states.end()};
}
}  // namespace

std::vector<std::string> optimizer_state_names(const nn::Optimizer& optimizer, const OptimizerLayout& layout) {
  return state_names_in(optimizer.state_dict(), layout);
}

std::vector<FlatRange> optimizer_flat_ranges(const nn::Optimizer& optimizer, const OptimizerLayout& layout) {
  std::vector<FlatRange> out;
  const nn::OptimizerStateDict dict = optimizer.state_dict();
  for (const std::string& state : state_names_in(dict, layout)) {
    const auto find = [&](size_t i) {
      const Tensor* t = dict.find_tensor(layout.keys[i] + "." + state);
      FATHOM_CHECK(t != nullptr, "checkpoint: parameter \"", layout.keys[i], "\" has no optimizer state \"", state,
                   "\" (it never got a gradient); every parameter must have stepped before a checkpoint");
      return t->contiguous().view({-1});
    };
    Tensor flat;
    if (layout.keys.size() == 1) {
      flat = find(0);  // one flat variable (ZeRO): its state as it is
    } else {
      flat = Tensor::empty({layout.covers.size()}, DType::F32);
      for (size_t i = 0; i < layout.keys.size(); ++i)
        flat.narrow(0, layout.slots[i].offset, layout.slots[i].numel).copy_(find(i));
    }
    FATHOM_CHECK(flat.numel() == layout.covers.size(), "checkpoint: optimizer state \"", state, "\" has ", flat.numel(),
                 " elements where ", layout.covers.size(), " were expected");
    out.push_back({"optim." + state, flat, layout.covers});
  }
  return out;
}

void load_optimizer_flat_ranges(nn::Optimizer& optimizer, const OptimizerLayout& layout, const FlatReader& read,
                                const SavedStates& saved) {
  nn::OptimizerStateDict dict = saved.scalars;
  if (saved.optimizer_step > 0) {
    for (const std::string& state : saved.optimizer_states) {
      Tensor flat = Tensor::empty({layout.covers.size()}, DType::F32);
      read("optim." + state, flat, layout.covers);
      for (size_t i = 0; i < layout.keys.size(); ++i)
        dict.tensors.emplace_back(
            layout.keys[i] + "." + state,
            flat.narrow(0, layout.slots[i].offset, layout.slots[i].numel).view(layout.slots[i].shape));
    }
    for (const std::string& key : layout.keys)
      dict.scalars.emplace_back(key + ".step", static_cast<double>(saved.optimizer_step));
  }
  optimizer.load_state_dict(dict);
}

}  // namespace fathom::zero
