#include "nn/optimizer.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "core/memory_stats.h"

namespace fathom::nn {
namespace {

std::string group_key(size_t group, const char* what) {
  return "param_groups." + std::to_string(group) + "." + what;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

}  // namespace

const Tensor* OptimizerStateDict::find_tensor(const std::string& name) const {
  for (const auto& [key, tensor] : tensors)
    if (key == name) return &tensor;
  return nullptr;
}

const double* OptimizerStateDict::find_scalar(const std::string& name) const {
  for (const auto& [key, value] : scalars)
    if (key == name) return &value;
  return nullptr;
}

void check_non_negative(const std::string& type, const char* key, double value) {
  // Written so that NaN fails too.
  FATHOM_CHECK(value >= 0 && std::isfinite(value), type, ": \"", key, "\" must be >= 0 (and finite), got ", value);
}

void check_betas(const std::string& type, double beta1, double beta2) {
  FATHOM_CHECK(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1, type,
               ": \"betas\" must be two numbers, each in [0, 1), got [", beta1, ", ", beta2, "]");
}

std::vector<ParamGroup> single_group(std::vector<autograd::Variable> params) {
  std::vector<ParamGroup> groups(1);
  groups[0].params = std::move(params);
  return groups;
}

std::vector<ParamGroup> single_group(const std::vector<std::pair<std::string, autograd::Variable>>& named) {
  std::vector<ParamGroup> groups(1);
  for (const auto& [name, param] : named) {
    groups[0].names.push_back(name);
    groups[0].params.push_back(param);
  }
  return groups;
}

Optimizer::Optimizer(std::string type, std::vector<ParamGroup> groups, double default_lr, double default_weight_decay)
    : type_(std::move(type)), groups_(std::move(groups)) {
  FATHOM_CHECK(!groups_.empty(), type_, ": no parameter groups given; pass at least one group of parameters");
  std::set<const autograd::VariableImpl*> seen;
  std::set<std::string> variable_names;
  bool use_variable_names = true;  // for groups without explicit names
  for (size_t g = 0; g < groups_.size(); ++g) {
    ParamGroup& group = groups_[g];
    if (!group.lr) group.lr = default_lr;
    if (!group.weight_decay) group.weight_decay = default_weight_decay;
    check_non_negative(type_, "lr", *group.lr);
    check_non_negative(type_, "weight_decay", *group.weight_decay);
    FATHOM_CHECK(group.names.empty() || group.names.size() == group.params.size(), type_, ": group ", g, " has ",
                 group.params.size(), " parameters but ", group.names.size(),
                 " names; give one name per parameter, or none");
    for (size_t i = 0; i < group.params.size(); ++i) {
      const autograd::Variable& param = group.params[i];
      FATHOM_CHECK(param.defined(), type_, ": parameter ", i, " of group ", g, " is an undefined Variable");
      const std::string& name = group.names.empty() ? param.name() : group.names[i];
      FATHOM_CHECK(seen.insert(param.impl().get()).second, type_, ": parameter \"", name, "\" (group ", g,
                   ", index ", i, ") is given twice; each parameter may appear in one group, once");
      check_param(param, name.empty() ? "group" + std::to_string(g) + "." + std::to_string(i) : name);
      if (group.names.empty() && (name.empty() || !variable_names.insert(name).second)) use_variable_names = false;
    }
  }
  std::map<std::string, std::string> owner;  // key -> "group g, index i", for the duplicate message
  for (size_t g = 0; g < groups_.size(); ++g) {
    keys_.emplace_back();
    states_.emplace_back(groups_[g].params.size());
    for (size_t i = 0; i < groups_[g].params.size(); ++i) {
      const std::string position = "group" + std::to_string(g) + "." + std::to_string(i);
      const std::string key = !groups_[g].names.empty() ? groups_[g].names[i]
                              : use_variable_names     ? groups_[g].params[i].name()
                                                       : position;
      const std::string where = "group " + std::to_string(g) + ", index " + std::to_string(i);
      auto [it, fresh] = owner.emplace(key, where);
      FATHOM_CHECK(fresh, type_, ": two parameters are named \"", key, "\" (", it->second, " and ", where,
                   "); names key the optimizer state, so they must be unique");
      keys_.back().push_back(key);
    }
  }
}

void Optimizer::check_param(const autograd::Variable& param, const std::string& key) const {
  const Tensor& data = param.data();
  FATHOM_CHECK(data.dtype() == DType::F32, type_, ": parameter \"", key, "\" is ", dtype_name(data.dtype()),
               ", but optimizers update f32 parameters only; keep an f32 copy of the weights for the optimizer "
               "(mixed-precision master weights come with the engine)");
  FATHOM_CHECK(data.is_contiguous(), type_, ": parameter \"", key, "\" (", data.str(),
               ") is not contiguous; the fused optimizer kernels update a parameter as one flat buffer, so "
               "store it contiguous (e.g. param.set_data(param.data().contiguous()))");
}

double Optimizer::lr(size_t group) const {
  FATHOM_CHECK(group < groups_.size(), type_, ": no param group ", group, " (there are ", groups_.size(), ")");
  return *groups_[group].lr;
}

double Optimizer::weight_decay(size_t group) const {
  FATHOM_CHECK(group < groups_.size(), type_, ": no param group ", group, " (there are ", groups_.size(), ")");
  return *groups_[group].weight_decay;
}

void Optimizer::set_lr(double lr) {
  check_non_negative(type_, "lr", lr);
  for (ParamGroup& group : groups_) group.lr = lr;
}

void Optimizer::set_lr(size_t group, double lr) {
  FATHOM_CHECK(group < groups_.size(), type_, ": no param group ", group, " (there are ", groups_.size(), ")");
  check_non_negative(type_, "lr", lr);
  groups_[group].lr = lr;
}

void Optimizer::step() {
  // State created here (first steps) and the temporaries of unfused updates are optimizer memory.
  MemoryTagScope tag(MemoryTag::OptimizerState);
  begin_step();
  const std::vector<std::string> names = state_names();
  const std::vector<ScalarState> scalars = scalar_states();
  for (size_t g = 0; g < groups_.size(); ++g) {
    std::vector<Update> updates;
    for (size_t i = 0; i < groups_[g].params.size(); ++i) {
      const autograd::Variable& param = groups_[g].params[i];
      const std::string& key = keys_[g][i];
      Tensor grad = param.grad();
      if (!grad.defined()) continue;
      check_param(param, key);
      const Tensor& data = param.data();
      FATHOM_CHECK(grad.sizes() == data.sizes(), type_, ": the gradient of \"", key, "\" has shape ",
                   shape_str(grad.sizes()), " but the parameter has shape ", shape_str(data.sizes()));
      FATHOM_CHECK(grad.dtype() == DType::F32, type_, ": the gradient of \"", key, "\" is ",
                   dtype_name(grad.dtype()), " but must be f32 like its parameter");
      FATHOM_CHECK(grad.device() == data.device(), type_, ": the gradient of \"", key, "\" is on ",
                   grad.device().str(), " but the parameter on ", data.device().str());
      // A gradient may be a strided view into someone's flat buffer; the kernels want it dense.
      if (!grad.is_contiguous()) grad = grad.contiguous();
      updates.push_back({data, grad, &states_[g][i]});
    }
    // Every parameter of the group passed its checks: only now does any state change.
    for (Update& u : updates) {
      ParamState& state = *u.state;
      if (state.buffers.size() != names.size()) {
        state.buffers.clear();
        for (size_t s = 0; s < names.size(); ++s)
          state.buffers.push_back(Tensor::zeros(u.param.sizes(), DType::F32, u.param.device()));
      }
      if (state.scalars.size() != scalars.size())
        for (const ScalarState& scalar : scalars) state.scalars.push_back(scalar.initial);
      ++state.step;
    }
    if (!updates.empty()) update_group(groups_[g], updates);
    if (!fused_copies())
      for (const Update& u : updates)
        if (u.copy().defined()) u.copy().copy_(u.param);
  }
  end_step();
}

void Optimizer::set_copy(const autograd::Variable& param, Tensor copy) {
  const Slot slot = find(param);
  if (copy.defined()) {
    const Tensor& data = param.data();
    FATHOM_CHECK(copy.numel() == data.numel() && copy.is_contiguous() && copy.device() == data.device() &&
                     (copy.dtype() == DType::BF16 || copy.dtype() == DType::F16 || copy.dtype() == DType::F32),
                 type_, ": the copy of \"", keys_[slot.group][slot.index], "\" (", copy.str(), ") must be a "
                 "contiguous bf16, f16 or f32 tensor of ", data.numel(), " elements on ", data.device().str());
  }
  states_[slot.group][slot.index].copy = std::move(copy);
}

void Optimizer::update_group(const ParamGroup& group, const std::vector<Update>& updates) {
  for (const Update& u : updates) update(group, u.param, u.grad, *u.state);
}

std::vector<Optimizer::UpdateBatch> Optimizer::batch_updates(const std::vector<Update>& updates,
                                                             const std::function<int64_t(const Update&)>& key) {
  std::vector<UpdateBatch> batches;
  for (const Update& u : updates) {
    const std::pair<Device, int64_t> id{u.param.device(), key(u)};
    auto batch = std::find_if(batches.begin(), batches.end(), [&](const UpdateBatch& b) { return b.first == id; });
    if (batch == batches.end()) batch = batches.insert(batches.end(), {id, {}});
    batch->second.push_back(&u);
  }
  return batches;
}

void Optimizer::zero_grad(bool set_to_none) {
  for (const ParamGroup& group : groups_)
    for (const autograd::Variable& param : group.params) param.zero_grad(set_to_none);
}

Optimizer::Slot Optimizer::find(const autograd::Variable& param) const {
  for (size_t g = 0; g < groups_.size(); ++g)
    for (size_t i = 0; i < groups_[g].params.size(); ++i)
      if (groups_[g].params[i].same(param)) return {g, i};
  FATHOM_FAIL(type_, ": parameter \"", param.defined() ? param.name() : std::string("<undefined>"),
              "\" is not optimized by this optimizer");
}

std::string Optimizer::param_key(const autograd::Variable& param) const {
  const Slot slot = find(param);
  return keys_[slot.group][slot.index];
}

int64_t Optimizer::step_count(const autograd::Variable& param) const {
  const Slot slot = find(param);
  return states_[slot.group][slot.index].step;
}

Tensor Optimizer::state(const autograd::Variable& param, const std::string& name) const {
  const Slot slot = find(param);
  const std::vector<std::string> names = state_names();
  for (size_t s = 0; s < names.size(); ++s) {
    if (names[s] != name) continue;
    const ParamState& state = states_[slot.group][slot.index];
    return s < state.buffers.size() ? state.buffers[s] : Tensor();
  }
  FATHOM_FAIL(type_, " has no state named \"", name, "\" (it keeps: ", joined(names), ")");
}

void Optimizer::load_param_state(const autograd::Variable& param, int64_t step, std::vector<Tensor> buffers) {
  const Slot slot = find(param);
  const std::vector<std::string> names = state_names();
  FATHOM_CHECK(scalar_states().empty(), type_, ".load_param_state: ", type_,
               " keeps scalar state per parameter; load it with load_state_dict");
  FATHOM_CHECK(step >= 1, type_, ".load_param_state: step must be >= 1, got ", step);
  FATHOM_CHECK(buffers.size() == names.size(), type_, ".load_param_state: ", buffers.size(), " state tensors for \"",
               param.name(), "\"; ", type_, " keeps ", names.size(), " (", joined(names), ")");
  const Tensor& data = groups_[slot.group].params[slot.index].data();
  for (size_t s = 0; s < names.size(); ++s)
    FATHOM_CHECK(buffers[s].sizes() == data.sizes() && buffers[s].dtype() == DType::F32, type_,
                 ".load_param_state: state \"", names[s], "\" of \"", param.name(), "\" is ",
                 shape_str(buffers[s].sizes()), " ", dtype_name(buffers[s].dtype()), "; expected ",
                 shape_str(data.sizes()), " f32");
  ParamState& state = states_[slot.group][slot.index];
  state = ParamState{.step = step, .copy = std::move(state.copy), .buffers = std::move(buffers)};
}

double Optimizer::scalar_state(const autograd::Variable& param, const std::string& name) const {
  const Slot slot = find(param);
  const std::vector<ScalarState> scalars = scalar_states();
  for (size_t s = 0; s < scalars.size(); ++s) {
    if (scalars[s].name != name) continue;
    const ParamState& state = states_[slot.group][slot.index];
    return s < state.scalars.size() ? state.scalars[s] : scalars[s].initial;
  }
  FATHOM_FAIL(type_, " has no scalar state named \"", name, "\"");
}

std::vector<std::pair<std::string, double>> Optimizer::scalar_state_dict() const {
  std::vector<std::pair<std::string, double>> out;
  const std::vector<ScalarState> scalars = scalar_states();
  for (size_t g = 0; g < groups_.size(); ++g)
    for (size_t i = 0; i < groups_[g].params.size(); ++i) {
      const ParamState& state = states_[g][i];
      if (state.step == 0) continue;
      for (size_t s = 0; s < scalars.size(); ++s) out.emplace_back(keys_[g][i] + "." + scalars[s].name, state.scalars[s]);
    }
  return out;
}

OptimizerStateDict Optimizer::state_dict() const {
  OptimizerStateDict dict;
  const std::vector<std::string> names = state_names();
  for (size_t g = 0; g < groups_.size(); ++g) {
    dict.scalars.emplace_back(group_key(g, "lr"), *groups_[g].lr);
    dict.scalars.emplace_back(group_key(g, "weight_decay"), *groups_[g].weight_decay);
    for (size_t i = 0; i < groups_[g].params.size(); ++i) {
      const ParamState& state = states_[g][i];
      if (state.step == 0) continue;
      const std::string& key = keys_[g][i];
      dict.scalars.emplace_back(key + ".step", static_cast<double>(state.step));
      for (size_t s = 0; s < names.size(); ++s) dict.tensors.emplace_back(key + "." + names[s], state.buffers[s]);
    }
  }
  for (auto& entry : scalar_state_dict()) dict.scalars.push_back(std::move(entry));
  return dict;
}

void Optimizer::load_state_dict(const OptimizerStateDict& dict) {
  const char* op = ".load_state_dict: ";
  const std::vector<std::string> names = state_names();
  const std::vector<ScalarState> scalar_names = scalar_states();
  std::set<std::string> used;
  auto scalar = [&](const std::string& name) {
    const double* value = dict.find_scalar(name);
    if (value) used.insert(name);
    return value;
  };

  // Pass 1: check everything, so that a bad dict leaves the optimizer as it was.
  std::vector<double> group_lr, group_decay;
  for (size_t g = 0; g < groups_.size(); ++g) {
    for (const char* what : {"lr", "weight_decay"}) {
      const double* value = scalar(group_key(g, what));
      FATHOM_CHECK(value != nullptr, type_, op, "missing entry \"", group_key(g, what), "\" (this optimizer has ",
                   groups_.size(), " param groups; was the state dict saved with the same groups?)");
      check_non_negative(type_, what, *value);
      (std::string(what) == "lr" ? group_lr : group_decay).push_back(*value);
    }
  }
  struct Load {
    size_t group, index;
    int64_t step;
    std::vector<const Tensor*> buffers;
    std::vector<double> scalars;
  };
  std::vector<Load> loads;
  for (size_t g = 0; g < groups_.size(); ++g) {
    for (size_t i = 0; i < groups_[g].params.size(); ++i) {
      const std::string& key = keys_[g][i];
      const double* step = scalar(key + ".step");
      if (step == nullptr) continue;  // this parameter had not stepped yet
      FATHOM_CHECK(*step >= 1 && *step == std::floor(*step) && *step < 9.0e15, type_, op, "entry \"", key,
                   ".step\" must be a whole number >= 1, got ", *step);
      Load load{g, i, static_cast<int64_t>(*step), {}};
      const Tensor& data = groups_[g].params[i].data();
      for (const std::string& name : names) {
        const std::string entry = key + "." + name;
        const Tensor* tensor = dict.find_tensor(entry);
        FATHOM_CHECK(tensor != nullptr && tensor->defined(), type_, op, "missing entry \"", entry, "\" (\"", key,
                     ".step\" is there, so ", type_, " needs its state: ", joined(names), ")");
        FATHOM_CHECK(tensor->sizes() == data.sizes(), type_, op, "entry \"", entry, "\" has shape ",
                     shape_str(tensor->sizes()), " but parameter \"", key, "\" has shape ", shape_str(data.sizes()),
                     "; the state dict was saved for a different model");
        FATHOM_CHECK(tensor->dtype() == DType::F32, type_, op, "entry \"", entry, "\" is ",
                     dtype_name(tensor->dtype()), " but optimizer state is f32");
        used.insert(entry);
        load.buffers.push_back(tensor);
      }
      for (const ScalarState& scalar_state : scalar_names) {
        const std::string entry = key + "." + scalar_state.name;
        const double* value = scalar(entry);
        FATHOM_CHECK(value != nullptr, type_, op, "missing entry \"", entry, "\" (\"", key, ".step\" is there, so ",
                     type_, " needs its scalar state too)");
        load.scalars.push_back(*value);
      }
      loads.push_back(std::move(load));
    }
  }
  auto unexpected = [&](const std::string& name) {
    FATHOM_FAIL(type_, op, "unexpected entry \"", name, "\": no parameter of this optimizer has it (", type_,
                " keeps per parameter: step, ", joined(names),
                "); was the state dict saved by another optimizer type or model?");
  };
  for (const auto& [name, value] : dict.scalars)
    if (!used.count(name)) unexpected(name);
  for (const auto& [name, tensor] : dict.tensors)
    if (!used.count(name)) unexpected(name);

  // Pass 2: apply. Fresh copies, so the caller's tensors are never updated behind its back.
  MemoryTagScope tag(MemoryTag::OptimizerState);
  for (size_t g = 0; g < groups_.size(); ++g) {
    groups_[g].lr = group_lr[g];
    groups_[g].weight_decay = group_decay[g];
    // The copies set_copy attached are wiring, not state: they stay.
    for (ParamState& state : states_[g]) state = ParamState{.copy = std::move(state.copy)};
  }
  for (const Load& load : loads) {
    ParamState& state = states_[load.group][load.index];
    const Tensor& data = groups_[load.group].params[load.index].data();
    state.step = load.step;
    state.scalars = load.scalars;
    for (const Tensor* source : load.buffers) {
      Tensor copy = Tensor::empty(data.sizes(), DType::F32, data.device());
      copy.copy_(*source);
      state.buffers.push_back(copy);
    }
  }
}

}  // namespace fathom::nn
